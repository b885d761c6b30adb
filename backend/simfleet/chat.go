package simfleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// kind is what a model request asks for.
type kind int

const (
	kindChat     kind = iota // a chat: /api/chat, /v1/chat/completions
	kindGenerate             // the completion of a prompt: /api/generate, /v1/completions
	kindEmbed                // vectors: /api/embed, /api/embeddings, /v1/embeddings
)

// op is what an Ollama request does with its model besides answering.
type op int

const (
	opAnswer op = iota // answer the request
	// opLoad: a request without messages or prompt loads the model and
	// answers done_reason "load" (backend/realserver/FINDINGS.md §7).
	opLoad
	// opUnload: the same with keep_alive 0 unloads it, done_reason "unload".
	opUnload
)

// request is what a server needs from a model request, whatever its
// protocol and endpoint.
type request struct {
	kind         kind
	model        string
	stream       bool
	think        bool // the caller asked for reasoning
	includeUsage bool // OpenAI stream_options.include_usage
	promptTokens int
	prompt       string // the last message's text
	op           op
	unloadAfter  bool // Ollama keep_alive 0 with a prompt: unload once answered

	// tools are the functions a chat offers; the answer calls the first
	// (or the one tool_choice names) unless toolResult is set.
	tools []tool
	// toolResult is the content of the chat's last message when that is a
	// tool result: the answer quotes it.
	toolResult *string
	// format asks for structured output: a JSON value, an instance of its
	// schema when it has one. Nil: text.
	format *outputFormat
	// suffix is the text after the insertion point of a generate request:
	// the answer is the infill text.
	suffix string

	inputs     []string // embed: the texts
	dimensions int      // embed: cut the vectors to this length; 0: the model's
	base64     bool     // embed: OpenAI encoding_format "base64"
}

// httpError is an error answer before any stream began.
type httpError struct {
	status int
	msg    string
}

// exchange is one model request being answered.
type exchange struct {
	req    request
	model  Model  // the served model
	id     string // response id
	start  time.Time
	load   time.Duration // load time spent on this request, 0 when warm
	first  time.Time     // when the first token was sent
	tokens []token       // the tokens of the whole answer
	sent   []token       // the tokens sent so far
}

// count returns the numbers of thinking and content tokens sent; the
// fragments of tool calls count as content.
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
		switch {
		case t.call != nil:
		case t.thinking:
			th.WriteString(t.text)
		default:
			co.WriteString(t.text)
		}
	}
	return th.String(), co.String()
}

// calls returns the tool calls sent, each with the arguments sent so far.
func (x *exchange) calls() []toolCall {
	var out []toolCall
	for _, t := range x.sent {
		if t.call == nil {
			continue
		}
		if t.head {
			c := *t.call
			c.arguments = ""
			out = append(out, c)
		}
		out[len(out)-1].arguments += t.text
	}
	return out
}

