package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// Why a line reader of our own instead of api.Client.Chat: in v0.17.4 the
// client scans the body without checking scanner.Err(), so a stream cut in
// the middle, a cancelled context and an over-long line all end with a nil
// error, exactly like a complete answer (fixed upstream only in v0.30.0). A
// router that must tell "answered" from "truncated" cannot use it. Here an
// answer is complete when, and only when, its done:true line was read.

// wireLine is one line of /api/chat's or /api/generate's NDJSON: a chat
// line's text is in message, a generation's at the top (response,
// thinking, tool_calls). The api types have no error field; Ollama reports
// a failure inside a started stream as {"error":"..."}.
type wireLine struct {
	Model      string         `json:"model"`
	Message    api.Message    `json:"message"`
	Response   string         `json:"response"`
	Thinking   string         `json:"thinking"`
	ToolCalls  []api.ToolCall `json:"tool_calls"`
	Done       bool           `json:"done"`
	DoneReason string         `json:"done_reason"`
	api.Metrics
	Logprobs json.RawMessage `json:"logprobs"`
	Error    json.RawMessage `json:"error"`
}

// stream reads one /api/chat answer. Recv must not be called concurrently
// with itself; Close may be called at any time, from any goroutine, and more
// than once. It starts no goroutine: cancelling ctx makes net/http close the
// connection, which ends a blocked body read.
type stream struct {
	ctx  context.Context
	body io.ReadCloser
	wait *fleet.WaitReader // body, as sc reads it
	sc   *bufio.Scanner
	buf  *[]byte // the scanner's first buffer, from bufPool; nil once given back
	max  int

	// Recv's state, touched by Recv only.
	line  wireLine // reused for every line, reset before each decode
	quick quickLine
	lines int   // non-empty lines read
	calls int   // tool calls seen so far: the Index of the next one
	err   error // sticky: once set, every Recv returns it
	// finish: the done line was read, and the Recv that returns io.EOF
	// reads the body to its end (upstream.FinishBody), once the done
	// line's chunk is in the reader's hands and goes out with the rest.
	finish bool

	closeOnce sync.Once
	closed    atomic.Bool

	// passthrough: the reader forwards Raw (fleet.Passthrougher), so a
	// line that can hold nothing but text is not decoded.
	passthrough bool
}

// Passthrough implements fleet.Passthrougher.
func (s *stream) Passthrough() { s.passthrough = true }

// BeforeWait implements fleet.Waiter.
func (s *stream) BeforeWait(f func()) { s.wait.Before = f }

// The marks of a line that says more than text; a JSON string holds no
// unescaped quote, so they can't stand inside a token's text.
var (
	markDone      = []byte(`"done"`)
	markDoneFalse = []byte(`"done":false`)
	markError     = []byte(`"error"`)
)

// plainLine reports whether b is a JSON line that is not the last (every
// done is false) and holds no error: one a pass-through forwards without
// decoding.
func plainLine(b []byte) bool {
	return bytes.Count(b, markDone) == bytes.Count(b, markDoneFalse) && !bytes.Contains(b, markError) && upstream.Valid(b)
}

// newStream reads NDJSON from body, allowing lines of up to maxLine bytes.
// The stream owns body and closes it on Close.
func newStream(ctx context.Context, body io.ReadCloser, maxLine int) *stream {
	wait := &fleet.WaitReader{R: body}
	sc := bufio.NewScanner(wait)
	// The scanner's buffer is reused for every line; it grows only for a
	// line longer than the last, up to maxLine. It comes from bufPool and
	// goes back when the answer ends (release).
	s := &stream{ctx: ctx, body: body, wait: wait, sc: sc, max: maxLine}
	if maxLine >= lineBuf {
		s.buf = bufPool.Get().(*[]byte)
		sc.Buffer((*s.buf)[:0], maxLine)
	} else {
		sc.Buffer(make([]byte, 0, maxLine), maxLine)
	}
	return s
}

// lineBuf is the scanner's starting buffer; a line is a few hundred bytes.
const lineBuf = 4 << 10

// bufPool holds scanner buffers of lineBuf bytes: every answer read one,
// and it was the largest allocation of an Ollama stream.
var bufPool = sync.Pool{New: func() any { b := make([]byte, lineBuf); return &b }}

