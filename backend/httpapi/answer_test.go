package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/router"
)

// The upstream's JSON is put together at the edge: the fields of the
// events that carry them, later ones winning, and the chunks' log
// probabilities as one array.
func TestAssemble(t *testing.T) {
	ans := assemble(&router.Answer{
		Events: [][]byte{
			[]byte(`{"fingerprint":"fp_1","role":"assistant"}`),
			[]byte(`not an object`),
			[]byte(`{"finish":"stop","timings":{"predicted_ms":12},"fingerprint":"fp_2"}`),
		},
		Logprobs: [][]byte{[]byte(`[{"token":"Hi"}]`), []byte(` [] `), []byte(`[{"token":" there"}]`)},
	})
	if string(ans.Fields["fingerprint"]) != `"fp_2"` || string(ans.Fields["timings"]) != `{"predicted_ms":12}` || string(ans.Fields["role"]) != `"assistant"` {
		t.Errorf("Fields = %v", ans.Fields)
	}
	if got := string(ans.Logprobs); got != `[{"token":"Hi"},{"token":" there"}]` {
		t.Errorf("Logprobs = %s", got)
	}
	if none := assemble(&router.Answer{}); none.Fields != nil || none.Logprobs != nil {
		t.Errorf("assemble of nothing = %v, %s; want nil, nil", none.Fields, none.Logprobs)
	}
	if empty := assemble(&router.Answer{Logprobs: [][]byte{[]byte(`[]`)}}); string(empty.Logprobs) != `[]` {
		t.Errorf("empty logprobs = %s; want []", empty.Logprobs)
	}
}

// mergeFields puts an event's fields into the map as json.Unmarshal does,
// or changes nothing.
func FuzzMergeFields(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3},"timings":{"predicted_n":1}}`,
		`{"a":1,"a":2}`, `{"a\u00e9\n":"x"}`, `{ "a" : [ 1 , 2 ] }`, `{}`, `[]`, `null`, `{"a":1} {"b":2}`, `{"a":`,
		"{\"bad\xff\":1}", "{\"a\":\"bad\xff\"}",
	} {
		f.Add([]byte(s))
	}
	same := func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
	f.Fuzz(func(t *testing.T, raw []byte) {
		prior := map[string]json.RawMessage{"kept": json.RawMessage(`1`), "a": json.RawMessage(`0`)}
		got := maps.Clone(prior)
		if !mergeFields(&got, raw) {
			if !maps.EqualFunc(got, prior, same) {
				t.Fatalf("mergeFields(%q) refused it but changed the map to %v", raw, got)
			}
			return
		}
		want := maps.Clone(prior)
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("mergeFields took %q, which encoding/json refuses: %v", raw, err)
		}
		if !maps.EqualFunc(got, want, same) {
			t.Fatalf("mergeFields(%q) = %v; want %v", raw, got, want)
		}
	})
}

// readFields answers every body as decoding it with decodeBody's decoder
// does: the same fields, or the same status and error, whether a chat
// request's fast path reads the fields in its pass or not.
func FuzzReadFields(f *testing.F) {
	for _, s := range []string{
		`{"model":"auto","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"a":1} `, `{"a":1}]`, `{"a":1}{}`, ``, `   `, `null`, `[]`, `"x"`, `{"a":`, `{"a":1,"a":2}`,
		"{\"a\":\"bad \xff\"}", "\xef\xbb\xbf{}", `{"a\u00e9":1}`,
	} {
		f.Add([]byte(s))
	}
	s := New(Options{})
	for _, s := range quickChatSeeds {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		_, got, _, gotStatus, gotErr := s.readFields(httptest.NewRecorder(), r, nil)
		r = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		_, gotQuick, _, gotQuickStatus, gotQuickErr := s.readFields(httptest.NewRecorder(), r, &chatRequest{})

		var raw json.RawMessage
		var want map[string]json.RawMessage
		wantStatus, wantErr := s.decodeFrom(bytes.NewReader(body), &raw)
		if wantErr == nil {
			if err := json.Unmarshal(raw, &want); err != nil || want == nil {
				want, wantStatus, wantErr = nil, http.StatusBadRequest, errors.New("expected a JSON object")
			}
		}
		if gotStatus != wantStatus || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("readFields(%q) = %d %v; want %d %v", body, gotStatus, gotErr, wantStatus, wantErr)
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("readFields(%q) fields = %v; want %v", body, got, want)
		}
		if gotQuickStatus != wantStatus || fmt.Sprint(gotQuickErr) != fmt.Sprint(wantErr) {
			t.Fatalf("readFields(%q) for a chat request = %d %v; want %d %v", body, gotQuickStatus, gotQuickErr, wantStatus, wantErr)
		}
		if !maps.EqualFunc(gotQuick, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("readFields(%q) fields for a chat request = %v; want %v", body, gotQuick, want)
		}
	})
}

