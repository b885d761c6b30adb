package ollama

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Lines as Ollama 0.17 writes them for /api/chat with stream true.
const (
	lineHi    = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.101Z","message":{"role":"assistant","content":"Hi"},"done":false}`
	lineThere = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.142Z","message":{"role":"assistant","content":" there"},"done":false}`
	lineEmpty = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.090Z","message":{"role":"assistant","content":""},"done":false}`
	lineThink = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.070Z","message":{"role":"assistant","content":"","thinking":"The user greets"},"done":false}`
	lineTool  = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.300Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k2j","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}}]},"done":false}`
	lineTool2 = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.350Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"index":1,"name":"get_time","arguments":{"tz":"Europe/Paris"}}}]},"done":false}`
	lineDone  = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.180Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1834567890,"load_duration":23456789,"prompt_eval_count":12,"prompt_eval_duration":345678901,"eval_count":3,"eval_duration":45678901}`
	lineLen   = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.180Z","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"prompt_eval_count":12,"eval_count":128}`
	lineNoWhy = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.180Z","message":{"role":"assistant","content":"!"},"done":true,"eval_count":4}`
	lineLoad  = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.180Z","message":{"role":"assistant","content":""},"done_reason":"load","done":true}`
	lineErr   = `{"error":"model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, check ollama server logs for details"}`
	busyBody  = `{"error":"server busy, please try again.  maximum pending requests exceeded"}`
	html502   = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
)

const runnerStopped = "model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, check ollama server logs for details"

var usageDone = &fleet.Usage{PromptTokens: 12, CompletionTokens: 3, LoadDuration: 23456789}

func text(s string) fleet.Chunk { return fleet.Chunk{Role: "assistant", Content: s, Model: "qwen3:8b"} }

func final(reason string, u *fleet.Usage) fleet.Chunk {
	return fleet.Chunk{Role: "assistant", Model: "qwen3:8b", FinishReason: reason, Usage: u}
}

// newBackend returns a Backend on a pool of its own whose idle connections
// are closed when the test ends (their goroutines would count as leaks).
func newBackend(t *testing.T) (*Backend, *upstream.Pool) {
	t.Helper()
	pool := upstream.NewPool(upstream.Settings{})
	t.Cleanup(pool.CloseIdle)
	return New(pool), pool
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func candidate(url string) fleet.Candidate {
	return fleet.Candidate{ID: "qwen3-8b-ollama", Provider: fleet.ProviderOllama, URL: url, Model: "qwen3:8b", Enabled: true}
}

func userRequest() *fleet.Request {
	return &fleet.Request{ID: "r1", Protocol: fleet.ProtocolOllama, Messages: []fleet.Message{{Role: "user", Content: "Hello"}}, Stream: true}
}

// ndjson answers with lines, flushing after each, as Ollama does.
func ndjson(lines ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
	}
}

// answer writes one whole response with status, content type and body.
func answer(status int, contentType, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// cut writes a raw HTTP/1.1 answer over the hijacked connection and closes
// it: chunked (the body ends without its terminating chunk), close-delimited
// (a clean EOF) or reset (RST instead of FIN).
func cut(mode string, lines ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		if mode == "chunked" {
			bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
			for _, l := range lines {
				fmt.Fprintf(bw, "%x\r\n%s\n\r\n", len(l)+1, l)
			}
		} else {
			bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n")
			for _, l := range lines {
				bw.WriteString(l + "\n")
			}
		}
		bw.Flush()
		if mode == "reset" {
			conn.(*net.TCPConn).SetLinger(0)
		}
	}
}

// drain reads s to its first error, failing the test if it yields more
// chunks than max.
func drain(t *testing.T, s fleet.Stream, max int) ([]fleet.Chunk, error) {
	t.Helper()
	var got []fleet.Chunk
	for range max + 1 {
		c, err := s.Recv()
		if err != nil {
			return got, err
		}
		c.Raw = nil // the stream's buffer; TestRawLines checks it
		got = append(got, c)
	}
	t.Fatalf("Recv yielded more than %d chunks", max)
	return nil, nil
}