// release gives the scanner's first buffer back to bufPool, once nothing
// reads it again: Recv calls it as it returns the error that ends the
// answer, after the chunks whose bytes were in it have been handed on.
func (s *stream) release() {
	if s.buf != nil {
		bufPool.Put(s.buf)
		s.buf = nil
	}
}

// Recv returns the next chunk of the answer. The chunk of the done:true line
// carries FinishReason and Usage; the call after it returns io.EOF. See
// fleet.Stream for the errors.
func (s *stream) Recv() (fleet.Chunk, error) {
	var c fleet.Chunk
	err := s.RecvInto(&c)
	return c, err
}

// RecvInto implements fleet.IntoReceiver.
func (s *stream) RecvInto(c *fleet.Chunk) error {
	*c = fleet.Chunk{}
	if s.err != nil {
		if s.finish {
			s.finish = false
			upstream.FinishBody(s.wait, s.body)
		}
		s.release()
		return s.err
	}
	if err := s.interrupted(); err != nil {
		s.err = err
		return err
	}
	for s.sc.Scan() {
		b := bytes.TrimSpace(s.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		s.lines++
		if s.passthrough && plainLine(b) {
			c.Raw = b
			return nil
		}
		if err := s.decodeInto(c, b); err != nil {
			*c = fleet.Chunk{}
			s.err = err
			return err
		}
		if s.line.Done {
			s.err, s.finish = io.EOF, true
		}
		return nil
	}
	s.err = s.endErr()
	s.release()
	return s.err
}

// decodeInto is decode into *c. Apart from RecvInto, whose frame is under
// the reads of the body (and the reader's writes before them): the chunk
// decode returns would be held there.
//
//go:noinline
func (s *stream) decodeInto(c *fleet.Chunk, b []byte) (err error) {
	*c, err = s.decode(b)
	return err
}

// Close closes the response body, and with it the connection unless the
// body was already read to its end. It never fails.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true) // before Close, so a Recv it unblocks sees it
		s.body.Close()
	})
	return nil
}

// interrupted reports why the stream may not be read any more, if it was
// cancelled or closed.
func (s *stream) interrupted() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("read ollama stream: %w", net.ErrClosed)
	}
	return nil
}

// endErr explains why the scanner stopped before a done:true line.
func (s *stream) endErr() error {
	if err := s.interrupted(); err != nil {
		return err
	}
	err := s.sc.Err()
	switch {
	case err == nil && s.lines > 0:
		// Ollama ends an answer this way, cleanly, with neither done:true
		// nor an error line, when its runner could not parse the model's
		// output; a crash cuts the connection instead.
		return fmt.Errorf("ollama answer ended after %d lines without done or an error: %w (%w)", s.lines, fleet.ErrTruncated, fleet.ErrModelOutput)
	case err == nil:
		return fmt.Errorf("ollama stream ended without a line: %w", fleet.ErrTruncated)
	case errors.Is(err, bufio.ErrTooLong):
		return &fleet.MalformedError{Detail: fmt.Sprintf("ollama line %d longer than %d bytes", s.lines+1, s.max), Err: err}
	}
	// A cut chunked body (io.ErrUnexpectedEOF) or a reset connection: the
	// answer is truncated, and the transport's error says how.
	return fmt.Errorf("read ollama stream: %w: %w", fleet.ErrTruncated, err)
}

