package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/schema"
)

// countingBackend answers every call with a short complete stream and
// counts the calls, so tests can prove a refused request was not routed.
type countingBackend struct{ calls atomic.Int32 }

func (b *countingBackend) Open(ctx context.Context, c fleet.Candidate, r *fleet.Request) (fleet.Stream, error) {
	b.calls.Add(1)
	return &sliceStream{chunks: []fleet.Chunk{{Role: "assistant"}, {Content: "hi"}, {FinishReason: "stop", Usage: &fleet.Usage{PromptTokens: 1, CompletionTokens: 1}}}}, nil
}

type sliceStream struct {
	chunks []fleet.Chunk
}

func (s *sliceStream) Recv() (fleet.Chunk, error) {
	if len(s.chunks) == 0 {
		return fleet.Chunk{}, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *sliceStream) Close() error { return nil }

func newTestServer(t *testing.T, o Options) (*Server, *countingBackend) {
	t.Helper()
	b := &countingBackend{}
	o.Router = router.New(router.Fleet{
		Targets:      []router.Target{{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true, SupportsThinking: true}, Backend: b}},
		DefaultModel: "m1",
	}, router.Deps{})
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8484"
	}
	return New(o), b
}

const chatBody = `{"model":"auto","messages":[{"role":"user","content":"hi"}]}`

