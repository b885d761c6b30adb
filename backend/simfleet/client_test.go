package simfleet

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Ollama's own Go client speaks to the Ollama simulation.
func TestOllamaClient(t *testing.T) {
	ctx := testContext(t)
	s := start(t, protos[0].config("alpha"))
	base, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(base, client(t))

	if err := c.Heartbeat(ctx); err != nil {
		t.Errorf("Heartbeat = %v", err)
	}
	if v, err := c.Version(ctx); err != nil || v != OllamaVersion {
		t.Errorf("Version = %q, %v; want %q", v, err, OllamaVersion)
	}

	var thinking, content strings.Builder
	var last api.ChatResponse
	stream := true
	err = c.Chat(ctx, &api.ChatRequest{
		Model:    "qwen3:8b",
		Messages: []api.Message{{Role: "user", Content: "hello"}},
		Stream:   &stream,
		Think:    &api.ThinkValue{Value: true},
	}, func(r api.ChatResponse) error {
		thinking.WriteString(r.Message.Thinking)
		content.WriteString(r.Message.Content)
		last = r
		return nil
	})
	if err != nil {
		t.Fatalf("Chat = %v", err)
	}
	// v0.17.4 returns nil for a cut stream too: completion is last.Done.
	if !last.Done || last.DoneReason != "stop" || last.EvalCount != 9 || last.LoadDuration <= 0 {
		t.Errorf("last response = %+v; want done, stop, eval_count 9, load_duration", last)
	}
	if content.String() != s.Answer("qwen3:8b") || thinking.String() != s.Thinking("qwen3:8b") {
		t.Errorf("Chat content %q thinking %q; want %q and %q",
			content.String(), thinking.String(), s.Answer("qwen3:8b"), s.Thinking("qwen3:8b"))
	}

	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 2 || list.Models[0].Name != "qwen3:8b" || list.Models[0].Size != DefaultModelSize {
		t.Errorf("List = %+v, %v; want both models", list, err)
	}

	s.SetResident("llama3.2:3b", false)
	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "qwen3:8b" ||
		ps.Models[0].Size == 0 || ps.Models[0].SizeVRAM != ps.Models[0].Size {
		t.Errorf("ListRunning = %+v, %v; want qwen3:8b only, all in VRAM", ps, err)
	}

	for name, want := range map[string][]model.Capability{
		"qwen3:8b":    {model.CapabilityCompletion, model.CapabilityTools, model.CapabilityThinking},
		"llama3.2:3b": {model.CapabilityCompletion, model.CapabilityTools},
	} {
		show, err := c.Show(ctx, &api.ShowRequest{Model: name})
		if err != nil || !slices.Equal(show.Capabilities, want) {
			t.Errorf("Show(%s) capabilities = %v, %v; want %v", name, show.Capabilities, err, want)
		}
	}
	if _, err := c.Show(ctx, &api.ShowRequest{Model: "nope"}); err == nil {
		t.Error("Show(nope) = nil error; want not found")
	}

	// The error of a faulted server reaches the client as a StatusError.
	setFault(t, s, "busy")
	err = c.Chat(ctx, &api.ChatRequest{Model: "qwen3:8b"}, func(api.ChatResponse) error { return nil })
	if se, ok := err.(api.StatusError); !ok || se.StatusCode != 503 || se.ErrorMessage != ollamaBusy {
		t.Errorf("Chat on busy = %#v; want StatusError 503 %q", err, ollamaBusy)
	}
}

// openai-go streams a completion from the OpenAI simulation and finds the
// reasoning in the delta's extra fields.
func TestOpenAIClient(t *testing.T) {
	ctx := testContext(t)
	s := start(t, protos[1].config("bravo"))
	c := openai.NewClient(
		option.WithBaseURL(s.URL()),
		option.WithAPIKey("unused"),
		option.WithHTTPClient(client(t)),
		option.WithMaxRetries(0),
	)
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:           "Qwen/Qwen3-32B",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		ReasoningEffort: shared.ReasoningEffortHigh,
		StreamOptions:   openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var content, reasoning strings.Builder
	var finish string
	var usage openai.CompletionUsage
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens > 0 {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			content.WriteString(ch.Delta.Content)
			if f, ok := ch.Delta.JSON.ExtraFields["reasoning"]; ok {
				var r string
				if err := json.Unmarshal([]byte(f.Raw()), &r); err != nil {
					t.Fatalf("reasoning %s: %v", f.Raw(), err)
				}
				reasoning.WriteString(r)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream.Err() = %v", err)
	}
	stream.Close()
	if content.String() != s.Answer("Qwen/Qwen3-32B") || reasoning.String() != s.Thinking("Qwen/Qwen3-32B") || finish != "stop" {
		t.Errorf("content %q, reasoning %q, finish %q; want %q, %q, stop",
			content.String(), reasoning.String(), finish, s.Answer("Qwen/Qwen3-32B"), s.Thinking("Qwen/Qwen3-32B"))
	}
	if usage.CompletionTokens != 9 || usage.CompletionTokensDetails.ReasoningTokens != 3 {
		t.Errorf("usage = %+v; want 9 completion tokens, 3 of them reasoning", usage)
	}

	done, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "mistral-7b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if err != nil || len(done.Choices) != 1 || done.Choices[0].Message.Content != s.Answer("mistral-7b") {
		t.Errorf("New = %+v, %v; want the answer of mistral-7b", done, err)
	}

	models, err := c.Models.List(ctx)
	if err != nil || len(models.Data) != 2 || models.Data[0].ID != "Qwen/Qwen3-32B" {
		t.Errorf("Models.List = %+v, %v; want both models", models, err)
	}

	setFault(t, s, "status:502")
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "mistral-7b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Message != "simulated HTTP 502 (server bravo)" {
		t.Errorf("New on status:502 = %v; want an *openai.Error 502 with the message", err)
	}
}
