// Package upstream holds what the wire-protocol adapters (upstream/ollama,
// upstream/openai) share: one keep-alive HTTP transport per upstream host,
// the send of a request (Pool.Send), and the mapping of an HTTP error
// answer to a *fleet.StatusError.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Settings tune the transports. The zero value means the defaults below.
type Settings struct {
	// DialTimeout bounds connecting to an upstream. Default 5s.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for response headers after the
	// request was written. It does not cover the body: the router's
	// first-token deadline and stall timeout do. Default 5m (a cold model
	// may take minutes to load before Ollama sends headers).
	ResponseHeaderTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per host. Default 64. Connections are never capped: a request waiting
	// for a free connection would burn its first-token deadline inside the
	// transport and trip the breaker of a healthy server; overload is the
	// upstream's to signal (429/503 busy), which the router honours.
	MaxIdleConnsPerHost int
}

func (s Settings) withDefaults() Settings {
	if s.DialTimeout <= 0 {
		s.DialTimeout = 5 * time.Second
	}
	if s.ResponseHeaderTimeout <= 0 {
		s.ResponseHeaderTimeout = 5 * time.Minute
	}
	if s.MaxIdleConnsPerHost <= 0 {
		s.MaxIdleConnsPerHost = 64
	}
	return s
}

// Pool hands out one *http.Client per upstream host, so connections are kept
// alive and reused across requests to the same server. Safe for concurrent
// use; the zero value is not usable, call NewPool.
//
// Send goes to a plain-HTTP server through the pool's own HTTP/1.1 client
// of that host (h1), which does a request's work on the caller's
// goroutine; an https server, and every request made with Client, go
// through net/http's.
type Pool struct {
	settings Settings
	dialer   *net.Dialer
	mu       sync.Mutex
	clients  map[string]*http.Client // by scheme://host:port
	h1s      map[string]*h1          // by scheme://host:port; nil where net/http sends
}

// NewPool returns an empty pool.
func NewPool(s Settings) *Pool {
	s = s.withDefaults()
	return &Pool{settings: s, clients: make(map[string]*http.Client), h1s: make(map[string]*h1),
		dialer: &net.Dialer{Timeout: s.DialTimeout, KeepAlive: 30 * time.Second}} // Go leaves TCP_NODELAY on
}

// h1 returns the pool's own client for baseURL's host, nil when it is not
// plain HTTP.
func (p *Pool) h1(baseURL string) *h1 {
	key := hostKey(baseURL)
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.h1s[key]
	if !ok {
		h = newH1(key, p.settings, p.dialer.DialContext)
		p.h1s[key] = h
	}
	return h
}

// Client returns the client for baseURL's host, creating it on first use.
func (p *Pool) Client(baseURL string) *http.Client {
	key := hostKey(baseURL)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c
	}
	c := &http.Client{Transport: p.newTransport()}
	p.clients[key] = c
	return c
}

// CloseIdle closes idle connections of every client (on shutdown).
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.CloseIdleConnections()
	}
	for _, h := range p.h1s {
		if h != nil {
			h.closeIdle()
		}
	}
}

func (p *Pool) newTransport() *http.Transport {
	s := p.settings
	return &http.Transport{
		Proxy:                 nil, // local fleets: never send prompts through an environment proxy
		DialContext:           p.dialer.DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   s.MaxIdleConnsPerHost,
		IdleConnTimeout:       idleConnTimeout,
		ResponseHeaderTimeout: s.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // token streams are small; gzip would add latency and buffering
		ForceAttemptHTTP2:     false,
	}
}

func hostKey(baseURL string) string {
	// scheme://host[:port]/path → scheme://host[:port]
	s := baseURL
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return s[:i+3+j]
		}
	}
	return s
}

