package simfleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A healthy stream of each protocol: framing, order of events, end markers,
// and content that is exactly Answer (and Thinking when asked).
func TestHealthyStream(t *testing.T) {
	for _, p := range protos {
		for _, think := range []bool{false, true} {
			t.Run(p.name+map[bool]string{false: "", true: "/thinking"}[think], func(t *testing.T) {
				ctx := testContext(t)
				s := start(t, p.config("alpha"))
				resp := mustPost(ctx, t, client(t), p, s, p.body(p.model, true, think))
				expectStatus(t, resp, http.StatusOK)
				body, err := readAll(resp)
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				events := p.events(t, body)
				got := p.collect(t, events)
				wantThinking := ""
				if think {
					wantThinking = s.Thinking(p.model)
				}
				if got.content != s.Answer(p.model) || got.thinking != wantThinking || !got.finished {
					t.Errorf("stream = %+v; want content %q, thinking %q, finished", got, s.Answer(p.model), wantThinking)
				}
				if !strings.HasPrefix(got.content, "alpha here ("+p.model+"):") {
					t.Errorf("content %q does not name the server and model", got.content)
				}
				thinkingTokens := 0
				if think {
					thinkingTokens = 3 // Tokens/2
				}
				if got.tokens != 6+thinkingTokens {
					t.Errorf("%d token events; want %d", got.tokens, 6+thinkingTokens)
				}
				if p.provider == "ollama" {
					checkOllamaStream(t, resp, events, think, got.tokens)
				} else {
					checkOpenAIStream(t, resp, body, events, think)
				}
				if st := s.Stats(); st != (Stats{Requests: 1, Completed: 1}) {
					t.Errorf("Stats() = %+v; want one completed request", st)
				}
			})
		}
	}
}

func checkOllamaStream(t *testing.T, resp *http.Response, events []string, think bool, tokens int) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q; want application/x-ndjson", ct)
	}
	// Thinking first, then content, then one done line.
	seenContent := false
	for i, ev := range events[:len(events)-1] {
		l := decode[ollamaLine](t, ev)
		if l.Done || l.Message.Role != "assistant" {
			t.Errorf("line %d = %s; want a not-done assistant line", i, ev)
		}
		if l.Message.Thinking != "" && seenContent {
			t.Errorf("line %d: thinking after content", i)
		}
		seenContent = seenContent || l.Message.Content != ""
		if l.Message.Thinking != "" && !think {
			t.Errorf("line %d: thinking without think", i)
		}
	}
	last := decode[ollamaLine](t, events[len(events)-1])
	if !last.Done || last.DoneReason != "stop" || last.Message.Content != "" {
		t.Errorf("last line = %s; want done:true, done_reason stop, no content", events[len(events)-1])
	}
	if last.LoadDuration <= 0 || last.TotalDuration <= 0 || last.PromptEvalDuration <= 0 ||
		last.EvalDuration <= 0 || last.PromptEvalCount <= 0 || last.EvalCount != tokens {
		t.Errorf("metrics of %s; want positive durations and eval_count %d", events[len(events)-1], tokens)
	}
	// The field names are the wire's, in nanoseconds.
	for _, field := range []string{`"load_duration":`, `"total_duration":`, `"eval_count":`, `"created_at":`} {
		if !strings.Contains(events[len(events)-1], field) {
			t.Errorf("last line lacks %s", field)
		}
	}
}

