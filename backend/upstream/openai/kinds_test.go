package openai

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// captured is one request as the server saw it.
type captured struct {
	path string
	body map[string]json.RawMessage
}

// capture serves reply for every request and hands over what came.
func capture(t *testing.T, contentType, reply string) (*httptest.Server, <-chan captured) {
	got := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		json.Unmarshal(b, &body)
		got <- captured{r.URL.Path, body}
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestRequestsByKindAndDialect(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	raw := func(fields string) *fleet.Raw {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(fields), &m); err != nil {
			panic(err)
		}
		return &fleet.Raw{Dialect: fleet.ProviderOpenAI, Fields: m}
	}
	embedReply := `{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1]}]}`
	tests := []struct {
		name  string
		req   fleet.Request
		path  string
		want  map[string]string // field → JSON; "" means absent
		reply string            // default: a clean chat stream
	}{
		{
			// Fidelity: every field the caller sent reaches the server,
			// unknown ones too, with the model, a stream and usage.
			name: "an OpenAI caller's chat is forwarded whole",
			req: fleet.Request{Protocol: fleet.ProtocolOpenAI, Messages: []fleet.Message{{Role: "user", Content: "hi"}},
				Raw: raw(`{"model":"auto","messages":[{"role":"user","content":"hi","name":"ann"}],"stream":false,
					"stream_options":{"continuous_usage_stats":true},"logprobs":true,"top_logprobs":2,"tool_choice":"required",
					"n":2,"logit_bias":{"50256":-100},"user":"u1","guided_json":{"type":"object"},"top_k":20}`)},
			path: "/v1/chat/completions",
			want: map[string]string{
				"model": `"m"`, "stream": `true`, "stream_options": `{"continuous_usage_stats":true,"include_usage":true}`,
				"messages": `[{"role":"user","content":"hi","name":"ann"}]`, "logprobs": `true`, "top_logprobs": `2`,
				"tool_choice": `"required"`, "n": `2`, "logit_bias": `{"50256":-100}`, "user": `"u1"`,
				"guided_json": `{"type":"object"}`, "top_k": `20`,
			},
		},
		{
			name: "the deep-thinking model named, no effort said",
			req:  fleet.Request{Protocol: fleet.ProtocolOpenAI, Thinking: true, Raw: raw(`{"model":"deep","messages":[]}`)},
			want: map[string]string{"reasoning_effort": `"medium"`},
		},
		{
			name: "the caller's own effort stays",
			req:  fleet.Request{Protocol: fleet.ProtocolOpenAI, Thinking: true, ThinkLevel: "low", Raw: raw(`{"messages":[],"reasoning_effort":"low"}`)},
			want: map[string]string{"reasoning_effort": `"low"`},
		},
		{
			name: "an Ollama caller's options are mapped",
			req: fleet.Request{Protocol: fleet.ProtocolOllama, Messages: []fleet.Message{{Role: "user", Content: "hi"}},
				KeepAlive: json.RawMessage(`"1h"`), Options: fleet.Options{
					TopK: n(40), MinP: f(0.05), RepeatPenalty: f(1.1), PresencePenalty: f(0.5), FrequencyPenalty: f(0.25),
					NumCtx: n(8192), Logprobs: true, TopLogprobs: n(3), MaxTokens: n(9),
				}},
			path: "/v1/chat/completions",
			want: map[string]string{
				"top_k": `40`, "min_p": `0.05`, "repeat_penalty": `1.1`, "repetition_penalty": `1.1`,
				"presence_penalty": `0.5`, "frequency_penalty": `0.25`, "logprobs": `true`, "top_logprobs": `3`, "max_tokens": `9`,
				"num_ctx": "", "keep_alive": "", "options": "",
			},
		},
		{
			name: "a templated generation is a chat of one turn",
			req:  fleet.Request{Protocol: fleet.ProtocolOllama, Kind: fleet.KindGenerate, Prompt: "hi", System: "be brief"},
			path: "/v1/chat/completions",
			want: map[string]string{"messages": `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`, "prompt": ""},
		},
		{
			name: "a generation with a suffix is a completion",
			req: fleet.Request{Protocol: fleet.ProtocolOllama, Kind: fleet.KindGenerate, Prompt: "def f(", Suffix: "return x",
				Options: fleet.Options{MaxTokens: n(8), Logprobs: true, TopLogprobs: n(2)}},
			path: "/v1/completions",
			want: map[string]string{
				"model": `"m"`, "prompt": `"def f("`, "suffix": `"return x"`, "stream": `true`,
				"stream_options": `{"include_usage":true}`, "max_tokens": `8`, "logprobs": `2`, "messages": "",
			},
			reply: ev(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","finish_reason":"stop"}]}`) + done,
		},
		{
			name:  "an OpenAI completion is forwarded whole",
			req:   fleet.Request{Protocol: fleet.ProtocolOpenAI, Kind: fleet.KindGenerate, Raw: raw(`{"model":"auto","prompt":["a","b"],"echo":true,"best_of":1}`)},
			path:  "/v1/completions",
			want:  map[string]string{"prompt": `["a","b"]`, "echo": `true`, "best_of": `1`, "stream": `true`},
			reply: ev(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","finish_reason":"stop"}]}`) + done,
		},
		{
			name:  "an embedding of an Ollama caller",
			req:   fleet.Request{Protocol: fleet.ProtocolOllama, Kind: fleet.KindEmbed, Input: []string{"a", "b"}, Dimensions: 8},
			path:  "/v1/embeddings",
			want:  map[string]string{"model": `"m"`, "input": `["a","b"]`, "dimensions": `8`, "stream": ""},
			reply: embedReply,
		},
		{
			name:  "an OpenAI caller's embedding is forwarded whole",
			req:   fleet.Request{Protocol: fleet.ProtocolOpenAI, Kind: fleet.KindEmbed, Raw: raw(`{"model":"e","input":"a","encoding_format":"float","user":"u"}`)},
			path:  "/v1/embeddings",
			want:  map[string]string{"model": `"m"`, "input": `"a"`, "encoding_format": `"float"`, "user": `"u"`, "stream": ""},
			reply: embedReply,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, reply := "text/event-stream", tt.reply
			if reply == "" {
				reply = cleanStream
			}
			if tt.req.Kind == fleet.KindEmbed {
				ct = "application/json"
			}
			srv, got := capture(t, ct, reply)
			s, err := newBackend(t).Open(t.Context(), candidate(srv), &tt.req)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			if _, err := collect(s); err != io.EOF {
				t.Fatalf("collect() error = %v; want io.EOF", err)
			}
			req := <-got
			if tt.path != "" && req.path != tt.path {
				t.Errorf("path = %s; want %s", req.path, tt.path)
			}
			for k, want := range tt.want {
				v, ok := req.body[k]
				switch {
				case want == "" && ok:
					t.Errorf("body has %s = %s; want it absent", k, v)
				case want != "" && !ok:
					t.Errorf("body lacks %s; want %s", k, want)
				case want != "" && !sameJSON(v, want):
					t.Errorf("body %s = %s; want %s", k, v, want)
				}
			}
		})
	}
}

func sameJSON(a json.RawMessage, b string) bool {
	var va, vb any
	json.Unmarshal(a, &va)
	json.Unmarshal([]byte(b), &vb)
	return reflect.DeepEqual(va, vb)
}

// Completions stream their text in choices[].text; logprobs of a chat come
// as {"content":[...]}; Raw is each event's data as sent.
func TestCompletionTextLogprobsAndRaw(t *testing.T) {
	text := `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x = 1","logprobs":null,"finish_reason":null}]}`
	logp := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}]},"finish_reason":null}]}`
	srv := serve(t, ev(text)+ev(logp)+stopChunk+done)
	s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Recv()
	if err != nil || c.Content != "x = 1" || string(c.Raw) != text {
		t.Fatalf("first chunk = %+v, %v", c, err)
	}
	c, err = s.Recv()
	if err != nil || c.Content != "Hi" || string(c.Raw) != logp {
		t.Fatalf("second chunk = %+v, %v", c, err)
	}
	if !sameJSON(c.Logprobs, `[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}]`) {
		t.Errorf("Logprobs = %s", c.Logprobs)
	}
}

func TestEmbeddings(t *testing.T) {
	b64 := func(fs ...float32) string {
		buf := make([]byte, 4*len(fs))
		for i, f := range fs {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
		}
		return base64.StdEncoding.EncodeToString(buf)
	}
	tests := []struct {
		name, body string
		want       [][]float32
		malformed  bool
	}{
		{"floats, out of order", `{"object":"list","model":"e","data":[{"object":"embedding","index":1,"embedding":[0.5]},{"object":"embedding","index":0,"embedding":[0.25]}],"usage":{"prompt_tokens":3,"total_tokens":3}}`,
			[][]float32{{0.25}, {0.5}}, false},
		{"base64", `{"object":"list","model":"e","data":[{"object":"embedding","index":0,"embedding":"` + b64(0.5, -2) + `"}]}`,
			[][]float32{{0.5, -2}}, false},
		{"no data", `{"object":"list","data":[]}`, nil, true},
		{"an index out of range", `{"data":[{"index":3,"embedding":[1]}]}`, nil, true},
		{"not a vector", `{"data":[{"index":0,"embedding":"%%%"}]}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := capture(t, "application/json", tt.body)
			s, err := newBackend(t).Open(t.Context(), candidate(srv), &fleet.Request{Kind: fleet.KindEmbed, Input: []string{"a"}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c, err := s.Recv()
			if tt.malformed {
				if _, ok := err.(*fleet.MalformedError); !ok {
					t.Fatalf("Recv() = %+v, %v; want a MalformedError", c, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(c.Embeddings, tt.want) || string(c.Raw) != tt.body {
				t.Fatalf("Recv() = %+v, %v; want %v", c, err, tt.want)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Errorf("then %v; want io.EOF", err)
			}
		})
	}
}

func TestEmbeddingsNotSupported(t *testing.T) {
	// llama-server without --embeddings (FINDINGS.md, section 9).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(501)
		io.WriteString(w, `{"error":{"code":501,"message":"This server does not support embeddings. Start it with `+"`--embeddings`"+`","type":"not_supported_error"}}`)
	}))
	defer srv.Close()
	_, err := newBackend(t).Open(t.Context(), candidate(srv), &fleet.Request{Kind: fleet.KindEmbed, Input: []string{"a"}})
	se, ok := err.(*fleet.StatusError)
	if !ok || se.Unsupported != "embedding" || !strings.Contains(se.Message, "--embeddings") {
		t.Fatalf("Open() error = %#v; want a StatusError with Unsupported embedding", err)
	}
}