func isEventError(msg string) func(error) bool {
	return func(err error) bool {
		var ee *fleet.EventError
		return errors.As(err, &ee) && ee.Message == msg
	}
}

func isMalformed(err error) bool {
	var me *fleet.MalformedError
	return errors.As(err, &me)
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func TestChatStream(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    []fleet.Chunk
		wantErr func(error) bool // on the Recv after the last chunk
	}{
		{
			name:    "clean stream",
			handler: ndjson(lineHi, lineThere, lineDone),
			want:    []fleet.Chunk{text("Hi"), text(" there"), final("stop", usageDone)},
			wantErr: is(io.EOF),
		},
		{
			name:    "thinking then content",
			handler: ndjson(lineThink, lineHi, lineDone),
			want: []fleet.Chunk{
				{Role: "assistant", Reasoning: "The user greets", Model: "qwen3:8b"},
				text("Hi"),
				final("stop", usageDone),
			},
			wantErr: is(io.EOF),
		},
		{
			name:    "tool calls numbered across the stream",
			handler: ndjson(lineTool, lineTool2, lineDone),
			want: []fleet.Chunk{
				{Role: "assistant", Model: "qwen3:8b", ToolCalls: []fleet.ToolCall{
					{Index: 0, ID: "call_k2j", Type: "function", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
				}},
				{Role: "assistant", Model: "qwen3:8b", ToolCalls: []fleet.ToolCall{
					{Index: 1, Type: "function", Name: "get_time", Arguments: `{"tz":"Europe/Paris"}`},
				}},
				final("stop", usageDone),
			},
			wantErr: is(io.EOF),
		},
		{
			name:    "done_reason length",
			handler: ndjson(lineHi, lineLen),
			want:    []fleet.Chunk{text("Hi"), final("length", &fleet.Usage{PromptTokens: 12, CompletionTokens: 128})},
			wantErr: is(io.EOF),
		},
		{
			name:    "done without done_reason defaults to stop and keeps its content",
			handler: ndjson(lineHi, lineNoWhy),
			want: []fleet.Chunk{text("Hi"), {
				Role: "assistant", Content: "!", Model: "qwen3:8b", FinishReason: "stop", Usage: &fleet.Usage{CompletionTokens: 4},
			}},
			wantErr: is(io.EOF),
		},
		{
			name:    "load answer is a final chunk without content",
			handler: answer(200, "application/json; charset=utf-8", lineLoad),
			want:    []fleet.Chunk{final("load", &fleet.Usage{})},
			wantErr: is(io.EOF),
		},
		{
			name:    "blank and CRLF lines are skipped",
			handler: answer(200, "application/x-ndjson", "\n"+lineHi+"\r\n  \r\n"+lineDone+"\r\n"),
			want:    []fleet.Chunk{text("Hi"), final("stop", usageDone)},
			wantErr: is(io.EOF),
		},
		{
			name:    "fields absent from a line do not carry over from the previous one",
			handler: ndjson(lineHi, `{"message":{"role":"assistant","content":"x"},"done":false}`, lineDone),
			want:    []fleet.Chunk{text("Hi"), {Role: "assistant", Content: "x"}, final("stop", usageDone)},
			wantErr: is(io.EOF),
		},
		{
			name:    "lines after done are not read",
			handler: ndjson(lineHi, lineDone, lineErr),
			want:    []fleet.Chunk{text("Hi"), final("stop", usageDone)},
			wantErr: is(io.EOF),
		},
		{
			name:    "error line before content",
			handler: ndjson(lineErr),
			wantErr: isEventError(runnerStopped),
		},
		{
			name:    "error line after content",
			handler: ndjson(lineHi, lineThere, lineErr),
			want:    []fleet.Chunk{text("Hi"), text(" there")},
			wantErr: isEventError(runnerStopped),
		},
		{
			name:    "error line in OpenAI shape",
			handler: ndjson(lineHi, `{"error":{"message":"boom","code":500}}`),
			want:    []fleet.Chunk{text("Hi")},
			wantErr: isEventError("boom"),
		},
		{
			name:    "empty stream",
			handler: answer(200, "application/x-ndjson", ""),
			wantErr: is(fleet.ErrTruncated),
		},
		{
			name:    "stream ends without done",
			handler: ndjson(lineHi, lineThere),
			want:    []fleet.Chunk{text("Hi"), text(" there")},
			wantErr: is(fleet.ErrTruncated),
		},
		{
			name:    "chunked body cut by the server",
			handler: cut("chunked", lineHi),
			want:    []fleet.Chunk{text("Hi")},
			wantErr: func(err error) bool { return errors.Is(err, fleet.ErrTruncated) && errors.Is(err, io.ErrUnexpectedEOF) },
		},
		{
			name:    "close-delimited body ends cleanly without done",
			handler: cut("close", lineHi, lineThere),
			want:    []fleet.Chunk{text("Hi"), text(" there")},
			wantErr: is(fleet.ErrTruncated),
		},
		{
			name:    "connection reset mid-stream",
			handler: cut("reset", lineHi),
			want:    []fleet.Chunk{text("Hi")},
			wantErr: is(fleet.ErrTruncated),
		},
		{
			name:    "malformed line",
			handler: ndjson(lineHi, `{"model":"qwen3:8b","message":{"role":"assistant","content":"x"`),
			want:    []fleet.Chunk{text("Hi")},
			wantErr: isMalformed,
		},
		{
			name:    "SSE instead of NDJSON",
			handler: answer(200, "text/event-stream", `data: {"choices":[{"delta":{"content":"Hi"}}]}`+"\n\n"),
			wantErr: isMalformed,
		},
		{
			name:    "wrong field type",
			handler: ndjson(`{"model":"qwen3:8b","message":{"role":"assistant","content":"x"},"done":"yes"}`),
			wantErr: isMalformed,
		},
		{
			name:    "JSON null line",
			handler: ndjson("null"),
			wantErr: isMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, tt.handler)
			s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			got, err := drain(t, s, len(tt.want)+2)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks = %+v; want %+v", got, tt.want)
			}
			if !tt.wantErr(err) {
				t.Errorf("Recv() error = %v (%T); want the test's error", err, err)
			}
			if _, again := s.Recv(); again != err {
				t.Errorf("Recv() after the end = %v; want the same error %v", again, err)
			}
		})
	}
}

