package simfleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/backend/fleet"
)

// ErrClosed is returned by the methods of a Server after Close.
var ErrClosed = errors.New("simfleet: server closed")

// Defaults for Config fields left zero.
const (
	// DefaultTokens is the number of content tokens of an answer.
	DefaultTokens = 24
	// DefaultModelSize is the size of a model whose SizeBytes is zero.
	DefaultModelSize int64 = 4 << 30
	// DefaultModelName names the one model of a Config without Models.
	DefaultModelName = "sim-model"
	// DefaultName names a server whose Config has no Name.
	DefaultName = "sim"
	// DefaultDimensions is the length of a model's vectors when its
	// Dimensions is zero.
	DefaultDimensions = 768
	// DefaultContextLength is the trained context of a model whose
	// ContextLength is zero.
	DefaultContextLength = 32768
)

// maxBody caps the size of a request body the servers read.
const maxBody = 4 << 20

// Model is one model a simulated server serves.
type Model struct {
	// Name is the model name clients send: "qwen3:8b" for Ollama,
	// "Qwen/Qwen3-32B" for vLLM. An Ollama name without a tag also matches
	// its ":latest" form.
	Name string
	// Thinking says the model can reason: Ollama lists the "thinking"
	// capability and emits message.thinking when asked with think; the
	// OpenAI dialect emits delta.reasoning when reasoning_effort is set.
	Thinking bool
	// Embedding says the model makes embeddings and cannot chat, as
	// nomic-embed-text: Ollama's /api/show lists only the "embedding"
	// capability, the embeddings endpoints answer for it, and chat and
	// generate requests get the refusal of the real servers. The other
	// models are chat models, which refuse embeddings.
	Embedding bool
	// Dimensions is the length of the model's vectors, and its
	// embedding_length in /api/show. Zero means DefaultDimensions.
	Dimensions int
	// Arch is the model's architecture: general.architecture and
	// details.family in /api/show, the prefix of its model_info keys.
	// Empty means the name up to its first digit or colon ("qwen" for
	// "qwen3:8b").
	Arch string
	// ContextLength is the context the model was trained for:
	// "<arch>.context_length" in /api/show (which apps like Zed read) and
	// max_model_len in vLLM's /v1/models. Zero means DefaultContextLength.
	ContextLength int
	// SizeBytes is the model's size in /api/tags and /api/ps (where it is
	// all in VRAM). Zero means DefaultModelSize.
	SizeBytes int64
}

// Config describes one simulated server. Zero fields mean the defaults
// documented on each.
type Config struct {
	// Name names the server in its answers ("alpha here (qwen3:8b): ...").
	// Default DefaultName.
	Name string
	// Provider is the wire protocol: fleet.ProviderOllama (default) or
	// fleet.ProviderOpenAI (vLLM-style: /v1 chat, /metrics, /health).
	Provider fleet.Provider
	// Models are the models it serves; the first is the one Candidate
	// names. Default: one non-thinking model named DefaultModelName.
	Models []Model
	// TTFT is the delay between the response headers and the first token
	// (the answer's first event for faults that replace it). Zero: none.
	TTFT time.Duration
	// HeadWithFirstToken holds back the headers of a streamed answer
	// until its first event, and sends them together in one write, as
	// Ollama does on /api/chat and on its /v1 alike (its handler writes
	// nothing before the first chunk). By default the headers go out at
	// once and the first token TTFT later, as llama-server sends its own
	// when a slot takes the request. Faults that say they send the
	// headers still send them.
	HeadWithFirstToken bool
	// TokenGap is the delay between two tokens. Zero: none.
	TokenGap time.Duration
	// Tokens is the number of content tokens of an answer and of an
	// infill text; a thinking answer first has Tokens/2 (at least 1)
	// thinking tokens. Tool calls, answers that quote a tool result and
	// JSON answers have the tokens their text needs. Default
	// DefaultTokens.
	Tokens int
	// LoadTime is added before the first token of a request whose model is
	// not resident (see SetResident); the request then makes it resident,
	// as Ollama loads a model on demand, and reports the time as its
	// load_duration. Zero: loading is instant.
	LoadTime time.Duration
	// Parallel is how many requests the server says it runs at once (its
	// candidates' Slots). A simulated server never queues, whatever it
	// says; it says DefaultParallel unless told otherwise, so Switchyard
	// does not take its concurrent answers for queueing.
	Parallel int
	// LegacyToolCalls makes an Ollama server send the tool calls of
	// /api/chat without an id, as Ollama did before 0.12.10 (ids came
	// with ollama/ollama#12732); its /api/version then says
	// OllamaLegacyVersion. By default a call has an id, as in 0.17.4.
	// Ollama's /v1 always gives ids.
	LegacyToolCalls bool
	// Topics makes the server answer a prompt on a few topics (circuit
	// breakers, a Go function, slow models) with a longer markdown text,
	// lists and code blocks among it, after its usual lead; every other
	// prompt gets its Answer. The demo fleet's servers have it, so the
	// demo shows what long and formatted answers look like.
	Topics bool
}

