package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/upstream"
)

// errClosed is what Recv returns after Close. It matches net.ErrClosed.
var errClosed = fmt.Errorf("openai stream: %w", net.ErrClosed)

// stream is a fleet.Stream over one chat completions SSE body.
//
// An answer is complete when data: [DONE] arrives (even without a
// finish_reason: the server said it is done), or when the body ends in any
// way after a chunk with a finish_reason (the content is whole; some
// servers omit [DONE], and the usage chunk may then be missing). A body that
// ends with neither is fleet.ErrTruncated, also when the transport calls
// the end clean: that is how an Ollama /v1 mid-stream failure and a cut
// close-delimited connection look.
//
// Recv is not safe for concurrent use with itself; Close is safe with
// anything.
type stream struct {
	ctx    context.Context // the request's context; cancel ends it
	cancel context.CancelFunc
	body   io.ReadCloser
	wait   *fleet.WaitReader // body, as sse reads it
	sse    *sseReader

	closeOnce sync.Once
	closed    atomic.Bool

	// Owned by Recv.
	err      error // sticky: once set, every Recv returns it
	finished bool  // a chunk carried a finish_reason
	feed     eventFeed
	json     *json.Decoder // reads feed; made on the first chunk
	dec      wire.Chunk    // the decode target of every event, reused
	quick    quickDecoder
	modelRaw []byte // last model value as sent, to reuse model below
	model    string
	// passthrough: the reader forwards Raw (fleet.Passthrougher), so an
	// event that can hold nothing but text is not decoded.
	passthrough bool
}

// Passthrough implements fleet.Passthrougher.
func (s *stream) Passthrough() { s.passthrough = true }

// BeforeWait implements fleet.Waiter.
func (s *stream) BeforeWait(f func()) { s.wait.Before = f }

// eventFeed hands one event's data at a time to the stream's json.Decoder.
// Decoding every chunk with the same Decoder reuses its buffer, scanner
// stack and error context, which json.Unmarshal allocates afresh each call
// (BenchmarkRecv: 10 allocations a content chunk down to 1, its text).
type eventFeed struct{ data []byte }

func (f *eventFeed) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// newStream reads body under ctx. cancel must cancel ctx (or be a no-op
// when ctx is not the request's); Close calls it.
func newStream(ctx context.Context, cancel context.CancelFunc, body io.ReadCloser, max int) *stream {
	wait := &fleet.WaitReader{R: body}
	return &stream{ctx: ctx, cancel: cancel, body: body, wait: wait, sse: newSSEReader(wait, max)}
}

// Recv returns the next chunk. Every SSE data event gives one chunk, which
// may be empty (a role-only first chunk, a usage-only last chunk). It
// returns io.EOF after a complete answer, fleet.ErrTruncated for a body that
// ended too early, a *fleet.EventError for an error the server sent in the
// stream (in any of its dialects, or a finish_reason of "error"), a
// *fleet.MalformedError for output that is not SSE with JSON chunks, the
// context's error once it is done, and an error matching net.ErrClosed after
// Close. Once it returned an error it returns the same error again.
func (s *stream) Recv() (fleet.Chunk, error) {
	var c fleet.Chunk
	err := s.RecvInto(&c)
	return c, err
}

// RecvInto implements fleet.IntoReceiver.
func (s *stream) RecvInto(c *fleet.Chunk) error {
	err := s.recv(c)
	if err != nil {
		*c = fleet.Chunk{}
		if s.sse != nil {
			// The end: nothing reads the body's buffer again.
			s.sse.release()
		}
	}
	return err
}

func (s *stream) recv(c *fleet.Chunk) error {
	if s.err != nil {
		return s.err
	}
	if s.closed.Load() {
		return errClosed
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return err
	}
	ev, err := s.sse.next()
	if err != nil {
		s.err = s.endError(err)
		return s.err
	}
	if ev.kind != kindData {
		s.err = eventError(ev.data)
		return s.err
	}
	if isDone(ev.data) {
		s.err = io.EOF
		if !s.sse.ended() {
			upstream.FinishBody(s.wait, s.body)
		}
		return s.err
	}
	if s.passthrough && plainEvent(ev.data) {
		*c = fleet.Chunk{Raw: ev.data}
		return nil
	}
	if err := s.decodeInto(c, ev.data); err != nil {
		s.err = err
		return err
	}
	return nil
}