func do(s *Server, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:8484"
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

func TestSecurity(t *testing.T) {
	big := `{"model":"auto","messages":[{"role":"user","content":"` + strings.Repeat("x", 5<<20) + `"}]}`
	tests := []struct {
		name       string
		opts       Options
		path, body string
		header     map[string]string
		wantStatus int
		wantBody   string // substring
		routed     bool
	}{
		{name: "loopback host passes", path: "/v1/chat/completions", body: chatBody, wantStatus: 200, routed: true},
		{name: "localhost name passes", path: "/v1/chat/completions", body: chatBody, header: map[string]string{"Host": "localhost:8484"}, wantStatus: 200, routed: true},
		{name: "DNS rebinding host refused", path: "/v1/chat/completions", body: chatBody, header: map[string]string{"Host": "evil.example:8484"},
			wantStatus: 403, wantBody: `"type":"permission_error"`},
		{name: "empty host refused", path: "/api/chat", body: chatBody, header: map[string]string{"Host": ""},
			wantStatus: 403, wantBody: `{"error":"forbidden host (empty)`},
		{name: "wrong port refused", path: "/v1/models", header: map[string]string{"Host": "127.0.0.1:9999"}, wantStatus: 403},
		{name: "foreign origin refused", path: "/v1/chat/completions", body: chatBody, header: map[string]string{"Origin": "https://evil.example"},
			wantStatus: 403, wantBody: "origin https://evil.example is not allowed"},
		{name: "own origin allowed", path: "/v1/chat/completions", body: chatBody, header: map[string]string{"Origin": "http://127.0.0.1:8484"}, wantStatus: 200, routed: true},
		{name: "wails origin allowed in the desktop app", opts: Options{Webview: true}, path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Origin": "wails://wails"}, wantStatus: 200, routed: true},
		{name: "wails origin refused by serve", path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Origin": "http://wails.localhost"}, wantStatus: 403},
		{name: "a local dev page allowed", path: "/v1/chat/completions", body: chatBody, header: map[string]string{"Origin": "http://localhost:5173"}, wantStatus: 200, routed: true},
		{name: "Obsidian allowed", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "app://obsidian.md"}, wantStatus: 200, routed: true},
		{name: "a VS Code webview allowed", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "vscode-webview://1a2b3c"}, wantStatus: 200, routed: true},
		{name: "a look-alike host refused", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "http://localhost.evil.example:80"}, wantStatus: 403},
		{name: "an extension refused by default", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "chrome-extension://abcdef"}, wantStatus: 403},
		{name: "an extension allowed by a pattern", opts: Options{AllowedOrigins: []string{"chrome-extension://*"}}, path: "/api/chat", body: chatBody,
			header: map[string]string{"Origin": "chrome-extension://abcdef"}, wantStatus: 200, routed: true},
		{name: "an IPv6 loopback page allowed", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "http://[::1]:5173"}, wantStatus: 200, routed: true},
		{name: "no character class in a pattern", path: "/api/chat", body: chatBody, header: map[string]string{"Origin": "http://::5173"}, wantStatus: 403},
		{name: "a star stops at a slash", opts: Options{AllowedOrigins: []string{"https://*.example"}}, path: "/api/chat", body: chatBody,
			header: map[string]string{"Origin": "https://x.invalid/y.example"}, wantStatus: 403},
		{name: "a star spans a dot", opts: Options{AllowedOrigins: []string{"https://*.example"}}, path: "/api/chat", body: chatBody,
			header: map[string]string{"Origin": "https://a.b.example"}, wantStatus: 200, routed: true},
		{name: "another loopback address bound: its own Host", opts: Options{Listen: "127.0.0.2:8484"}, path: "/v1/models",
			header: map[string]string{"Host": "127.0.0.2:8484"}, wantStatus: 200},
		{name: "another loopback address bound: its own origin", opts: Options{Listen: "127.0.0.2:8484"}, path: "/api/chat", body: chatBody,
			header: map[string]string{"Host": "127.0.0.2:8484", "Origin": "http://127.0.0.2:8484"}, wantStatus: 200, routed: true},
		{name: "another loopback address: others refused", opts: Options{Listen: "127.0.0.2:8484"}, path: "/v1/models",
			header: map[string]string{"Host": "127.0.0.3:8484"}, wantStatus: 403},
		{name: "configured origin allowed", opts: Options{AllowedOrigins: []string{"http://localhost:5173"}}, path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Origin": "http://localhost:5173"}, wantStatus: 200, routed: true},
		{name: "missing token", opts: Options{APIKey: "s3cret"}, path: "/v1/chat/completions", body: chatBody,
			wantStatus: 401, wantBody: `"type":"authentication_error"`},
		{name: "wrong token", opts: Options{APIKey: "s3cret"}, path: "/api/chat", body: chatBody, header: map[string]string{"Authorization": "Bearer nope"},
			wantStatus: 401, wantBody: `{"error":"missing or wrong API key`},
		{name: "right token", opts: Options{APIKey: "s3cret"}, path: "/v1/chat/completions", body: chatBody,
			header: map[string]string{"Authorization": "Bearer s3cret"}, wantStatus: 200, routed: true},
		{name: "token guards switchyard API", opts: Options{APIKey: "s3cret"}, path: "/switchyard/v1/status", wantStatus: 401},
		{name: "oversized body → 413 in OpenAI's protocol", path: "/v1/chat/completions", body: big, wantStatus: 413, wantBody: `"type":"invalid_request_error"`},
		{name: "oversized body → 413 in Ollama's protocol", path: "/api/chat", body: big, wantStatus: 413, wantBody: `{"error":"request body larger than`},
		{name: "malformed JSON → 400 (OpenAI)", path: "/v1/chat/completions", body: `{"model":`, wantStatus: 400, wantBody: `"message":"malformed JSON`},
		{name: "malformed JSON → 400 (Ollama)", path: "/api/chat", body: `{"model":`, wantStatus: 400, wantBody: `{"error":"malformed JSON`},
		{name: "wrong type → 400 naming the field", path: "/v1/chat/completions", body: `{"model":1,"messages":[]}`, wantStatus: 400, wantBody: `field \"model\": expected a string, got JSON number`},
		{name: "wrong type in the caller's words", path: "/api/chat", body: `{"model":"auto","messages":{"role":"user"}}`, wantStatus: 400, wantBody: `field \"messages\": expected an array, got JSON object`},
		{name: "no messages → 400", path: "/v1/chat/completions", body: `{"model":"auto","messages":[]}`, wantStatus: 400, wantBody: "at least one message"},
		{name: "unknown model → 404 (OpenAI)", path: "/v1/chat/completions", body: `{"model":"gpt-17","messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 404, wantBody: `"type":"not_found_error"`},
		{name: "unknown model → 404 (Ollama)", path: "/api/chat", body: `{"model":"gpt-17","messages":[{"role":"user","content":"x"}]}`,
			wantStatus: 404, wantBody: `{"error":"unknown model \"gpt-17\"`},
		{name: "bad think value → 400", path: "/api/chat", body: `{"model":"auto","think":"turbo","messages":[{"role":"user","content":"x"}]}`, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, b := newTestServer(t, tt.opts)
			method := "POST"
			if tt.body == "" {
				method = "GET"
			}
			w := do(s, method, tt.path, tt.body, tt.header)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d; want %d (body %s)", w.Code, tt.wantStatus, w.Body.String())
			}
			if !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("body = %s; want it to contain %s", w.Body.String(), tt.wantBody)
			}
			if routed := b.calls.Load() > 0; routed != tt.routed {
				t.Errorf("routed = %v; want %v", routed, tt.routed)
			}
		})
	}
}

