package httpapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
)

// quickChatSeeds are chat requests as clients send them, and the shapes at
// the edge of what the quick path takes.
var quickChatSeeds = []struct {
	body  string
	quick bool // the quick path takes it
}{
	{`{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
	{`{"model":"auto","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"line\nbreak \"q\" \u00e9 \ud83d\ude00"}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"top_p":1,"max_tokens":256,"seed":42}`, true},
	{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"a"}},{"function":null,"index":1}]}],"tools":[{"function":{"name":"a"}},{"function":{"name":"b"}}]}`, true},
	{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stop":["\n","END"],"response_format":{"type":"json_object"},"tool_choice":"auto","logit_bias":{"50256":-100}}`, true},
	{`{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"call_1","name":"get","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get","description":"the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`, true},
	{`{"model":"m","messages":[],"reasoning_effort":"low","reasoning":{"effort":"high"},"chat_template_kwargs":{"enable_thinking":false},"n":1,"logprobs":true,"top_logprobs":3,"presence_penalty":-0.5,"frequency_penalty":0.5,"top_k":40,"min_p":0.05,"repeat_penalty":1.1,"repetition_penalty":1.1,"max_completion_tokens":9}`, true},
	{`{"model":"m","messages":null,"tools":null,"stream_options":null,"temperature":null,"max_tokens":null,"logprobs":null,"stop":null,"chat_template_kwargs":{"enable_thinking":null}}`, true},
	{`{"model":"a","model":"b","stream":true,"stream":null,"temperature":1,"temperature":2,"user":"u","metadata":{"k":[1,{"x":null}]}}`, true},
	{`  {"model":"a","messages":[{"role":"user","content":"hi","extra":1}]}  `, true},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e2,"top_p":-0,"seed":-3}`, true},
	{`{"ﬁnish":"stop","model":"m"}`, true},
	{`{"model":"m","messages":[{"role":"critic","content":"x"},{"role":null},{"role":"tool","role":"user"}]}`, true},
	{`{"model":"m","messages":[{"role":"us\u0065r","content":"x"}]}`, false},

	{`{"Model":"a","messages":[]}`, false},
	{`{"model":"a","messages":[{"Role":"user","content":"x"}]}`, false},
	{`{"model":"a","messages":[{"role":"user","content":"x"}],"messages":[{"role":"user"}]}`, false},
	{`{"model":"a","messages":[{"role":"assistant","tool_calls":[],"tool_calls":[{"id":"x"}]}]}`, false},
	{`{"model":"a","tools":[{"function":{"name":"f"},"function":{"description":"d"}}]}`, false},
	{`{"model":"a","stream_options":{"include_usage":true},"stream_options":{}}`, false},
	{`{"model":"a","messages":[null]}`, false},
	{`{"model":"a","messages":["hi"]}`, false},
	{`{"model":5}`, false},
	{`{"model":"a","stream":"yes"}`, false},
	{`{"model":"a","max_tokens":1.5}`, false},
	{`{"model":"a","max_tokens":99999999999999999999}`, false},
	{`{"model":"a","temperature":1e999}`, false},
	{`{"model":"a","temperature":"0.7"}`, false},
	{`{"model":"a","reasoning":"high"}`, false},
	{"{\"model\":\"bad \xff\"}", false},
	{`{"mod\u0065l":"a"}`, false},
	{`{"model":"a"`, false},
	{`{"model":"a"} {"model":"b"}`, false},
	{`[]`, false},
	{`null`, false},
	{``, false},
	{"{\"max_to\u212aens\":5}", false}, // a Kelvin sign, which folds to k
}

// The quick path reads what it accepts exactly as json.Unmarshal does, the
// request and its top-level fields, and leaves the rest to it, whose
// errors are then the only ones.
func FuzzQuickChat(f *testing.F) {
	for _, s := range quickChatSeeds {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		holdQuick(t, body, chatRequest{Model: "prior"}, (*chatRequest).decodeQuick, func(q chatRequest) chatRequest { return q })
	})
}

// holdQuick checks a fast path's decodeQuick on body against
// json.Unmarshal: it refuses body and leaves the request (prior) as it
// was, or reads the request as json.Unmarshal reads it into a W (as
// converts one to the other) and the fields as json.Unmarshal reads them
// into a map.
func holdQuick[R, W any](t *testing.T, body []byte, prior R, decode func(*R, []byte) (map[string]json.RawMessage, bool), as func(R) W) {
	t.Helper()
	got := prior
	fields, ok := decode(&got, body)
	if !ok {
		if !reflect.DeepEqual(got, prior) || fields != nil {
			t.Fatalf("decodeQuick(%q) refused it but changed the request to %+v, the fields to %v", body, got, fields)
		}
		return
	}
	var want W
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("quick took %q, which json.Unmarshal refuses: %v", body, err)
	}
	if !reflect.DeepEqual(as(got), want) {
		t.Fatalf("decodeQuick(%q) = %#v; want %#v", body, as(got), want)
	}
	var wantFields map[string]json.RawMessage
	if err := json.Unmarshal(body, &wantFields); err != nil {
		t.Fatalf("quick took %q, which json.Unmarshal refuses as an object: %v", body, err)
	}
	if !maps.EqualFunc(fields, wantFields, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		t.Fatalf("decodeQuick(%q) fields = %q; want %q", body, fields, wantFields)
	}
}

// The quick path takes the common requests (else it saves nothing) and
// leaves what it cannot be sure of.
func TestQuickChatTakes(t *testing.T) {
	for _, s := range quickChatSeeds {
		var q chatRequest
		if _, ok := q.decodeQuick([]byte(s.body)); ok != s.quick {
			t.Errorf("decodeQuick(%s) = %v; want %v", s.body, ok, s.quick)
		}
	}
}

// BenchmarkChatDecode is the typed decode of a usual chat request, the
// quick path beside encoding/json.
func BenchmarkChatDecode(b *testing.B) {
	body := []byte(`{"model":"auto","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"max_tokens":256}`)
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q chatRequest
			if _, ok := q.decodeQuick(body); !ok {
				b.Fatal("not quick")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q chatRequest
			if err := json.Unmarshal(body, &q); err != nil {
				b.Fatal(err)
			}
		}
	})
}
