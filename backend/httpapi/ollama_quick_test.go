package httpapi

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ollama/ollama/api"
)

// quickOllamaSeeds are Ollama chat requests as clients send them, and the
// shapes at the edge of what the quick path takes.
var quickOllamaSeeds = []struct {
	body  string
	quick bool // the quick path takes it
}{
	{`{"model":"a","messages":[{"role":"user","content":"hi"}]}`, true},
	{`{"model":"llama3","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"line\nbreak \"q\" \u00e9 \ud83d\ude00"}],"stream":false,"options":{"temperature":0.7,"num_predict":256,"seed":42,"stop":["\n","END"],"mirostat":false,"x":null,"s":"v"}}`, true},
	{`{"model":"m","messages":[{"role":"assistant","content":"","thinking":"hmm"},{"role":"tool","content":"sunny","tool_name":"get","tool_call_id":"c1"}],"think":"high","format":"json"}`, true},
	{`{"model":"m","messages":[{"role":"User","content":"x"},{"role":"ASSISTANT"},{"role":"critic"},{"role":null},{"role":"tool","role":"User"}]}`, true},
	{`{"model":"m","messages":[{"role":"us\u0065r","content":"x"}]}`, false},
	{`{"model":"m","messages":[],"think":true,"truncate":false,"shift":true,"_debug_render_only":false,"logprobs":true,"top_logprobs":3}`, true},
	{`{"model":"m","messages":null,"stream":null,"options":null,"think":null,"format":null,"top_logprobs":null,"logprobs":null}`, true},
	{`{"model":"a","model":"b","stream":true,"stream":false,"top_logprobs":1,"top_logprobs":2,"user":"u","metadata":{"k":[1,{"x":null}]}}`, true},
	{`{"model":"m","format":{"type":"object","properties":{"a":{"type":"string"}}},"options":{"stop":[],"a":1e2,"b":-0,"c":1.5,"a":2}}`, true},
	{`  {"model":"a","messages":[{"role":"user","content":"hi","extra":1}]}  `, true},

	{`{"model":"a","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, false},
	{`{"model":"a","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}]}]}`, false},
	{`{"model":"a","tools":[{"type":"function","function":{"name":"f"}}]}`, false},
	{`{"model":"a","keep_alive":"5m"}`, false},
	{`{"model":"a","keep_alive":0,"messages":[]}`, false},
	{`{"model":"a","think":"max"}`, false},
	{`{"model":"a","think":1}`, false},
	{`{"model":"a","think":true,"think":false}`, false},
	{`{"model":"a","options":{"a":1},"options":{"b":2}}`, false},
	{`{"model":"a","options":{"a":{"b":1}}}`, false},
	{`{"model":"a","options":{"a":[[1]]}}`, false},
	{`{"model":"a","options":{"a":1e999}}`, false},
	{`{"model":"a","options":[]}`, false},
	{`{"model":"a","messages":[{"role":"user"}],"messages":[]}`, false},
	{`{"Model":"a","messages":[]}`, false},
	{`{"model":"a","messages":[{"Content":"x"}]}`, false},
	{`{"model":"a","messages":[null]}`, false},
	{`{"model":"a","stream":"yes"}`, false},
	{`{"model":"a","top_logprobs":1.5}`, false},
	{"{\"model\":\"bad \xff\"}", false},
	{`{"model":"a"`, false},
	{`{"model":"a"} {"model":"b"}`, false},
	{`[]`, false},
	{``, false},
}

// The Ollama quick path reads what it accepts exactly as json.Unmarshal
// reads an api.ChatRequest, the request and its top-level fields, and
// leaves the rest to it.
func FuzzQuickOllamaChat(f *testing.F) {
	for _, s := range quickOllamaSeeds {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		holdQuick(t, body, ollamaChatRequest{Model: "prior"}, (*ollamaChatRequest).decodeQuick,
			func(q ollamaChatRequest) api.ChatRequest { return api.ChatRequest(q) })
	})
}

// The Ollama quick path takes the usual requests and leaves what it
// cannot be sure of.
func TestQuickOllamaChatTakes(t *testing.T) {
	for _, s := range quickOllamaSeeds {
		var q ollamaChatRequest
		if _, ok := q.decodeQuick([]byte(s.body)); ok != s.quick {
			t.Errorf("decodeQuick(%s) = %v; want %v", s.body, ok, s.quick)
		}
	}
}

// Each Ollama option lands in its own setting, and a bad one is named.
func TestOllamaOptions(t *testing.T) {
	o, err := ollamaOptions(map[string]any{
		"temperature": 0.1, "top_p": 0.2, "min_p": 0.3, "repeat_penalty": 1.4, "presence_penalty": 0.5, "frequency_penalty": 0.6,
		"num_predict": 7.0, "seed": 8.0, "top_k": 9.0, "num_ctx": 10.0, "stop": []any{"a", "b"}, "mirostat": 1.0,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	n := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	got := []any{f(o.Temperature), f(o.TopP), f(o.MinP), f(o.RepeatPenalty), f(o.PresencePenalty), f(o.FrequencyPenalty),
		n(o.MaxTokens), n(o.Seed), n(o.TopK), n(o.NumCtx), o.Stop}
	want := []any{0.1, 0.2, 0.3, 1.4, 0.5, 0.6, 7, 8, 9, 10, []string{"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ollamaOptions() = %v; want %v", got, want)
	}
	for key, want := range map[string]string{
		"temperature": "options.temperature: expected a number", "frequency_penalty": "options.frequency_penalty: expected a number",
		"num_ctx": "options.num_ctx: expected a number", "stop": "options.stop: expected an array of strings",
	} {
		if _, err := ollamaOptions(map[string]any{key: "x"}); fmt.Sprint(err) != want {
			t.Errorf("ollamaOptions(%s: \"x\") = %v; want %s", key, err, want)
		}
	}
}
