package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// refuser answers like llama-server to a request with tools and logprobs:
// 400 to the streamed form, one chat.completion to the other. It keeps
// the bodies it got, each with the Accept header it came with under the
// key "(accept)".
func refuser(t *testing.T, refusal string) (*httptest.Server, func() []map[string]json.RawMessage) {
	var mu sync.Mutex
	var got []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&m)
		if m != nil {
			accept, _ := json.Marshal(r.Header.Get("Accept"))
			m["(accept)"] = accept
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		if string(m["stream"]) == "true" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":400,"message":"`+refusal+`","type":"invalid_request_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":"ok","reasoning_content":"hm","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			"logprobs":{"content":[{"token":"ok","logprob":-1}]}}],"usage":{"prompt_tokens":3,"completion_tokens":1},"timings":{}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []map[string]json.RawMessage { mu.Lock(); defer mu.Unlock(); return got }
}

// A server that refuses only the streamed form of a request whose caller
// wants one answer is asked once more for one answer, which comes back as
// one chunk of a complete answer.
func TestRefusedStreamIsAskedWhole(t *testing.T) {
	raw := &fleet.Raw{Dialect: fleet.ProviderOpenAI, Fields: map[string]json.RawMessage{
		"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`), "logprobs": json.RawMessage(`true`),
		"tools": json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`), "stream_options": json.RawMessage(`{"include_usage":false}`),
	}}
	for _, tt := range []struct {
		name string
		req  *fleet.Request
	}{
		{"typed", &fleet.Request{ID: "r", Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Options: fleet.Options{Logprobs: true}}},
		{"raw", &fleet.Request{ID: "r", Raw: raw}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, bodies := refuser(t, "logprobs is not supported with tools + stream")
			s, err := newBackend(t).Open(t.Context(), candidate(srv), tt.req)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			ch, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			want := fleet.Chunk{Role: "assistant", Content: "ok", Reasoning: "hm", Model: "m", FinishReason: "tool_calls",
				ToolCalls: []fleet.ToolCall{{ID: "c1", Type: "function", Name: "f", Arguments: "{}"}},
				Usage:     &fleet.Usage{PromptTokens: 3, CompletionTokens: 1}, Logprobs: json.RawMessage(`[{"token":"ok","logprob":-1}]`), Whole: true}
			if !strings.Contains(string(ch.Raw), `"timings"`) {
				t.Errorf("Raw = %s; want the server's body", ch.Raw)
			}
			ch.Raw = nil
			if !equalChunk(ch, want) {
				t.Errorf("chunk = %+v\nwant    %+v", ch, want)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Errorf("second Recv() = %v; want io.EOF", err)
			}
			got := bodies()
			if len(got) != 2 {
				t.Fatalf("server got %d requests; want 2", len(got))
			}
			if string(got[1]["stream"]) != "false" || got[1]["stream_options"] != nil {
				t.Errorf("second request: stream %s, stream_options %s; want false and none", got[1]["stream"], got[1]["stream_options"])
			}
			if a0, a1 := string(got[0]["(accept)"]), string(got[1]["(accept)"]); a0 != `"text/event-stream"` || a1 != `"application/json"` {
				t.Errorf("Accept %s, then %s; want the stream asked for, then JSON", a0, a1)
			}
			if string(got[1]["model"]) != `"m"` {
				t.Errorf("second request: model %s", got[1]["model"])
			}
		})
	}
}

// Only a caller that wants one answer is asked again, and only for a 400
// that names the stream.
func TestRefusalIsFinalOtherwise(t *testing.T) {
	for _, tt := range []struct {
		name    string
		stream  bool
		refusal string
	}{
		{"caller streams", true, "logprobs is not supported with tools + stream"},
		{"other 400", false, "invalid tools"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, bodies := refuser(t, tt.refusal)
			req := hello()
			req.Stream = tt.stream
			_, err := newBackend(t).Open(t.Context(), candidate(srv), req)
			if se, ok := errors.AsType[*fleet.StatusError](err); !ok || se.StatusCode != 400 {
				t.Fatalf("Open() error = %v; want the 400", err)
			}
			if n := len(bodies()); n != 1 {
				t.Errorf("server got %d requests; want 1", n)
			}
		})
	}
}

func equalChunk(a, b fleet.Chunk) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
