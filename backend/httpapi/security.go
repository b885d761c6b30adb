package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// WebviewOrigins are the origins of the Wails webview (Linux/macOS, and
// Windows), allowed to call the API in the desktop app.
var WebviewOrigins = []string{"wails://wails", "http://wails.localhost"}

// LocalAppOrigins are the browser origins allowed by default, as Ollama
// allows them: pages on this machine and the app shells local model users
// run (Obsidian's app://, Tauri, VS Code webviews, files). A "*" stands for
// any text without a "/".
var LocalAppOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://[::1]", "http://[::1]:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
}

// guard applies the checks of docs/DESIGN.md, "Security", to every request, in order: Host
// allowlist (DNS rebinding), browser origin, bearer token, body limit.
type guard struct {
	hosts     map[string]bool // exact Host values allowed; nil means any (non-loopback bind with a key)
	origins   map[string]bool // browser origins allowed
	patterns  []string        // browser origins allowed, with "*" (originMatch)
	keyHash   [32]byte
	hasKey    bool
	bodyLimit int64
}

// Security is what a config reload may change in the checks while the
// server runs.
type Security struct {
	APIKey string
	// AllowedOrigins are browser origins allowed besides LocalAppOrigins;
	// "*" stands for any text without a "/" ("chrome-extension://*").
	AllowedOrigins []string
	BodyLimit      int64 // default 4 MiB
	// Webview allows the desktop app's webview (WebviewOrigins).
	Webview bool
}

func newGuard(listen string, sec Security) *guard {
	apiKey, allowedOrigins := sec.APIKey, sec.AllowedOrigins
	g := &guard{origins: make(map[string]bool), bodyLimit: sec.BodyLimit}
	if g.bodyLimit <= 0 {
		g.bodyLimit = DefaultBodyLimit
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = listen, ""
	}
	if fleet.LoopbackHost(host) {
		g.hosts = make(map[string]bool)
		// The loopback names, and the address bound when it is another
		// (127.0.0.2): what a client of that address sends.
		for _, name := range []string{"127.0.0.1", "localhost", "[::1]", net.JoinHostPort(host, port)} {
			if !strings.HasSuffix(name, ":"+port) {
				name += ":" + port
			}
			g.hosts[name] = true
			g.origins["http://"+name] = true
		}
	}
	// A non-loopback bind requires a key (config validation); any Host may
	// then reach it, and the key is what keeps it safe.
	if sec.Webview {
		for _, o := range WebviewOrigins {
			g.origins[o] = true
		}
	}
	for _, o := range append(slices.Clone(LocalAppOrigins), allowedOrigins...) {
		o = strings.TrimRight(o, "/")
		if strings.Contains(o, "*") {
			g.patterns = append(g.patterns, o)
		} else {
			g.origins[o] = true
		}
	}
	if apiKey != "" {
		g.hasKey = true
		g.keyHash = sha256.Sum256([]byte(apiKey))
	}
	return g
}

// maxEchoed bounds a caller's Host or Origin said back in a refusal;
// maxMethod, its method (the longest HTTP defines is 7 bytes).
const (
	maxEchoed = 200
	maxMethod = 32
)

// wrap applies the guard in force (cur) to every request. A body must
// arrive within bodyTime, whichever handler reads it, or none: net/http
// drains a body the handler left unread before it answers, and without
// a deadline a caller that stops sending holds the connection for ever.
// The deadline goes once the body is read to its end (limitedBody), as a
// stream's caller may then take its time.
func wrap(cur *atomic.Pointer[guard], bodyTime time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := cur.Load()
		if !g.admit(w, r) {
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		setReadDeadline(w, time.Now().Add(bodyTime))
		body := &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, g.bodyLimit), w: w}
		sent := r.Body
		r.Body = body
		next.ServeHTTP(w, r)
		if body.over {
			discardBody(w, sent) // the handler answered 413; net/http said Connection: close
		}
	})
}

// setReadDeadline sets the read deadline of w's connection, as
// http.ResponseController does, without allocating one for net/http's own
// writer.
func setReadDeadline(w http.ResponseWriter, t time.Time) {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(t)
		return
	}
	http.NewResponseController(w).SetReadDeadline(t) // not every writer can; then the server's own timeouts hold
}