func TestChatStreamStatus(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    fleet.StatusError
	}{
		{
			name:    "503 server busy",
			handler: answer(503, "application/json; charset=utf-8", busyBody),
			want:    fleet.StatusError{StatusCode: 503, Message: "server busy, please try again.  maximum pending requests exceeded", Busy: true},
		},
		{
			name:    "503 without busy text",
			handler: answer(503, "application/json; charset=utf-8", `{"error":"ollama is shutting down"}`),
			want:    fleet.StatusError{StatusCode: 503, Message: "ollama is shutting down"},
		},
		{
			name:    "429 with Retry-After",
			handler: answer(429, "application/json", `{"error":"too many requests"}`, "Retry-After", "2"),
			want:    fleet.StatusError{StatusCode: 429, Message: "too many requests", Busy: true, RetryAfter: 2 * time.Second},
		},
		{
			name:    "404 model not found",
			handler: answer(404, "application/json; charset=utf-8", `{"error":"model \"qwen3:8b\" not found, try pulling it first"}`),
			want:    fleet.StatusError{StatusCode: 404, Message: `model "qwen3:8b" not found, try pulling it first`},
		},
		{
			name:    "400 model cannot think",
			handler: answer(400, "application/json; charset=utf-8", `{"error":"\"gemma3:4b\" does not support thinking"}`),
			want:    fleet.StatusError{StatusCode: 400, Message: `"gemma3:4b" does not support thinking`, Unsupported: "thinking"},
		},
		{
			name:    "401 from an auth proxy",
			handler: answer(401, "application/json", `{"error":"unauthorized"}`),
			want:    fleet.StatusError{StatusCode: 401, Message: "unauthorized"},
		},
		{
			name:    "HTML 502 from a proxy",
			handler: answer(502, "text/html", html502),
			want:    fleet.StatusError{StatusCode: 502, Message: fleet.ClipTo(strings.TrimSpace(html502), 200)},
		},
		{
			name:    "redirect is not followed",
			handler: answer(302, "text/plain", "", "Location", "https://elsewhere.example/api/chat"),
			want:    fleet.StatusError{StatusCode: 302},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, tt.handler)
			s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
			if err == nil {
				s.Close()
				t.Fatal("Open() error = nil; want a status error")
			}
			var se *fleet.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Open() error = %v (%T); want *fleet.StatusError", err, err)
			}
			if *se != tt.want {
				t.Errorf("Open() error = %+v; want %+v", *se, tt.want)
			}
		})
	}
}