// DefaultParallel is the Parallel of a simulated server by default.
const DefaultParallel = 256

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Parallel <= 0 {
		c.Parallel = DefaultParallel
	}
	switch c.Provider {
	case "":
		c.Provider = fleet.ProviderOllama
	case fleet.ProviderOllama, fleet.ProviderOpenAI:
	default:
		return c, fmt.Errorf("simfleet %s: unknown provider %q", c.Name, c.Provider)
	}
	if c.Tokens < 0 || c.TTFT < 0 || c.TokenGap < 0 || c.LoadTime < 0 {
		return c, fmt.Errorf("simfleet %s: negative tokens or duration", c.Name)
	}
	if c.Tokens == 0 {
		c.Tokens = DefaultTokens
	}
	if len(c.Models) == 0 {
		c.Models = []Model{{Name: DefaultModelName}}
	}
	models := make([]Model, len(c.Models))
	seen := make(map[string]bool)
	for i, m := range c.Models {
		if m.Name == "" || seen[m.Name] {
			return c, fmt.Errorf("simfleet %s: model %d: empty or duplicate name %q", c.Name, i, m.Name)
		}
		seen[m.Name] = true
		if m.SizeBytes <= 0 {
			m.SizeBytes = DefaultModelSize
		}
		if m.Dimensions <= 0 {
			m.Dimensions = DefaultDimensions
		}
		if m.ContextLength <= 0 {
			m.ContextLength = DefaultContextLength
		}
		if m.Arch == "" {
			m.Arch = defaultArch(m.Name)
		}
		models[i] = m
	}
	c.Models = models
	return c, nil
}

// Stats counts the model requests of a server: chat, generate,
// completions and embeddings, streaming or not. Discovery endpoints and
// connections refused by FaultRefuse are not counted. Once no request is
// open, Requests == Completed + Cancelled.
type Stats struct {
	// Requests is the number of model requests received.
	Requests int
	// OpenStreams is the number of model requests being answered now.
	OpenStreams int
	// Completed counts requests the server finished answering as scripted,
	// errors and cut connections included.
	Completed int
	// Cancelled counts requests whose client went away (or whose server was
	// closed) before the server finished.
	Cancelled int
	// Faulted counts requests answered under a fault other than healthy.
	Faulted int
}

// Server is one simulated upstream. All its methods are safe for concurrent
// use. Start returns it listening; Close stops it.
type Server struct {
	cfg  Config
	addr string // 127.0.0.1:PORT, kept across FaultRefuse
	srv  *http.Server
	done chan struct{} // closed by Close

	mu        sync.Mutex
	closed    bool
	fault     Fault
	ln        net.Listener // nil while refusing
	conns     map[net.Conn]http.ConnState
	connsGone *sync.Cond // on mu; signalled when a conn leaves conns
	resident  map[string]bool
	kvCache   float64
	waiting   int
	stats     Stats
	changed   chan struct{} // closed and replaced when stats change
	seq       int           // request sequence, for response ids

	serving  sync.WaitGroup // Serve goroutines
	handlers sync.WaitGroup // running handlers; Add only under mu while !closed

	// born is the clock the marks count from; arrived and firstToken are
	// the latest model request's (Marks), in nanoseconds since born.
	born                time.Time
	arrived, firstToken atomic.Int64
}

// Marks returns when the latest model request had been read whole and
// when the latest answer began to write its first token; zero times
// before any. With one request at a time they are that request's: make
// bench splits a first token's latency into the way in and the way out
// with them.
func (s *Server) Marks() (arrived, firstToken time.Time) {
	at := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return s.born.Add(time.Duration(ns))
	}
	return at(s.arrived.Load()), at(s.firstToken.Load())
}

// mark stores now in m, as Marks reads it.
func (s *Server) mark(m *atomic.Int64) { m.Store(int64(max(time.Since(s.born), 1))) }