// decodeInto is decode into *c. Apart from recv, whose frame is under the
// reads of the body (and the reader's writes before them): the chunk
// decode returns would be held there.
//
//go:noinline
func (s *stream) decodeInto(c *fleet.Chunk, data []byte) (err error) {
	*c, err = s.decode(data)
	return err
}

// The marks of an event that says more than text. A JSON string holds
// no unescaped quote, so none of them can stand inside a token's text.
var (
	markFinish     = []byte(`"finish_reason"`)
	markFinishNull = []byte(`"finish_reason":null`)
	markUsage      = []byte(`"usage"`)
	markError      = []byte(`"error"`)
)

// plainEvent reports whether data is a JSON value without a finish reason
// (every one null), usage or error: one that a pass-through forwards
// without decoding. Anything else, however it is spaced, takes the full
// decode.
func plainEvent(data []byte) bool {
	return bytes.Count(data, markFinish) == bytes.Count(data, markFinishNull) &&
		!bytes.Contains(data, markUsage) && !bytes.Contains(data, markError) && upstream.Valid(data)
}

// endError says what the end of the body means.
func (s *stream) endError(err error) error {
	if s.closed.Load() {
		return errClosed
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return ctxErr // the transport's read error is only its echo
	}
	if _, ok := errors.AsType[*fleet.MalformedError](err); ok {
		return err
	}
	switch {
	case s.finished:
		return io.EOF
	case err == io.EOF:
		return fleet.ErrTruncated
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %w", fleet.ErrTruncated, err)
	}
	return fmt.Errorf("read stream: %w", err)
}

// Close ends the stream at once: it cancels the request and closes the
// connection, which unblocks a Recv in progress. It is safe to call more
// than once and concurrently with Recv; it always returns nil.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.body.Close()
	})
	return nil
}

// reset empties d for the next chunk, keeping its buffers. encoding/json
// appends into a reused slice without zeroing the elements, so the old
// choices are cleared first.
func reset(d *wire.Chunk) {
	choices := d.Choices[:cap(d.Choices)]
	clear(choices)
	*d = wire.Chunk{
		Model:   d.Model[:0],
		Choices: choices[:0],
		Error:   d.Error[:0],
		Object:  d.Object[:0],
		Code:    d.Code[:0],
	}
}

// decode turns one event's data into a chunk: the common chunk quickly,
// the rest with encoding/json (full).
func (s *stream) decode(data []byte) (fleet.Chunk, error) {
	if c, ok := s.quick.chunk(data, s.modelName); ok {
		s.finished = s.finished || c.FinishReason != ""
		return c, nil
	}
	return s.full(data)
}

// full decodes data with encoding/json: every chunk, error and malformed
// event.
func (s *stream) full(data []byte) (fleet.Chunk, error) {
	d := &s.dec
	if err := s.unmarshal(data, d); err != nil {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "chunk " + clip(data), Err: err}
	}
	if fleet.IsSet(d.Error) {
		return fleet.Chunk{}, eventError(data)
	}
	if string(d.Object) == `"error"` {
		return fleet.Chunk{}, upstream.EventError(orRaw(d.Message, data), code(d.Code))
	}
	c := fleet.Chunk{Model: s.modelName(d.Model), Raw: data}
	if d.Usage != nil {
		c.Usage = &fleet.Usage{PromptTokens: d.Usage.PromptTokens, CompletionTokens: d.Usage.CompletionTokens}
	}
	if len(d.Choices) == 0 {
		c.UsageOnly = c.Usage != nil
		return c, nil // usage-only: choices [], null or missing
	}
	ch := &d.Choices[0]
	c.Role = ch.Delta.Role
	c.Content = ch.Delta.Content + ch.Text
	if lp := ch.Logprobs; lp != nil && fleet.IsSet(lp.Content) {
		c.Logprobs = bytes.Clone(lp.Content)
	}
	c.Reasoning = ch.Delta.Reasoning
	if c.Reasoning == "" {
		c.Reasoning = ch.Delta.ReasoningContent
	}
	if n := len(ch.Delta.ToolCalls); n > 0 {
		c.ToolCalls = make([]fleet.ToolCall, n)
		for i, tc := range ch.Delta.ToolCalls {
			index := i
			if tc.Index != nil {
				index = *tc.Index
			}
			c.ToolCalls[i] = fleet.ToolCall{
				Index:     index,
				ID:        tc.ID,
				Type:      tc.Type,
				Name:      tc.Function.Name,
				Arguments: tc.Function.Arguments,
			}
		}
	}
	switch ch.FinishReason {
	case "":
	case "error":
		// vLLM: "retryable request-level internal error".
		return fleet.Chunk{}, &fleet.EventError{Message: "finish_reason error: the server failed the request"}
	default:
		c.FinishReason = ch.FinishReason
		s.finished = true
	}
	return c, nil
}