// admit sets the headers every answer carries and checks r against g:
// its host, its origin (answering a preflight), a cross-site request, the
// API key and the body's announced size. When it returns false it has
// answered. Apart from wrap, whose frame is under every request's stack:
// an open stream holds that stack, and what admit needs was a third of a
// KiB of it.
//
//go:noinline
func (g *guard) admit(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	// No other site may frame the UI (clickjacking), sniff a type, or
	// learn where a link from it came from; and the UI loads no image
	// from elsewhere, so that one in a model's answer can't carry the
	// conversation off (the UI shows those as links, markdown.ts).
	setHeaders(h,
		"X-Frame-Options", "DENY",
		"Content-Security-Policy", "frame-ancestors 'none'; base-uri 'self'; object-src 'none'; img-src 'self' data:",
		"X-Content-Type-Options", "nosniff",
		"Referrer-Policy", "no-referrer")
	if g.hosts != nil && !g.hosts[r.Host] {
		deny(w, r, http.StatusForbidden, "forbidden host "+quoteOrEmpty(fleet.ClipTo(r.Host, maxEchoed))+": Switchyard answers only to its loopback address")
		return false
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		// Its own origin (the UI it served, under the Host that passed
		// the allowlist above) is always allowed.
		if !g.allowed(origin) && !g.self(origin, r.Host) {
			deny(w, r, http.StatusForbidden, "origin "+fleet.ClipTo(origin, maxEchoed)+" is not allowed (add it to allowed_origins)")
			return false
		}
		if !g.self(origin, r.Host) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "X-Switchyard-Request-Id, X-Switchyard-Served-Model, X-Switchyard-Fallback, X-Switchyard-Fallback-Reason")
		}
		if r.Method == http.MethodOptions {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			allow := "Authorization, Content-Type, X-Switchyard-Client"
			if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
				allow = asked // an allowed origin may send what its client library sends
			}
			h.Set("Access-Control-Allow-Headers", allow)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return false
		}
	}
	if needsKey(r) && r.Header.Get("Sec-Fetch-Site") == "cross-site" && (origin == "" || !g.allowed(origin)) {
		// A page of another site reaching the API with the browser's
		// own request (an <img>, a form, a script tag): never.
		deny(w, r, http.StatusForbidden, "cross-site request refused: only the UI and allowed origins may call the API from a browser")
		return false
	}
	if g.hasKey && needsKey(r) && !g.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
		deny(w, r, http.StatusUnauthorized, "missing or wrong API key: send Authorization: Bearer <api_key>")
		return false
	}
	if r.ContentLength > g.bodyLimit {
		// Said before the body is sent: refuse at once, then let the
		// caller finish sending what it is sending.
		w.Header().Set("Connection", "close")
		deny(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", g.bodyLimit))
		if r.Header.Get("Expect") != "100-continue" { // that caller waits for a 100 it won't get, sending nothing
			discardBody(w, r.Body)
		}
		return false
	}
	return true
}

// The most of a body over the limit that is read, and for how long, after
// the 413: a caller that sends its whole body before it reads the answer
// (Python's urllib, the OpenAI SDKs) then reads the 413, where a server
// that closes on unread bytes resets the connection under it, and a
// client that retries connection errors sends it all again.
const (
	discardBytes = 64 << 20
	discardTime  = 10 * time.Second
)

// discardBody writes the answer out and reads and discards the rest of
// body, up to discardBytes within discardTime.
func discardBody(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	rc.SetReadDeadline(time.Now().Add(discardTime))
	io.CopyN(io.Discard, body, discardBytes)
}

// limitedBody is a body behind http.MaxBytesReader that remembers whether
// the caller sent more than the limit, and lifts the body's read deadline
// when it is read to its end. Like a request's Body, it is read
// by one goroutine.
type limitedBody struct {
	io.ReadCloser
	w    http.ResponseWriter // whose read deadline goes at the body's end
	over bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && b.w != nil {
		setReadDeadline(b.w, time.Time{}) // read whole (wrap)
		b.w = nil
	}
	if err != nil && err != io.EOF {
		// Declared here, not above: errors.As moves it to the heap, and
		// every read would pay an allocation for it.
		var mbe *http.MaxBytesError
		b.over = b.over || errors.As(err, &mbe)
	}
	return n, err
}

// allowed reports whether a browser origin may call the API.
func (g *guard) allowed(origin string) bool {
	if g.origins[origin] {
		return true
	}
	for _, p := range g.patterns {
		if originMatch(p, origin) {
			return true
		}
	}
	return false
}

// originMatch reports whether origin matches pattern, in which each "*"
// stands for any text without a "/" and every other character for itself
// ("http://[::1]:*" is no character class).
func originMatch(pattern, origin string) bool {
	lit, rest, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == origin
	}
	if !strings.HasPrefix(origin, lit) {
		return false
	}
	origin = origin[len(lit):]
	for i := 0; ; i++ {
		if originMatch(rest, origin[i:]) {
			return true
		}
		if i == len(origin) || origin[i] == '/' {
			return false
		}
	}
}

// self reports whether origin is the server's own (the UI served by it).
func (g *guard) self(origin, host string) bool {
	return origin == "http://"+host
}

// needsKey reports whether r must carry the API key: everything but the
// UI's static files.
func needsKey(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/api/") ||
		strings.HasPrefix(p, "/switchyard/") || p == "/metrics"
}

func (g *guard) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") { // schemes are case-insensitive (RFC 7235)
		return false
	}
	// Comparing fixed-size hashes keeps the comparison constant-time even
	// in the key's length.
	h := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(h[:], g.keyHash[:]) == 1
}

// deny answers a refused request in the caller's protocol.
func deny(w http.ResponseWriter, r *http.Request, status int, msg string) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		typ := "permission_error"
		switch status {
		case http.StatusUnauthorized:
			typ = "authentication_error"
		case http.StatusRequestEntityTooLarge:
			typ = "invalid_request_error"
		}
		writeOpenAIError(w, status, typ, msg)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		writeOllamaError(w, status, msg)
	default:
		writeJSONError(w, status, msg)
	}
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return `"` + s + `"`
}
