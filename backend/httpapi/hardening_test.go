package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The edge refuses what a lenient parser let through, each in the caller's
// protocol and naming the field (issue 12, items 3 and 6).
func TestStrictRequests(t *testing.T) {
	longModel := strings.Repeat("m", 1<<20)
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		wantStatus               int
		wantBody                 string
		wantHeader               [2]string
	}{
		{name: "a stray ] after the JSON", path: "/v1/chat/completions", body: chatBody + "]", wantStatus: 400, wantBody: "unexpected data after the JSON value"},
		{name: "a stray } after the JSON (Ollama)", path: "/api/chat", body: chatBody + "}", wantStatus: 400, wantBody: "unexpected data after the JSON value"},
		{name: "5 MiB of spaces after the JSON", path: "/v1/chat/completions", body: chatBody + strings.Repeat(" ", 5<<20), wantStatus: 413},
		{name: "white space after the JSON is fine", path: "/v1/chat/completions", body: chatBody + " \n\t ", wantStatus: 200},
		{name: "max_tokens -1", path: "/v1/chat/completions", body: `{"model":"auto","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: "max_tokens: -1 is not a positive number of tokens"},
		{name: "temperature -5", path: "/v1/chat/completions", body: `{"model":"auto","temperature":-5,"messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: "temperature: -5 is out of range"},
		{name: "an unknown role", path: "/v1/chat/completions", body: `{"model":"auto","messages":[{"role":"wizard","content":"x"}]}`,
			wantStatus: 400, wantBody: `messages[0].role: \"wizard\" is not a role`},
		{name: "an unknown role (Ollama)", path: "/api/chat", body: `{"model":"auto","messages":[{"role":"developer","content":"x"}]}`,
			wantStatus: 400, wantBody: `messages[0].role: \"developer\" is not a role`},
		{name: "negative temperature (Ollama)", path: "/api/chat", body: `{"model":"auto","options":{"temperature":-1},"messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: "options.temperature: -1 is negative"},
		{name: "an option of the wrong type, in Ollama's words", path: "/api/chat", body: `{"model":"auto","options":{"repeat_last_n":"x"},"messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: `option \"repeat_last_n\" must be of type integer`},
		{name: "a boolean option of the wrong type", path: "/api/generate", body: `{"model":"auto","options":{"use_mmap":"x"},"prompt":"x"}`,
			wantStatus: 400, wantBody: `option \"use_mmap\" must be of type boolean`},
		{name: "options of the right types", path: "/api/chat", body: `{"model":"auto","options":{"repeat_last_n":64,"use_mmap":true,"stop":["a"],"num_thread":2},"messages":[{"role":"user","content":"x"}]}`, wantStatus: 200},
		{name: "an option the module does not know is the server's", path: "/api/chat", body: `{"model":"auto","options":{"brand_new_option":"x"},"messages":[{"role":"user","content":"x"}]}`, wantStatus: 200},
		{name: "a format Ollama does not know", path: "/api/chat", body: `{"model":"auto","format":"xml","messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: `invalid format: \"xml\"; expected \"json\" or a valid JSON Schema object`},
		{name: "a format Ollama does not know (generate)", path: "/api/generate", body: `{"model":"auto","format":"yaml","prompt":"x"}`,
			wantStatus: 400, wantBody: `invalid format: \"yaml\"`},
		{name: "format json (Ollama)", path: "/api/chat", body: `{"model":"auto","format":"json","messages":[{"role":"user","content":"x"}]}`, wantStatus: 200},
		{name: "a format schema (Ollama)", path: "/api/chat", body: `{"model":"auto","format":{"type":"object"},"messages":[{"role":"user","content":"x"}]}`, wantStatus: 200},
		{name: "a 1 MiB model name", path: "/v1/chat/completions", body: `{"model":"` + longModel + `","messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: "model: a name of 1048576 bytes is longer than 256"},
		{name: "a 1 MiB model name (Ollama)", path: "/api/chat", body: `{"model":"` + longModel + `","messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 400, wantBody: "is longer than 256"},
		{name: "GET on a POST endpoint", method: "GET", path: "/v1/chat/completions", wantStatus: 405,
			wantBody: `"message":"method GET not allowed on /v1/chat/completions (use POST)","param":null,"type":"invalid_request_error"`, wantHeader: [2]string{"Allow", "POST"}},
		{name: "GET on a POST endpoint (Ollama)", method: "GET", path: "/api/chat", wantStatus: 405, wantBody: `{"error":"method GET`, wantHeader: [2]string{"Allow", "POST"}},
		{name: "POST on a GET endpoint", method: "POST", path: "/switchyard/v1/status", body: "{}", wantStatus: 405, wantHeader: [2]string{"Allow", "GET, HEAD"}},
		{name: "no such path is still 404", method: "GET", path: "/v1/nothing-here", wantStatus: 404, wantBody: "no such endpoint"},
		{name: "the bearer scheme is case-insensitive", path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Authorization": "bearer a-long-enough-key-0123"}, wantStatus: 200},
		{name: "a declared body over the limit, refused before it is sent", path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Content-Length": fmt.Sprint(5 << 20), "Expect": "100-continue"}, wantStatus: 413, wantBody: "request body larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Options{APIKey: "a-long-enough-key-0123"})
			h := map[string]string{"Authorization": "Bearer a-long-enough-key-0123"}
			for k, v := range tt.header {
				h[k] = v
			}
			method := tt.method
			if method == "" {
				method = "POST"
			}
			req := httptest.NewRequest(method, tt.path, strings.NewReader(tt.body))
			req.Host = "127.0.0.1:8484"
			for k, v := range h {
				req.Header.Set(k, v)
			}
			if cl := h["Content-Length"]; cl != "" {
				fmt.Sscan(cl, &req.ContentLength)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d; want %d (body %s)", w.Code, tt.wantStatus, fleet.ClipTo(w.Body.String(), 300))
			}
			if !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("body = %s; want it to contain %s", fleet.ClipTo(w.Body.String(), 300), tt.wantBody)
			}
			if w.Body.Len() > 2048 {
				t.Errorf("a %d-byte error body: caller strings must not be echoed unbounded", w.Body.Len())
			}
			if k := tt.wantHeader[0]; k != "" && w.Header().Get(k) != tt.wantHeader[1] {
				t.Errorf("%s = %q; want %q", k, w.Header().Get(k), tt.wantHeader[1])
			}
		})
	}
}

// No other site frames the UI, sniffs a type or reads a referrer; a page of
// another site can't reach the private API with the browser's own request;
// the UI's folders are not listed (issue 12, item 5).
func TestBrowserDefenses(t *testing.T) {
	ui := fstest.MapFS{"index.html": {Data: []byte("<html>ui</html>")}, "assets/app.js": {Data: []byte("x")}}
	s, b := newTestServer(t, Options{UI: ui, AllowedOrigins: []string{"http://localhost:5173"}})
	w := do(s, "GET", "/", "", nil)
	for k, v := range map[string]string{
		"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s = %q; want %q", k, got, v)
		}
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "img-src 'self' data:") {
		t.Errorf("Content-Security-Policy = %q; want frame-ancestors 'none' and img-src 'self' data:", csp)
	}
	for _, tt := range []struct {
		name, method, path, body string
		header                   map[string]string
		want                     int
	}{
		{"another site reads the status", "GET", "/switchyard/v1/status", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"another site posts a chat without CORS", "POST", "/api/chat", chatBody, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"an allowed origin calls cross-site", "POST", "/v1/chat/completions", chatBody,
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost:5173"}, 200},
		{"the UI itself", "GET", "/switchyard/v1/status", "", map[string]string{"Sec-Fetch-Site": "same-origin"}, 404},
		{"a link to the UI from another site", "GET", "/", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
		{"no listing of a folder", "GET", "/assets/", "", nil, 404},
		{"no listing without the slash either", "GET", "/assets", "", nil, 404},
		{"a file is served", "GET", "/assets/app.js", "", nil, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b.calls.Store(0)
			if w := do(s, tt.method, tt.path, tt.body, tt.header); w.Code != tt.want {
				t.Errorf("status = %d; want %d (body %s)", w.Code, tt.want, w.Body.String())
			}
		})
	}
}

// A connection that sends part of a body and then nothing is let go at
// the body read deadline (issue 12, item 4).
func TestStalledBodyIsLetGo(t *testing.T) {
	s, b := newTestServer(t, Options{BodyReadTimeout: 200 * time.Millisecond})
	conn := rawConn(t, s)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8484\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d; want 408", resp.StatusCode)
	}
	if b.calls.Load() != 0 {
		t.Error("a stalled request was routed")
	}
}

// A body that stops arriving is let go at the deadline on an endpoint
// that never reads it, too: net/http drains it before answering, and
// waited for ever (u2 review, item 2).
func TestStalledBodyIsLetGoUnread(t *testing.T) {
	s, _ := newTestServer(t, Options{BodyReadTimeout: 200 * time.Millisecond})
	for _, head := range []string{"GET /v1/models", "POST /api/pull", "DELETE /api/delete"} {
		t.Run(head, func(t *testing.T) {
			conn := rawConn(t, s)
			fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: 127.0.0.1:8484\r\nContent-Type: application/json\r\nContent-Length: 50000\r\n\r\n{", head)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadAll(conn) // an answer, or none, and then the close
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection is still open 5 s after the body stopped; want it let go at 200 ms")
			}
		})
	}
}

// wrap lifts the body's read deadline once the body is read to its end,
// whoever reads it, so that a stream's caller may take its time.
func TestBodyDeadlineGoesAtTheBodysEnd(t *testing.T) {
	var g atomic.Pointer[guard]
	g.Store(&guard{bodyLimit: 1 << 20})
	var during []time.Time
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	h := wrap(&g, 30*time.Second, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		during = append(during, w.deadlines...)
		io.ReadAll(r.Body)
	}))
	h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"m"}`)))
	if len(during) != 1 || during[0].IsZero() {
		t.Fatalf("deadlines before the handler read = %v; want one, 30 s ahead", during)
	}
	if len(w.deadlines) != 2 || !w.deadlines[1].IsZero() {
		t.Errorf("deadlines = %v; want the body's, then none once it was read", w.deadlines)
	}
}

type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// A body over the limit is answered 413 that a caller which sends its
// whole body before it reads (Python's urllib, the OpenAI SDKs) reads,
// declared or chunked, instead of a connection reset under it (issue 20,
// item 4).
func TestBodyOverLimitIsAnsweredNotReset(t *testing.T) {
	s, b := newTestServer(t, Options{})
	body := `{"model":"auto","messages":[{"role":"user","content":"` + strings.Repeat("x", 5<<20) + `"}]}`
	var chunked strings.Builder
	for rest := body; rest != ""; {
		n := min(len(rest), 32<<10)
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	chunked.WriteString("0\r\n\r\n")
	for _, tt := range []struct{ name, head, body string }{
		{"declared", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body},
		{"chunked", "Transfer-Encoding: chunked\r\n", chunked.String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := rawConn(t, s)
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			// As urllib does: the whole request, then the answer.
			if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8484\r\nContent-Type: application/json\r\n"+tt.head+"\r\n"+tt.body); err != nil {
				t.Fatalf("sending the body: %v; want it read to its end", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v; want a 413", err)
			}
			msg, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the answer's body: %v", err)
			}
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close || !strings.Contains(string(msg), "request body larger than") {
				t.Errorf("= %d (close %v) %s; want 413 with Connection: close", resp.StatusCode, resp.Close, msg)
			}
		})
	}
	if b.calls.Load() != 0 {
		t.Error("a body over the limit was routed")
	}
}

// An events subscriber that never reads is dropped once its queue is full,
// instead of being kept for minutes with megabytes queued (issue 12,
// item 4).
func TestSlowEventSubscriberIsDropped(t *testing.T) {
	hub := NewHub()
	s, _ := newTestServer(t, Options{Hub: hub, WriteTimeout: time.Second})
	conn := rawConn(t, s)
	fmt.Fprintf(conn, "GET /switchyard/v1/events HTTP/1.1\r\nHost: 127.0.0.1:8484\r\n\r\n")
	deadline := time.Now().Add(5 * time.Second)
	for hub.subscribers() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Never read: the socket's buffers fill, then the subscriber's queue.
	big := strings.Repeat("x", 64<<10)
	for i := 0; hub.subscribers() > 0 && time.Now().Before(deadline); i++ {
		hub.Observe(fleet.Event{Type: fleet.EventAttempt, RequestID: fmt.Sprint(i),
			Attempt: &fleet.Attempt{Candidate: "m1", Error: big}})
		time.Sleep(time.Millisecond)
	}
	if n := hub.subscribers(); n != 0 {
		t.Fatalf("%d subscribers left; want the one that never reads dropped", n)
	}
	if hub.Dropped() != 1 {
		t.Errorf("Dropped() = %d; want 1", hub.Dropped())
	}
}

// rawConn serves h on a loopback server and opens a connection to it, for
// a test that writes its own HTTP; both close when the test ends, the
// connection first.
func rawConn(t *testing.T, h http.Handler) net.Conn {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// zeros is an endless body of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
func (zeros) Close() error               { return nil }

// Reading a body behind the limit costs no allocation per read: the body
// is read in a few reads for every request.
func TestLimitedBodyReadAllocatesNothing(t *testing.T) {
	b := &limitedBody{ReadCloser: http.MaxBytesReader(nil, zeros{}, 1<<40)}
	buf := make([]byte, 512)
	if n := testing.AllocsPerRun(100, func() { b.Read(buf) }); n != 0 {
		t.Errorf("limitedBody.Read: %v allocations a read; want 0", n)
	}
	if b.over {
		t.Error("a body under the limit was taken for one over it")
	}
}

// A large body that says its length is read into one buffer of that
// length, not grown by doubling (twice its size for a request carrying
// images); one that does not say it is read whole all the same.
func TestLargeBodyIsReadIntoOneBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("A"), 4<<20)
	req := func(announce bool) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if !announce {
			r.ContentLength = -1
		}
		return r
	}
	var before, after runtime.MemStats
	r := req(true)
	runtime.ReadMemStats(&before)
	got, err := readBody(r)
	runtime.ReadMemStats(&after)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("readBody() = %d bytes, %v; want the body", len(got), err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > uint64(len(body))*11/10 {
		t.Errorf("reading a %d-byte body allocated %d bytes; want about its size", len(body), allocated)
	}
	if got, err := readBody(req(false)); err != nil || !bytes.Equal(got, body) {
		t.Errorf("readBody() of a body of unknown length = %d bytes, %v; want the body", len(got), err)
	}
}

// A pass-through answer does not bring its own security headers or
// cookies to Switchyard's origin, and an HTML page in it runs nothing
// there (u2 review, item 3).
func TestPassThroughKeepsSwitchyardsHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html")
		h.Set("X-Frame-Options", "ALLOWALL")
		h.Set("Content-Security-Policy", "default-src *")
		h.Set("Set-Cookie", "up=1; Path=/")
		h.Set("X-Upstream", "kept")
		io.WriteString(w, "<script>document.title='ran'</script>")
	}))
	t.Cleanup(up.Close)
	s := fleetServer(t, fleet.Candidate{ID: "m", Provider: fleet.ProviderOpenAI, URL: up.URL + "/v1", Model: "m", Priority: 1})
	w := do(s, "GET", "/v1/htmlpage", "", nil)
	h := w.Header()
	if w.Code != 200 || h.Get("X-Upstream") != "kept" {
		t.Fatalf("pass-through = %d %v; want the upstream's answer", w.Code, h)
	}
	if h.Get("X-Frame-Options") != "DENY" || len(h.Values("X-Frame-Options")) != 1 {
		t.Errorf("X-Frame-Options = %q; want Switchyard's DENY alone", h.Values("X-Frame-Options"))
	}
	if csp := h.Values("Content-Security-Policy"); len(csp) != 1 || !strings.HasPrefix(csp[0], "sandbox") || !strings.Contains(csp[0], "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q; want one that sandboxes the page and loads nothing", csp)
	}
	if c := h.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("Set-Cookie = %q; want no upstream cookie on Switchyard's origin", c)
	}
}

// A refused Host or Origin is said back cut short, not whole (u2
// review, item 4).
func TestRefusalEchoesBounded(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	long := strings.Repeat("a", 30000)
	for _, hdr := range []map[string]string{{"Host": long}, {"Origin": "http://" + long}} {
		w := do(s, "GET", "/api/tags", "", hdr)
		if w.Code != http.StatusForbidden || w.Body.Len() > 1000 {
			t.Errorf("%d bytes, status %d; want a 403 of well under 1000 bytes", w.Body.Len(), w.Code)
		}
	}
	// A method too (v4 re-check): 405 on a known path, 404 elsewhere.
	for _, path := range []string{"/api/chat", "/switchyard/v1/nothing"} {
		w := do(s, "M"+strings.ToUpper(long), path, "", nil)
		if w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound || w.Body.Len() > 1000 {
			t.Errorf("%s: %d bytes, status %d; want a 405 or 404 of well under 1000 bytes", path, w.Body.Len(), w.Code)
		}
	}
}
