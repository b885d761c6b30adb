package simfleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// chatRequest is what a server needs from a chat request, whatever its
// protocol.
type chatRequest struct {
	model        string
	stream       bool
	think        bool // the caller asked for reasoning
	includeUsage bool // OpenAI stream_options.include_usage
	promptTokens int
}

// httpError is an error answer before any stream began.
type httpError struct {
	status int
	msg    string
}

// exchange is one chat request being answered.
type exchange struct {
	req    chatRequest
	model  Model
	id     string // response id
	start  time.Time
	load   time.Duration // load time spent on this request, 0 when warm
	first  time.Time     // when the first token was sent
	tokens []token       // the tokens of the whole answer
	sent   []token       // the tokens sent so far
}

// count returns the numbers of thinking and content tokens sent.
func (x *exchange) count() (thinking, content int) {
	for _, t := range x.sent {
		if t.thinking {
			thinking++
		} else {
			content++
		}
	}
	return thinking, content
}

// text returns the thinking and content texts sent.
func (x *exchange) text() (thinking, content string) {
	var th, co strings.Builder
	for _, t := range x.sent {
		if t.thinking {
			th.WriteString(t.text)
		} else {
			co.WriteString(t.text)
		}
	}
	return th.String(), co.String()
}

// dialect is one wire protocol's rendering of the events of an answer.
// Methods that return bytes return one complete wire event (an NDJSON line,
// an SSE event), or the whole body for whole.
type dialect interface {
	// parse decodes a request body.
	parse(body []byte) (chatRequest, *httpError)
	// check rejects a request the protocol's servers reject for model.
	check(req chatRequest, m Model) *httpError
	// notFound is the answer for a model the server does not serve.
	notFound(model string) *httpError
	// writeError answers an HTTP error with the protocol's error body.
	writeError(w http.ResponseWriter, status int, msg string)
	// writeBusy answers "overloaded, try elsewhere".
	writeBusy(w http.ResponseWriter, retryAfter time.Duration)
	// streamType is the Content-Type of a stream.
	streamType() string
	// opening is sent right after the headers of a healthy stream (the
	// OpenAI role chunk), or nil.
	opening(x *exchange) []byte
	// stall is the event without content that FaultRoleThenStall sends.
	stall(x *exchange) []byte
	token(x *exchange, t token) []byte
	// finish ends a complete stream (finish chunk, usage, [DONE]; or the
	// done line).
	finish(x *exchange) []byte
	errorEvent(x *exchange, msg string) []byte
	garbage(x *exchange) []byte
	// whole is the body of a non-streaming answer.
	whole(x *exchange) []byte
}

// chat answers a chat request in dialect d, under the fault in force when
// it arrived, and counts it.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, d dialect) {
	s.update(func(st *Stats) { st.Requests++; st.OpenStreams++ })
	err := s.answer(r.Context(), w, r, d)
	if err != nil {
		// Never let net/http end the response cleanly for an answer that
		// was stopped halfway.
		cut(w)
	}
	s.update(func(st *Stats) {
		st.OpenStreams--
		if err != nil {
			st.Cancelled++
		} else {
			st.Completed++
		}
	})
}