// unmarshal decodes data, which must hold exactly one JSON value, into d
// after resetting it. Once it failed the decoder is out of step: the stream
// must end.
func (s *stream) unmarshal(data []byte, d *wire.Chunk) error {
	reset(d)
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return errors.New("empty chunk")
	}
	if s.json == nil {
		s.json = json.NewDecoder(&s.feed)
	}
	s.feed.data = data
	start := s.json.InputOffset()
	if err := s.json.Decode(d); err != nil {
		return err
	}
	if n := s.json.InputOffset() - start; n != int64(len(data)) {
		return fmt.Errorf("data after the JSON value at offset %d", n)
	}
	return nil
}

// modelName returns the model value raw decodes to, reusing the last string
// while the server repeats the same name (it does on every chunk).
func (s *stream) modelName(raw json.RawMessage) string {
	if bytes.Equal(raw, s.modelRaw) {
		return s.model
	}
	s.modelRaw = append(s.modelRaw[:0], raw...)
	s.model = ""
	if m, ok := upstream.Plain(raw); ok {
		s.model = m
	} else {
		json.Unmarshal(raw, &s.model) // a non-string model is no model
	}
	return s.model
}

// eventError turns an error the server sent inside the stream into a
// *fleet.EventError. raw is the data of an error event or the value of a
// legacy error: line: {"error":{"message":...,"code":...}}, {"error":"..."},
// the flat {"object":"error","message":...,"code":...}, the bare
// {"message":...,"code":...} of llama.cpp's error: line, or plain text.
func eventError(raw []byte) *fleet.EventError {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return upstream.EventError(orRaw("", raw), "")
	}
	if fleet.IsSet(v.Error) {
		var s string
		if json.Unmarshal(v.Error, &s) == nil {
			return upstream.EventError(orRaw(s, raw), "")
		}
		inner := v.Error
		v.Message, v.Type, v.Code = "", "", nil
		if json.Unmarshal(inner, &v) != nil {
			return upstream.EventError(orRaw("", raw), "")
		}
	}
	msg := v.Message
	if msg == "" {
		msg = v.Type
	}
	return upstream.EventError(orRaw(msg, raw), code(v.Code))
}

// code renders an error code as the server sent it: a string unquoted, a
// number as written, null or absent as "".
func code(raw json.RawMessage) string {
	if !fleet.IsSet(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// orRaw is msg, or the start of raw when the server gave no message.
func orRaw(msg string, raw []byte) string {
	if msg != "" {
		return msg
	}
	if raw = bytes.TrimSpace(raw); len(raw) == 0 {
		return "error without a message"
	}
	return clip(raw)
}

// clip is the start of b for a message, converting no more of it than
// that (b may be megabytes).
func clip(b []byte) string {
	const n = 200
	return fleet.ClipTo(string(b[:min(len(b), n+1)]), n)
}

// embedStream is the answer of /embeddings: one JSON object, read whole on
// the first Recv and handed over as one chunk.
type embedStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	done   bool
	once   sync.Once
}

func newEmbedStream(ctx context.Context, cancel context.CancelFunc, body io.ReadCloser) *embedStream {
	return &embedStream{ctx: ctx, cancel: cancel, body: body}
}

// maxEmbedBody bounds an embedding answer.
const maxEmbedBody = 256 << 20

// whole reads the answer's one body on the first call; later calls return
// io.EOF.
func (s *embedStream) whole(max int64, what string) ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	return upstream.ReadAll(s.ctx, s.body, max, what)
}