func checkOpenAIStream(t *testing.T, resp *http.Response, body []byte, events []string, think bool) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q; want text/event-stream", ct)
	}
	if !strings.HasSuffix(string(body), "\n\ndata: [DONE]\n\n") {
		t.Errorf("body does not end with data: [DONE]: %q", body[max(0, len(body)-80):])
	}
	n := len(events)
	// role chunk, tokens..., finish chunk, usage chunk, [DONE]
	role := decode[oaLine](t, events[0])
	if role.Object != "chat.completion.chunk" || len(role.Choices) != 1 ||
		role.Choices[0].Delta["role"] != "assistant" || role.Choices[0].Delta["content"] != "" {
		t.Errorf("first event = %s; want the role chunk with empty content", events[0])
	}
	id := role.ID
	seenContent := false
	for i, ev := range events[1 : n-3] {
		l := decode[oaLine](t, ev)
		if l.ID != id || len(l.Choices) != 1 || l.Choices[0].FinishReason != nil || l.Usage != nil {
			t.Errorf("token event %d = %s; want one choice, same id, no finish", i, ev)
		}
		_, hasReasoning := l.Choices[0].Delta["reasoning"]
		if hasReasoning && (seenContent || !think) {
			t.Errorf("token event %d: reasoning after content or without reasoning_effort", i)
		}
		if _, ok := l.Choices[0].Delta["reasoning_content"]; ok {
			t.Errorf("token event %d has reasoning_content; vLLM now sends reasoning only", i)
		}
		_, hasContent := l.Choices[0].Delta["content"]
		seenContent = seenContent || hasContent
	}
	finish := decode[oaLine](t, events[n-3])
	if len(finish.Choices) != 1 || finish.Choices[0].FinishReason == nil || *finish.Choices[0].FinishReason != "stop" {
		t.Errorf("finish event = %s; want finish_reason stop", events[n-3])
	}
	usage := decode[oaLine](t, events[n-2])
	if !strings.Contains(events[n-2], `"choices":[]`) || usage.Usage == nil ||
		usage.Usage.CompletionTokens == 0 || usage.Usage.TotalTokens != usage.Usage.PromptTokens+usage.Usage.CompletionTokens {
		t.Errorf("usage event = %s; want choices [] and consistent usage", events[n-2])
	}
	if events[n-1] != "[DONE]" {
		t.Errorf("last event = %q; want [DONE]", events[n-1])
	}
}

