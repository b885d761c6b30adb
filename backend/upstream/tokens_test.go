package upstream

import (
	"encoding/json"
	"testing"
)

// Valid says what json.Valid says.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, ` {"a":[1,2,{"b":null}]} `, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `"\ud800"`, `"\ud800\u0041"`, `"\u00zz"`,
		`{}`, `[]`, `1e5`, `-0`, `01`, `{"a":1}{}`, ``, ` `, `nul`, `tru`, `"`, `{"a":1,}`, `[1,]`, "\"\x01\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v; json.Valid says %v", data, got, want)
		}
	})
}

// Plain reads a checked JSON string as json.Unmarshal does, or leaves it.
func FuzzPlain(f *testing.F) {
	for _, s := range []string{`"hi"`, `""`, `"a\nb"`, `"\u00e9"`, "\"caf\xc3\xa9\"", "\"bad \xff\"", `"\ud800"`, `5`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Plain(raw)
		var want string
		if err := json.Unmarshal(raw, &want); !ok || err != nil {
			if ok && json.Valid(raw) {
				t.Fatalf("Plain(%q) = %q, which json.Unmarshal refuses: %v", raw, got, err)
			}
			return
		}
		if got != want {
			t.Fatalf("Plain(%q) = %q; want %q", raw, got, want)
		}
	})
}