func TestChatStreamHTMLWith200(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, answer(200, "text/html; charset=utf-8", "<!DOCTYPE html><html><body>Sign in to the guest network</body></html>"))
	s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
	if err == nil {
		s.Close()
		t.Fatal("Open() error = nil; want an error for an HTML page")
	}
	var me *fleet.MalformedError
	var se *fleet.StatusError
	if !errors.As(err, &me) || !errors.As(err, &se) || se.StatusCode != 200 || !strings.Contains(se.Message, "guest network") {
		t.Errorf("Open() error = %v; want a *fleet.MalformedError wrapping a status 200 with the page's start", err)
	}
}

func TestChatStreamDeadPort(t *testing.T) {
	b, _ := newBackend(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	_, err = b.Open(t.Context(), candidate(url), userRequest())
	var se *fleet.StatusError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("Open() on a closed port error = %v; want a transport error", err)
	}
}

// stall answers one line without content and then holds the stream open
// until the client goes away, like a model stuck before its first token.
func stall(sent chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ndjson(lineEmpty)(w, r)
		close(sent)
		<-r.Context().Done()
	}
}

// wait returns what ch delivers, failing the test if nothing comes in
// time; the timeout guards against a hang and is never expected to fire.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
		panic("unreachable")
	}
}

func TestStallThenCancel(t *testing.T) {
	b, _ := newBackend(t)
	sent := make(chan struct{})
	srv := serve(t, stall(sent))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := b.Open(ctx, candidate(srv.URL), userRequest())
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	c, err := s.Recv()
	if err != nil || c.IsFirstToken() || c.Role != "assistant" {
		t.Fatalf("Recv() = %+v, %v; want an empty assistant chunk", c, err)
	}
	wait(t, sent, "server's first line")
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		errc <- err
	}()
	cancel()
	if err := wait(t, errc, "Recv returning after cancel"); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv() after cancel = %v; want context.Canceled", err)
	}
}

// enteredBody signals each time a Read begins, so a test knows Recv has
// passed its own checks and is reading the connection.
type enteredBody struct {
	io.ReadCloser
	entered chan struct{}
}

func (b *enteredBody) Read(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	return b.ReadCloser.Read(p)
}

// TestBlockedRecv checks that a Recv blocked in the body read of a real
// connection returns when the stream is closed or its context cancelled.
func TestBlockedRecv(t *testing.T) {
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			_, pool := newBackend(t)
			sent := make(chan struct{})
			srv := serve(t, stall(sent))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/chat", strings.NewReader("{}"))
			resp, err := pool.Client(srv.URL).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := &enteredBody{ReadCloser: resp.Body, entered: make(chan struct{}, 1)}
			s := newStream(ctx, body, maxLine)
			defer s.Close()
			if _, err := s.Recv(); err != nil {
				t.Fatalf("Recv() error = %v", err)
			}
			wait(t, sent, "server's first line")
			select {
			case <-body.entered: // the first Recv's read
			default:
			}
			errc := make(chan error, 1)
			go func() {
				_, err := s.Recv()
				errc <- err
			}()
			wait(t, body.entered, "Recv reading the body")
			var want error
			if how == "close" {
				s.Close()
				want = net.ErrClosed
			} else {
				cancel()
				want = context.Canceled
			}
			if err := wait(t, errc, "blocked Recv returning"); !errors.Is(err, want) {
				t.Errorf("blocked Recv() after %s = %v; want %v", how, err, want)
			}
		})
	}
}

