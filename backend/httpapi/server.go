// Package httpapi is Switchyard's localhost API (docs/API.md; docs/DESIGN.md,
// "Security"): the
// OpenAI-compatible and Ollama-compatible chat endpoints, Switchyard's own
// /switchyard/v1/ API with its live event stream, /metrics, and the web UI's
// static files — behind the security checks every request passes: exact
// Host allowlist, origin checks, optional bearer token and a body limit.
package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/schema"
	"github.com/switchyard/switchyard/backend/upstream"
)

// Router is what the API asks of the router; *router.Router is the one
// system passes. It is safe for concurrent use.
type Router interface {
	// Stream routes a streaming request; it returns once an attempt
	// committed (its first token came), or a *router.Error. The caller
	// closes the stream.
	Stream(ctx context.Context, req *fleet.Request) (*router.Stream, error)
	// Complete routes a request for one whole answer.
	Complete(ctx context.Context, req *fleet.Request) (*router.Answer, error)
	// Fleet is the fleet in force: the candidates the model lists name.
	Fleet() router.Fleet
	// Resolve is the candidate a request naming model would try first.
	Resolve(model string, thinking bool) (fleet.Candidate, error)
	// Available are, in order, the candidates a request naming model may
	// be passed through to now.
	Available(model string) ([]fleet.Candidate, error)
}

// History is what the API reads from the request history.
type History interface {
	Requests(ctx context.Context, f history.Filter) ([]fleet.RequestRecord, error)
	Request(ctx context.Context, id string) (fleet.RequestRecord, error)
	TTFTSeries(ctx context.Context, since time.Time, bucket time.Duration) ([]history.SeriesPoint, error)
	FailoverRate(ctx context.Context, since time.Time, bucket time.Duration) ([]history.RatePoint, error)
}

// Demo controls the simulated fleet in demo mode.
type Demo interface {
	// Demo is GET /switchyard/v1/demo.
	Demo() schema.Demo
	// SetFault gives a simulated server a fault and returns it as it is
	// now; an unknown candidate or fault is an error the caller must fix.
	SetFault(candidate, fault string) (schema.DemoServer, error)
}

// Upstreams reach a candidate's server outside routing: model details,
// resident models, loading, and requests passed through unchanged.
type Upstreams interface {
	// Do sends method path (as a caller of Switchyard names it: /api/...,
	// /v1/...) to c's server and returns its answer, whatever its status.
	Do(ctx context.Context, c fleet.Candidate, method, path string, header http.Header, body io.Reader) (*http.Response, error)
}

// Team is the node's team, for /switchyard/v1/team.
type Team interface {
	// Doc is GET /switchyard/v1/team; it does not wait on the network.
	Doc() schema.Team
	// Requests reads the team's history from its database (node "": every
	// node's), bounded in time.
	Requests(ctx context.Context, node string, limit int) (schema.TeamRequests, error)
}

// Options configure a Server. Router is required; nil History, Demo,
// Metrics and UI turn their endpoints off (404); nil Upstreams answers
// what needs a server's own word from Switchyard's view alone and passes
// nothing through.
type Options struct {
	Router    Router
	Upstreams Upstreams
	History   History
	Hub       *Hub
	Demo      Demo
	Metrics   http.Handler
	UI        fs.FS // the built frontend (frontend/dist)
	// Status returns the document of GET /switchyard/v1/status; Config
	// that of GET /switchyard/v1/config.
	Status func() schema.Status
	Config func() schema.Config
	// WriteConfig writes the config in force as the config file (POST
	// /switchyard/v1/config/write) and returns its path; an error that
	// wraps fs.ErrExist answers 409, any other 404. Nil: 404.
	WriteConfig func() (string, error)
	// Team answers /switchyard/v1/team; nil: no team (404).
	Team Team

	// Listen is the address the server is bound to, host:port; it decides
	// the Host allowlist.
	Listen string
	// APIKey, when set, is required as a bearer token.
	APIKey string
	// AllowedOrigins are extra browser origins allowed to call the API
	// (Security.AllowedOrigins).
	AllowedOrigins []string
	// Webview allows the desktop app's webview to call the API.
	Webview bool
	// BodyLimit caps request bodies. Default 4 MiB.
	BodyLimit int64
	// Version is reported by the status endpoint.
	Version string
	// WriteTimeout bounds each write to a caller; it is extended per chunk
	// while streaming. Default 30s.
	WriteTimeout time.Duration
	// BodyReadTimeout bounds the time a caller may take to send a request
	// body: a connection that sends part of one and then nothing is not
	// held. Default 30s.
	BodyReadTimeout time.Duration
}

