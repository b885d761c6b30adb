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