// Without stream_options.include_usage there is no usage chunk; with
// reasoning_effort "none" there is no reasoning.
func TestOpenAIStreamOptions(t *testing.T) {
	p := protos[1]
	ctx := testContext(t)
	s := start(t, p.config("bravo"))
	body := `{"model":"Qwen/Qwen3-32B","stream":true,"reasoning_effort":"none","messages":[{"role":"user","content":"hi"}]}`
	resp := mustPost(ctx, t, client(t), p, s, body)
	raw, err := readAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"usage"`) || strings.Contains(string(raw), `"reasoning"`) {
		t.Errorf("stream has usage or reasoning: %s", raw)
	}
	if got := p.collect(t, p.events(t, raw)); got.content != s.Answer(p.model) || !got.finished {
		t.Errorf("stream = %+v; want the answer, finished", got)
	}
}

// Ollama's think also takes a level, and a model without thinking rejects it.
func TestOllamaThink(t *testing.T) {
	p := protos[0]
	ctx := testContext(t)
	s := start(t, p.config("alpha"))
	c := client(t)

	resp := mustPost(ctx, t, c, p, s, `{"model":"qwen3:8b","think":"high","messages":[{"role":"user","content":"hi"}]}`)
	raw, err := readAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.collect(t, p.events(t, raw)); got.thinking != s.Thinking("qwen3:8b") || got.thinking == "" {
		t.Errorf("thinking = %q; want %q", got.thinking, s.Thinking("qwen3:8b"))
	}

	resp = mustPost(ctx, t, c, p, s, `{"model":"llama3.2:3b","think":true,"messages":[]}`)
	expectStatus(t, resp, http.StatusBadRequest)
	raw, _ = readAll(resp)
	if want := `{"error":"\"llama3.2:3b\" does not support thinking"}`; string(raw) != want {
		t.Errorf("body = %s; want %s", raw, want)
	}
	if s.Thinking("llama3.2:3b") != "" {
		t.Errorf("Thinking of a plain model = %q; want empty", s.Thinking("llama3.2:3b"))
	}
}

// stream:false returns one JSON object with the whole answer.
func TestNonStream(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, p.config("alpha"))
			resp := mustPost(ctx, t, client(t), p, s, p.body(p.model, false, true))
			expectStatus(t, resp, http.StatusOK)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
			dec := json.NewDecoder(resp.Body)
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			if err := dec.Decode(&raw); err != io.EOF {
				t.Errorf("second Decode = %v; want io.EOF (one object)", err)
			}
			if p.provider == "ollama" {
				l := decode[ollamaLine](t, string(raw))
				if !l.Done || l.DoneReason != "stop" || l.Message.Content != s.Answer(p.model) ||
					l.Message.Thinking != s.Thinking(p.model) || l.EvalCount != 9 || l.LoadDuration <= 0 {
					t.Errorf("body = %s; want done with the whole answer and thinking", raw)
				}
				return
			}
			l := decode[oaLine](t, string(raw))
			if l.Object != "chat.completion" || len(l.Choices) != 1 || l.Choices[0].FinishReason == nil ||
				*l.Choices[0].FinishReason != "stop" || l.Choices[0].Message["content"] != s.Answer(p.model) ||
				l.Choices[0].Message["reasoning"] != s.Thinking(p.model) || l.Choices[0].Message["role"] != "assistant" ||
				l.Usage == nil || l.Usage.CompletionTokens != 9 {
				t.Errorf("body = %s; want a chat.completion with the whole answer", raw)
			}
		})
	}
}

// An unknown model is 404 in the protocol's dialect; a bad body is 400.
func TestRequestErrors(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, p.config("alpha"))
			c := client(t)
			resp := mustPost(ctx, t, c, p, s, p.body("nope", true, false))
			expectStatus(t, resp, http.StatusNotFound)
			raw, _ := readAll(resp)
			if p.provider == "ollama" {
				// As Ollama answers it (backend/realserver/FINDINGS.md §8).
				if want := `{"error":"model 'nope' not found"}`; string(raw) != want {
					t.Errorf("body = %s; want %s", raw, want)
				}
			} else if l := decode[oaLine](t, string(raw)); l.Error == nil || l.Error.Code != 404 || l.Error.Type != "NotFoundError" {
				t.Errorf("body = %s; want a NotFoundError with code 404", raw)
			}

			resp = mustPost(ctx, t, c, p, s, `{"model":`)
			expectStatus(t, resp, http.StatusBadRequest)
			if st := s.Stats(); st.Requests != 2 || st.Completed != 2 {
				t.Errorf("Stats() = %+v; want 2 completed requests", st)
			}
		})
	}
}

// An answer and its thinking end where a sentence ends, whatever the
// number of tokens, and have exactly the tokens the server is told to send.
func TestAnswersEndSentences(t *testing.T) {
	for n := 1; n <= 80; n++ {
		cfg, err := protos[0].config("alpha").withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tokens = n
		s := &Server{cfg: cfg} // AnswerTokens and Thinking read only the config
		model := protos[0].model
		toks := s.AnswerTokens(model)
		if len(toks) != n {
			t.Errorf("Tokens %d: %d answer tokens", n, len(toks))
		}
		if answer := s.Answer(model); !strings.HasPrefix(answer, "alpha here ("+model+"):") || !strings.HasSuffix(answer, ".") {
			t.Errorf("Tokens %d: answer %q does not name the server or end a sentence", n, answer)
		}
		if thinking := s.Thinking(model); !strings.HasSuffix(thinking, ".") || len(s.thinkingTokens(model)) != max(1, n/2) {
			t.Errorf("Tokens %d: thinking %q does not end a sentence, or has not %d tokens", n, thinking, max(1, n/2))
		}
	}
	// The default answer is the whole text, once.
	cfg, _ := Config{Name: "alpha"}.withDefaults()
	if got, want := (&Server{cfg: cfg}).Answer(DefaultModelName), "alpha here (sim-model): "+answerText; got != want {
		t.Errorf("default answer = %q; want %q", got, want)
	}
}

// A server with HeadWithFirstToken sends nothing while it waits for the
// first token, then the headers and the first token in one write, as
// Ollama does; by default the headers come at once, as llama-server's
// and vLLM's do.
func TestHeadWithFirstToken(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			// firstRead sends a streamed chat over a connection of its own
			// and returns the first read's bytes, or none when nothing came
			// within wait.
			firstRead := func(cfg Config, wait time.Duration) string {
				s := start(t, cfg)
				path := strings.TrimPrefix(s.URL(), "http://"+s.Addr()) + p.chatPath
				conn, err := net.Dial("tcp", s.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				body := p.body(p.plain, true, false)
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, s.Addr(), len(body), body)
				conn.SetReadDeadline(time.Now().Add(wait))
				buf := make([]byte, 64<<10)
				n, _ := conn.Read(buf)
				return string(buf[:n])
			}
			firstToken := "alpha here (" + p.plain + "):"

			// The first token never comes within the test.
			never := p.config("alpha")
			never.TTFT = time.Hour
			if got := firstRead(never, testTimeout); !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || strings.Contains(got, firstToken) {
				t.Errorf("headers at once: first read %q; want the headers without a token", got)
			}
			never.HeadWithFirstToken = true
			if got := firstRead(never, absence); got != "" {
				t.Errorf("HeadWithFirstToken, waiting for the first token: read %q; want nothing", got)
			}

			with := p.config("alpha")
			with.HeadWithFirstToken = true
			got := firstRead(with, testTimeout)
			head, rest, ok := strings.Cut(got, "\r\n\r\n")
			if !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || !ok || !strings.Contains(rest, firstToken) {
				t.Errorf("HeadWithFirstToken: first read %q; want the headers and the first token", got)
			}
		})
	}
}