// Server serves the API. Create it with New; it is safe for concurrent use.
type Server struct {
	o        Options
	guard    atomic.Pointer[guard]
	handler  http.Handler
	draining atomic.Bool
	closing  chan struct{} // closed by BeginShutdown: long-lived event streams end
	once     sync.Once
	// responses keeps the output of recent /v1/responses answers, for
	// item_reference and previous_response_id.
	responses *responseStore
}

// SetSecurity puts new security settings in force for the requests that
// arrive from now on (a config reload).
func (s *Server) SetSecurity(sec Security) {
	s.guard.Store(newGuard(s.o.Listen, sec))
}

// BeginShutdown marks the server as shutting down: a stream whose context
// is cancelled from now on is ended with an error event in its protocol
// instead of silently, since the caller is still there.
func (s *Server) BeginShutdown() {
	s.draining.Store(true)
	s.once.Do(func() { close(s.closing) })
}

// streamErrorText is the message of the error event that ends a committed
// stream.
func (s *Server) streamErrorText(r *http.Request, err error) string {
	if s.draining.Load() && r.Context().Err() != nil {
		return "switchyard is shutting down; the answer was cut short"
	}
	return err.Error()
}

// callerGone reports whether r's caller went away (rather than the server
// shutting down under it).
func (s *Server) callerGone(r *http.Request) bool {
	return r.Context().Err() != nil && !s.draining.Load()
}

// DefaultBodyLimit is the body limit of Options and Security when theirs
// is zero.
const DefaultBodyLimit = 4 << 20

// New returns a server for o.
func New(o Options) *Server {
	if o.BodyLimit <= 0 {
		o.BodyLimit = DefaultBodyLimit
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = 30 * time.Second
	}
	if o.Hub == nil {
		o.Hub = NewHub()
	}
	s := &Server{o: o, closing: make(chan struct{}), responses: newResponseStore(storeSettings{})}
	s.guard.Store(newGuard(o.Listen, Security{APIKey: o.APIKey, AllowedOrigins: o.AllowedOrigins, BodyLimit: o.BodyLimit, Webview: o.Webview}))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.openaiChat)
	mux.HandleFunc("POST /v1/responses", s.openaiResponses)
	mux.HandleFunc("POST /v1/completions", s.openaiCompletions)
	mux.HandleFunc("POST /v1/embeddings", s.openaiEmbeddings)
	mux.HandleFunc("GET /v1/models", s.openaiModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.openaiModel)
	mux.HandleFunc("POST /api/chat", s.ollamaChat)
	mux.HandleFunc("POST /api/generate", s.ollamaGenerate)
	mux.HandleFunc("POST /api/embed", s.ollamaEmbed)
	mux.HandleFunc("POST /api/embeddings", s.ollamaEmbeddings)
	mux.HandleFunc("POST /api/show", s.ollamaShow)
	mux.HandleFunc("GET /api/ps", s.ollamaPS)
	for _, p := range []string{"POST /api/pull", "POST /api/push", "POST /api/create", "DELETE /api/delete", "POST /api/copy",
		"HEAD /api/blobs/{digest}", "POST /api/blobs/{digest}"} {
		mux.HandleFunc(p, s.ollamaManage)
	}
	mux.HandleFunc("GET /api/tags", s.ollamaTags)
	mux.HandleFunc("GET /api/version", s.ollamaVersion)
	mux.HandleFunc("HEAD /api/version", s.ollamaVersion)
	mux.HandleFunc("GET /switchyard/v1/status", s.status)
	mux.HandleFunc("GET /switchyard/v1/config", s.config)
	mux.HandleFunc("POST /switchyard/v1/config/write", s.writeConfig)
	mux.HandleFunc("GET /switchyard/v1/team", s.team)
	mux.HandleFunc("GET /switchyard/v1/team/requests", s.teamRequests)
	mux.HandleFunc("GET /switchyard/v1/requests", s.requests)
	mux.HandleFunc("GET /switchyard/v1/requests/{id}", s.request)
	mux.HandleFunc("GET /switchyard/v1/stats", s.stats)
	mux.HandleFunc("GET /switchyard/v1/events", s.events)
	mux.HandleFunc("GET /switchyard/v1/demo", s.demo)
	mux.HandleFunc("POST /switchyard/v1/demo/fault", s.demoFault)
	mux.HandleFunc("GET /switchyard/v1/openapi.json", openAPI)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	mux.Handle("/switchyard/", unrouted(mux, writeJSONError, nil))
	mux.Handle("/v1/", unrouted(mux, writeOpenAIStatus, s.passThrough(writeOpenAIStatus)))
	mux.Handle("/api/", unrouted(mux, writeOllamaError, s.passThrough(writeOllamaError)))
	var ui http.Handler
	if o.UI != nil {
		ui = uiFiles(o.UI)
		mux.Handle("/", ui)
	}
	mux.HandleFunc("GET /{$}", s.root(ui))
	s.handler = wrap(&s.guard, o.BodyReadTimeout, mux)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// HTTPServer returns an *http.Server for the API with the timeouts a