func TestCloseConcurrent(t *testing.T) {
	b, _ := newBackend(t)
	sent := make(chan struct{})
	srv := serve(t, stall(sent))
	s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if _, err := s.Recv(); err != nil {
				return
			}
		}
	})
	wait(t, sent, "server's first line")
	wg.Go(func() { s.Close() })
	wg.Go(func() { s.Close() })
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("third Close() = %v; want nil", err)
	}
	if _, err := s.Recv(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Recv() after Close = %v; want net.ErrClosed", err)
	}
}

// TestNoGoroutineOutlivesStream opens streams in every state, closes them,
// and checks that only the test's own goroutines remain.
func TestNoGoroutineOutlivesStream(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	func() {
		b, pool := newBackend(t)
		defer pool.CloseIdle()
		sent := make(chan struct{})
		stalled := httptest.NewServer(stall(sent))
		defer stalled.Close()
		clean := httptest.NewServer(ndjson(lineHi, lineDone))
		defer clean.Close()

		s1, err := b.Open(t.Context(), candidate(stalled.URL), userRequest())
		if err != nil {
			t.Fatal(err)
		}
		s1.Recv()
		s1.Close()

		s2, err := b.Open(t.Context(), candidate(clean.URL), userRequest())
		if err != nil {
			t.Fatal(err)
		}
		drain(t, s2, 3)
		s2.Close()

		// Closed before the first Recv.
		s3, err := b.Open(t.Context(), candidate(clean.URL), userRequest())
		if err != nil {
			t.Fatal(err)
		}
		s3.Close()
	}()
	goleak.VerifyNone(t, opts)
}

