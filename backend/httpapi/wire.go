package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// decodeBody reads a JSON request body into v. The body must be one JSON
// value and nothing but white space after it, within the body limit and
// the body read deadline (Options.BodyReadTimeout). It returns the HTTP
// status and message to answer with when the body is too large (413), too
// slow (408) or not the JSON expected (400).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	// The deadline stays when the body could not be read whole: the server
	// would otherwise wait forever to drain it after the answer.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.o.BodyReadTimeout)) // not every ResponseWriter can; then the server's own timeouts hold
	if status, err := s.decodeFrom(r.Body, v); err != nil {
		return status, err
	}
	rc.SetReadDeadline(time.Time{}) // read whole: a stream's caller may take its time now
	return 0, nil
}

// decodeFrom decodes the one JSON value body holds into v, as decodeBody
// does, with its answers to a bad one.
func (s *Server) decodeFrom(body io.Reader, v any) (int, error) {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		return s.bodyError(err)
	}
	// What follows the value must be blank, up to the limit: a stray ']'
	// is malformed JSON, and 5 MiB of spaces is a body too large.
	switch blank, err := blankRest(io.MultiReader(dec.Buffered(), body)); {
	case err != nil:
		return s.bodyError(err)
	case !blank:
		return http.StatusBadRequest, fmt.Errorf("malformed JSON: unexpected data after the JSON value at byte %d", dec.InputOffset())
	}
	return 0, nil
}

// readFields reads a body that must be a JSON object whole, with its
// top-level fields. The usual body is read once and its fields with
// jsontext (mergeFields), where decodeBody's decoder and json.Unmarshal
// would scan it three times more; any other is decoded as decodeBody
// decodes it, for the same answer to a bad one.
//
// quick, when not nil, is the request the body is for, with a fast path
// through its usual bodies: where it takes the body it reads the fields
// too, in the same pass, and took is true.
func (s *Server) readFields(w http.ResponseWriter, r *http.Request, quick quickRequest) (body []byte, fields map[string]json.RawMessage, took bool, status int, err error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.o.BodyReadTimeout))
	body, err = readBody(r) // the body limit (guard) bounds it
	if err != nil {
		status, err := s.bodyError(err)
		return nil, nil, false, status, err
	}
	if quick != nil {
		fields, took = quick.decodeQuick(body)
	}
	if !took && !mergeFields(&fields, body) {
		var raw json.RawMessage
		if status, err := s.decodeFrom(bytes.NewReader(body), &raw); err != nil {
			return nil, nil, false, status, err
		}
		// Into a map of its own: one whose address goes to json.Unmarshal
		// is on the heap, and fields would be for every body.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, nil, false, http.StatusBadRequest, errors.New("expected a JSON object")
		}
		body, fields = raw, m
	}
	rc.SetReadDeadline(time.Time{})
	return body, fields, took, 0, nil
}

// readBody reads r's whole body: into one buffer of the length it
// announced when it did (io.ReadAll grows its buffer by doubling, so a
// large body, images in base64, would take about twice its size in
// allocations), else as it comes. The guard has refused a length over the
// body limit already.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, 0, r.ContentLength+1) // +1: the read that finds the end
	for len(buf) < cap(buf) {
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	// Longer than it said (not through net/http's server, which stops at
	// Content-Length): the rest as it comes.
	rest, err := io.ReadAll(r.Body)
	return append(buf, rest...), err
}

func (s *Server) bodyError(err error) (int, error) {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, errors.New("empty request body: expected a JSON object")
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout, fmt.Errorf("the request body did not arrive within %v", s.o.BodyReadTimeout)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return http.StatusBadRequest, fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te) && te.Field == "":
		return http.StatusBadRequest, fmt.Errorf("the body: expected %s, got JSON %s", jsonKind(te.Type), te.Value)
	case errors.As(err, &te):
		return http.StatusBadRequest, fmt.Errorf("field %q: expected %s, got JSON %s", fleet.ClipTo(te.Field, 100), jsonKind(te.Type), te.Value)
	}
	return http.StatusBadRequest, fmt.Errorf("malformed JSON: %v", fleet.ClipTo(err.Error(), 200))
}