func (s *embedStream) Recv() (fleet.Chunk, error) {
	b, err := s.whole(maxEmbedBody, "embeddings")
	if err != nil {
		return fleet.Chunk{}, err
	}
	var v struct {
		Model string `json:"model"`
		Data  []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage *wire.Usage     `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "embeddings " + clip(b), Err: err}
	}
	if fleet.IsSet(v.Error) {
		return fleet.Chunk{}, eventError(b)
	}
	if len(v.Data) == 0 {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "embeddings answer without data: " + clip(b)}
	}
	c := fleet.Chunk{Model: v.Model, FinishReason: "stop", Raw: b, Embeddings: make([][]float32, len(v.Data))}
	for i, d := range v.Data {
		vec, err := vector(d.Embedding)
		if err != nil || d.Index < 0 || d.Index >= len(v.Data) {
			return fleet.Chunk{}, &fleet.MalformedError{Detail: fmt.Sprintf("embeddings data[%d]", i), Err: err}
		}
		c.Embeddings[d.Index] = vec
	}
	if v.Usage != nil {
		c.Usage = &fleet.Usage{PromptTokens: v.Usage.PromptTokens}
	}
	return c, nil
}

// vector reads an embedding: an array of numbers, or the base64 of
// little-endian float32s (encoding_format "base64").
func vector(raw json.RawMessage) ([]float32, error) {
	var floats []float32
	if err := json.Unmarshal(raw, &floats); err == nil {
		return floats, nil
	}
	var b64 string
	if err := json.Unmarshal(raw, &b64); err != nil {
		return nil, errors.New("neither numbers nor base64")
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b)%4 != 0 {
		return nil, errors.New("base64 that is not float32s")
	}
	floats = make([]float32, len(b)/4)
	for i := range floats {
		floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return floats, nil
}

func (s *embedStream) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.body.Close()
	})
	return nil
}

// wholeStream is a chat or completion answered in one JSON body (the
// form asked for when a server refuses the streamed one): read whole on
// the first Recv and handed over as one chunk, the answer complete.
type wholeStream struct {
	embedStream
}

func newWholeStream(ctx context.Context, cancel context.CancelFunc, body io.ReadCloser) *wholeStream {
	return &wholeStream{embedStream{ctx: ctx, cancel: cancel, body: body}}
}

// maxWholeBody bounds a whole answer, as a stream's line is bounded.
const maxWholeBody = 64 << 20

// wholeJSON is what Switchyard reads of a chat.completion or a
// text_completion (wire.Completion), or of the error a server answered in
// its place. Usage is a pointer: a server may send none.
type wholeJSON struct {
	Model   string          `json:"model"`
	Choices []wire.Choice   `json:"choices"`
	Usage   *wire.Usage     `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

func (s *wholeStream) Recv() (fleet.Chunk, error) {
	b, err := s.whole(maxWholeBody, "answer")
	if err != nil {
		return fleet.Chunk{}, err
	}
	var v wholeJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "answer " + clip(b), Err: err}
	}
	if fleet.IsSet(v.Error) {
		return fleet.Chunk{}, eventError(b)
	}
	c := fleet.Chunk{Role: "assistant", Model: v.Model, Raw: b, FinishReason: "stop", Whole: true}
	if v.Usage != nil {
		c.Usage = &fleet.Usage{PromptTokens: v.Usage.PromptTokens, CompletionTokens: v.Usage.CompletionTokens}
	}
	if len(v.Choices) == 0 {
		return c, nil // no answer: the router's empty answer
	}
	ch := &v.Choices[0]
	m := cmp.Or(ch.Message, &wire.AssistantMessage{})
	c.Content = m.Content
	if ch.Text != nil {
		c.Content += *ch.Text
	}
	c.Reasoning = cmp.Or(m.Reasoning, m.ReasoningContent)
	if lp := ch.Logprobs; lp != nil && fleet.IsSet(lp.Content) {
		c.Logprobs = lp.Content
	}
	for i, tc := range m.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, fleet.ToolCall{Index: i, ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	switch ch.FinishReason {
	case "":
	case "error":
		return fleet.Chunk{}, &fleet.EventError{Message: "finish_reason error: the server failed the request"}
	default:
		c.FinishReason = ch.FinishReason
	}
	return c, nil
}