// answer returns nil when the server finished its script, or the error
// that stopped it: the client went away or the server closed.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, r *http.Request, d dialect) error {
	// Read the whole body: net/http notices a client that goes away (and
	// cancels ctx) only once the body is consumed.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil
	}
	req, herr := d.parse(body)
	if herr == nil {
		if m, ok := s.model(req.model); !ok {
			herr = d.notFound(req.model)
		} else {
			herr = d.check(req, m)
		}
	}
	if herr != nil {
		d.writeError(w, herr.status, herr.msg)
		return nil
	}
	m, _ := s.model(req.model)

	s.mu.Lock()
	fault := s.fault
	s.seq++
	seq := s.seq
	cold := !s.resident[m.Name]
	s.mu.Unlock()
	if fault.Kind != FaultHealthy {
		s.update(func(st *Stats) { st.Faulted++ })
	}

	x := &exchange{
		req:   req,
		id:    fmt.Sprintf("%s-%d", s.cfg.Name, seq),
		start: time.Now(),
	}
	if req.think {
		for _, t := range s.thinkingTokens(req.model) {
			x.tokens = append(x.tokens, token{text: t, thinking: true})
		}
	}
	for _, t := range s.AnswerTokens(req.model) {
		x.tokens = append(x.tokens, token{text: t})
	}

	switch fault.Kind {
	case FaultStatus:
		d.writeError(w, fault.Status, fmt.Sprintf("%s: simulated HTTP %d", s.cfg.Name, fault.Status))
		return nil
	case FaultBusy:
		d.writeBusy(w, fault.RetryAfter)
		return nil
	case FaultHangHeaders:
		return s.hang(ctx)
	}

	rc := http.NewResponseController(w)
	send := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if req.stream {
		w.Header().Set("Content-Type", d.streamType())
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	headers := func() error {
		w.WriteHeader(http.StatusOK)
		return rc.Flush()
	}

	// Faults that strike before the first token.
	switch fault.Kind {
	case FaultHangFirstToken:
		if err := headers(); err != nil {
			return err
		}
		return s.hang(ctx)
	case FaultCloseBeforeFirst:
		if err := headers(); err != nil {
			return err
		}
		cut(w)
		return nil
	case FaultRoleThenStall:
		if err := headers(); err != nil {
			return err
		}
		if req.stream {
			if err := send(d.stall(x)); err != nil {
				return err
			}
		}
		return s.hang(ctx)
	}

	if req.stream {
		if err := headers(); err != nil {
			return err
		}
		// vLLM reports an error that strikes before generation without
		// the role chunk.
		if b := d.opening(x); b != nil && fault.Kind != FaultErrorEvent {
			if err := send(b); err != nil {
				return err
			}
		}
	}
	delay := s.cfg.TTFT
	if cold {
		x.load = s.cfg.LoadTime
		delay += s.cfg.LoadTime
	}
	if err := s.wait(ctx, delay); err != nil {
		return err
	}
	if cold {
		s.SetResident(m.Name, true)
	}

	switch fault.Kind {
	case FaultErrorEvent:
		msg := fmt.Sprintf("%s: simulated error before the first token", s.cfg.Name)
		if !req.stream {
			d.writeError(w, http.StatusInternalServerError, msg)
			return nil
		}
		return send(d.errorEvent(x, msg))
	case FaultMalformed:
		if !req.stream {
			return send([]byte("}{ this is not JSON\n"))
		}
		return send(d.garbage(x))
	case FaultEmpty:
		x.tokens = nil
	}

	gap := s.cfg.TokenGap
	if fault.Kind == FaultSlow {
		gap = fault.Gap
	}
	for i, t := range x.tokens {
		if fault.Kind == FaultDieAfter && len(x.sent) == fault.AfterTokens {
			break
		}
		if i > 0 {
			if err := s.wait(ctx, gap); err != nil {
				return err
			}
		}
		if i == 0 {
			x.first = time.Now()
		}
		if req.stream {
			if err := send(d.token(x, t)); err != nil {
				return err
			}
		}
		x.sent = append(x.sent, t)
	}

	switch {
	case fault.Kind == FaultDieAfter:
		if !req.stream {
			// Nothing of a non-streaming answer is written before its end.
			if err := headers(); err != nil {
				return err
			}
		}
		cut(w)
		return nil
	case !req.stream && fault.Kind == FaultTruncated:
		b := d.whole(x)
		return send(b[:len(b)/2])
	case !req.stream:
		return send(d.whole(x))
	case fault.Kind == FaultTruncated:
		return nil
	}
	return send(d.finish(x))
}

// hang waits until the client goes away or the server closes.
func (s *Server) hang(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	}
}

// wait waits d, and returns early with an error when the client goes away
// or the server closes.
func (s *Server) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		default:
			return nil
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	case <-t.C:
		return nil
	}
}

// cut closes the connection under w at once, without ending the response:
// what was written is flushed, a chunked body is left unterminated. The
// handler must not use w afterwards.
func cut(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// promptTokens estimates the prompt's token count: its words, plus four per
// message for the chat template.
func promptTokens(contents []string) int {
	n := 0
	for _, c := range contents {
		n += len(strings.Fields(c)) + 4
	}
	return n
}
