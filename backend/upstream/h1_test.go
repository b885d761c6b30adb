package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections it
// accepted.
type countingServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns int
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	cs := &countingServer{}
	cs.Server = httptest.NewUnstartedServer(h)
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.mu.Lock()
			cs.conns++
			cs.mu.Unlock()
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) accepted() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.conns
}

// sendBody sends a POST through p and returns the body it answered.
func sendBody(t *testing.T, p *Pool, u, path string) string {
	t.Helper()
	resp, err := p.Send(context.Background(), Call{Method: http.MethodPost, URL: u, Path: path, Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatalf("Send(%s) = %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// A body read to its end gives its connection back: answers of every
// framing (length, chunked, none) go out on one connection, and the
// request arrives as net/http's client would send it, below the base
// URL's path.
func TestH1ReusesConnections(t *testing.T) {
	got := make(chan *http.Request, 8)
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		got <- r
		switch r.URL.Path {
		case "/v1/chunked":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/v1/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			io.WriteString(w, "whole")
		}
	})
	p := NewPool(Settings{})
	for _, tt := range []struct{ path, want string }{{"/whole", "whole"}, {"/chunked", "ab"}, {"/empty", ""}, {"/whole", "whole"}} {
		if b := sendBody(t, p, ts.URL+"/v1/", tt.path); b != tt.want {
			t.Errorf("body of %s = %q; want %q", tt.path, b, tt.want)
		}
		r := <-got
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1"+tt.path || r.Host != strings.TrimPrefix(ts.URL, "http://") ||
			string(body) != `{"a":1}` || r.ContentLength != 7 || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s host %q length %d type %q body %s; want POST /v1%s with the JSON body", r.Method, r.URL.Path, r.Host, r.ContentLength, r.Header.Get("Content-Type"), body, tt.path)
		}
	}
	if n := ts.accepted(); n != 1 {
		t.Errorf("%d connections for 4 requests read to their end; want 1", n)
	}
}

// A body closed before its end, or an answer that says the server closes
// the connection, does not give the connection back.
func TestH1DropsUnfinishedConnections(t *testing.T) {
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, strings.Repeat("x", 64<<10))
	})
	p := NewPool(Settings{})
	resp, err := p.Send(context.Background(), Call{Method: http.MethodGet, URL: ts.URL, Path: "/big"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	if n, err := resp.Body.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("Read after Close = %d, %v; want 0, EOF", n, err)
	}
	sendBody(t, p, ts.URL, "/close")
	sendBody(t, p, ts.URL, "/big")
	if n := ts.accepted(); n != 3 {
		t.Errorf("%d connections; want 3 (a body closed early and a Connection: close answer give theirs up)", n)
	}
	if h := p.h1(ts.URL); len(h.idle) != 1 {
		t.Errorf("%d idle connections; want 1", len(h.idle))
	}
}