// jsonKind says what JSON a Go type takes, in a caller's words ("an
// array"), not Go's ("[]api.Message").
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}

// blankBufs are blankRest's read buffers: a buffer handed to an io.Reader
// escapes, and a new one per request would be an allocation per request.
var blankBufs = sync.Pool{New: func() any { return new([4096]byte) }}

// blankRest reads r to its end and reports whether it held only JSON white
// space.
func blankRest(r io.Reader) (bool, error) {
	buf := blankBufs.Get().(*[4096]byte)
	defer blankBufs.Put(buf)
	blank := true
	for {
		n, err := r.Read(buf[:])
		for _, b := range buf[:n] {
			if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
				blank = false
			}
		}
		if err == io.EOF {
			return blank, nil
		}
		if err != nil {
			return blank, err
		}
	}
}

// MaxModelName is the longest model name a request may carry: names are
// echoed in errors, stored in history and sent to every event subscriber.
const MaxModelName = 256

// checkModel returns why a requested model name is refused, nil when it is
// fine.
func checkModel(name string) error {
	if len(name) > MaxModelName {
		return fmt.Errorf("model: a name of %d bytes is longer than %d", len(name), MaxModelName)
	}
	return nil
}

// maxErrorBody is the longest error message sent to a caller.
const maxErrorBody = 4096

// routeStream routes req as a stream and sets the routing headers; when
// no candidate commits it answers the caller in its protocol (write) and
// returns nil. The caller closes the stream.
func (s *Server) routeStream(w http.ResponseWriter, r *http.Request, req *fleet.Request, write routeWriter) *router.Stream {
	st, err := s.o.Router.Stream(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, write)
		return nil
	}
	routeHeaders(w.Header(), st.Meta())
	return st
}

// routeComplete routes req for one whole answer and sets the routing
// headers; when it fails it answers the caller in its protocol (write)
// and returns nil.
func (s *Server) routeComplete(w http.ResponseWriter, r *http.Request, req *fleet.Request, write routeWriter) *answer {
	ans, err := s.o.Router.Complete(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, write)
		return nil
	}
	routeHeaders(w.Header(), &ans.Meta)
	return assemble(ans)
}

// answer is a routed answer with the upstream's JSON put together at the
// edge: the router hands over the events as they came.
type answer struct {
	*router.Answer
	// Fields are the top-level fields of the upstream's answer, from its
	// first event and those that ended it, later ones winning.
	Fields map[string]json.RawMessage
	// Logprobs are the answer's token log probabilities as one JSON array
	// (see fleet.Chunk.Logprobs); nil when none came.
	Logprobs json.RawMessage
}

func assemble(a *router.Answer) *answer {
	ans := &answer{Answer: a}
	for _, raw := range a.Events {
		// Each event's fields go over the earlier ones. A value that is
		// not an object (or not JSON) is refused whole before anything is
		// stored: nothing to keep.
		if !mergeFields(&ans.Fields, raw) {
			json.Unmarshal(raw, &ans.Fields)
		}
	}
	var lp []byte
	for _, arr := range a.Logprobs {
		lp = appendArray(lp, arr)
	}
	if lp != nil {
		ans.Logprobs = append(lp, ']')
	}
	return ans
}

