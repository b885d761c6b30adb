package simfleet

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Ollama's /api/generate through Ollama's own client: the answer in
// response, thinking, the infill text for a suffix, JSON for a format,
// and a done line with done_reason, context and metrics.
func TestOllamaGenerate(t *testing.T) {
	ctx := testContext(t)
	s := start(t, protos[0].config("alpha"))
	base, _ := url.Parse(s.URL())
	c := api.NewClient(base, client(t))
	for _, tt := range []struct {
		name           string
		req            api.GenerateRequest
		response, thks string
	}{
		{"plain", api.GenerateRequest{Prompt: "Why is the sky blue?"}, s.Answer("qwen3:8b"), ""},
		{"think", api.GenerateRequest{Prompt: "Why?", Think: &api.ThinkValue{Value: true}}, s.Answer("qwen3:8b"), s.Thinking("qwen3:8b")},
		{"suffix", api.GenerateRequest{Prompt: "def add(a, b):\n", Suffix: "\nprint(add(1, 2))"}, s.Infill("qwen3:8b"), ""},
		{"format", api.GenerateRequest{Prompt: "Who?", Format: []byte(personSchema)}, personJSON, ""},
	} {
		for _, stream := range []bool{true, false} {
			req := tt.req
			req.Model, req.Stream = "qwen3:8b", &stream
			var response, thinking strings.Builder
			var parts []api.GenerateResponse
			err := c.Generate(ctx, &req, func(r api.GenerateResponse) error {
				response.WriteString(r.Response)
				thinking.WriteString(r.Thinking)
				parts = append(parts, r)
				return nil
			})
			if err != nil {
				t.Fatalf("%s: Generate = %v", tt.name, err)
			}
			last := parts[len(parts)-1]
			if response.String() != tt.response || thinking.String() != tt.thks {
				t.Errorf("%s (stream %v): response %q, thinking %q; want %q, %q", tt.name, stream, response.String(), thinking.String(), tt.response, tt.thks)
			}
			if !last.Done || last.DoneReason != "stop" || len(last.Context) == 0 || last.EvalCount == 0 || last.TotalDuration <= 0 {
				t.Errorf("%s: last part = %+v; want done, stop, context, metrics", tt.name, last)
			}
			if stream && len(parts) < 3 || !stream && len(parts) != 1 {
				t.Errorf("%s (stream %v): %d parts", tt.name, stream, len(parts))
			}
		}
	}
	if !strings.HasPrefix(s.Infill("qwen3:8b"), "alpha fills in (qwen3:8b):") {
		t.Errorf("Infill = %q; want it to name the server and model", s.Infill("qwen3:8b"))
	}
}