func TestCORSPreflightAndHeaders(t *testing.T) {
	s, _ := newTestServer(t, Options{Webview: true})
	w := do(s, "OPTIONS", "/v1/chat/completions", "", map[string]string{"Origin": "wails://wails"})
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != "wails://wails" ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight = %d %v", w.Code, w.Header())
	}
	w = do(s, "POST", "/v1/chat/completions", chatBody, map[string]string{"Origin": "wails://wails"})
	if !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "X-Switchyard-Served-Model") {
		t.Errorf("cross-origin answer does not expose the routing headers: %v", w.Header())
	}
	w = do(s, "POST", "/v1/chat/completions", chatBody, nil)
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS headers sent without an Origin")
	}
}

func TestOpenAIStreamWire(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	w := do(s, "POST", "/v1/chat/completions", `{"model":"auto","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, nil)
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %q", w.Code, w.Header().Get("Content-Type"))
	}
	for _, h := range []string{"X-Switchyard-Request-Id", "X-Switchyard-Served-Model", "X-Switchyard-Fallback"} {
		if w.Header().Get(h) == "" {
			t.Errorf("missing header %s", h)
		}
	}
	events := strings.Split(strings.TrimSuffix(w.Body.String(), "\n\n"), "\n\n")
	if last := events[len(events)-1]; last != "data: [DONE]" {
		t.Fatalf("last event %q; want data: [DONE]", last)
	}
	var content, finish string
	var sawUsage bool
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Role, Content string
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "model-1" {
			t.Errorf("event %q: object/model", e)
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			sawUsage = c.Usage.TotalTokens == 2 && len(c.Choices) == 0
		}
	}
	if content != "hi" || finish != "stop" || !sawUsage {
		t.Errorf("content %q finish %q usage %v", content, finish, sawUsage)
	}
}

func TestOllamaStreamWire(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	w := do(s, "POST", "/api/chat", `{"model":"auto","messages":[{"role":"user","content":"x"}]}`, nil)
	lines := strings.Split(strings.TrimSpace(w.Body.String()), "\n")
	if w.Header().Get("Content-Type") != "application/x-ndjson" || len(lines) != 2 {
		t.Fatalf("type %q lines %q", w.Header().Get("Content-Type"), lines)
	}
	var last struct {
		Done       bool   `json:"done"`
		DoneReason string `json:"done_reason"`
		EvalCount  int    `json:"eval_count"`
	}
	json.Unmarshal([]byte(lines[1]), &last)
	if !last.Done || last.DoneReason != "stop" || last.EvalCount != 1 {
		t.Errorf("final line %s", lines[1])
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "new\nline\r\t", "\x00\x01\x1f", "ünï©ødé 🚀", "bad\xffutf8", "\u2028\u2029", "<html>&amp;"} {
		var got string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil {
			t.Fatalf("appendString(%q) is not JSON: %v", s, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if got != want {
			t.Errorf("round trip of %q = %q", s, got)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("hello \"world\"\n")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil {
			t.Fatalf("appendString(%q) is not JSON: %v", s, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Errorf("round trip of %q = %q", s, got)
		}
	})
}

func TestNotFoundInProtocol(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	if w := do(s, "GET", "/v1/nope", "", nil); w.Code != 404 || !strings.Contains(w.Body.String(), `"type":"not_found_error"`) {
		t.Errorf("/v1/nope = %d %s", w.Code, w.Body.String())
	}
	if w := do(s, "GET", "/switchyard/v1/demo", "", nil); w.Code != 404 || !strings.Contains(w.Body.String(), "not in demo mode") {
		t.Errorf("demo outside demo mode = %d %s", w.Code, w.Body.String())
	}
	if w := do(s, "GET", "/v1/models", "", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"id":"auto"`) || !strings.Contains(w.Body.String(), `"id":"m1"`) {
		t.Errorf("/v1/models = %d %s", w.Code, w.Body.String())
	}
}

// fragmentBackend streams one tool call in OpenAI-style fragments.
type fragmentBackend struct{}