// mergeFields puts the top-level fields of the JSON object raw into
// *fields (made when nil), as json.Unmarshal into the map does, but reading
// names and values with a tokenizer instead of reflection. It reports
// false, having changed nothing, when raw is not an object it could read
// whole; invalid UTF-8, which encoding/json replaces, is one, and so is
// anything malformed, which encoding/json refuses, and a name with
// escapes, which json.Unmarshal is left to read.
//
// The values are raw's own bytes, not copies (jsontext parses a
// bytes.Buffer in place): raw must not change while *fields is in use. Its
// callers' raw is a request body or an event the answer holds, neither
// written again.
func mergeFields(fields *map[string]json.RawMessage, raw []byte) bool {
	var got [16]field
	read := got[:0]
	d := tokenizers.Get().(*quickChat)
	t := &d.t
	t.Reset(raw)
	ok := t.Object(func(name []byte) bool {
		v, ok := t.Value()
		read = append(read, field{fieldName(name), v})
		return ok
	}) && t.End()
	t.Reset(nil) // the pool keeps no body
	tokenizers.Put(d)
	if ok {
		putFields(fields, read)
	}
	return ok
}

// putFields puts the fields read into *fields, making the map when there
// is none; of a name read twice the last value wins, as in
// json.Unmarshal.
func putFields(fields *map[string]json.RawMessage, read []field) {
	if *fields == nil {
		*fields = make(map[string]json.RawMessage, len(read))
	}
	for _, f := range read {
		(*fields)[f.name] = f.value
	}
}

// fieldName is a name as a string: the usual names of a request and of
// an answer's events are constants, not a string made for each.
func fieldName(name []byte) string {
	for _, k := range commonNames {
		if string(name) == k {
			return k
		}
	}
	return string(name)
}

// commonNames are the top-level names of the usual chat request and of
// the events an answer is put together from.
var commonNames = []string{
	"model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens", "tools",
	"id", "object", "created", "system_fingerprint", "choices", "usage", "timings",
}

// appendArray appends the elements of the JSON array arr to the open array
// dst ("[a,b"), starting it when dst is nil.
func appendArray(dst, arr []byte) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return dst
	}
	if dst == nil {
		dst = []byte{'['}
	}
	inner := bytes.TrimSpace(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		return dst
	}
	if len(dst) > 1 {
		dst = append(dst, ',')
	}
	return append(dst, inner...)
}

// routeWriter writes a routing failure in the caller's protocol: status,
// msg, and the upstream's error when the failure is its refusal (nil
// otherwise).
type routeWriter func(w http.ResponseWriter, status int, msg string, upstream *fleet.StatusError)

