package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/switchyard/switchyard/backend/fleet"
)

// got is one dispatched event as the tests compare it.
type got struct {
	kind eventKind
	data string
}

func (g got) String() string { return fmt.Sprintf("{%d %q}", g.kind, g.data) }

// readEvents drains r, copying each event, and returns the error that ended
// it. It gives up after limit events so a bug cannot hang a test.
func readEvents(r *sseReader, limit int) ([]got, error) {
	var evs []got
	for range limit {
		ev, err := r.next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, got{ev.kind, string(ev.data)})
	}
	return evs, errors.New("too many events")
}

func data(s string) got { return got{kindData, s} }

// malformed stands for any *fleet.MalformedError in a wantErr.
var malformed = errors.New("malformed")

// errBoom is a read error of the transport.
var errBoom = errors.New("boom")

var sseTests = []struct {
	name    string
	in      string
	max     int // 0: maxLine
	want    []got
	wantErr error // io.EOF, errBoom or malformed
}{
	{name: "lf", in: "data: a\n\ndata: b\n\n", want: []got{data("a"), data("b")}},
	{name: "crlf", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []got{data("a"), data("b")}},
	{name: "cr", in: "data: a\r\rdata: b\r\r", want: []got{data("a"), data("b")}},
	{name: "mixed endings", in: "data: a\r\n\rdata: b\n\r\ndata: c\r\n\n", want: []got{data("a"), data("b"), data("c")}},
	{name: "multi-line data joined by lf", in: "data: {\"a\":\r\ndata: 1}\r\n\r\n", want: []got{data("{\"a\":\n1}")}},
	{name: "no space after colon", in: "data:a\n\n", want: []got{data("a")}},
	{name: "only one space stripped", in: "data:  a \n\n", want: []got{data(" a ")}},
	{name: "colon in value", in: "data: {\"k\":\"v: w\"}\n\n", want: []got{data(`{"k":"v: w"}`)}},
	{name: "comments and pings", in: ": ping\n\n:\n: ping - 2025-01-01 00:00:00.000000+00:00\r\ndata: a\n: mid-event\n\n", want: []got{data("a")}},
	{name: "unknown fields ignored", in: "id: 7\nretry: 100\nfoo: bar\nobfuscation: x\ndata: a\n\n", want: []got{data("a")}},
	{name: "field name without colon", in: "data\ndata: a\n\n", want: []got{data("\na")}},
	{name: "empty data not dispatched", in: "data:\n\ndata\n\nevent: x\n\n", want: nil},
	{name: "blank lines only", in: "\n\r\n\r\n\n", want: nil},
	{name: "last event without blank line dropped", in: "data: a\n\ndata: b\n", want: []got{data("a")}},
	{name: "last line without terminator dropped", in: "data: a\n\ndata: {\"x\"", want: []got{data("a")}},
	{name: "done without blank line", in: "data: a\n\ndata: [DONE]\n", want: []got{data("a"), data("[DONE]")}},
	{name: "done without line end", in: "data: a\r\n\r\ndata: [DONE]", want: []got{data("a"), data("[DONE]")}},
	{name: "done after cr at eof", in: "data: [DONE]\r", want: []got{data("[DONE]")}},
	{name: "joined data ending in done is not done", in: "data: x\ndata: [DONE]\n", want: nil},
	{name: "event error", in: "event: error\ndata: {\"message\":\"x\"}\n\n", want: []got{{kindErrorEvent, `{"message":"x"}`}}},
	{name: "event type resets after dispatch", in: "event: error\n\ndata: a\n\n", want: []got{data("a")}},
	{name: "other event types are data", in: "event: message\ndata: a\n\nevent: delta\ndata: b\n\n", want: []got{data("a"), data("b")}},
	{
		name: "legacy llama.cpp error line",
		in:   "data: a\n\nerror: {\"code\":500,\"message\":\"slot unavailable\",\"type\":\"server_error\"}\n\n",
		want: []got{data("a"), {kindErrorField, `{"code":500,"message":"slot unavailable","type":"server_error"}`}},
	},
	{name: "legacy error line at eof", in: "error: oops", want: []got{{kindErrorField, "oops"}}},
	{name: "byte order mark", in: "\xef\xbb\xbfdata: a\n\n", want: []got{data("a")}},
	{name: "byte order mark only at start", in: "data: a\n\n\xef\xbb\xbfdata: b\n\n", want: []got{data("a")}},
	{name: "line at the cap", max: 16, in: "data: 0123456789\n\n", want: []got{data("0123456789")}},
	{name: "line over the cap", max: 16, in: "data: a\n\ndata: 0123456789A\n\n", want: []got{data("a")}, wantErr: malformed},
	{name: "garbage without line end", max: 16, in: strings.Repeat("x", 100), wantErr: malformed},
	{name: "joined data over the cap", max: 16, in: "data: 0123456789\ndata: 0123456789\n\n", wantErr: malformed},
}

// readers are the ways a body may arrive: whole, byte by byte (every
// boundary, including between "\r" and "\n"), in halves, and with the last
// data together with io.EOF.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data with eof", iotest.DataErrReader},
}