// dialect is one wire protocol's rendering of one endpoint: how it reads
// a request and writes the events of an answer. Methods that return bytes
// return one complete wire event (an NDJSON line, an SSE event), or the
// whole body for whole. The stream methods of an endpoint that never
// streams (embeddings) are never called.
type dialect interface {
	// parse decodes a request body.
	parse(body []byte) (request, *httpError)
	// check rejects a request the protocol's servers reject for model.
	check(req request, m Model) *httpError
	// notFound is the answer for a model the server does not serve.
	notFound(model string) *httpError
	// writeError answers an HTTP error with the protocol's error body.
	writeError(w http.ResponseWriter, status int, msg string)
	// writeBusy answers "overloaded, try elsewhere".
	writeBusy(w http.ResponseWriter, retryAfter time.Duration)
	// call returns the tokens of tool call c: one token with the whole
	// call, or a head token and the fragments of its arguments.
	call(x *exchange, c toolCall) []token
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

// handle answers a model request in dialect d, under the fault in force
// when it arrived, and counts it.
func (s *Server) handle(d dialect) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.update(func(st *Stats) { st.Requests++; st.OpenStreams++ })
		err := s.answer(r.Context(), w, r, d)
		if err != nil {
			// Never let net/http end the response cleanly for an answer
			// that was stopped halfway.
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
}

// phases are the parts of an answer a fault can play its own way, in the
// order they come; healthy says how a healthy server plays them. A phase
// that returns end true or an error ends the answer there with err: nil
// when the server finished its script, else what stopped it (the client
// went away, the server closed).
type phases struct {
	// respond comes before the response headers.
	respond func(a *reply) (end bool, err error)
	// open sends the headers. Then the server waits for the first token
	// (TTFT, and the load time of a cold model).
	open func(a *reply) (end bool, err error)
	// first comes before the first token.
	first func(a *reply) (end bool, err error)
	// token sends one token of a.x.tokens.
	token func(a *reply, t token) (end bool, err error)
	// end ends an answer whose tokens were all sent.
	end func(a *reply) error
}

// healthy is how a healthy server plays each phase.
var healthy = phases{
	respond: func(*reply) (bool, error) { return false, nil },
	open:    func(a *reply) (bool, error) { return false, a.open(true) },
	first:   func(*reply) (bool, error) { return false, nil },
	token:   func(a *reply, t token) (bool, error) { return false, a.token(t, a.s.cfg.TokenGap) },
	end:     (*reply).end,
}

// or returns p with the phases it leaves nil taken from base.
func (p phases) or(base phases) phases {
	if p.respond == nil {
		p.respond = base.respond
	}
	if p.open == nil {
		p.open = base.open
	}
	if p.first == nil {
		p.first = base.first
	}
	if p.token == nil {
		p.token = base.token
	}
	if p.end == nil {
		p.end = base.end
	}
	return p
}

// answer plays the phases of the fault in force for a model request. It
// returns nil when the server finished its script, or the error that
// stopped it: the client went away or the server closed.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, r *http.Request, d dialect) error {
	a, err := s.begin(ctx, w, r, d)
	if a == nil {
		return err
	}
	s.mark(&s.arrived)
	fr, _ := row(a.fault.Kind) // SetFault lets only known kinds in
	script := fr.phases.or(healthy)
	if end, err := script.respond(a); end || err != nil {
		return err
	}
	if end, err := script.open(a); end || err != nil {
		return err
	}
	if err := a.load(); err != nil {
		return err
	}
	if end, err := script.first(a); end || err != nil {
		return err
	}
	for i, t := range a.x.tokens {
		if i == 0 {
			s.mark(&s.firstToken)
		}
		if end, err := script.token(a, t); end || err != nil {
			return err
		}
	}
	return script.end(a)
}

// reply is the writing side of one exchange: what the phases of an answer
// write with, and the fault in force when the request arrived.
type reply struct {
	s     *Server
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	d     dialect
	x     *exchange
	fault Fault
	model string // the served model's name
	cold  bool   // the model was not resident
}

// begin reads a model request and starts its reply. When the request is
// not one the server answers, it writes the error answer and returns nil,
// with the error of a client that went away.
func (s *Server) begin(ctx context.Context, w http.ResponseWriter, r *http.Request, d dialect) (*reply, error) {
	// Read the whole body: net/http notices a client that goes away (and
	// cancels ctx) only once the body is consumed.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d.writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, nil
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
		return nil, nil
	}
	m, _ := s.model(req.model)

	a := &reply{s: s, ctx: ctx, w: w, rc: http.NewResponseController(w), d: d, model: m.Name}
	s.mu.Lock()
	a.fault = s.fault
	s.seq++
	seq := s.seq
	a.cold = !s.resident[m.Name]
	s.mu.Unlock()
	if a.fault.Kind != FaultHealthy {
		s.update(func(st *Stats) { st.Faulted++ })
	}

	a.x = &exchange{
		req:   req,
		model: m,
		id:    fmt.Sprintf("%s-%d", s.cfg.Name, seq),
		start: time.Now(),
	}
	a.x.tokens = s.plan(a.x, d)
	if req.stream {
		w.Header().Set("Content-Type", d.streamType())
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	return a, nil
}

