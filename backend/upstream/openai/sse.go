package openai

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/switchyard/switchyard/backend/fleet"
)

// maxLine bounds one SSE line and one event's joined data (16 MiB, between
// Ollama's 8 MiB and openai-go's 32 MiB). Beyond it the stream is malformed.
const maxLine = 16 << 20

// initialBuf is the read buffer's starting size; a chunk event is a few
// hundred bytes, so it rarely grows.
const initialBuf = 4 << 10

// eventKind says how an SSE event must be read.
type eventKind int

const (
	// kindData is an ordinary event (no event type, or any type but
	// "error"): its data is a chunk, [DONE] or an error object.
	kindData eventKind = iota
	// kindErrorEvent is an event of type "error" (event: error), which the
	// openai npm client reads as an API error.
	kindErrorEvent
	// kindErrorField is the legacy llama.cpp `error: {...}` line, a field
	// the SSE standard does not know; data holds its value.
	kindErrorField
)

// event is one dispatched SSE event. data is only valid until the next call
// of sseReader.next.
type event struct {
	kind eventKind
	data []byte
}

// sseReader splits a text/event-stream body into events following the
// WHATWG rules: lines end in "\n", "\r\n" or "\r"; "field: value" loses one
// space after the colon; the data lines of one event are joined with "\n";
// lines starting with ":" are comments (keep-alive pings); an empty line
// dispatches; unknown fields are ignored. Deviations, all deliberate:
//
//   - an `error:` line is returned at once as kindErrorField (llama.cpp
//     before PR #16109 reported mid-stream failures that way);
//   - events whose data is empty are not dispatched (nothing to decode);
//   - when the body ends (or fails) with an event still missing its blank
//     line, that event is dispatched if its data is [DONE]
//     (llama.cpp b10603 ends like that); any other unfinished event is
//     dropped, as browsers do.
//
// A line or an event's data longer than max is a *fleet.MalformedError, so
// memory stays bounded (about 2×max) whatever the body holds. The zero
// value is not usable; call newSSEReader.
type sseReader struct {
	r   io.Reader
	max int

	buf        []byte // read buffer; buf[start:end] is not yet consumed
	start, end int
	rerr       error // sticky error of r, reported once buf is drained
	skipLF     bool  // the last line ended in "\r": drop a "\n" that follows
	started    bool  // past the optional leading byte order mark
	emptyReads int

	// The event being built.
	data      []byte
	hasData   bool
	errorType bool // event: error
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: r, max: max}
}

var (
	doneMarker = []byte("[DONE]")
	bom        = []byte("\xef\xbb\xbf") // UTF-8 byte order mark, dropped at the start
)

// isDone reports whether data is the [DONE] end marker.
func isDone(data []byte) bool {
	return bytes.Equal(bytes.TrimSpace(data), doneMarker)
}

// next returns the next event, or the error that ended the body: io.EOF at
// its clean end, a *fleet.MalformedError for an oversized line, or the
// reader's own error.
func (s *sseReader) next() (event, error) {
	for {
		line, err := s.line()
		if err != nil {
			if err == s.rerr && s.hasData && isDone(s.data) {
				ev := event{kind: kindData, data: s.data}
				s.resetEvent()
				return ev, nil
			}
			return event{}, err
		}
		if len(line) == 0 {
			if s.hasData && len(s.data) > 0 {
				ev := event{kind: kindData, data: s.data}
				if s.errorType {
					ev.kind = kindErrorEvent
				}
				s.resetEvent()
				return ev, nil
			}
			s.resetEvent()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, line[len(line):]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if err := s.appendData(value); err != nil {
				return event{}, err
			}
		case "event":
			s.errorType = string(value) == "error"
		case "error":
			s.resetEvent()
			return event{kind: kindErrorField, data: value}, nil
		}
	}
}

func (s *sseReader) appendData(value []byte) error {
	n := len(s.data) + len(value)
	if s.hasData {
		n++
	}
	if n > s.max {
		return &fleet.MalformedError{Detail: fmt.Sprintf("SSE event data longer than %d bytes", s.max)}
	}
	if s.hasData {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
	s.hasData = true
	return nil
}

// resetEvent forgets the event being built, keeping the data buffer.
func (s *sseReader) resetEvent() {
	s.data = s.data[:0]
	s.hasData = false
	s.errorType = false
}

// line returns the next line without its terminator. The slice is only
// valid until the next call. At the end of the body a last line without a
// terminator is still returned, then the reader's error.
func (s *sseReader) line() ([]byte, error) {
	for {
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		b := s.buf[s.start:s.end]
		if !s.started {
			if len(b) < len(bom) && s.rerr == nil && bytes.HasPrefix(bom, b) {
				s.fill() // too few bytes to tell
				continue
			}
			s.started = true
			if bytes.HasPrefix(b, bom) {
				s.start += len(bom)
				b = b[len(bom):]
			}
		}
		i := bytes.IndexByte(b, '\n')
		j := i
		if j < 0 {
			j = len(b)
		}
		if k := bytes.IndexByte(b[:j], '\r'); k >= 0 {
			i = k
		}
		if i >= 0 {
			if i > s.max {
				return nil, s.tooLong()
			}
			s.skipLF = b[i] == '\r'
			s.start += i + 1
			return b[:i], nil
		}
		if len(b) > s.max {
			return nil, s.tooLong()
		}
		if s.rerr != nil {
			if len(b) > 0 {
				s.start = s.end
				return b, nil
			}
			return nil, s.rerr
		}
		s.fill()
	}
}

// bufPool holds read buffers of initialBuf bytes, which a stream takes on
// its first read and gives back when it ends: every answer read one, and
// it was the largest allocation of a request (docs/BENCHMARKS.md).
var bufPool = sync.Pool{New: func() any { b := make([]byte, initialBuf); return &b }}

// release gives the read buffer back to bufPool, once no line of it is in
// use: after the reader's last event, on the goroutine that reads. An
// event's data is a buffer of its own, which stays.
func (s *sseReader) release() {
	if cap(s.buf) == initialBuf {
		b := s.buf[:initialBuf]
		bufPool.Put(&b)
	}
	s.buf, s.start, s.end = nil, 0, 0
}

// ended reports whether the body has ended (or failed).
func (s *sseReader) ended() bool { return s.rerr != nil }

func (s *sseReader) tooLong() error {
	return &fleet.MalformedError{Detail: fmt.Sprintf("SSE line longer than %d bytes", s.max)}
}

// fill reads more of the body, first making room: the unread rest moves to
// the front, and the buffer doubles (up to max+1) when the rest fills it.
func (s *sseReader) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.buf == nil && s.max+1 >= initialBuf {
		s.buf = *bufPool.Get().(*[]byte)
	}
	if s.end == len(s.buf) {
		n := max(2*len(s.buf), min(initialBuf, s.max+1))
		n = min(n, s.max+1)
		buf := make([]byte, n)
		copy(buf, s.buf[:s.end])
		s.buf = buf
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	switch {
	case err != nil:
		s.rerr = err
	case n == 0:
		if s.emptyReads++; s.emptyReads >= 100 {
			s.rerr = io.ErrNoProgress
		}
	default:
		s.emptyReads = 0
	}
}