// Start starts a server for cfg on a random port of 127.0.0.1. Every model
// starts resident and the fault is healthy. The caller closes the server.
func Start(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simfleet %s: listen: %w", cfg.Name, err)
	}
	s := &Server{
		born:     time.Now(),
		cfg:      cfg,
		addr:     ln.Addr().String(),
		done:     make(chan struct{}),
		fault:    Fault{Kind: FaultHealthy},
		ln:       ln,
		conns:    make(map[net.Conn]http.ConnState),
		resident: make(map[string]bool),
		changed:  make(chan struct{}),
	}
	s.connsGone = sync.NewCond(&s.mu)
	for _, m := range cfg.Models {
		s.resident[m.Name] = true
	}
	s.srv = &http.Server{
		Handler:           s.gate(s.routes()),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         s.connState,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s.mu.Lock()
	s.serveLocked(ln)
	s.mu.Unlock()
	return s, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Provider == fleet.ProviderOpenAI {
		s.openaiRoutes(mux, flavorVLLM)
		mux.HandleFunc("GET /metrics", s.vllmMetrics)
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		return mux
	}
	base := ollamaBase{}
	mux.Handle("POST /api/chat", s.handle(ollamaChat{base, !s.cfg.LegacyToolCalls}))
	mux.Handle("POST /api/generate", s.handle(ollamaGenerate{base}))
	mux.Handle("POST /api/embed", s.handle(ollamaEmbed{ollamaBase: base}))
	mux.Handle("POST /api/embeddings", s.handle(ollamaEmbeddings{ollamaBase: base}))
	mux.HandleFunc("GET /api/tags", s.ollamaTags)
	mux.HandleFunc("GET /api/ps", s.ollamaPS)
	mux.HandleFunc("POST /api/show", s.ollamaShow)
	mux.HandleFunc("GET /api/version", s.ollamaVersion)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "Ollama is running")
	})
	// Ollama's own OpenAI-compatible API, beside its native one.
	s.openaiRoutes(mux, flavorOllama)
	return mux
}

// openaiRoutes serves the OpenAI-compatible endpoints as f's servers do.
func (s *Server) openaiRoutes(mux *http.ServeMux, f flavor) {
	base := openaiBase{f}
	mux.Handle("POST /v1/chat/completions", s.handle(openaiChat{base}))
	mux.Handle("POST /v1/completions", s.handle(openaiCompletions{base}))
	mux.Handle("POST /v1/embeddings", s.handle(openaiEmbeddings{openaiBase: base}))
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { s.openaiModels(w, f) })
}

// gate tracks running handlers so Close can wait for them, and drops
// requests that arrive on an old connection while the server refuses or
// after Close.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed || s.fault.Kind == FaultRefuse {
			s.mu.Unlock()
			cut(w)
			return
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		defer s.handlers.Done()
		next.ServeHTTP(w, r)
	})
}

// serveLocked serves ln in a new goroutine. s.mu is held and s is open.
func (s *Server) serveLocked(ln net.Listener) {
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		s.srv.Serve(ln) // returns when ln or the server is closed
	}()
}

func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateHijacked, http.StateClosed:
		delete(s.conns, c)
		s.connsGone.Broadcast()
		return
	case http.StateNew, http.StateIdle:
		// A refusing (crashed) server keeps no connection open, and a
		// connection accepted while closing would outlive Close.
		if s.closed || s.fault.Kind == FaultRefuse {
			c.Close()
		}
	}
	s.conns[c] = state
}

// Addr is the server's address, 127.0.0.1:PORT; it stays the same across
// FaultRefuse.
func (s *Server) Addr() string { return s.addr }

// URL returns the base URL as the server's own clients take it:
// http://127.0.0.1:PORT for Ollama, http://127.0.0.1:PORT/v1 for OpenAI.
// It stays the same across FaultRefuse. An Ollama server also serves
// Ollama's OpenAI-compatible API under URL()+"/v1".
func (s *Server) URL() string {
	if s.cfg.Provider == fleet.ProviderOpenAI {
		return "http://" + s.addr + "/v1"
	}
	return "http://" + s.addr
}

// Name returns the server's name, as its answers say it.
func (s *Server) Name() string { return s.cfg.Name }

// Config returns the server's configuration with its defaults filled in.
func (s *Server) Config() Config {
	c := s.cfg
	c.Models = append([]Model(nil), c.Models...)
	return c
}