func TestSSEReader(t *testing.T) {
	for _, tt := range sseTests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				max := tt.max
				if max == 0 {
					max = maxLine
				}
				evs, err := readEvents(newSSEReader(rd.wrap(strings.NewReader(tt.in)), max), 100)
				if fmt.Sprint(evs) != fmt.Sprint(tt.want) {
					t.Errorf("events = %v; want %v", evs, tt.want)
				}
				checkErr(t, err, tt.wantErr)
			})
		}
	}
}

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		want = io.EOF
	}
	if want == malformed {
		if _, ok := errors.AsType[*fleet.MalformedError](err); !ok {
			t.Errorf("end = %v; want a *fleet.MalformedError", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("end = %v; want %v", err, want)
	}
}

// failingReader returns its data, then err.
type failingReader struct {
	data string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestSSEReaderReadError(t *testing.T) {
	tests := []struct {
		name string
		r    io.Reader
		want []got
		err  error
	}{
		{"error ends the events", &failingReader{"data: a\n\ndata: b\n", errBoom}, []got{data("a")}, errBoom},
		{"pending done survives an error", &failingReader{"data: a\n\ndata: [DONE]\n", io.ErrUnexpectedEOF}, []got{data("a"), data("[DONE]")}, io.ErrUnexpectedEOF},
		{"no progress", &failingReader{"", nil}, nil, io.ErrNoProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readEvents(newSSEReader(tt.r, maxLine), 100)
			if fmt.Sprint(evs) != fmt.Sprint(tt.want) {
				t.Errorf("events = %v; want %v", evs, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("end = %v; want %v", err, tt.err)
			}
		})
	}
}

// FuzzSSE feeds arbitrary bodies to the SSE reader and to the whole chunk
// decoder. It checks that nothing panics or loops, that memory stays within
// the cap whatever the input, and that the events do not depend on how the
// body was split into reads.
func FuzzSSE(f *testing.F) {
	for _, tt := range sseTests {
		f.Add([]byte(tt.in))
	}
	for _, tt := range streamTests {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 256
		whole := newSSEReader(bytes.NewReader(in), max)
		a, errA := readBounded(t, whole, len(in)+1)
		b, errB := readBounded(t, newSSEReader(iotest.OneByteReader(bytes.NewReader(in)), max), len(in)+1)
		if fmt.Sprint(a) != fmt.Sprint(b) || errKind(errA) != errKind(errB) {
			t.Fatalf("whole read: %v, %v; byte by byte: %v, %v", a, errA, b, errB)
		}

		s := newStream(context.Background(), func() {}, io.NopCloser(bytes.NewReader(in)), max)
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatalf("more chunks than input bytes")
			}
			if _, err := s.Recv(); err != nil {
				break
			}
		}
	})
}

// readBounded is readEvents that also checks, after every event, that the
// reader's buffers stay within the cap.
func readBounded(t *testing.T, r *sseReader, limit int) ([]got, error) {
	var evs []got
	for range limit + 1 {
		ev, err := r.next()
		if cap(r.buf) > r.max+1 || len(r.data) > r.max || cap(r.data) > 4*r.max {
			t.Fatalf("buffers grew past the cap %d: buf %d, data %d/%d", r.max, cap(r.buf), len(r.data), cap(r.data))
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, got{ev.kind, string(ev.data)})
	}
	t.Fatalf("more events than input bytes")
	return nil, nil
}

func errKind(err error) string {
	if _, ok := errors.AsType[*fleet.MalformedError](err); ok {
		return "malformed"
	}
	return fmt.Sprint(err)
}

// A stream read to its end gives its read buffer back, and the next one
// reads as well from a buffer that held another body.
func TestEndedStreamGivesItsBufferBack(t *testing.T) {
	for range 3 {
		body := strings.Repeat(chunk(`"delta":{"content":"tok"},"finish_reason":null`), 40) + "data: [DONE]\n\n"
		s := newStream(context.Background(), func() {}, io.NopCloser(strings.NewReader(body)), maxLine)
		chunks, err := collect(s)
		if err != io.EOF || len(chunks) != 40 || chunks[39].Content != "tok" {
			t.Fatalf("%d chunks, then %v; want 40 of \"tok\", then io.EOF", len(chunks), err)
		}
		if s.sse.buf != nil {
			t.Error("the ended stream still holds its read buffer")
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Errorf("Recv() after the end = %v; want io.EOF again", err)
		}
	}
}

// BenchmarkShortStream is one short answer read whole: the per-stream
// cost (buffers, decoder) with the per-chunk cost of 10 chunks.
func BenchmarkShortStream(b *testing.B) {
	body := strings.Repeat(chunk(`"delta":{"content":" tok"},"finish_reason":null`), 10) + "data: [DONE]\n\n"
	b.ReportAllocs()
	for b.Loop() {
		s := newStream(context.Background(), func() {}, io.NopCloser(strings.NewReader(body)), maxLine)
		for {
			if _, err := s.Recv(); err != nil {
				break
			}
		}
	}
}

// What the reader holds of an answer goes out before the wait for the
// body's end after [DONE]: that end is the server's framing, which a
// server may send late, and the content need not wait for it. FinishBody
// reads through the stream's WaitReader, so the reader's BeforeWait
// function runs once more, with the whole body read, before the read that
// finds its end.
func TestReaderWritesBeforeTheBodyEnds(t *testing.T) {
	body := strings.NewReader(content("Hi") + ev("[DONE]"))
	s := newStream(t.Context(), func() {}, io.NopCloser(body), maxLine)
	var left []int // what the body held at each of the reader's writes
	s.BeforeWait(func() { left = append(left, body.Len()) })
	for {
		if _, err := s.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if len(left) != 2 || left[1] != 0 {
		t.Errorf("the reader wrote with %v bytes of the body left; want a write after the last byte, before the read that ends the body", left)
	}
}