// streaming localhost API wants: a header read timeout against slow
// clients, no global write timeout (writes are bounded per chunk).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler: s,
		// A handler may tune its connection (an events stream's send
		// buffer).
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// connKey is the context key of a request's net.Conn (HTTPServer).
type connKey struct{}

// unrouted answers a request no endpoint took, in the protocol of its
// path: 405 with Allow when the path exists for other methods, else
// other (a pass-through) or 404 when there is none.
func unrouted(mux *http.ServeMux, write func(http.ResponseWriter, int, string), other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, own := mux.Handler(r)
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != own {
				allow = append(allow, m)
			}
		}
		switch {
		case len(allow) > 0:
			w.Header().Set("Allow", strings.Join(allow, ", "))
			write(w, http.StatusMethodNotAllowed, "method "+fleet.ClipTo(r.Method, maxMethod)+" not allowed on "+fleet.ClipTo(r.URL.Path, 200)+" (use "+strings.Join(allow, ", ")+")")
		case other != nil:
			other.ServeHTTP(w, r)
		default:
			write(w, http.StatusNotFound, "no such endpoint: "+fleet.ClipTo(r.Method, maxMethod)+" "+fleet.ClipTo(r.URL.Path, 200))
		}
	})
}

// uiFiles serves the built UI: files only, never a listing of a folder.
func uiFiles(ui fs.FS) http.Handler {
	files := http.FileServerFS(ui)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSONError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if name := strings.Trim(path.Clean(r.URL.Path), "/"); name != "" {
			if st, err := fs.Stat(ui, name); err == nil && st.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if raw, ok := v.(json.RawMessage); ok && upstream.Valid(raw) {
		// An answer put together from the upstream's fields: what the
		// Encoder writes of valid JSON, without its scanner, which took a
		// tenth of a non-stream request's CPU (BenchmarkSameDialectComplete).
		bp := chunkBufs.Get().(*[]byte)
		b := append(appendCompact((*bp)[:0], raw), '\n')
		// Its length is known: an answer longer than net/http's 2 KiB
		// buffer goes out whole with it, not in chunks (a shorter one
		// net/http measures itself, without allocating).
		if len(b) > 2048 {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		w.WriteHeader(status)
		w.Write(b)
		if cap(b) <= 2*lazyMax {
			*bp = b[:0]
			chunkBufs.Put(bp)
		}
		return
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// appendCompact appends the valid JSON src as encoding/json's Encoder
// writes a json.RawMessage: whitespace between tokens dropped, and <, >,
// & and U+2028, U+2029 escaped as \u003c, \u003e, \u0026, \u2028,
// \u2029. src must be valid JSON (upstream.Valid); of anything else the
// Encoder writes nothing.
func appendCompact(dst, src []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	inString, escaped := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			start = i + 1
		case c == 0xe2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xa8:
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[i+2]&0xf])
			i += 2
			start = i + 1
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, schema.Error{Error: msg})
}

// routeHeaders sets the X-Switchyard-* headers of a routed answer.
func routeHeaders(h http.Header, m *router.Meta) {
	fallback := "false"
	if m.Fallback {
		fallback = "true"
		if why := m.FallbackReason(); why != "" {
			h.Set("X-Switchyard-Fallback-Reason", why)
		}
	}
	setHeaders(h, "X-Switchyard-Request-Id", m.RequestID, "X-Switchyard-Served-Model", m.Candidate.ID, "X-Switchyard-Fallback", fallback)
}

// setHeaders sets each name of kv (name, value, name, value, ...) to its
// value, as h.Set would, from one allocation where h.Set makes one a
// name. Each value is a slice of its own (capacity 1), so adding to one
// name later touches no other.
func setHeaders(h http.Header, kv ...string) {
	vals := make([]string, len(kv)/2)
	for i := range vals {
		vals[i] = kv[2*i+1]
		h[http.CanonicalHeaderKey(kv[2*i])] = vals[i : i+1 : i+1]
	}
}

// protocolOf returns the protocol to record for a request: "ui" when
// Switchyard's own UI says so.
func protocolOf(r *http.Request, p fleet.Protocol) fleet.Protocol {
	if r.Header.Get("X-Switchyard-Client") == "ui" {
		return fleet.ProtocolUI
	}
	return p
}
