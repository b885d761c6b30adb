package upstream

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// rawFields is a caller's chat body of about 4 KiB as the API edge
// decodes it, field by field.
func rawFields(t testing.TB) map[string]json.RawMessage {
	body := `{"model":"auto","stream":false,"temperature":0.2,"x_<odd>\u00e9":1,"messages":[` +
		strings.Repeat(`{"role":"user","content":"a line of a long conversation, with \"quotes\" and \u00e9 and <tags>"},`, 40) +
		`{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// MergeRaw keeps every field of the caller, puts set over them, removes
// the nil ones, and leaves the caller's map as it was.
func TestMergeRaw(t *testing.T) {
	fields := rawFields(t)
	before := maps.Clone(fields)
	b, err := MergeRaw(fields, map[string]any{"model": "m", "stream": true, "temperature": nil, "stream_options": map[string]json.RawMessage{"include_usage": json.RawMessage("true")}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := maps.Clone(before)
	delete(want, "temperature")
	want["model"], want["stream"], want["stream_options"] = json.RawMessage(`"m"`), json.RawMessage(`true`), json.RawMessage(`{"include_usage":true}`)
	if len(got) != len(want) {
		t.Errorf("keys %v; want %v", slicesOf(got), slicesOf(want))
	}
	for k, v := range want {
		var a, b any
		json.Unmarshal(v, &a)
		json.Unmarshal(got[k], &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s = %s; want %s", k, got[k], v)
		}
	}
	if !reflect.DeepEqual(fields, before) {
		t.Error("the caller's map changed")
	}
}

func slicesOf(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// BenchmarkMergeRaw is the cost of a same-dialect body, the caller's
// fields with the model and the stream put in.
func BenchmarkMergeRaw(b *testing.B) {
	fields := rawFields(b)
	b.ReportAllocs()
	for b.Loop() {
		MergeRaw(fields, map[string]any{"model": "m", "stream": true, "stream_options": map[string]json.RawMessage{"include_usage": json.RawMessage("true")}})
	}
}

// BenchmarkMergeRawSmall is the usual short chat body, where the fields
// put in cost more than the caller's copied.
func BenchmarkMergeRawSmall(b *testing.B) {
	var fields map[string]json.RawMessage
	json.Unmarshal([]byte(`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`), &fields)
	b.ReportAllocs()
	for b.Loop() {
		MergeRaw(fields, map[string]any{"model": "m", "stream": true, "stream_options": json.RawMessage(`{"include_usage":true}`)})
	}
}

// appendValue writes what json.Marshal writes, and fails where it fails.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{`m`, `qwen3:0.6b`, `a"b`, `<tag>`, "é", "\u2028", `{"include_usage":true}`, `{"a": 1}`, `[1,2`, `"x"`, `true`, "\xff"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, raw bool) {
		var v any = s
		if raw {
			v = json.RawMessage(s)
		}
		got, gotErr := appendValue(nil, v)
		want, wantErr := json.Marshal(v)
		if (gotErr != nil) != (wantErr != nil) || gotErr == nil && string(got) != string(want) {
			t.Fatalf("appendValue(%#v) = %s, %v; want %s, %v", v, got, gotErr, want, wantErr)
		}
	})
}
