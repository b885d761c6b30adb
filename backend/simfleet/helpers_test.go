package simfleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every test's waits: a broken server fails the test
// instead of hanging it.
const testTimeout = 20 * time.Second

// absence is how long a test watches for bytes that must not come. It only
// ever makes a broken server pass, never a working one fail.
const absence = 50 * time.Millisecond

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// proto is one wire protocol as the tests drive it.
type proto struct {
	name     string
	provider fleet.Provider
	chatPath string // appended to URL()
	model    string // a thinking model
	plain    string // a model without thinking
}

var protos = []proto{
	{name: "ollama", provider: fleet.ProviderOllama, chatPath: "/api/chat", model: "qwen3:8b", plain: "llama3.2:3b"},
	{name: "openai", provider: fleet.ProviderOpenAI, chatPath: "/chat/completions", model: "Qwen/Qwen3-32B", plain: "mistral-7b"},
}

// config is a fast server of p with a thinking and a plain model.
func (p proto) config(name string) Config {
	return Config{
		Name:     name,
		Provider: p.provider,
		Models:   []Model{{Name: p.model, Thinking: true}, {Name: p.plain}},
		TTFT:     time.Millisecond,
		Tokens:   6,
	}
}

// body is a chat request for model.
func (p proto) body(model string, stream, think bool) string {
	if p.provider == fleet.ProviderOllama {
		req := map[string]any{
			"model":    model,
			"messages": []map[string]string{{"role": "user", "content": "hello there"}},
			"stream":   stream,
		}
		if think {
			req["think"] = true
		}
		return mustJSON(req)
	}
	req := map[string]any{
		"model":    model,
		"messages": []map[string]string{{"role": "user", "content": "hello there"}},
		"stream":   stream,
	}
	if stream {
		req["stream_options"] = map[string]bool{"include_usage": true}
	}
	if think {
		req["reasoning_effort"] = "high"
	}
	return mustJSON(req)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", cfg, err)
	}
	t.Cleanup(s.Close)
	return s
}