// Replayable marks a request that may be sent again on a fresh connection
// when the kept-alive one it went out on turns out to have been closed by
// the server before it answered (net/http retries such a request once only
// when it is idempotent, which a POST is not by default). A chat request
// that got no answer at all is safe to send again: the server never began
// it. The header is not sent.
func Replayable(r *http.Request) {
	r.Header["X-Idempotency-Key"] = nil
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// StatusError reads an error answer (status >= 400) and turns it into a
// *fleet.StatusError. It understands the JSON error bodies of OpenAI, vLLM
// (nested and flat), llama.cpp and Ollama, and keeps the start of an HTML or
// plain-text page from a proxy. It sets Busy for 429, and for 503 when the
// answer carries Retry-After or busyHint reports the body as a busy answer.
// It does not close resp.Body.
func StatusError(resp *http.Response, busyHint func(msg string) bool) *fleet.StatusError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := ErrorMessage(body)
	se := &fleet.StatusError{
		StatusCode: resp.StatusCode,
		Message:    msg,
		RetryAfter: RetryAfter(resp.Header),
	}
	se.Type, se.Code = errorKind(body)
	if resp.StatusCode >= 500 {
		se.Output = ModelOutput(msg)
		se.Crash = RunnerCrash(msg)
		se.Invalid = InvalidRequest(msg)
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotImplemented, http.StatusInternalServerError:
		// Ollama: 400 `"embed" does not support chat`; llama.cpp and
		// Ollama: 501 "This server does not support embeddings";
		// llama.cpp: 500 "image input is not supported - hint: ... mmproj".
		se.Unsupported = Unsupported(msg)
	case http.StatusTooManyRequests:
		se.Busy = true
	case http.StatusServiceUnavailable:
		// llama.cpp while it loads its model, on every endpoint:
		// {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}
		se.Loading = msg == "Loading model"
		se.Busy = !se.Loading && (resp.Header.Get("Retry-After") != "" || (busyHint != nil && busyHint(msg)))
	}
	return se
}

// OllamaBusy reports whether an error message is Ollama's answer when its
// request queue is full (server/sched.go ErrMaxQueue, a 503 on /api and
// /v1): "server busy, please try again.  maximum pending requests
// exceeded".
func OllamaBusy(msg string) bool {
	return strings.Contains(msg, "server busy") || strings.Contains(msg, "maximum pending requests")
}

// modelOutput matches llama.cpp's report that the model's output did not
// parse: "The model produced output that does not match the expected
// peg-native format" (as an HTTP 500, or an error event mid-stream).
var modelOutput = regexp.MustCompile(`(?i)produced output that does not match|does not match the expected \S+ format`)

// ModelOutput reports whether an error message says the server could not
// parse the model's output for the request (see fleet.ErrModelOutput).
func ModelOutput(msg string) bool { return modelOutput.MatchString(msg) }

// invalidRequest matches Ollama's refusals of a request's own fields,
// which it sends as a 500 to a streamed request and as a 400 to one that
// is not (seen with the real v0.33): `invalid format: "\"xml\""; expected
// "json" or a valid JSON Schema object`, `option "repeat_last_n" must be
// of type integer`.
var invalidRequest = regexp.MustCompile(`^(invalid format: |option "[^"]*" must be of type )`)

// InvalidRequest reports whether an error message says the request's own
// fields are wrong (see fleet.StatusError.Invalid).
func InvalidRequest(msg string) bool { return invalidRequest.MatchString(msg) }

// RunnerCrash reports whether an error message says the process that ran
// the model died on the request: Ollama's 500 "llama-server process has
// terminated: GGML_ASSERT(...)" (older: "llama runner process has
// terminated"). Ollama starts it again for the next request.
func RunnerCrash(msg string) bool { return strings.Contains(msg, "process has terminated") }

// EventError is an error the server sent inside a stream, with Output set
// when its message says the model's output did not parse.
func EventError(msg, code string) *fleet.EventError {
	return &fleet.EventError{Message: msg, Code: code, Output: ModelOutput(msg)}
}

// unsupported matches a server's refusal of a request the model can't
// serve: Ollama's `"gemma3:4b" does not support thinking` (tools, insert,
// chat, ...), vLLM's "The model does not support Chat Completions API"
// (Completions, Embeddings), llama.cpp's "does not support embeddings".
var unsupported = regexp.MustCompile(`(?i)does not support (thinking|tools|insert|vision|images|multimodal|completions?|chat|generate|embeddings?)\b|(image) input is not supported`)