func (fragmentBackend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return &sliceStream{chunks: []fleet.Chunk{
		{Role: "assistant"},
		{ToolCalls: []fleet.ToolCall{{Index: 0, ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"loc`}}},
		{ToolCalls: []fleet.ToolCall{{Index: 0, Arguments: `ation":"Pa`}}},
		{ToolCalls: []fleet.ToolCall{{Index: 0, Arguments: `ris"}`}}},
		{FinishReason: "tool_calls"},
	}}, nil
}

func TestOllamaStreamMergesToolCallFragments(t *testing.T) {
	s := New(Options{Listen: "127.0.0.1:8484", Router: router.New(router.Fleet{
		Targets:      []router.Target{{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true}, Backend: fragmentBackend{}}},
		DefaultModel: "m1",
	}, router.Deps{})})
	w := do(s, "POST", "/api/chat", `{"model":"auto","messages":[{"role":"user","content":"weather?"}]}`, nil)
	var calls []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(w.Body.String()), "\n") {
		var resp struct {
			Message struct {
				ToolCalls []struct {
					Function struct {
						Name      string         `json:"name"`
						Arguments map[string]any `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for _, c := range resp.Message.ToolCalls {
			calls = append(calls, map[string]any{"name": c.Function.Name, "args": c.Function.Arguments})
		}
	}
	if len(calls) != 1 || calls[0]["name"] != "get_weather" || calls[0]["args"].(map[string]any)["location"] != "Paris" {
		t.Errorf("tool calls = %v; want one whole get_weather(location=Paris)\n%s", calls, w.Body.String())
	}
}

func TestSetSecurityAppliesAtOnce(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	if w := do(s, "GET", "/v1/models", "", nil); w.Code != 200 {
		t.Fatalf("no key: %d", w.Code)
	}
	s.SetSecurity(Security{APIKey: "k", BodyLimit: 16})
	if w := do(s, "GET", "/v1/models", "", nil); w.Code != 401 {
		t.Errorf("after a key was added: %d; want 401 at once", w.Code)
	}
	if w := do(s, "POST", "/v1/chat/completions", chatBody, map[string]string{"Authorization": "Bearer k"}); w.Code != 413 {
		t.Errorf("after the body limit shrank: %d; want 413", w.Code)
	}
}

func TestOwnOriginOnALANBind(t *testing.T) {
	s, _ := newTestServer(t, Options{Listen: "0.0.0.0:8484", APIKey: "k"})
	w := do(s, "POST", "/v1/chat/completions", chatBody, map[string]string{
		"Host": "192.0.2.5:8484", "Origin": "http://192.0.2.5:8484", "Authorization": "Bearer k"})
	if w.Code != 200 {
		t.Errorf("the UI served on the LAN address calling its own API: %d %s", w.Code, w.Body.String())
	}
	w = do(s, "POST", "/v1/chat/completions", chatBody, map[string]string{
		"Host": "192.0.2.5:8484", "Origin": "http://evil.example", "Authorization": "Bearer k"})
	if w.Code != 403 {
		t.Errorf("a foreign origin on a LAN bind: %d; want 403", w.Code)
	}
}

func TestPreflightEchoesRequestedHeaders(t *testing.T) {
	s, _ := newTestServer(t, Options{AllowedOrigins: []string{"http://localhost:5173"}})
	w := do(s, "OPTIONS", "/v1/chat/completions", "", map[string]string{
		"Origin": "http://localhost:5173", "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"})
	if got := w.Header().Get("Access-Control-Allow-Headers"); !strings.Contains(got, "x-stainless-os") {
		t.Errorf("Allow-Headers = %q; want the headers the client library asked for", got)
	}
}

func TestEventsEndOnShutdown(t *testing.T) {
	s, _ := newTestServer(t, Options{Status: func() schema.Status { return schema.Status{Version: "test"} }})
	ts := httptest.NewServer(s)
	defer ts.Close()
	s.guard.Store(newGuard(strings.TrimPrefix(ts.URL, "http://"), Security{}))
	resp, err := http.Get(ts.URL + "/switchyard/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 64)
	if n, _ := resp.Body.Read(first); !strings.HasPrefix(string(first[:n]), "event: status") {
		t.Fatalf("first event %q", first[:n])
	}
	s.BeginShutdown()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("events stream ended with %v; want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the events stream kept the server from shutting down")
	}
}

// fleetRouter is a Router that only knows its fleet: the API needs no
// *router.Router behind it.
type fleetRouter struct {
	Router // nil: any other method panics
	fleet  router.Fleet
}

func (f fleetRouter) Fleet() router.Fleet { return f.fleet }

func TestModelsFromAnyRouter(t *testing.T) {
	s := New(Options{Listen: "127.0.0.1:8484", Router: fleetRouter{fleet: router.Fleet{Targets: []router.Target{
		{Candidate: fleet.Candidate{ID: "on", Enabled: true}},
		{Candidate: fleet.Candidate{ID: "off"}},
	}}}})
	w := do(s, "GET", "/v1/models", "", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.Unmarshal(w.Body.Bytes(), &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if want := []string{router.AliasAuto, "on"}; !slices.Equal(ids, want) {
		t.Errorf("GET /v1/models = %v; want %v\n%s", ids, want, w.Body.String())
	}
}