// plan returns the tokens of the answer to x's request: the thinking
// when asked for, then what the request calls for: a tool call, an answer
// that quotes a tool's result, a JSON value, the infill text, or the
// server's answer. Loading, unloading and embeddings have no tokens.
func (s *Server) plan(x *exchange, d dialect) []token {
	req := x.req
	if req.op != opAnswer || req.kind == kindEmbed {
		return nil
	}
	var toks []token
	if req.think {
		for _, t := range s.thinkingTokens(req.model) {
			toks = append(toks, token{text: t, thinking: true})
		}
	}
	var content []string
	switch {
	case len(req.tools) > 0 && req.toolResult == nil:
		t := req.tools[0]
		c := toolCall{name: t.name, arguments: string(instance(t.parameters, s.cfg.Name))}
		return append(toks, d.call(x, c)...)
	case req.toolResult != nil:
		content = s.toolAnswerTokens(req.model, *req.toolResult)
	case req.format != nil:
		content = fragments(string(s.structured(req.model, req.format)), fragmentBytes)
	case req.kind == kindGenerate && req.suffix != "":
		content = s.InfillTokens(req.model)
	default:
		content = s.answerTokens(req.model, req.prompt)
	}
	for _, t := range content {
		toks = append(toks, token{text: t})
	}
	return toks
}

// load waits for the first token: TTFT, and the load time of a cold model,
// which it then makes resident. Embeddings and loading without an answer
// wait for the load alone; unloading waits for nothing and makes the model
// not resident.
func (a *reply) load() error {
	if a.x.req.op == opUnload {
		a.s.SetResident(a.model, false)
		return nil
	}
	delay := a.s.cfg.TTFT
	if a.x.req.op == opLoad || a.x.req.kind == kindEmbed {
		delay = 0
	}
	if a.cold {
		a.x.load = a.s.cfg.LoadTime
		delay += a.s.cfg.LoadTime
	}
	if err := a.s.wait(a.ctx, delay); err != nil {
		return err
	}
	if a.cold {
		a.s.SetResident(a.model, true)
	}
	return nil
}

// send writes b and flushes it.
func (a *reply) send(b []byte) error {
	if _, err := a.w.Write(b); err != nil {
		return err
	}
	return a.rc.Flush()
}

// headers sends the headers of a 200 answer.
func (a *reply) headers() error {
	a.w.WriteHeader(http.StatusOK)
	return a.rc.Flush()
}

// open sends the headers of a stream and, when opening is true, its
// opening event; with HeadWithFirstToken both wait, unflushed, for the
// first event's write. A non-streaming answer sends nothing before its
// end.
func (a *reply) open(opening bool) error {
	if !a.x.req.stream {
		return nil
	}
	b := a.d.opening(a.x)
	if !opening {
		b = nil
	}
	if a.s.cfg.HeadWithFirstToken {
		a.w.WriteHeader(http.StatusOK)
		_, err := a.w.Write(b)
		return err
	}
	if err := a.headers(); err != nil {
		return err
	}
	if b != nil {
		return a.send(b)
	}
	return nil
}

// token sends t, gap after the token before it.
func (a *reply) token(t token, gap time.Duration) error {
	if len(a.x.sent) > 0 {
		if err := a.s.wait(a.ctx, gap); err != nil {
			return err
		}
	} else {
		a.x.first = time.Now()
	}
	if a.x.req.stream {
		if err := a.send(a.d.token(a.x, t)); err != nil {
			return err
		}
	}
	a.x.sent = append(a.x.sent, t)
	return nil
}

// end ends a complete answer: the finish events of a stream, or the whole
// body. A request with keep_alive 0 unloads its model after it.
func (a *reply) end() error {
	if a.x.req.unloadAfter {
		defer a.s.SetResident(a.model, false)
	}
	if !a.x.req.stream {
		return a.send(a.d.whole(a.x))
	}
	return a.send(a.d.finish(a.x))
}

// die cuts the connection, after the headers of a non-streaming answer
// (nothing of which is written before its end).
func (a *reply) die() error {
	if !a.x.req.stream {
		if err := a.headers(); err != nil {
			return err
		}
	}
	cut(a.w)
	return nil
}

// hang waits until the client goes away or the server closes.
func (a *reply) hang() error { return a.s.hang(a.ctx) }

// stall sends the headers and, when event is true, the event without
// content of the dialect; then it hangs.
func (a *reply) stall(event bool) error {
	if err := a.headers(); err != nil {
		return err
	}
	if event {
		if err := a.send(a.d.stall(a.x)); err != nil {
			return err
		}
	}
	return a.hang()
}

// crash sends the headers, then cuts the connection.
func (a *reply) crash() error {
	if err := a.headers(); err != nil {
		return err
	}
	cut(a.w)
	return nil
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