func TestCheck(t *testing.T) {
	var b Backend
	c := fleet.Candidate{Provider: fleet.ProviderOpenAI}
	tests := []struct {
		name string
		req  fleet.Request
		ok   bool
	}{
		{"a chat", fleet.Request{Options: fleet.Options{NumCtx: new(int)}}, true},
		{"a templated generation with images", fleet.Request{Kind: fleet.KindGenerate, Images: []string{"AAAA"}}, true},
		{"a raw generation with images", fleet.Request{Kind: fleet.KindGenerate, RawPrompt: true, Images: []string{"AAAA"}}, false},
		{"a suffix with a format", fleet.Request{Kind: fleet.KindGenerate, Suffix: "x", Format: json.RawMessage(`"json"`)}, false},
		{"a suffix", fleet.Request{Kind: fleet.KindGenerate, Suffix: "x"}, true},
	}
	for _, tt := range tests {
		if err := b.Check(c, &tt.req); (err == nil) != tt.ok {
			t.Errorf("%s: Check() = %v; want ok %v", tt.name, err, tt.ok)
		}
	}
}

// After Passthrough, a text event is handed over as Raw without being
// decoded; the end, usage and errors are read as before.
func TestPassthrough(t *testing.T) {
	weird := `{"choices":[{"index":0,"delta":{"content":"\"finish_reason\":\"stop\" \"usage\" \"error\""},"finish_reason":null}],"model":"m"}`
	spaced := `{"choices":[{"index":0,"delta":{},"finish_reason" : "length"}],"model":"m"}`
	srv := serve(t, roleChunk+content("Hel")+ev(weird)+ev(spaced)+usageChunk+done)
	s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.(fleet.Passthrougher).Passthrough()
	var got []fleet.Chunk
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Raw) == 0 {
			t.Errorf("chunk %d without Raw", len(got))
		}
		c.Raw = nil
		got = append(got, c)
	}
	want := []fleet.Chunk{{}, {}, {}, {FinishReason: "length", Model: "m"}, usageOut}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %+v\nwant %+v", got, want)
	}
	// A text event that is not JSON is still malformed.
	srv = serve(t, roleChunk+ev(`{"choices":[{"delta":{"content":"x"}}`)+done)
	s, _ = newBackend(t).Open(t.Context(), candidate(srv), hello())
	defer s.Close()
	s.(fleet.Passthrougher).Passthrough()
	s.Recv()
	if _, err := s.Recv(); !isMalformed(err) {
		t.Errorf("broken event: %v; want malformed", err)
	}
}

func isMalformed(err error) bool {
	_, ok := err.(*fleet.MalformedError)
	return ok
}

// BenchmarkRecvPassthrough is one content chunk after commit for a caller
// of the same dialect: no allocation.
func BenchmarkRecvPassthrough(b *testing.B) {
	body := &loopReader{ev: []byte(chunk(`"delta":{"content":" token"},"finish_reason":null`))}
	s := newStream(context.Background(), func() {}, io.NopCloser(body), maxLine)
	s.Passthrough()
	b.SetBytes(int64(len(body.ev)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}