// A request without prompt or messages only loads the model; with
// keep_alive 0 it unloads it, as Ollama answers them (FINDINGS.md §7).
func TestOllamaLoadUnload(t *testing.T) {
	ctx := testContext(t)
	cfg := protos[0].config("alpha")
	cfg.LoadTime = 20 * time.Millisecond
	cfg.TTFT = time.Hour // a load never waits for a first token
	s := start(t, cfg)
	base, _ := url.Parse(s.URL())
	c := api.NewClient(base, client(t))
	resident := func() bool {
		ps, err := c.ListRunning(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ps.Models {
			if m.Name == "llama3.2:3b" {
				return true
			}
		}
		return false
	}
	zero := &api.Duration{}
	for _, step := range []struct {
		name     string
		do       func() (string, error) // the done_reason
		want     string
		resident bool
	}{
		{"generate unload", func() (string, error) {
			var last api.GenerateResponse
			err := c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2:3b", KeepAlive: zero}, func(r api.GenerateResponse) error { last = r; return nil })
			return last.DoneReason, err
		}, "unload", false},
		{"generate load", func() (string, error) {
			var last api.GenerateResponse
			err := c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2:3b"}, func(r api.GenerateResponse) error { last = r; return nil })
			return last.DoneReason, err
		}, "load", true},
		{"chat unload", func() (string, error) {
			var last api.ChatResponse
			err := c.Chat(ctx, &api.ChatRequest{Model: "llama3.2:3b", KeepAlive: zero}, func(r api.ChatResponse) error { last = r; return nil })
			return last.DoneReason, err
		}, "unload", false},
		{"chat load", func() (string, error) {
			var last api.ChatResponse
			err := c.Chat(ctx, &api.ChatRequest{Model: "llama3.2:3b", Messages: []api.Message{}}, func(r api.ChatResponse) error { last = r; return nil })
			return last.DoneReason, err
		}, "load", true},
	} {
		reason, err := step.do()
		if err != nil || reason != step.want || resident() != step.resident {
			t.Errorf("%s: done_reason %q, %v, resident %v; want %q, resident %v", step.name, reason, err, resident(), step.want, step.resident)
		}
	}
	// The answer is one JSON object, not a stream, whatever stream says.
	resp, err := client(t).Do(httpPost(ctx, t, s.URL()+"/api/generate", `{"model":"llama3.2:3b","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") ||
		!strings.Contains(string(b), `"response":"","done":true,"done_reason":"load"`) {
		t.Errorf("load answer %s %s; want one JSON object", ct, b)
	}
}

// /v1/completions of vLLM and of Ollama's /v1 through openai-go.
func TestOpenAICompletions(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, p.config("alpha"))
			base := s.URL()
			if p.provider == fleet.ProviderOllama {
				base += "/v1"
			}
			c := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("unused"), option.WithHTTPClient(client(t)), option.WithMaxRetries(0))
			params := openai.CompletionNewParams{
				Model:  openai.CompletionNewParamsModel(p.plain),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			}
			whole, err := c.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if whole.Object != "text_completion" || whole.Choices[0].Text != s.Answer(p.plain) || whole.Choices[0].FinishReason != "stop" ||
				whole.Usage.CompletionTokens != 6 || whole.Usage.PromptTokens == 0 {
				t.Errorf("Completions.New = %+v; want the answer, stop and usage", whole)
			}
			if fp := whole.SystemFingerprint; (fp == "fp_ollama") != (p.provider == fleet.ProviderOllama) {
				t.Errorf("system_fingerprint = %q", fp)
			}

			params.Suffix = openai.String("The end.")
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := c.Completions.NewStreaming(ctx, params)
			var text strings.Builder
			var finish string
			var usage int64
			for stream.Next() {
				chunk := stream.Current()
				for _, ch := range chunk.Choices {
					text.WriteString(ch.Text)
					if ch.FinishReason != "" {
						finish = string(ch.FinishReason)
					}
				}
				usage += chunk.Usage.CompletionTokens
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if text.String() != s.Infill(p.plain) || finish != "stop" || usage != 6 {
				t.Errorf("stream: text %q, finish %q, usage %d; want %q, stop, 6", text.String(), finish, usage, s.Infill(p.plain))
			}
		})
	}
}

// Faults work on /api/generate and /v1/completions as on chat: an error
// before the first token, a crash before it, a cut stream.
func TestGenerateFaults(t *testing.T) {
	for _, p := range protos {
		path, body := "/api/generate", `{"model":"qwen3:8b","prompt":"hi"}`
		if p.provider == fleet.ProviderOpenAI {
			path, body = "/completions", `{"model":"mistral-7b","prompt":"hi","stream":true}`
		}
		for _, tt := range []struct {
			fault  string
			status int
			tokens int  // content events before the end
			clean  bool // the body ended without a read error
			marker bool // the stream's end marker came
		}{
			{"healthy", 200, 6, true, true},
			{"close_before_first", 200, 0, false, false},
			{"die_after:2", 200, 2, false, false},
			{"truncated", 200, 6, true, false},
			{"empty", 200, 0, true, true},
			{"status:503", 503, 0, true, false},
		} {
			t.Run(p.name+"/"+tt.fault, func(t *testing.T) {
				ctx := testContext(t)
				s := start(t, p.config("alpha"))
				setFault(t, s, tt.fault)
				resp, err := client(t).Do(httpPost(ctx, t, s.URL()+path, body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				expectStatus(t, resp, tt.status)
				raw, err := io.ReadAll(resp.Body)
				if (err == nil) != tt.clean {
					t.Errorf("reading the body: %v; want clean %v", err, tt.clean)
				}
				if tt.status != 200 {
					return
				}
				tokens, marker := 0, false
				for _, ev := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
					switch {
					case ev == "" || ev == "data: [DONE]":
						marker = marker || ev != ""
					case strings.Contains(ev, `"done":true`):
						marker = true
					case strings.Contains(ev, `"response":"`) && !strings.Contains(ev, `"response":""`),
						strings.Contains(ev, `"text":"`) && !strings.Contains(ev, `"text":""`):
						tokens++
					}
				}
				if tokens != tt.tokens || marker != tt.marker {
					t.Errorf("%d tokens, end marker %v; want %d, %v:\n%s", tokens, marker, tt.tokens, tt.marker, raw)
				}
			})
		}
	}
}

// A client that goes away mid-generation is counted as cancelled.
func TestGenerateCancel(t *testing.T) {
	ctx := testContext(t)
	cfg := protos[0].config("alpha")
	cfg.Tokens, cfg.TokenGap = 1000, 5*time.Millisecond
	s := start(t, cfg)
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := client(t).Do(httpPost(reqCtx, t, s.URL()+"/api/generate", `{"model":"qwen3:8b","prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitCancelled(ctx, t, s)
}