// Candidate returns the router candidate for the server's first model:
// enabled, local, with the server's provider, URL and thinking support.
func (s *Server) Candidate(id string, priority int) fleet.Candidate {
	m := s.cfg.Models[0]
	return fleet.Candidate{
		ID:               id,
		Provider:         s.cfg.Provider,
		URL:              s.URL(),
		Model:            m.Name,
		Priority:         priority,
		Enabled:          true,
		SupportsThinking: m.Thinking,
		Local:            true,
		Slots:            s.cfg.Parallel,
	}
}

// SetFault sets how the server answers requests that arrive from now on;
// requests already in flight keep their behaviour. Zero parameters get the
// defaults of Fault. Setting FaultRefuse closes the listener and the idle
// connections; setting any other fault afterwards listens again on the same
// port, and fails (leaving the server refusing) if the port was taken
// meanwhile.
func (s *Server) SetFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	f = f.normalized()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	refusing := s.fault.Kind == FaultRefuse
	switch {
	case f.Kind == FaultRefuse && !refusing:
		s.ln.Close()
		s.ln = nil
		for c, state := range s.conns {
			if state == http.StateIdle || state == http.StateNew {
				c.Close()
			}
		}
	case f.Kind != FaultRefuse && refusing:
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("simfleet %s: listen again on %s: %w", s.cfg.Name, s.addr, err)
		}
		s.ln = ln
		s.serveLocked(ln)
	}
	s.fault = f
	return nil
}

// Fault returns the fault in force, with its defaults filled in.
func (s *Server) Fault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

// SetResident says whether model is loaded: Ollama's /api/ps lists only
// resident models, and a request for a model that is not resident waits
// Config.LoadTime and makes it resident.
func (s *Server) SetResident(model string, resident bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resident[model] = resident
}

// SetKVCacheUsage sets vllm:kv_cache_usage_perc of /metrics (1 = 100%).
func (s *Server) SetKVCacheUsage(ratio float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kvCache = ratio
}

// SetWaiting sets vllm:num_requests_waiting of /metrics.
func (s *Server) SetWaiting(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = n
}