// client is a plain HTTP client with its own connections, closed at the
// end of the test.
func client(t *testing.T) *http.Client {
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// post sends body to the chat endpoint of s.
func post(ctx context.Context, t *testing.T, c *http.Client, p proto, s *Server, body string) (*http.Response, error) {
	t.Helper()
	return c.Do(httpPost(ctx, t, s.URL()+p.chatPath, body))
}

// httpPost is a POST of a JSON body to url.
func httpPost(ctx context.Context, t *testing.T, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// postJSON posts body to url and returns the body of its 200 answer.
func postJSON(ctx context.Context, t *testing.T, url, body string) []byte {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(httpPost(ctx, t, url, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	expectStatus(t, resp, http.StatusOK)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustPost is post for requests that must get response headers.
func mustPost(ctx context.Context, t *testing.T, c *http.Client, p proto, s *Server, body string) *http.Response {
	t.Helper()
	resp, err := post(ctx, t, c, p, s, body)
	if err != nil {
		t.Fatalf("POST %s = %v", p.chatPath, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events splits a stream body into its wire events: NDJSON lines, or the
// data of SSE events. It fails the test on framing errors: a line without
// its newline, an SSE event that is not a single data line ended by a blank
// line.
func (p proto) events(t *testing.T, body []byte) []string {
	t.Helper()
	if len(body) == 0 {
		return nil
	}
	if p.provider == fleet.ProviderOllama {
		if !bytes.HasSuffix(body, []byte("\n")) {
			t.Fatalf("NDJSON body does not end with a newline: %q", body)
		}
		return strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("SSE body does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("SSE event %q is not one data line", ev)
		}
		out = append(out, data)
	}
	return out
}

// nextEvent reads one wire event (an NDJSON line, an SSE event) from r.
func (p proto) nextEvent(r *bufio.Reader) (string, error) {
	if p.provider == fleet.ProviderOllama {
		line, err := r.ReadString('\n')
		return strings.TrimSuffix(line, "\n"), err
	}
	var ev strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev.String(), err
		}
		if line == "\n" {
			return strings.TrimPrefix(ev.String(), "data: "), nil
		}
		ev.WriteString(strings.TrimSuffix(line, "\n"))
	}
}

// ollamaLine is an NDJSON line of /api/chat as the tests read it.
type ollamaLine struct {
	Model   string `json:"model"`
	Message struct {
		Role     string `json:"role"`
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	Done               bool   `json:"done"`
	DoneReason         string `json:"done_reason"`
	TotalDuration      int64  `json:"total_duration"`
	LoadDuration       int64  `json:"load_duration"`
	PromptEvalCount    int    `json:"prompt_eval_count"`
	PromptEvalDuration int64  `json:"prompt_eval_duration"`
	EvalCount          int    `json:"eval_count"`
	EvalDuration       int64  `json:"eval_duration"`
	Error              string `json:"error"`
}

// oaLine is an SSE chunk (or a chat.completion) as the tests read it.
type oaLine struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta        map[string]any `json:"delta"`
		Message      map[string]any `json:"message"`
		FinishReason *string        `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// streamed is what a stream carried, whatever its protocol.
type streamed struct {
	thinking, content string
	tokens            int  // events with thinking or content
	finished          bool // done:true / finish_reason, and [DONE] for OpenAI
}

// collect reads the events of a stream.
func (p proto) collect(t *testing.T, events []string) streamed {
	t.Helper()
	var out streamed
	for i, ev := range events {
		if p.provider == fleet.ProviderOllama {
			l := decode[ollamaLine](t, ev)
			out.thinking += l.Message.Thinking
			out.content += l.Message.Content
			if l.Message.Thinking != "" || l.Message.Content != "" {
				out.tokens++
			}
			out.finished = out.finished || l.Done
			continue
		}
		if ev == "[DONE]" {
			if i != len(events)-1 {
				t.Errorf("[DONE] is event %d of %d", i, len(events))
			}
			continue
		}
		l := decode[oaLine](t, ev)
		for _, c := range l.Choices {
			th, _ := c.Delta["reasoning"].(string)
			co, _ := c.Delta["content"].(string)
			out.thinking += th
			out.content += co
			if th != "" || co != "" {
				out.tokens++
			}
			if c.FinishReason != nil && events[len(events)-1] == "[DONE]" {
				out.finished = true
			}
		}
	}
	return out
}

// readAll reads the whole body; err says how the body ended.
func readAll(resp *http.Response) ([]byte, error) {
	return io.ReadAll(resp.Body)
}

// quiet fails the test if r yields a byte before absence has passed, then
// cancels the request with cancel and expects the read to fail.
func quiet(t *testing.T, r io.Reader, cancel context.CancelFunc) {
	t.Helper()
	got := make(chan error, 1)
	var n int
	go func() {
		var buf [1]byte
		var err error
		n, err = r.Read(buf[:])
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("read %d bytes, err %v; want nothing", n, err)
	case <-time.After(absence):
	}
	cancel()
	if err := <-got; err == nil || n != 0 {
		t.Fatalf("after cancel: read %d bytes, err %v; want 0 and an error", n, err)
	}
}

// waitCancelled waits until s has no open request and checks that exactly
// one was cancelled.
func waitCancelled(ctx context.Context, t *testing.T, s *Server) {
	t.Helper()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle = %v; stats %+v", err, s.Stats())
	}
	if st := s.Stats(); st.Cancelled != 1 || st.OpenStreams != 0 || st.Completed != st.Requests-1 {
		t.Errorf("Stats() = %+v; want one cancelled request and none open", st)
	}
}

func expectStatus(t *testing.T, resp *http.Response, want int) {
	t.Helper()
	if resp.StatusCode != want {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status = %d (%s); want %d", resp.StatusCode, body, want)
	}
}

func (p proto) String() string { return fmt.Sprint(p.name) }
