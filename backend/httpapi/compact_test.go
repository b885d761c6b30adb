package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/switchyard/switchyard/backend/upstream"
)

// compactCases are JSON values with everything the Encoder changes:
// whitespace between tokens, and <, >, &, U+2028 and U+2029, in names and
// values, next to escapes.
var compactCases = []string{
	`{}`, `[]`, `null`, `"x"`, ` 1 `,
	`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":" tok tok"}}],"usage":{"prompt_tokens":3}}`,
	"{ \"a\" : [ 1 , 2.5e3 , true , false , null ] ,\n\t\"b\" :\r\n {\"c\": \"d e\"} }",
	`{"html":"<b>a & b</b>","<k>":">"}`,
	"{\"ls\":\"a\u2028b\u2029c\",\"x\":\"\u2027\u202a\"}",
	`{"esc":"quote \" back \\ slash \\\" <\u003c> \n \t","next":" <"}`,
	`{"s":"\\","t":"\\\\ \" ","u":"\"\\ \""}`,
	"{\"bad utf8\":\"\xff\xfe <\"}",
	`{"nested":{"a":[{"b":[[],{}]}]},"n":-0.0e-1}`,
}

// appendCompact writes of valid JSON what encoding/json's Encoder writes
// of it as a json.RawMessage, which writeJSON wrote before.
func TestAppendCompactIsTheEncoders(t *testing.T) {
	for _, c := range compactCases {
		checkCompact(t, c)
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, c := range compactCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCompact(t, s)
	})
}

func checkCompact(t *testing.T, s string) {
	t.Helper()
	var want bytes.Buffer
	json.NewEncoder(&want).Encode(json.RawMessage(s))
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, json.RawMessage(s))
	if got := rec.Body.String(); got != want.String() {
		t.Errorf("writeJSON(%q) = %q; want %q (valid: %v)", s, got, want.String(), upstream.Valid([]byte(s)))
	}
}