func TestChatRequestBody(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	tests := []struct {
		name   string
		c      func(url string) fleet.Candidate
		req    fleet.Request
		want   map[string]string // top-level key → its JSON; "" means absent
		header map[string]string // request header → value; "" means absent
		path   string
	}{
		{
			name: "plain request, no think even with a level",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "Hello"}}, ThinkLevel: "high"},
			want: map[string]string{
				"model":    `"qwen3:8b"`,
				"stream":   `true`,
				"messages": `[{"role":"user","content":"Hello"}]`,
				"think":    "",
				"format":   "",
				"tools":    "",
				"options":  `null`,
			},
			header: map[string]string{"Authorization": "", "Content-Type": "application/json", "Accept": "application/x-ndjson"},
			path:   "/api/chat",
		},
		{
			name: "thinking mode",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "Why?"}}, Thinking: true},
			want: map[string]string{"think": `true`},
		},
		{
			name: "thinking level, to a model that takes levels (gpt-oss)",
			c: func(url string) fleet.Candidate {
				c := candidate(url)
				c.ThinkLevels = true
				return c
			},
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "Why?"}}, Thinking: true, ThinkLevel: "high"},
			want: map[string]string{"think": `"high"`},
		},
		{
			// Other thinking models take true or false only.
			name: "thinking level, to a model that takes on/off",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "Why?"}}, Thinking: true, ThinkLevel: "high"},
			want: map[string]string{"think": `true`},
		},
		{
			// Ollama thinks by default with a thinking-capable model: the
			// caller's false must reach it.
			name: "thinking turned off",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "Why?"}}, NoThinking: true},
			want: map[string]string{"think": `false`},
		},
		{
			name: "options",
			req: fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x"}}, Options: fleet.Options{
				Temperature: f(0.2), TopP: f(0.9), MaxTokens: n(128), Seed: n(7), Stop: []string{"\n\n", "END"},
			}},
			want: map[string]string{"options": `{"temperature":0.2,"top_p":0.9,"num_predict":128,"seed":7,"stop":["\n\n","END"]}`},
		},
		{
			name: "messages with images, thinking, tool calls and tool results",
			req: fleet.Request{Messages: []fleet.Message{
				{Role: "system", Content: "Be brief."},
				{Role: "user", Content: "What is this?", Images: []string{"iVBORw0KGgo=", "data:image/png;base64,AAEC"}},
				{Role: "assistant", Content: "", Thinking: "Need the weather.", ToolCalls: []fleet.ToolCall{
					{ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city":"Paris","days":2}`},
				}},
				{Role: "tool", Content: `{"temp":21}`, Name: "get_weather", ToolCallID: "call_1"},
			}},
			want: map[string]string{"messages": `[
				{"role":"system","content":"Be brief."},
				{"role":"user","content":"What is this?","images":["iVBORw0KGgo=","AAEC"]},
				{"role":"assistant","content":"","thinking":"Need the weather.","tool_calls":[{"id":"call_1","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris","days":2}}}]},
				{"role":"tool","content":"{\"temp\":21}","tool_name":"get_weather","tool_call_id":"call_1"}
			]`},
		},
		{
			name: "tools",
			req: fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x"}}, Tools: []fleet.Tool{
				{Type: "function", Function: fleet.ToolFunction{Name: "get_weather", Description: "Weather for a city",
					Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"]}`)}},
				{Function: fleet.ToolFunction{Name: "now"}},
			}},
			want: map[string]string{"tools": `[
				{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"}}}}},
				{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":null}}}
			]`},
		},
		{
			name: "format json passes through",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x"}}, Format: json.RawMessage(`"json"`)},
			want: map[string]string{"format": `"json"`},
		},
		{
			name: "format schema passes through",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x"}}, Format: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)},
			want: map[string]string{"format": `{"type":"object","properties":{"a":{"type":"integer"}}}`},
		},
		{
			name: "OpenAI json_object becomes json",
			req:  fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}}, Format: json.RawMessage(`{"type":"json_object"}`)},
			want: map[string]string{"format": `"json"`},
		},
		{
			name: "OpenAI json_schema becomes its schema",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}},
				Format: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}}`)},
			want: map[string]string{"format": `{"type":"object"}`},
		},
		{
			name: "OpenAI text format is no format",
			req:  fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}}, Format: json.RawMessage(`{"type":"text"}`)},
			want: map[string]string{"format": ""},
		},
		{
			name: "every option that maps to Ollama's, keep_alive and logprobs",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}},
				KeepAlive: json.RawMessage(`"10m"`), Options: fleet.Options{
					TopK: n(40), MinP: f(0.05), RepeatPenalty: f(1.1), PresencePenalty: f(0.5), FrequencyPenalty: f(0.25),
					NumCtx: n(8192), Logprobs: true, TopLogprobs: n(3),
				}},
			want: map[string]string{
				"options":      `{"top_k":40,"min_p":0.05,"repeat_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":0.25,"num_ctx":8192}`,
				"keep_alive":   `"10m0s"`,
				"logprobs":     `true`,
				"top_logprobs": `3`,
			},
		},
		{
			name: "tool_choice none sends no tools",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}},
				Tools: []fleet.Tool{{Function: fleet.ToolFunction{Name: "now"}}}, ToolChoice: json.RawMessage(`"none"`)},
			want: map[string]string{"tools": ""},
		},
		{
			// Fidelity: a caller of Ollama's API reaches Ollama with every
			// field it sent, unknown ones too; only model, stream and
			// think are Switchyard's.
			name: "an Ollama caller's body is forwarded whole",
			req: fleet.Request{Protocol: fleet.ProtocolOllama, Messages: []fleet.Message{{Role: "user", Content: "x"}}, Thinking: true,
				Raw: &fleet.Raw{Dialect: fleet.ProviderOllama, Endpoint: "/api/chat", Fields: map[string]json.RawMessage{
					"model": json.RawMessage(`"auto"`), "stream": json.RawMessage(`false`),
					"messages":   json.RawMessage(`[{"role":"user","content":"x","images":null,"future_field":1}]`),
					"options":    json.RawMessage(`{"num_ctx":16384,"mirostat":2,"typical_p":0.7}`),
					"keep_alive": json.RawMessage(`-1`), "truncate": json.RawMessage(`false`), "shift": json.RawMessage(`false`),
					"something_new": json.RawMessage(`{"a":[1,2]}`),
				}}},
			want: map[string]string{
				"model":         `"qwen3:8b"`,
				"stream":        `true`,
				"think":         `true`,
				"messages":      `[{"role":"user","content":"x","images":null,"future_field":1}]`,
				"options":       `{"num_ctx":16384,"mirostat":2,"typical_p":0.7}`,
				"keep_alive":    `-1`,
				"truncate":      `false`,
				"shift":         `false`,
				"something_new": `{"a":[1,2]}`,
			},
			path: "/api/chat",
		},
		{
			name: "an OpenAI caller's body is mapped, not forwarded",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "x"}},
				Raw: &fleet.Raw{Dialect: fleet.ProviderOpenAI, Fields: map[string]json.RawMessage{"frequency_penalty": json.RawMessage(`1`)}}},
			want: map[string]string{"frequency_penalty": "", "messages": `[{"role":"user","content":"x"}]`},
		},
		{
			name: "a completion becomes a raw generation",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Kind: fleet.KindGenerate, Prompt: "def f(", Suffix: "\n    return x",
				RawPrompt: true, Options: fleet.Options{MaxTokens: n(16)}},
			want: map[string]string{
				"model": `"qwen3:8b"`, "prompt": `"def f("`, "suffix": `"\n    return x"`, "raw": `true`, "stream": `true`,
				"options": `{"num_predict":16}`, "messages": "",
			},
			path: "/api/generate",
		},
		{
			name: "an Ollama generation is forwarded whole to /api/generate",
			req: fleet.Request{Protocol: fleet.ProtocolOllama, Kind: fleet.KindGenerate, Prompt: "hi",
				Raw: &fleet.Raw{Dialect: fleet.ProviderOllama, Endpoint: "/api/generate", Fields: map[string]json.RawMessage{
					"model": json.RawMessage(`"auto"`), "prompt": json.RawMessage(`"hi"`), "context": json.RawMessage(`[1,2,3]`), "template": json.RawMessage(`"{{ .Prompt }}"`),
				}}},
			want: map[string]string{"model": `"qwen3:8b"`, "prompt": `"hi"`, "context": `[1,2,3]`, "template": `"{{ .Prompt }}"`, "stream": `true`},
			path: "/api/generate",
		},
		{
			name: "an embedding of one input",
			req:  fleet.Request{Protocol: fleet.ProtocolOpenAI, Kind: fleet.KindEmbed, Input: []string{"hello"}, Dimensions: 32},
			want: map[string]string{"model": `"qwen3:8b"`, "input": `"hello"`, "dimensions": `32`, "stream": ""},
			path: "/api/embed",
		},
		{
			name: "a legacy embedding goes to the legacy endpoint",
			req: fleet.Request{Protocol: fleet.ProtocolOllama, Kind: fleet.KindEmbed, Input: []string{"hello"},
				Raw: &fleet.Raw{Dialect: fleet.ProviderOllama, Endpoint: "/api/embeddings", Fields: map[string]json.RawMessage{
					"model": json.RawMessage(`"nomic"`), "prompt": json.RawMessage(`"hello"`),
				}}},
			want: map[string]string{"model": `"qwen3:8b"`, "prompt": `"hello"`, "stream": ""},
			path: "/api/embeddings",
		},
		{
			name: "API key and a base URL with a path and trailing slash",
			c: func(url string) fleet.Candidate {
				c := candidate(url + "/ollama/")
				c.APIKey = "sk-local"
				return c
			},
			req:    fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x"}}},
			header: map[string]string{"Authorization": "Bearer sk-local"},
			path:   "/ollama/api/chat",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			got := make(chan *http.Request, 1)
			bodies := make(chan []byte, 1)
			srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- r
				bodies <- body
				if strings.HasPrefix(r.URL.Path, "/api/embed") {
					answer(200, "application/json", `{"embedding":[1],"embeddings":[[1]]}`)(w, r)
					return
				}
				ndjson(lineDone)(w, r)
			}))
			c := candidate(srv.URL)
			if tt.c != nil {
				c = tt.c(srv.URL)
			}
			s, err := b.Open(t.Context(), c, &tt.req)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			drain(t, s, 1)
			s.Close()
			r, body := <-got, <-bodies

			if r.Method != http.MethodPost {
				t.Errorf("method = %s; want POST", r.Method)
			}
			if tt.path != "" && r.URL.Path != tt.path {
				t.Errorf("path = %s; want %s", r.URL.Path, tt.path)
			}
			for k, want := range tt.header {
				if v := r.Header.Get(k); v != want {
					t.Errorf("header %s = %q; want %q", k, v, want)
				}
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(body, &fields); err != nil {
				t.Fatalf("request body %s: %v", body, err)
			}
			for k, want := range tt.want {
				v, ok := fields[k]
				switch {
				case want == "" && ok:
					t.Errorf("body has %s = %s; want it absent", k, v)
				case want != "" && !ok:
					t.Errorf("body lacks %s; want %s", k, want)
				case want != "" && !jsonEqual(t, v, []byte(want)):
					t.Errorf("body %s = %s; want %s", k, v, want)
				}
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestChatStreamInvalidRequest(t *testing.T) {
	tests := []struct {
		name string
		req  fleet.Request
	}{
		{"image not base64", fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "x", Images: []string{"not base64!"}}}}},
		{"tool call arguments not an object", fleet.Request{Messages: []fleet.Message{{Role: "assistant", ToolCalls: []fleet.ToolCall{{Name: "f", Arguments: `"city=Paris"`}}}}}},
		{"tool parameters not an object", fleet.Request{Tools: []fleet.Tool{{Type: "function", Function: fleet.ToolFunction{Name: "f", Parameters: json.RawMessage(`[1]`)}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Error("the request was sent")
			}))
			_, err := b.Open(t.Context(), candidate(srv.URL), &tt.req)
			var se *fleet.StatusError
			if !errors.As(err, &se) || se.StatusCode != 400 {
				t.Fatalf("Open() error = %v; want a 400 *fleet.StatusError", err)
			}
		})
	}
}

func TestLineTooLong(t *testing.T) {
	long := `{"model":"m","message":{"role":"assistant","content":"` + strings.Repeat("x", 600) + `"},"done":false}`
	s := newStream(context.Background(), io.NopCloser(strings.NewReader(lineHi+"\n"+long+"\n"+lineDone+"\n")), 512)
	got, err := drainNoT(s, 5)
	if len(got) != 1 || got[0].Content != "Hi" {
		t.Errorf("chunks = %+v; want the first line only", got)
	}
	if !isMalformed(err) || !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("Recv() error = %v; want *fleet.MalformedError wrapping bufio.ErrTooLong", err)
	}
}

// drainNoT reads s to its first error or max chunks, whichever comes first.
func drainNoT(s fleet.Stream, max int) ([]fleet.Chunk, error) {
	var got []fleet.Chunk
	for range max {
		c, err := s.Recv()
		if err != nil {
			return got, err
		}
		c.Raw = nil
		got = append(got, c)
	}
	return got, nil
}

func BenchmarkRecv(b *testing.B) {
	const lines = 1000
	var sb strings.Builder
	for range lines {
		sb.WriteString(lineHi + "\n")
	}
	sb.WriteString(lineDone + "\n")
	data := sb.String()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s := newStream(context.Background(), io.NopCloser(strings.NewReader(data)), maxLine)
		for {
			if _, err := s.Recv(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(lines+1)), "ns/line")
}

// What the reader holds of an answer, the done line's chunk included,
// goes out before the wait for the body's end: the Recv after the done
// line's reads the body to its end (FinishBody) through the stream's
// WaitReader, so the reader's BeforeWait function runs once more, with
// the whole body read and the done line's chunk in the reader's hands.
func TestReaderWritesBeforeTheBodyEnds(t *testing.T) {
	body := strings.NewReader(lineHi + "\n" + lineDone + "\n")
	s := newStream(t.Context(), io.NopCloser(body), maxLine)
	var left []int // what the body held at each of the reader's writes
	s.BeforeWait(func() { left = append(left, body.Len()) })
	for range 2 {
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if len(left) != 1 {
		t.Fatalf("the reader wrote %d times by the done line's chunk; want once, before the first read: the next Recv ends the body", len(left))
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("Recv after the done line = %v; want io.EOF", err)
	}
	if len(left) != 2 || left[1] != 0 {
		t.Errorf("the reader wrote with %v bytes of the body left; want a write after the last byte, before the read that ends the body", left)
	}
}