// failRoute answers a request the router could not serve, before anything
// was written, with write (the caller's protocol); a caller that went away
// gets nothing.
func (s *Server) failRoute(w http.ResponseWriter, r *http.Request, err error, write routeWriter) {
	status, msg := http.StatusInternalServerError, fleet.ClipTo(err.Error(), maxErrorBody)
	var refusal *fleet.StatusError
	var re *router.Error
	if errors.As(err, &re) {
		status = failureStatus(re.Failure, re.Attempts)
		w.Header().Set("X-Switchyard-Request-Id", re.RequestID)
	}
	switch se, _ := errors.AsType[*fleet.StatusError](err); {
	case re != nil && re.Failure == fleet.FailureRejected && se != nil && se.Message != "":
		// The upstream said what is wrong with the request: its words,
		// as the server alone would answer (docs/DESIGN.md, "Other 4xx
		// answers"), not repeated for its attempt.
		msg, refusal = se.Message, se
	case re != nil && re.Failure == fleet.FailureShutdown:
		// The server cut the request short while shutting down; the
		// caller is still there and deserves an answer.
		msg = "switchyard is shutting down; retry in a moment"
		w.Header().Set("Retry-After", "1")
	case status == StatusClientClosed:
		return // the caller went away
	case re != nil && (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests):
		// When a candidate that could serve this request may be tried
		// again, in whole seconds.
		wait := max(re.RetryAfter, time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	}
	write(w, status, msg, refusal)
}

// startSSE answers 200 with the headers of a Server-Sent Events stream,
// which no cache or proxy may hold back.
func startSSE(w http.ResponseWriter) {
	setHeaders(w.Header(), "Content-Type", "text/event-stream", "Cache-Control", "no-cache", "X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// chunkWriter writes a streamed answer: each chunk flushed at once, or,
// after flushBeforeWait, when the upstream's stream is about to wait; the
// write deadline extended per write so a vanished caller cannot pin the
// handler, while a slow one only slows its own stream.
type chunkWriter struct {
	pooled  *[]byte // the box buf came in from chunkBufs; nil when buf is none of theirs
	w       http.ResponseWriter
	rc      http.ResponseController // a value, not the pointer NewResponseController makes: one allocation less a stream
	timeout time.Duration
	buf     []byte
	lazy    bool  // chunks are written before the stream waits
	err     error // the first failed write of a lazy writer
	// ch is the chunk pump writes: the encoders take its address, which
	// puts it on the heap, so it lives in cw's allocation rather than in
	// one of its own.
	ch fleet.Chunk
}

// lazyMax is the most a lazy chunkWriter holds before it writes anyway.
const lazyMax = 32 << 10

// flushBeforeWait makes cw write its chunks when st is about to wait for
// the upstream rather than one by one (router.Stream.BeforeWait): what
// the upstream sent together goes out in one write, which is what a bare
// proxy's copy does, and nothing is held back while the upstream is
// silent. Where st can't say, every chunk is written at once.
func (cw *chunkWriter) flushBeforeWait(st *router.Stream) {
	cw.lazy = st.BeforeWait(func() {
		if len(cw.buf) > 0 && cw.err == nil {
			cw.err = cw.flush()
		}
	})
}

// chunk ends a chunk in cw.buf: it is written now, or by a lazy writer
// before the stream waits or once lazyMax is held. An error says the
// caller went away.
func (cw *chunkWriter) chunk() error {
	switch {
	case cw.err != nil:
		return cw.err
	case cw.lazy && len(cw.buf) < lazyMax:
		return nil
	}
	return cw.flush()
}

func newChunkWriter(w http.ResponseWriter, timeout time.Duration) *chunkWriter {
	return &chunkWriter{w: w, rc: *http.NewResponseController(w), timeout: timeout}
}

// chunkBufs holds chunk writers' buffers between writes. An answer whose
// events come together fills a few KiB before its one write, and growing
// a buffer of its own to that was the largest allocation of a stream
// (make bench's profile: 2.7 KiB); a buffer held between writes would be
// memory an open stream keeps while its upstream is silent.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// hold is cw.buf to append to, taken from chunkBufs when cw holds none.
func (cw *chunkWriter) hold() []byte {
	if cw.pooled == nil {
		cw.pooled = chunkBufs.Get().(*[]byte)
		cw.buf = (*cw.pooled)[:0]
	}
	return cw.buf
}

// release gives cw's buffer back to chunkBufs, dropping what it holds. A
// buffer that grew past twice lazyMax is left to the collector.
func (cw *chunkWriter) release() {
	if cw.pooled != nil && cap(cw.buf) <= 2*lazyMax {
		*cw.pooled = cw.buf[:0] // the same box back: putting a new one would allocate
		chunkBufs.Put(cw.pooled)
	}
	cw.pooled, cw.buf = nil, nil
}

// flush writes cw.buf and flushes it to the caller; the buffer goes back
// to chunkBufs.
func (cw *chunkWriter) flush() error {
	cw.rc.SetWriteDeadline(time.Now().Add(cw.timeout))
	if _, err := cw.w.Write(cw.buf); err != nil {
		return err
	}
	cw.release()
	return cw.rc.Flush()
}

// last writes the end of an answer, unflushed: net/http sends it with the
// chunked body's terminator when the handler returns, in one write where
// a flush and the terminator made two. The handler must return soon
// after, as every one that pumps does.
func (cw *chunkWriter) last() error {
	cw.rc.SetWriteDeadline(time.Now().Add(cw.timeout))
	_, err := cw.w.Write(cw.buf)
	cw.release()
	return err
}

// appendString appends s as a JSON string, escaped as encoding/json does
// (minus HTML escaping): quotes, backslashes, control characters, invalid
// UTF-8 as U+FFFD, and U+2028/U+2029.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
