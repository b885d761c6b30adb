package openai

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
)

// quickSeeds are events as servers send them, and the shapes at the edge
// of what the quick path takes.
var quickSeeds = []struct {
	event string
	quick bool // the quick path takes it
}{
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`, true},
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"tiny","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":" Hello"},"logprobs":null,"finish_reason":null}]}`, true},
	{`{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1764543600,"id":"chatcmpl-abc","model":"tiny","system_fingerprint":"b1-80fb11a","object":"chat.completion.chunk","timings":{"prompt_n":29,"predicted_n":1,"predicted_ms":3.5}}`, true},
	{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":8,"total_tokens":11}}`, true},
	{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":null,"usage":{"prompt_tokens":3,"completion_tokens":8}}`, true},
	{`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}`, true},
	{`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"reasoning":"think","content":null},"finish_reason":null}]}`, true},
	{`{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":" tok","finish_reason":null}]}`, true},
	{`{"choices":[{"delta":{"content":"line\nbreak \"quoted\" \u00e9 \ud83d\ude00"}}]}`, true},
	{`{"choices":[{"delta":{"Content":"case"}}]}`, false},
	{`{"choices":[{"delta":{"content":"a","content":"b"}}]}`, true},
	// A name sent again as null leaves the first value, as encoding/json does.
	{`{"choices":[{"delta":{"content":"a","content":null},"finish_reason":"stop","finish_reason":null}],"usage":{"prompt_tokens":3,"prompt_tokens":null}}`, true},
	{`{"choices":[{"delta":{"content":"x"}},{"delta":{"content":"y"}}]}`, false},
	{`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`, false},
	{`{"choices":[{"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.1}]}}]}`, false},
	{`{"choices":[{"delta":{},"finish_reason":"error"}]}`, false},
	{`{"error":{"message":"boom","code":500}}`, false},
	{`{"error":null,"choices":[{"delta":{"content":"x"}}]}`, true},
	{`{"object":"error","message":"bad","code":400}`, false},
	{`{"message":5,"choices":[]}`, false},
	{`{"usage":{"prompt_tokens":1.5}}`, false},
	{`{"usage":{"prompt_tokens":99999999999999999999}}`, false},
	{`{"usage":null,"choices":[{"delta":{"content":"x"}}]}`, true},
	{`{"model":null,"choices":[{"delta":{"content":5}}]}`, false},
	{`{"model":7}`, true},
	{`{"choices":[{"delta":{"content":"x"}}]} {"more":1}`, false},
	{`  {"choices":[{"delta":{"content":"x"}}]}  `, true},
	{"{\"choices\":[{\"delta\":{\"content\":\"bad \xff utf8\"}}]}", false},
	{`{"choices":[{"delta":{"content":"x"}}]`, false},
	{`[]`, false},
	{`"text"`, false},
	{``, false},
	{`{"ﬁnish_reason":"stop"}`, true},
	{`{"choices":[{"FINISH_REASON":"stop","delta":{"content":"x"}}]}`, false},
	{`{"deep":[[[[{"a":[1,2,{"b":null}]}]]]],"choices":[{"delta":{"content":"x"}}]}`, true},
	{"{\"usage\":{\"prompt_to\u212aens\":5}}", false}, // a Kelvin sign, which folds to k
}

// The quick path decodes what it accepts exactly as encoding/json does,
// and leaves the rest to it.
func FuzzQuickChunk(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s.event))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q := newStream(context.Background(), func() {}, io.NopCloser(strings.NewReader("")), maxLine)
		got, ok := q.quick.chunk(data, q.modelName)
		if !ok {
			return
		}
		full := newStream(context.Background(), func() {}, io.NopCloser(strings.NewReader("")), maxLine)
		want, err := full.full(data)
		if err != nil {
			t.Fatalf("quick took %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quick(%q) = %+v; want %+v", data, got, want)
		}
		if gotFin, wantFin := q.finished || got.FinishReason != "", full.finished; gotFin != wantFin {
			t.Fatalf("finished %v; want %v", gotFin, wantFin)
		}
	})
}

// The quick path takes the common chunks (else it saves nothing) and
// leaves what it cannot be sure of.
func TestQuickChunkTakes(t *testing.T) {
	q := newStream(context.Background(), func() {}, io.NopCloser(strings.NewReader("")), maxLine)
	for _, s := range quickSeeds {
		if _, ok := q.quick.chunk([]byte(s.event), q.modelName); ok != s.quick {
			t.Errorf("quick took %s: %v; want %v", s.event, ok, s.quick)
		}
	}
}