// Unsupported returns the capability an error message says the model
// lacks ("thinking", "tools", "insert", ...), "" when it says none.
func Unsupported(msg string) string {
	m := unsupported.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	switch what := strings.ToLower(m[1] + m[2]); what {
	case "images", "image", "multimodal":
		// Ollama v0.33: "Multimodal data provided, but model does not
		// support multimodal requests."; llama.cpp: "image input is not
		// supported - hint: if this is unexpected, you may need to
		// provide the mmproj".
		return "vision"
	case "embeddings":
		return "embedding"
	case "chat", "generate", "completions":
		return "completion"
	default:
		return what
	}
}

// ErrorMessage extracts the human message from an error body in any of the
// known dialects: {"error":{"message":...}}, {"error":"..."},
// {"object":"error","message":...}, {"message":...}. Anything else (HTML,
// plain text) is returned trimmed and cut to 200 bytes; any message to
// fleet.MaxErrorText bytes.
func ErrorMessage(body []byte) string {
	return fleet.Clip(errorMessage(body))
}

func errorMessage(body []byte) string { return errorMessageAt(body, 0) }

// errorMessageAt is errorMessage of a body found depth bodies deep.
func errorMessageAt(body []byte, depth int) string {
	body = bytes.TrimSpace(body)
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
	}
	if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &v) == nil {
		if len(v.Error) > 0 && string(v.Error) != "null" {
			var s string
			if json.Unmarshal(v.Error, &s) == nil {
				if inner := strings.TrimSpace(s); strings.HasPrefix(inner, `{"error"`) && depth < 2 {
					// Ollama passes its runner's (llama.cpp's) JSON
					// error on as its message.
					return errorMessageAt([]byte(inner), depth+1)
				}
				return s
			}
			var o struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(v.Error, &o) == nil && o.Message != "" {
				return o.Message
			}
		}
		if v.Message != "" {
			return v.Message
		}
		if v.Detail != "" {
			return v.Detail
		}
	}
	return fleet.ClipTo(string(body), 200)
}

// errorKind is the type and code of an OpenAI-dialect error body
// ({"error":{"type":...,"code":...}}, the code a string or a number), ""
// for what it does not give.
func errorKind(body []byte) (typ, code string) {
	var v struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &v) != nil {
		return "", ""
	}
	c := bytes.Trim(v.Error.Code, `"`)
	if string(c) == "null" {
		c = nil
	}
	return fleet.ClipTo(v.Error.Type, 80), fleet.ClipTo(string(c), 80)
}

// MaxRetryAfter caps the back-off a Retry-After asks for: a server that
// asks for a day is tried again within the hour, not every second.
const MaxRetryAfter = time.Hour

// RetryAfter reads Retry-After in seconds (the form model servers use)
// or as an HTTP date (RFC 9110, 10.2.3), counted from the answer's own
// Date when it has one, so that the two machines' clocks need not agree.
// It is at most MaxRetryAfter; a date past, a negative number or garbage
// yields zero.
func RetryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, MaxRetryAfter.Seconds()) * float64(time.Second))
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		now = time.Now()
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

// ReadAll reads a whole answer (an embedding, a model list) of at most max
// bytes. A read cut short is fleet.ErrTruncated, or ctx's error when ctx
// is done.
func ReadAll(ctx context.Context, r io.Reader, max int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("read %s: %w: %w", what, fleet.ErrTruncated, err)
	}
	return b, nil
}

// What FinishBody reads at most, and waits for at most.
const (
	finishMax  = 64 << 10
	finishWait = 100 * time.Millisecond
)

// FinishBody reads what follows an answer's end marker ([DONE], Ollama's
// done:true) to the end of the body, so that net/http puts the connection
// back in its pool: a body closed before its end closes the connection,
// and every request then dialled a new one, a connect and two goroutines
// on both sides. A server sends the end of the body right after the
// marker; one that sends more than finishMax, or does not end the body
// within finishWait, loses its connection, as before.
//
// It reads through r, the adapter's fleet.WaitReader over body, so that
// what the reader holds of the answer goes out before the wait for the
// body's end, not after it: the end is the server's framing, and the
// caller's content need not wait for it. That costs no write: the reader
// would write the same bytes once the answer ended, before its record.
func FinishBody(r io.Reader, body io.Closer) {
	t := time.AfterFunc(finishWait, func() { body.Close() })
	defer t.Stop()
	io.Copy(io.Discard, io.LimitReader(r, finishMax))
}