// A same-dialect whole answer is the bytes that encoding the upstream's
// fields as a map, the answer's put over them, gave: sorted names, values
// compacted and HTML-escaped.
func TestWholeAnswerAsMap(t *testing.T) {
	events := [][]byte{
		[]byte(`{"created":7,"object":"chat.completion.chunk","system_fingerprint":"<fp>&","choices":[{"delta":{"role":"assistant"}}]}`),
		[]byte(`{"choices":[{"finish_reason":"stop","delta":{}}],"timings": { "a" : [1, 2] },"x\u2028<":"\u2028 é","model":"tiny"}`),
	}
	msg := fleet.Message{Role: "assistant", Content: "Hi <b> & \u2028 there"}
	encoded := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	asMap := func(fields map[string]json.RawMessage, set map[string]any) string {
		m := maps.Clone(fields)
		for k, v := range set {
			m[k] = json.RawMessage(encoded(v))
		}
		return encoded(m)
	}

	oa := assemble(&router.Answer{Meta: router.Meta{RequestID: "r", Candidate: fleet.Candidate{Provider: fleet.ProviderOpenAI, Model: "tiny"}},
		Message: msg, FinishReason: "stop", Events: events})
	oaReq := &fleet.Request{Protocol: fleet.ProtocolOpenAI, Raw: &fleet.Raw{Dialect: fleet.ProviderOpenAI}}
	out := openaiAnswer(&fleet.Request{}, oa, "chat.completion").(wire.Completion) // the answer in the caller's shape
	want := asMap(oa.Fields, map[string]any{"object": out.Object, "choices": out.Choices, "id": out.ID, "usage": out.Usage})
	if got := encoded(openaiAnswer(oaReq, oa, "chat.completion")); got != want {
		t.Errorf("OpenAI answer = %s\nwant %s", got, want)
	}

	ol := assemble(&router.Answer{Meta: router.Meta{Candidate: fleet.Candidate{Provider: fleet.ProviderOllama}}, Message: msg, Events: events})
	olReq := &fleet.Request{Protocol: fleet.ProtocolOllama, Raw: &fleet.Raw{Dialect: fleet.ProviderOllama}}
	want = asMap(ol.Fields, map[string]any{"done": true, "message": api.Message{Role: "assistant", Content: msg.Content}})
	if got := encoded(ollamaWhole(olReq, ol, false, 0)); got != want {
		t.Errorf("Ollama answer = %s\nwant %s", got, want)
	}
}

// setHeaders sets what h.Set would, under canonical names, and a value
// added to one name later leaves the others as they were.
func TestSetHeaders(t *testing.T) {
	h := http.Header{"Keep": {"k"}}
	setHeaders(h, "x-one", "1", "X-Two", "2")
	h.Add("X-One", "more")
	want := http.Header{"Keep": {"k"}, "X-One": {"1", "more"}, "X-Two": {"2"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("header = %v; want %v", h, want)
	}
}

// A whole answer goes out with its length, also one longer than
// net/http's 2 KiB buffer, which it used to send in chunks.
func TestWholeAnswerHasItsLength(t *testing.T) {
	long := strings.Repeat("word ", 1000)
	ev := func(content string) string {
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "tiny",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
		return string(b)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(ev(long), lcStop))
	}))
	t.Cleanup(up.Close)
	api := fleetServer(t, fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: up.URL + "/v1", Model: "tiny", Priority: 1})
	sw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "127.0.0.1:8484"
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(sw.Close)
	resp, err := http.Post(sw.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %v for a body of %d bytes; want its length, not chunks", resp.ContentLength, resp.TransferEncoding, len(body))
	}
	if !strings.Contains(string(body), long) {
		t.Errorf("the answer lost its text: %.200s", body)
	}
}
