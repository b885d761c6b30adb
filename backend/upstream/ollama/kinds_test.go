package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Lines as Ollama writes them for /api/generate with stream true.
const (
	genThink = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.050Z","response":"","thinking":"Hmm","done":false}`
	genHi    = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.100Z","response":"Hi","done":false}`
	genDone  = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.180Z","response":"","done":true,"done_reason":"stop","context":[1,2,3],"total_duration":900,"load_duration":100,"prompt_eval_count":5,"prompt_eval_duration":200,"eval_count":2,"eval_duration":300}`
	chatLogp = `{"model":"qwen3:8b","created_at":"2026-08-01T10:00:00.100Z","message":{"role":"assistant","content":"Hi"},"done":false,"logprobs":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.1}]}]}`
)

func TestGenerateStream(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, ndjson(genThink, genHi, genDone))
	req := &fleet.Request{Kind: fleet.KindGenerate, Prompt: "hello", Stream: true}
	s, err := b.Open(t.Context(), candidate(srv.URL), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := drain(t, s, 5)
	if err != io.EOF {
		t.Fatalf("end = %v; want io.EOF", err)
	}
	want := []fleet.Chunk{
		{Model: "qwen3:8b", Reasoning: "Hmm"},
		{Model: "qwen3:8b", Content: "Hi"},
		{Model: "qwen3:8b", FinishReason: "stop", Usage: &fleet.Usage{PromptTokens: 5, CompletionTokens: 2, LoadDuration: 100}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %+v\nwant %+v", got, want)
	}
}

// Raw is each line as Ollama sent it, so a caller of the same API gets
// every field (context, durations, logprobs) untouched.
func TestRawLines(t *testing.T) {
	b, _ := newBackend(t)
	lines := []string{chatLogp, lineDone}
	srv := serve(t, ndjson(lines...))
	s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, line := range lines {
		c, err := s.Recv()
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if string(c.Raw) != line {
			t.Errorf("Raw %d = %s; want %s", i, c.Raw, line)
		}
		if i == 0 && !jsonEqual(t, c.Logprobs, []byte(`[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.1}]}]`)) {
			t.Errorf("Logprobs = %s", c.Logprobs)
		}
	}
}

func TestEmbedStream(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		raw     *fleet.Raw
		want    [][]float32
		usage   *fleet.Usage
		wantErr func(error) bool
	}{
		{
			name:  "embed, two inputs",
			body:  `{"model":"embed","embeddings":[[0.5,-0.25],[1,0]],"total_duration":42,"load_duration":11,"prompt_eval_count":4}`,
			want:  [][]float32{{0.5, -0.25}, {1, 0}},
			usage: &fleet.Usage{PromptTokens: 4, LoadDuration: 11},
		},
		{
			name: "legacy embeddings",
			body: `{"embedding":[0.75,0.125]}`,
			raw:  &fleet.Raw{Dialect: fleet.ProviderOllama, Endpoint: "/api/embeddings", Fields: map[string]json.RawMessage{"prompt": json.RawMessage(`"x"`)}},
			want: [][]float32{{0.75, 0.125}},
		},
		{
			name:    "an answer without vectors",
			body:    `{"model":"embed","embeddings":[]}`,
			wantErr: isMalformed,
		},
		{
			name:    "not JSON",
			body:    `<html>`,
			wantErr: isMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, answer(200, "application/json; charset=utf-8", tt.body))
			req := &fleet.Request{Kind: fleet.KindEmbed, Input: []string{"x"}, Raw: tt.raw}
			s, err := b.Open(t.Context(), candidate(srv.URL), req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c, err := s.Recv()
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Recv() error = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Embeddings, tt.want) || c.FinishReason != "stop" || !c.IsFirstToken() {
				t.Errorf("chunk = %+v; want vectors %v", c, tt.want)
			}
			if tt.usage != nil && !reflect.DeepEqual(c.Usage, tt.usage) {
				t.Errorf("usage = %+v; want %+v", c.Usage, tt.usage)
			}
			if string(c.Raw) != tt.body {
				t.Errorf("Raw = %s; want the body", c.Raw)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Errorf("second Recv = %v; want io.EOF", err)
			}
		})
	}
}