// Stats returns the request counters now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// WaitStats blocks until cond holds for the server's Stats or ctx is done,
// and returns ctx's error in the latter case. cond is called without locks
// held, once per change of the counters.
func (s *Server) WaitStats(ctx context.Context, cond func(Stats) bool) error {
	for {
		s.mu.Lock()
		st, changed := s.stats, s.changed
		s.mu.Unlock()
		if cond(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// WaitIdle blocks until no chat request is open (Stats().OpenStreams == 0)
// or ctx is done.
func (s *Server) WaitIdle(ctx context.Context) error {
	return s.WaitStats(ctx, func(st Stats) bool { return st.OpenStreams == 0 })
}

// update changes the counters under the lock and wakes WaitStats.
func (s *Server) update(change func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change(&s.stats)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close stops the server: it closes the listener and every connection, ends
// the running handlers and waits for them and for every goroutine of the
// server. It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()

	// Connections first, so that no handler ended by done below can still
	// finish its response cleanly.
	s.srv.Close()
	close(s.done)
	s.serving.Wait()
	s.handlers.Wait()
	s.mu.Lock()
	for len(s.conns) > 0 {
		s.connsGone.Wait()
	}
	s.mu.Unlock()
}

// model returns the served model a request names.
func (s *Server) model(name string) (Model, bool) {
	for _, m := range s.cfg.Models {
		if m.Name == name {
			return m, true
		}
		if s.cfg.Provider == fleet.ProviderOllama && !strings.Contains(name, ":") && m.Name == name+":latest" {
			return m, true
		}
	}
	return Model{}, false
}

// token is one event of an answer: thinking or content text, or (a
// fragment of) a tool call.
type token struct {
	text     string
	thinking bool
	// call is the tool call the token belongs to; text is then a fragment
	// of its arguments, and head says the token opens the call.
	call *toolCall
	head bool
}

// Answer returns the full content the server answers for model: Tokens
// tokens, the first of which names the server and the model. It ends where
// a sentence ends.
func (s *Server) Answer(model string) string { return strings.Join(s.AnswerTokens(model), "") }

// AnswerTokens returns the content tokens of the answer for model, in the
// order they are streamed.
func (s *Server) AnswerTokens(model string) []string {
	return script(fmt.Sprintf("%s here (%s):", s.cfg.Name, model), answerText, s.cfg.Tokens)
}

// Infill returns the text the server inserts for a generate request
// with a suffix (fill-in-the-middle, as editors ask for it): Tokens
// tokens, the first of which names the server and the model.
func (s *Server) Infill(model string) string { return strings.Join(s.InfillTokens(model), "") }

// InfillTokens returns the tokens of Infill, in the order they are
// streamed.
func (s *Server) InfillTokens(model string) []string {
	return script(fmt.Sprintf("%s fills in (%s):", s.cfg.Name, model), answerText, s.cfg.Tokens)
}

// ToolAnswer returns the answer to a chat whose last message is a tool
// result: it names the server and the model, and quotes the result
// verbatim, so a test can see the round trip.
func (s *Server) ToolAnswer(model, result string) string {
	return strings.Join(s.toolAnswerTokens(model, result), "")
}

func (s *Server) toolAnswerTokens(model, result string) []string {
	lead := fmt.Sprintf("%s here (%s): The tool returned:", s.cfg.Name, model)
	return append([]string{lead}, words(" "+result)...)
}

// Structured returns the JSON value the server answers for a request
// with structured output: an instance of schema, or, without a schema
// (Ollama format "json", OpenAI json_object), an object whose "answer" is
// the server's Answer.
func (s *Server) Structured(model string, schema json.RawMessage) json.RawMessage {
	return s.structured(model, &outputFormat{schema: schema})
}

func (s *Server) structured(model string, f *outputFormat) json.RawMessage {
	if len(f.schema) == 0 {
		b, _ := json.Marshal(map[string]string{"answer": s.Answer(model)})
		return b
	}
	return instance(f.schema, s.cfg.Name)
}

// Thinking returns the thinking text the server streams before the answer
// when asked to reason, or "" when model is not a thinking model of the
// server. It ends where a sentence ends.
func (s *Server) Thinking(model string) string { return strings.Join(s.thinkingTokens(model), "") }

func (s *Server) thinkingTokens(model string) []string {
	if m, ok := s.model(model); !ok || !m.Thinking {
		return nil
	}
	return script(fmt.Sprintf("%s thinking (%s):", s.cfg.Name, model), thinkingText, max(1, s.cfg.Tokens/2))
}

// The texts of answers and thoughts: sentences, each ending in a full stop.
const (
	answerText = "Switchyard sent your request my way, and I am glad to help. " +
		"Here is a short and friendly answer, streamed one token at a time, " +
		"so you can always tell which server replied."
	thinkingText = "The user would like a short, friendly answer. " +
		"I will keep it clear and kind, and say who I am first."
)

// script returns n tokens: lead, then the words of text, each with its
// leading space, from the start again when text runs out. The last token
// runs on to the end of its sentence, so that a script of any length ends
// where a sentence does.
func script(lead, text string, n int) []string {
	if n <= 0 {
		return nil
	}
	words := strings.Fields(text)
	toks := make([]string, 1, n)
	toks[0] = lead
	i := 0
	for ; len(toks) < n; i++ {
		toks = append(toks, " "+words[i%len(words)])
	}
	last := &toks[n-1]
	for ; !strings.HasSuffix(*last, "."); i++ {
		*last += " " + words[i%len(words)]
	}
	return toks
}

// words splits text into tokens that join back to it exactly: each is a
// run of white space and the word after it.
func words(text string) []string {
	var toks []string
	start := 0
	for i := 1; i < len(text); i++ {
		if isSpace(text[i]) && !isSpace(text[i-1]) {
			toks = append(toks, text[start:i])
			start = i
		}
	}
	return append(toks, text[start:])
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// fragmentBytes is the size of the fragments a JSON text is streamed in.
const fragmentBytes = 8

// fragments cuts text into pieces of about n bytes that join back to it,
// never inside a UTF-8 character.
func fragments(text string, n int) []string {
	var out []string
	for len(text) > n {
		i := n
		for i < len(text) && !utf8.RuneStart(text[i]) {
			i++
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// defaultArch makes an architecture name from a model name: the name up
// to its first digit, colon or slash-separated organisation.
func defaultArch(name string) string {
	if _, after, ok := strings.Cut(name, "/"); ok {
		name = after
	}
	name = strings.ToLower(name)
	if i := strings.IndexAny(name, "0123456789:"); i > 0 {
		name = name[:i]
	}
	return strings.TrimRight(name, "-._")
}

// digest is a stable fake sha256 digest for a model name.
func digest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}