// rawServer answers every connection with answer, after reading one
// request head, and then closes it when closeAfter.
func rawServer(t *testing.T, answer string, closeAfter bool) (u string, conns func() int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, answer)
					if closeAfter {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// A request on a new connection that the server closes unanswered is not
// sent again: it is the answer, a transport error naming the URL.
func TestH1NewConnectionClosedUnanswered(t *testing.T) {
	u, conns := rawServer(t, "", true)
	_, err := NewPool(Settings{}).Send(context.Background(), Call{Method: http.MethodPost, URL: u, Path: "/x", Body: []byte(`{}`)})
	if ue, ok := errors.AsType[*url.Error](err); !ok || ue.URL != u+"/x" || ue.Op != "Post" {
		t.Errorf("Send = %v; want a *url.Error of Post %s/x", err, u)
	}
	if n := conns(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

// Informational answers before the answer are skipped.
func TestH1SkipsInformationalAnswers(t *testing.T) {
	u, _ := rawServer(t, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"+okAnswer, false)
	if b := sendBody(t, NewPool(Settings{}), u, "/x"); b != "ok" {
		t.Errorf("body = %q; want ok", b)
	}
}

// A cancelled request ends at once, waiting for its head or reading its
// body, with the context's error; its connection is not kept.
func TestH1Cancel(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) })
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server sees the caller go
		arrived <- struct{}{}
		if r.URL.Path == "/body" {
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := NewPool(Settings{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := p.Send(ctx, Call{Method: http.MethodPost, URL: ts.URL, Path: "/head", Body: []byte(`{}`)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Send cancelled while waiting for the head = %v; want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	resp, err := p.Send(ctx, Call{Method: http.MethodPost, URL: ts.URL, Path: "/body", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first Read = %q, %v", buf[:n], err)
	}
	cancel()
	if _, err := resp.Body.Read(buf); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v; want context.Canceled", err)
	}
	resp.Body.Close()
	if h := p.h1(ts.URL); len(h.idle) != 0 {
		t.Errorf("%d idle connections after cancelled requests; want 0", len(h.idle))
	}
}

// Close ends a Read blocked on the body (a stream's Close from another
// goroutine).
func TestH1CloseEndsBlockedRead(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	resp, err := NewPool(Settings{}).Send(context.Background(), Call{Method: http.MethodGet, URL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := resp.Body.Read(make([]byte, 8))
		done <- err
	}()
	resp.Body.Close()
	if err := <-done; err == nil {
		t.Error("blocked Read after Close = nil; want an error")
	}
}

// A server that sends no head within ResponseHeaderTimeout fails the
// request with a timeout.
func TestH1ResponseHeaderTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	p := NewPool(Settings{ResponseHeaderTimeout: 30 * time.Millisecond})
	_, err = p.Send(context.Background(), Call{Method: http.MethodGet, URL: "http://" + ln.Addr().String()})
	if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() || !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Errorf("Send to a silent server = %v; want a header timeout", err)
	}
}

// Idle connections are kept up to MaxIdleConnsPerHost, and those idle for
// longer than the idle timeout are closed by the sweep and never reused.
func TestH1IdleBounds(t *testing.T) {
	started, release := make(chan struct{}, 3), make(chan struct{})
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	})
	p := NewPool(Settings{MaxIdleConnsPerHost: 2})
	h := p.h1(ts.URL)
	now := time.Now()
	h.now = func() time.Time { return now }
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { sendBody(t, p, ts.URL, "/x") })
	}
	for range 3 {
		<-started // three requests at once: three connections
	}
	close(release)
	wg.Wait()
	if len(h.idle) != 2 {
		t.Fatalf("%d idle connections; want 2 (MaxIdleConnsPerHost)", len(h.idle))
	}
	now = now.Add(idleConnTimeout)
	h.sweep()
	if len(h.idle) != 0 {
		t.Errorf("%d idle connections after the sweep; want 0", len(h.idle))
	}
	sendBody(t, p, ts.URL, "/x")
	if n := ts.accepted(); n != 4 {
		t.Errorf("%d connections; want 4", n)
	}
}

// Only plain HTTP goes through h1: https, and a URL with a user, go
// through net/http.
func TestH1Schemes(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"http://127.0.0.1:8080/v1", true},
		{"http://localhost", true},
		{"http://[::1]:11434", true},
		{"https://127.0.0.1:8443/v1", false},
		{(&url.URL{Scheme: "http", User: url.UserPassword("user", "pw"), Host: "127.0.0.1:8080"}).String(), false},
	} {
		if got := newH1(hostKey(tt.url), Settings{}.withDefaults(), nil) != nil; got != tt.want {
			t.Errorf("newH1(%s) != nil = %v; want %v", tt.url, got, tt.want)
		}
	}
	if h := newH1("http://localhost", Settings{}.withDefaults(), nil); h.addr != "localhost:80" || h.host != "localhost" {
		t.Errorf("http://localhost: addr %q host %q; want localhost:80, localhost", h.addr, h.host)
	}
}

// A call whose parts would break the request line or start a header of
// their own is refused before anything is sent.
func TestH1RefusesBrokenCalls(t *testing.T) {
	ts := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	p := NewPool(Settings{})
	for _, c := range []Call{
		{Method: "PO ST", URL: ts.URL},
		{Method: http.MethodGet, URL: ts.URL, Path: "/a b"},
		{Method: http.MethodGet, URL: ts.URL, Path: "/a\r\nX-Evil: 1"},
		{Method: http.MethodGet, URL: ts.URL, APIKey: "k\r\nX-Evil: 1"},
		{Method: http.MethodGet, URL: ts.URL, Accept: "a\nb"},
	} {
		if _, err := p.Send(context.Background(), c); err == nil {
			t.Errorf("Send(%+v) = nil; want an error", c)
		}
	}
	if n := ts.accepted(); n != 0 {
		t.Errorf("%d connections; want none", n)
	}
}
