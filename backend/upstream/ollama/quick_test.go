package ollama

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

// quickSeeds are lines as Ollama writes them, and the shapes at the edge
// of what the quick path takes.
var quickSeeds = []struct {
	line  string
	quick bool // the quick path takes it
}{
	{`{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.123Z","message":{"role":"assistant","content":"Hi"},"done":false}`, true},
	{`{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00Z","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}`, true},
	{`{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":123456789,"load_duration":1234567,"prompt_eval_count":12,"prompt_eval_duration":2345678,"eval_count":8,"eval_duration":3456789}`, true},
	{`{"model":"tiny","created_at":"2026-11-30T20:00:00Z","response":" tok","done":false}`, true},
	{`{"model":"tiny","created_at":"2026-11-30T20:00:00Z","response":"","thinking":"t","done":false}`, true},
	{`{"model":"m","message":{"role":"ASSISTANT","content":"a\nb \"c\" \u00e9"},"done":false}`, true},
	{`{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},"done":false}`, false},
	{`{"model":"m","message":{"role":"assistant","images":["aGk="]},"done":false}`, false},
	{`{"model":"m","message":null,"done":null}`, true},
	{`{"error":"model runner has unexpectedly stopped"}`, false},
	{`{"error":null,"response":"x"}`, true},
	{`{"Model":"m","response":"x"}`, false},
	{`{"model":"m","message":{"Content":"x"}}`, false},
	{`{"eval_count":1.5}`, false},
	{`{"eval_duration":99999999999999999999}`, false},
	{`{"done":"yes"}`, false},
	{`{"model":5}`, false},
	{`{"response":"x"} {"response":"y"}`, false},
	{`{"response":"x"`, false},
	{`{"logprobs":[{"token":"x","logprob":-1}]}`, false},
	{`{"done_reason":"load","done":true}`, true},
	{`{"created_at":"not a time","response":"x"}`, true},
	{"{\"response\":\"bad \xff\"}", false},
	{`{"response":"a","response":"b"}`, true},
	// A name sent again as null leaves the first value, as json.Unmarshal does.
	{`{"model":"a","model":null,"response":"r","response":null,"done":true,"done":null,"eval_count":3,"eval_count":null,"message":{"content":"c","content":null}}`, true},
}

// The quick path reads what it accepts exactly as json.Unmarshal does, and
// leaves the rest to it.
func FuzzQuickLine(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s.line))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q quickLine
		var got wireLine
		if !q.read(b, &got) {
			return
		}
		var want wireLine
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("quick took %q, which json.Unmarshal refuses: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quick(%q) = %+v; want %+v", b, got, want)
		}
	})
}

// The quick path takes the common lines (else it saves nothing) and leaves
// what it cannot be sure of.
func TestQuickLineTakes(t *testing.T) {
	var q quickLine
	for _, s := range quickSeeds {
		var l wireLine
		if ok := q.read([]byte(s.line), &l); ok != s.quick {
			t.Errorf("quick took %s: %v; want %v", s.line, ok, s.quick)
		}
	}
}

// The quick path knows the names of every field json.Unmarshal reads into
// a line and its message: a field a newer ollama/api adds must be known
// here too, or the two would disagree about a line that has it.
func TestQuickNamesAreTheLinesFields(t *testing.T) {
	for _, c := range []struct {
		names []string
		of    any
	}{
		{lineNames, wireLine{}},
		{messageNames, api.Message{}},
	} {
		var fields []string
		var walk func(reflect.Type)
		walk = func(typ reflect.Type) {
			for f := range typ.Fields() {
				if f.Anonymous {
					walk(f.Type)
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				fields = append(fields, name)
			}
		}
		walk(reflect.TypeOf(c.of))
		slices.Sort(fields)
		names := slices.Sorted(slices.Values(c.names))
		if !slices.Equal(names, fields) {
			t.Errorf("quick path's names for %T = %q; want %q", c.of, names, fields)
		}
	}
}
