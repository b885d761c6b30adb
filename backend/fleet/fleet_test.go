package fleet

import (
	"errors"
	"fmt"
	"testing"
)

func TestModelOutputErrors(t *testing.T) {
	for _, err := range []error{
		&StatusError{StatusCode: 500, Output: true},
		&EventError{Message: "does not match the expected format", Output: true},
		fmt.Errorf("ollama answer ended: %w (%w)", ErrTruncated, ErrModelOutput),
	} {
		if !errors.Is(err, ErrModelOutput) {
			t.Errorf("errors.Is(%v, ErrModelOutput) = false", err)
		}
	}
	for _, err := range []error{&StatusError{StatusCode: 500}, &EventError{Message: "boom"}, ErrTruncated} {
		if errors.Is(err, ErrModelOutput) {
			t.Errorf("errors.Is(%v, ErrModelOutput) = true", err)
		}
	}
}

func TestSameModel(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"qwen3", "qwen3:latest", true},
		{"Qwen3:8B", "qwen3:8b", true},
		{"qwen3:8b", "qwen3:latest", false},
		{"registry.local:5000/me/qwen3", "registry.local:5000/me/qwen3:latest", true},
		{"hf.co/org/model:Q4_K_M", "hf.co/org/model:q4_k_m", true},
		{"llama3", "llama3.1", false},
	} {
		if got := SameModel(tt.a, tt.b); got != tt.want {
			t.Errorf("SameModel(%q, %q) = %v; want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestMergeToolCall(t *testing.T) {
	var calls []ToolCall
	for _, d := range []ToolCall{
		{Index: 0, ID: "call_1", Type: "function", Name: "get_"},
		{Index: 0, Name: "weather", Arguments: `{"city":`},
		{Index: 1, ID: "call_2", Name: "time", Arguments: `{}`},
		{Index: 0, Arguments: `"Paris"}`},
	} {
		calls = MergeToolCall(calls, d)
	}
	want := []ToolCall{
		{Index: 0, ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{Index: 1, ID: "call_2", Name: "time", Arguments: `{}`},
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("MergeToolCall() = %+v; want %+v", calls, want)
	}
}

func TestIsFirstToken(t *testing.T) {
	for _, tt := range []struct {
		c    Chunk
		want bool
	}{
		{Chunk{Role: "assistant"}, false},
		{Chunk{FinishReason: "stop"}, false},
		{Chunk{Usage: &Usage{PromptTokens: 3}}, false},
		{Chunk{Content: "hi"}, true},
		{Chunk{Reasoning: "hm"}, true},
		{Chunk{ToolCalls: []ToolCall{{Name: "f"}}}, true},
	} {
		if got := tt.c.IsFirstToken(); got != tt.want {
			t.Errorf("%+v.IsFirstToken() = %v; want %v", tt.c, got, tt.want)
		}
	}
}

func TestSameServer(t *testing.T) {
	c := func(url, key string) Candidate { return Candidate{URL: url, ServerKey: key} }
	for _, tt := range []struct {
		a, b Candidate
		want bool
	}{
		{c("http://127.0.0.1:11434", ""), c("http://127.0.0.1:11434", ""), true},
		{c("http://127.0.0.1:8080/v1", ""), c("http://127.0.0.1:8080", ""), true},
		{c("http://LOCALHOST:8080/v1", ""), c("http://localhost:8080/v1", ""), true},
		{c("http://127.0.0.1:8080/v1", ""), c("http://127.0.0.1:8081/v1", ""), false},
		// Every name of this machine is one host (v4 re-check).
		{c("http://localhost:9672/v1", ""), c("http://127.0.0.1:9672/v1", ""), true},
		{c("http://[::1]:9672", ""), c("http://127.0.0.1:9672/v1", ""), true},
		{c("http://localhost/v1", ""), c("http://127.0.0.1:80", ""), true},
		{c("http://localhost:9672/v1", ""), c("http://127.0.0.1:9673/v1", ""), false},
		{c("http://127.0.0.1:1", "box"), c("http://127.0.0.2:1", "box"), true},
		{c("", ""), c("", ""), false},
		{c("http://127.0.0.1:1", "x"), c("http://127.0.0.2:1", "y"), false},
	} {
		if got := SameServer(tt.a, tt.b); got != tt.want {
			t.Errorf("SameServer(%+v, %+v) = %v; want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