// decode turns one non-empty line into a chunk, or into the error it
// reports.
func (s *stream) decode(b []byte) (fleet.Chunk, error) {
	if b[0] != '{' {
		return fleet.Chunk{}, s.malformed(b, errors.New("not a JSON object"))
	}
	if !s.quick.read(b, &s.line) {
		// Reset first: Unmarshal leaves fields absent from b as they
		// were, and the previous line's must not leak into this one.
		s.line = wireLine{}
		if err := json.Unmarshal(b, &s.line); err != nil {
			return fleet.Chunk{}, s.malformed(b, err)
		}
	}
	if fleet.IsSet(s.line.Error) {
		msg := upstream.ErrorMessage(b)
		if msg == "" {
			msg = "unknown error"
		}
		return fleet.Chunk{}, upstream.EventError(msg, "")
	}

	r := &s.line
	c := fleet.Chunk{Role: r.Message.Role, Model: r.Model, Raw: b}
	if r.Done {
		c.FinishReason = r.DoneReason
		if c.FinishReason == "" {
			c.FinishReason = "stop"
		}
		c.Usage = &fleet.Usage{
			PromptTokens:     r.PromptEvalCount,
			CompletionTokens: r.EvalCount,
			LoadDuration:     r.LoadDuration,
		}
		// "load" and "unload" answer a request without messages (Ollama
		// only loaded or unloaded the model): whatever the line holds, it
		// is not an answer, and the router sees a stream without content.
		if r.DoneReason == "load" || r.DoneReason == "unload" {
			return c, nil
		}
	}
	c.Content = r.Message.Content + r.Response
	c.Reasoning = r.Message.Thinking + r.Thinking
	if fleet.IsSet(r.Logprobs) {
		c.Logprobs = r.Logprobs
	}
	calls := r.Message.ToolCalls
	if len(calls) == 0 {
		calls = r.ToolCalls
	}
	if n := len(calls); n > 0 {
		c.ToolCalls = make([]fleet.ToolCall, n)
		for i := range calls {
			tc := &calls[i]
			args, err := tc.Function.Arguments.MarshalJSON()
			if err != nil {
				return fleet.Chunk{}, s.malformed(b, err)
			}
			// Ollama sends each call whole, in one line; Index numbers the
			// calls across the stream so that no two calls share one, which
			// a translation to OpenAI deltas would merge.
			c.ToolCalls[i] = fleet.ToolCall{
				Index:     s.calls,
				ID:        tc.ID,
				Type:      "function",
				Name:      tc.Function.Name,
				Arguments: string(args),
			}
			s.calls++
		}
	}
	return c, nil
}

func (s *stream) malformed(b []byte, err error) error {
	return &fleet.MalformedError{
		Detail: fmt.Sprintf("ollama line %d %q", s.lines, fleet.ClipTo(string(b), 120)),
		Err:    err,
	}
}

// embedStream is the answer of /api/embed (or legacy /api/embeddings): one
// JSON object, read whole on the first Recv and handed over as one chunk.
type embedStream struct {
	ctx    context.Context
	body   io.ReadCloser
	legacy bool // {"embedding":[...]}, not {"embeddings":[[...]]}
	done   bool
	once   sync.Once
}

func newEmbedStream(ctx context.Context, body io.ReadCloser, legacy bool) *embedStream {
	return &embedStream{ctx: ctx, body: body, legacy: legacy}
}

// maxEmbedBody bounds an embedding answer: a few thousand floats per
// input, for inputs that fit in a request body.
const maxEmbedBody = 256 << 20

func (s *embedStream) Recv() (fleet.Chunk, error) {
	if s.done {
		return fleet.Chunk{}, io.EOF
	}
	s.done = true
	b, err := upstream.ReadAll(s.ctx, s.body, maxEmbedBody, "ollama embeddings")
	if err != nil {
		return fleet.Chunk{}, err
	}
	var v struct {
		api.EmbedResponse
		Embedding []float32       `json:"embedding"`
		Error     json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "ollama embeddings " + fleet.ClipTo(string(b), 120), Err: err}
	}
	if fleet.IsSet(v.Error) {
		return fleet.Chunk{}, upstream.EventError(upstream.ErrorMessage(b), "")
	}
	c := fleet.Chunk{Model: v.Model, Embeddings: v.Embeddings, FinishReason: "stop", Raw: b,
		Usage: &fleet.Usage{PromptTokens: v.PromptEvalCount, LoadDuration: v.LoadDuration}}
	if s.legacy {
		c.Embeddings = [][]float32{v.Embedding}
	}
	if len(c.Embeddings) == 0 || len(c.Embeddings[0]) == 0 {
		return fleet.Chunk{}, &fleet.MalformedError{Detail: "ollama embeddings answer without a vector: " + fleet.ClipTo(string(b), 120)}
	}
	return c, nil
}

func (s *embedStream) Close() error {
	s.once.Do(func() { s.body.Close() })
	return nil
}