func TestEmbedUnsupported(t *testing.T) {
	// Ollama with a chat model (FINDINGS.md, section 9).
	b, _ := newBackend(t)
	srv := serve(t, answer(501, "application/json", `{"error":"This server does not support embeddings. Start it with `+"`--embeddings`"+`"}`))
	_, err := b.Open(t.Context(), candidate(srv.URL), &fleet.Request{Kind: fleet.KindEmbed, Input: []string{"x"}})
	var se *fleet.StatusError
	if !errors.As(err, &se) || se.Unsupported != "embedding" {
		t.Fatalf("Open() error = %#v; want a StatusError with Unsupported embedding", err)
	}
}

func TestCheck(t *testing.T) {
	n := func(v int) *int { return &v }
	var b Backend
	c := candidate("http://127.0.0.1:1")
	tests := []struct {
		name string
		req  fleet.Request
		ok   bool
	}{
		{"plain", fleet.Request{}, true},
		{"n 1", fleet.Request{Options: fleet.Options{N: n(1)}}, true},
		{"n 2", fleet.Request{Options: fleet.Options{N: n(2)}}, false},
		{"tool_choice auto", fleet.Request{ToolChoice: json.RawMessage(`"auto"`)}, true},
		{"tool_choice none", fleet.Request{ToolChoice: json.RawMessage(`"none"`)}, true},
		{"tool_choice required", fleet.Request{ToolChoice: json.RawMessage(`"required"`)}, false},
		{"tool_choice named", fleet.Request{ToolChoice: json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}, false},
		{"an Ollama caller is never refused", fleet.Request{Options: fleet.Options{N: n(2)}, Raw: &fleet.Raw{Dialect: fleet.ProviderOllama}}, true},
	}
	for _, tt := range tests {
		err := b.Check(c, &tt.req)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Check() = %v; want ok %v", tt.name, err, tt.ok)
		}
	}
}

// After Passthrough, a text line is handed over as Raw without being
// decoded; the done line and errors are read as before.
func TestPassthrough(t *testing.T) {
	weird := `{"model":"qwen3:8b","message":{"role":"assistant","content":"\"done\":true \"error\""},"done":false}`
	for _, tt := range []struct {
		name    string
		lines   []string
		want    []fleet.Chunk
		wantErr func(error) bool
	}{
		{"text, then done", []string{lineHi, weird, lineDone}, []fleet.Chunk{{}, {}, final("stop", usageDone)}, is(io.EOF)},
		{"an error line", []string{lineHi, lineErr}, []fleet.Chunk{{}}, isEventError(runnerStopped)},
		{"a broken line", []string{lineHi, `{"model":"x","done":false`}, []fleet.Chunk{{}}, isMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, ndjson(tt.lines...))
			s, err := b.Open(t.Context(), candidate(srv.URL), userRequest())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.(fleet.Passthrougher).Passthrough()
			got, err := drain(t, s, 5)
			if !reflect.DeepEqual(got, tt.want) || !tt.wantErr(err) {
				t.Errorf("chunks = %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// BenchmarkRecvPassthrough is one text line after commit for a caller of
// Ollama's API: no allocation.
func BenchmarkRecvPassthrough(b *testing.B) {
	line := []byte(lineHi + "\n")
	s := newStream(context.Background(), io.NopCloser(&loop{b: line}), maxLine)
	s.Passthrough()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

// loop repeats b forever.
type loop struct {
	b   []byte
	off int
}

func (l *loop) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.b[l.off:])
		n += c
		l.off = (l.off + c) % len(l.b)
	}
	return n, nil
}
