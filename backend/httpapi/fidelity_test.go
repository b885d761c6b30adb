package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/format"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// The fidelity tests run the whole chain: API → router → adapter → HTTP →
// an upstream that answers with the shapes the real servers send
// (backend/realserver/FINDINGS.md) and records what it was sent.

// received is one request as an upstream saw it.
type received struct {
	method, path string
	header       http.Header
	body         map[string]json.RawMessage
	raw          string
}

// upstreamFake answers each path with its canned reply and records every
// request.
type upstreamFake struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received
	replies map[string]reply // by "METHOD /path"
}

type reply struct {
	status      int
	contentType string
	body        string
}

func newUpstream(t *testing.T, replies map[string]reply) *upstreamFake {
	u := &upstreamFake{t: t, replies: replies}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := received{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), raw: string(b)}
		json.Unmarshal(b, &rec.body)
		u.mu.Lock()
		u.got = append(u.got, rec)
		u.mu.Unlock()
		rp, ok := replies[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no such path in the fake"}`)
			return
		}
		w.Header().Set("Content-Type", rp.contentType)
		w.WriteHeader(max(rp.status, 200))
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamFake) last() received {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		u.t.Fatal("the upstream got no request")
	}
	return u.got[len(u.got)-1]
}

// fleetServer is an API over candidates on real adapters.
func fleetServer(t *testing.T, cands ...fleet.Candidate) *Server {
	t.Helper()
	pool := upstream.NewPool(upstream.Settings{})
	t.Cleanup(pool.CloseIdle)
	ol, oa := ollama.New(pool), openai.New(pool)
	var targets []router.Target
	for _, c := range cands {
		c.Enabled = true
		var b fleet.Backend = oa
		if c.Provider == fleet.ProviderOllama {
			b = ol
		}
		targets = append(targets, router.Target{Candidate: c, Backend: b})
	}
	r := router.New(router.Fleet{Targets: targets, DefaultModel: cands[0].ID}, router.Deps{})
	ui := fstest.MapFS{"index.html": {Data: []byte("<html>ui</html>")}}
	return New(Options{Router: r, Upstreams: upstream.Direct{Pool: pool}, Listen: "127.0.0.1:8484", UI: ui})
}

func ollamaCand(u *upstreamFake, id, model string) fleet.Candidate {
	return fleet.Candidate{ID: id, Provider: fleet.ProviderOllama, URL: u.srv.URL, Model: model, Priority: 1}
}

func openaiCand(u *upstreamFake, id, model string) fleet.Candidate {
	return fleet.Candidate{ID: id, Provider: fleet.ProviderOpenAI, URL: u.srv.URL + "/v1", Model: model, Priority: 1}
}

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String() + "data: [DONE]\n\n"
}

// llama.cpp's events, fields and all (FINDINGS.md).
var (
	lcRole  = `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1764543600,"id":"chatcmpl-abc","model":"tiny","system_fingerprint":"b1-80fb11a","object":"chat.completion.chunk"}`
	lcHello = `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1764543600,"id":"chatcmpl-abc","model":"tiny","system_fingerprint":"b1-80fb11a","object":"chat.completion.chunk"}`
	lcStop  = `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1764543600,"id":"chatcmpl-abc","model":"tiny","system_fingerprint":"b1-80fb11a","object":"chat.completion.chunk","timings":{"prompt_n":29,"predicted_n":1,"predicted_ms":3.5}}`
	lcUsage = `{"choices":[],"created":1764543600,"id":"chatcmpl-abc","model":"tiny","system_fingerprint":"b1-80fb11a","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":29,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":0}}}`

	olHello = `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.1Z","message":{"role":"assistant","content":"Hello"},"done":false}`
	olDone  = `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.2Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":2000,"load_duration":100,"prompt_eval_count":29,"prompt_eval_duration":300,"eval_count":1,"eval_duration":400}`
	// An Ollama from before tool-call ids: the call whole in one line.
	olCall = `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.1Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}`
)

func TestOpenAICallerToOpenAIServerKeepsEveryField(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream", body: sse(lcRole, lcHello, lcStop, lcUsage)}})
	s := fleetServer(t, openaiCand(u, "tiny-llama", "tiny"))
	body := `{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi","name":"ann"}],"logit_bias":{"42":-100},
		"n":1,"top_k":5,"mirostat_mode":2,"chat_template_kwargs":{"enable_thinking":false},"response_format":{"type":"text"},"some_future_field":[1]}`
	w := do(s, "POST", "/v1/chat/completions", body, nil)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	// The upstream got what the caller sent, but for model, stream and
	// stream_options.
	got := u.last()
	var sent map[string]json.RawMessage
	json.Unmarshal([]byte(body), &sent)
	for k, v := range sent {
		switch k {
		case "model":
			if string(got.body[k]) != `"tiny"` {
				t.Errorf("model sent = %s", got.body[k])
			}
		default:
			if !sameJSON(got.body[k], string(v)) {
				t.Errorf("%s sent = %s; the caller sent %s", k, got.body[k], v)
			}
		}
	}
	if !sameJSON(got.body["stream_options"], `{"include_usage":true}`) {
		t.Errorf("stream_options = %s", got.body["stream_options"])
	}
	// The caller got the upstream's events as they were, without the
	// usage event it did not ask for.
	want := "data: " + lcRole + "\n\ndata: " + lcHello + "\n\ndata: " + lcStop + "\n\ndata: [DONE]\n\n"
	if w.Body.String() != want {
		t.Errorf("stream =\n%s\nwant\n%s", w.Body, want)
	}
}

func TestOpenAICallerNonStreamKeepsTheUpstreamsFields(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream", body: sse(lcRole, lcHello, lcStop, lcUsage)}})
	s := fleetServer(t, openaiCand(u, "tiny-llama", "tiny"))
	w := do(s, "POST", "/v1/chat/completions", `{"model":"tiny-llama","messages":[{"role":"user","content":"hi"}]}`, nil)
	var got map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for k, want := range map[string]string{
		"system_fingerprint": `"b1-80fb11a"`,
		"timings":            `{"prompt_n":29,"predicted_n":1,"predicted_ms":3.5}`,
		"usage":              `{"completion_tokens":1,"prompt_tokens":29,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":0}}`,
		"object":             `"chat.completion"`,
		"id":                 `"chatcmpl-abc"`,
	} {
		if !sameJSON(got[k], want) {
			t.Errorf("%s = %s; want %s", k, got[k], want)
		}
	}
	var choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	}
	json.Unmarshal(got["choices"], &choices)
	if len(choices) != 1 || choices[0].Message.Content != "Hello" || choices[0].FinishReason != "stop" {
		t.Errorf("choices = %s", got["choices"])
	}
}

func TestOllamaCallerToOllamaServerKeepsEveryField(t *testing.T) {
	gen := `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.1Z","response":"Hi","done":false}`
	genDone := `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00.2Z","response":"","done":true,"done_reason":"stop","context":[1,2,3],"total_duration":2000,"load_duration":100,"prompt_eval_count":29,"prompt_eval_duration":300,"eval_count":1,"eval_duration":400}`
	u := newUpstream(t, map[string]reply{
		"POST /api/chat":     {contentType: "application/x-ndjson", body: olHello + "\n" + olDone + "\n"},
		"POST /api/generate": {contentType: "application/x-ndjson", body: gen + "\n" + genDone + "\n"},
	})
	s := fleetServer(t, ollamaCand(u, "qwen", "qwen3:0.6b"))

	body := `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"options":{"num_ctx":8192,"mirostat":2,"top_k":7},"keep_alive":"1h","think":false,"truncate":false}`
	w := do(s, "POST", "/api/chat", body, nil)
	if w.Code != 200 || w.Body.String() != olHello+"\n"+olDone+"\n" {
		t.Errorf("stream = %d %q", w.Code, w.Body)
	}
	got := u.last()
	for k, want := range map[string]string{
		"options": `{"num_ctx":8192,"mirostat":2,"top_k":7}`, "keep_alive": `"1h"`, "think": `false`, "truncate": `false`,
		"model": `"qwen3:0.6b"`, "stream": `true`,
	} {
		if !sameJSON(got.body[k], want) {
			t.Errorf("sent %s = %s; want %s", k, got.body[k], want)
		}
	}

	// Not streamed: the last line, with the answer put together.
	w = do(s, "POST", "/api/generate", `{"model":"qwen","prompt":"hi","stream":false,"context":[9]}`, nil)
	var whole map[string]json.RawMessage
	json.Unmarshal(w.Body.Bytes(), &whole)
	for k, want := range map[string]string{
		"response": `"Hi"`, "context": `[1,2,3]`, "prompt_eval_duration": `300`, "eval_duration": `400`, "total_duration": `2000`,
		"done": `true`, "done_reason": `"stop"`,
	} {
		if !sameJSON(whole[k], want) {
			t.Errorf("generate %s = %s; want %s (%s)", k, whole[k], want, w.Body)
		}
	}
	if !sameJSON(u.last().body["context"], `[9]`) {
		t.Errorf("context sent = %s", u.last().body["context"])
	}
}

// An Ollama without tool-call ids, called in OpenAI's dialect: every call
// gets an id and type, and the answer ends with finish_reason tool_calls.
func TestToolCallsGetIDsAcrossDialects(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /api/chat": {contentType: "application/x-ndjson", body: olCall + "\n" + olDone + "\n"}})
	s := fleetServer(t, ollamaCand(u, "qwen", "qwen3:0.6b"))
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`

	w := do(s, "POST", "/v1/chat/completions", `{"model":"auto","stream":true,"messages":[{"role":"user","content":"weather?"}],`+tools+`}`, nil)
	var ids []string
	var finish string
	for _, line := range strings.Split(w.Body.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						ID, Type string
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(data), &ch)
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.Type != "function" {
					t.Errorf("tool call type %q", tc.Type)
				}
				ids = append(ids, tc.ID)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "call_") || finish != "tool_calls" {
		t.Errorf("ids %v, finish %q; want one call_ id and tool_calls:\n%s", ids, finish, w.Body)
	}

	w = do(s, "POST", "/v1/chat/completions", `{"model":"auto","messages":[{"role":"user","content":"weather?"}],`+tools+`}`, nil)
	var whole struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	json.Unmarshal(w.Body.Bytes(), &whole)
	if len(whole.Choices) != 1 || len(whole.Choices[0].Message.ToolCalls) != 1 || whole.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("non-stream = %s", w.Body)
	}
	tc := whole.Choices[0].Message.ToolCalls[0]
	if tc.ID == "" || tc.Type != "function" || tc.Function.Name != "get_weather" || !sameJSON(json.RawMessage(tc.Function.Arguments), `{"city":"Paris"}`) {
		t.Errorf("tool call = %+v", tc)
	}
}

// OpenAI's tool_calls finish stays an Ollama value for an Ollama caller.
func TestOllamaCallerSeesOllamaDoneReason(t *testing.T) {
	call := `{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}],"model":"tiny","object":"chat.completion.chunk"}`
	end := `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"model":"tiny","object":"chat.completion.chunk"}`
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream", body: sse(call, end)}})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	w := do(s, "POST", "/api/chat", `{"model":"auto","stream":false,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, nil)
	var got struct {
		Message struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"message"`
		DoneReason string `json:"done_reason"`
	}
	json.Unmarshal(w.Body.Bytes(), &got)
	if got.DoneReason != "stop" || len(got.Message.ToolCalls) != 1 || got.Message.ToolCalls[0].ID != "call_1" {
		t.Errorf("answer = %s", w.Body)
	}
}

func TestEmbeddingsAcrossDialects(t *testing.T) {
	u := newUpstream(t, map[string]reply{
		"POST /api/embed":      {contentType: "application/json", body: `{"model":"embed","embeddings":[[0.5,-2]],"total_duration":42,"load_duration":11,"prompt_eval_count":2}`},
		"POST /api/embeddings": {contentType: "application/json", body: `{"embedding":[0.25,1]}`},
		"POST /v1/embeddings":  {contentType: "application/json", body: `{"object":"list","model":"e5","data":[{"object":"embedding","index":0,"embedding":[1,0]}],"usage":{"prompt_tokens":3,"total_tokens":3}}`},
	})
	ol := ollamaCand(u, "embed", "embed")
	ol.Embeds = true
	oa := openaiCand(u, "e5", "e5")
	oa.Embeds, oa.Priority = true, 2
	s := fleetServer(t, ol, oa)

	// OpenAI caller, Ollama server, base64 asked.
	w := do(s, "POST", "/v1/embeddings", `{"model":"embed","input":"hello","encoding_format":"base64"}`, nil)
	var list struct {
		Object string
		Data   []struct {
			Object    string
			Index     int
			Embedding string
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != 200 || len(list.Data) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	b, _ := base64.StdEncoding.DecodeString(list.Data[0].Embedding)
	if len(b) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) != -2 || list.Usage.PromptTokens != 2 {
		t.Errorf("list = %+v", list)
	}
	if !sameJSON(u.last().body["input"], `"hello"`) {
		t.Errorf("input sent = %s", u.last().body["input"])
	}

	// Ollama callers, Ollama server: the server's answers as they are.
	w = do(s, "POST", "/api/embed", `{"model":"embed","input":["a"],"truncate":true}`, nil)
	if !sameJSON(w.Body.Bytes(), `{"model":"embed","embeddings":[[0.5,-2]],"total_duration":42,"load_duration":11,"prompt_eval_count":2}`) {
		t.Errorf("/api/embed = %s", w.Body)
	}
	if !sameJSON(u.last().body["truncate"], `true`) {
		t.Errorf("truncate sent = %s", u.last().body["truncate"])
	}
	w = do(s, "POST", "/api/embeddings", `{"model":"embed","prompt":"a"}`, nil)
	if !sameJSON(w.Body.Bytes(), `{"embedding":[0.25,1]}`) || u.last().path != "/api/embeddings" {
		t.Errorf("/api/embeddings = %s (to %s)", w.Body, u.last().path)
	}

	// Ollama caller, OpenAI server.
	w = do(s, "POST", "/api/embed", `{"model":"e5","input":"a"}`, nil)
	var emb struct {
		Model      string
		Embeddings [][]float32
	}
	json.Unmarshal(w.Body.Bytes(), &emb)
	if !reflect.DeepEqual(emb.Embeddings, [][]float32{{1, 0}}) || emb.Model != "e5" {
		t.Errorf("/api/embed from OpenAI = %s", w.Body)
	}
	if w.Header().Get("X-Switchyard-Served-Model") != "e5" {
		t.Errorf("served by %q", w.Header().Get("X-Switchyard-Served-Model"))
	}
}

func TestCompletionsBothWays(t *testing.T) {
	text := `{"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":" world","logprobs":null,"finish_reason":"length"}]}`
	u := newUpstream(t, map[string]reply{
		"POST /v1/completions": {contentType: "text/event-stream", body: sse(text)},
		"POST /api/generate":   {contentType: "application/x-ndjson", body: `{"model":"q","response":" there","done":false}` + "\n" + `{"model":"q","response":"","done":true,"done_reason":"stop","eval_count":1}` + "\n"},
	})
	tiny := openaiCand(u, "tiny", "tiny")
	q := ollamaCand(u, "q", "q")
	q.Priority = 2
	s := fleetServer(t, tiny, q)

	w := do(s, "POST", "/v1/completions", `{"model":"tiny","prompt":"hello","max_tokens":1,"echo":false}`, nil)
	if !strings.Contains(w.Body.String(), `"text":" world"`) || !strings.Contains(w.Body.String(), `"object":"text_completion"`) {
		t.Errorf("completion = %s", w.Body)
	}
	if p := u.last(); p.path != "/v1/completions" || !sameJSON(p.body["echo"], "false") || !sameJSON(p.body["prompt"], `"hello"`) {
		t.Errorf("sent %s %s", p.path, p.raw)
	}
	// To Ollama: a raw generation, and the text in text_completion events.
	w = do(s, "POST", "/v1/completions", `{"model":"q","prompt":"hello","suffix":"!","stream":true}`, nil)
	if !strings.Contains(w.Body.String(), `"object":"text_completion"`) || !strings.Contains(w.Body.String(), `"text":" there"`) ||
		!strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Errorf("completion stream = %s", w.Body)
	}
	if p := u.last(); p.path != "/api/generate" || !sameJSON(p.body["raw"], "true") || !sameJSON(p.body["suffix"], `"!"`) {
		t.Errorf("sent %s %s", p.path, p.raw)
	}
	// echo can't be done by Ollama, and q is the only other candidate.
	w = do(s, "POST", "/v1/completions", `{"model":"q","prompt":"hello","echo":true}`, nil)
	if w.Code != 200 || w.Header().Get("X-Switchyard-Served-Model") != "tiny" {
		t.Errorf("echo: %d served by %q: %s", w.Code, w.Header().Get("X-Switchyard-Served-Model"), w.Body)
	}
}

func TestRefusedEverywhereIs400(t *testing.T) {
	u := newUpstream(t, map[string]reply{})
	s := fleetServer(t, ollamaCand(u, "q", "q"))
	w := do(s, "POST", "/v1/chat/completions", `{"model":"q","n":2,"messages":[{"role":"user","content":"x"}]}`, nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "n: 2 answers asked") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	if len(u.got) != 0 {
		t.Errorf("the upstream was sent %d requests", len(u.got))
	}
}

// n > 1 is refused whatever the upstream: an OpenAI-compatible server
// would make n answers, and one would be lost (or mixed into the other)
// on the way back.
func TestSeveralAnswersRefused(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream",
		body: sse(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"choices":[{"index":1,"delta":{"content":"b"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `{"choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")}})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	for _, tt := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"tiny","n":2,"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"tiny","n":2,"stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/completions", `{"model":"tiny","n":3,"prompt":"x"}`},
	} {
		w := do(s, "POST", tt.path, tt.body, nil)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "answers asked, and Switchyard gives one per request") ||
			!strings.Contains(w.Body.String(), `"type":"invalid_request_error"`) {
			t.Errorf("%s %s = %d %s; want 400 saying one answer per request", tt.path, tt.body, w.Code, w.Body)
		}
	}
	if len(u.got) != 0 {
		t.Errorf("the upstream was sent %d requests", len(u.got))
	}
	if w := do(s, "POST", "/v1/chat/completions", `{"model":"tiny","n":1,"messages":[{"role":"user","content":"x"}]}`, nil); w.Code != 200 {
		t.Errorf("n: 1 = %d %s", w.Code, w.Body)
	}
}

func TestOpenAIModelErrors(t *testing.T) {
	u := newUpstream(t, map[string]reply{})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	w := do(s, "GET", "/v1/models/tiny", "", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"id":"tiny"`) {
		t.Errorf("GET /v1/models/tiny = %d %s", w.Code, w.Body)
	}
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/v1/models/gpt-9", ""},
		{"POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`},
	} {
		w := do(s, tt.method, tt.path, tt.body, nil)
		if w.Code != 404 || !strings.Contains(w.Body.String(), `"code":"model_not_found"`) {
			t.Errorf("%s %s = %d %s", tt.method, tt.path, w.Code, w.Body)
		}
	}
}

func TestRetryAfterSaysWhenToCome(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {status: 503, contentType: "application/json", body: `{"error":"down"}`}})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	var w *httptest.ResponseRecorder
	for range 5 { // the breaker opens after its failures
		w = do(s, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"x"}]}`, nil)
	}
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || w.Header().Get("Retry-After") == "0" {
		t.Errorf("%d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestOllamaModelEndpoints(t *testing.T) {
	u := newUpstream(t, map[string]reply{
		"GET /api/tags":         {contentType: "application/json", body: `{"models":[{"name":"qwen3:0.6b","model":"qwen3:0.6b","modified_at":"2026-11-01T10:00:00Z","size":522653767,"digest":"7df6b6e09427a769808717c0a93cadc4ae99ed4eb8bf5ca557c90846becea435","details":{"parent_model":"","format":"gguf","family":"qwen3","families":["qwen3"],"parameter_size":"751.63M","quantization_level":"Q4_K_M","context_length":4096,"embedding_length":64},"capabilities":["completion"]}]}`},
		"GET /api/ps":           {contentType: "application/json", body: `{"models":[{"name":"qwen3:0.6b","model":"qwen3:0.6b","size":1000,"digest":"7df6","details":{"format":"gguf"},"expires_at":"2026-11-30T20:49:17Z","size_vram":0,"context_length":4096}]}`},
		"POST /api/show":        {contentType: "application/json", body: `{"modelfile":"FROM x","parameters":"stop \"<|im_end|>\"","template":"{{ .Prompt }}","details":{"format":"gguf","family":"qwen3"},"model_info":{"general.architecture":"qwen3","qwen3.context_length":40960},"capabilities":["completion","tools","thinking"],"modified_at":"2026-11-01T10:00:00Z"}`},
		"POST /api/chat":        {contentType: "application/json", body: `{"model":"qwen3:0.6b","created_at":"2026-11-30T20:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"load"}`},
		"GET /v1/models":        {contentType: "application/json", body: `{"object":"list","data":[{"id":"tiny","object":"model","max_model_len":8192}]}`},
		"POST /api/anything":    {contentType: "application/json", body: `{"ok":true}`},
		"POST /v1/audio/speech": {contentType: "audio/wav", body: "RIFF"},
	})
	q := ollamaCand(u, "qwen", "qwen3:0.6b")
	tiny := openaiCand(u, "tiny", "tiny")
	tiny.Priority = 2
	s := fleetServer(t, q, tiny)

	w := do(s, "GET", "/api/tags", "", nil)
	var tags struct {
		Models []struct {
			Name, Digest string
			Size         int64
			Details      struct{ Family, QuantizationLevel string } `json:"details"`
		}
	}
	json.Unmarshal(w.Body.Bytes(), &tags)
	// Names as Ollama lists them, name:tag: its clients compare the whole
	// string ("model llama3.2:latest not loaded").
	if len(tags.Models) != 3 || tags.Models[0].Name != "auto:latest" || tags.Models[1].Name != "qwen:latest" || tags.Models[1].Size != 522653767 ||
		!strings.HasPrefix(tags.Models[1].Digest, "7df6b6") || tags.Models[2].Name != "tiny:latest" || tags.Models[2].Digest == "" {
		t.Errorf("tags = %s", w.Body)
	}
	// What newer servers add beyond the module's types is kept, for the
	// candidate and for auto.
	if n := strings.Count(w.Body.String(), `"capabilities":["completion"]`); n != 2 || strings.Count(w.Body.String(), `"context_length":4096,"embedding_length":64`) != 2 {
		t.Errorf("tags = %s; want the server's capabilities and context length on qwen and auto", w.Body)
	}

	w = do(s, "GET", "/api/ps", "", nil)
	if !strings.Contains(w.Body.String(), `"name":"qwen:latest","model":"qwen:latest"`) || !strings.Contains(w.Body.String(), `"context_length":4096`) ||
		!strings.Contains(w.Body.String(), `"name":"tiny:latest","model":"tiny:latest"`) || !strings.Contains(w.Body.String(), `"context_length":8192`) {
		t.Errorf("ps = %s", w.Body)
	}
	// A server of another kind keeps its model loaded: Ollama's CLI must
	// show "Forever", not "Stopping...".
	var ps api.ProcessResponse
	json.Unmarshal(w.Body.Bytes(), &ps)
	for _, m := range ps.Models {
		if got := format.HumanTime(m.ExpiresAt, "Never"); m.Name == "tiny:latest" && got != "Forever" {
			t.Errorf("ollama ps would show tiny until %q; want Forever", got)
		}
	}
	// A name listed there is a name a request may use.
	for _, name := range []string{"auto:latest", "qwen:latest", "tiny:latest"} {
		if w := do(s, "POST", "/api/show", `{"model":"`+name+`"}`, nil); w.Code != 200 {
			t.Errorf("show %s = %d %s", name, w.Code, w.Body)
		}
	}

	w = do(s, "POST", "/api/show", `{"model":"auto"}`, nil)
	if !strings.Contains(w.Body.String(), `"qwen3.context_length":40960`) || !strings.Contains(w.Body.String(), `"alias":"auto"`) {
		t.Errorf("show auto = %s", w.Body)
	}
	if !sameJSON(u.last().body["model"], `"qwen3:0.6b"`) {
		t.Errorf("show sent %s", u.last().raw)
	}
	w = do(s, "POST", "/api/show", `{"name":"tiny"}`, nil)
	if !strings.Contains(w.Body.String(), `"capabilities":["completion","tools"]`) || !strings.Contains(w.Body.String(), `.context_length":8192`) {
		t.Errorf("show tiny = %s", w.Body)
	}
	if w := do(s, "POST", "/api/show", `{"model":"nope"}`, nil); w.Code != 404 || !strings.Contains(w.Body.String(), "model 'nope' not found") {
		t.Errorf("show nope = %d %s", w.Code, w.Body)
	}

	// Loading: forwarded to Ollama; a server of another kind says loaded.
	w = do(s, "POST", "/api/chat", `{"model":"qwen","messages":[]}`, nil)
	if !strings.Contains(w.Body.String(), `"done_reason":"load"`) || u.last().path != "/api/chat" || string(u.last().body["messages"]) != "[]" {
		t.Errorf("load = %s (sent %s)", w.Body, u.last().raw)
	}
	w = do(s, "POST", "/api/generate", `{"model":"tiny","keep_alive":0}`, nil)
	if !strings.Contains(w.Body.String(), `"done_reason":"unload"`) {
		t.Errorf("unload = %s", w.Body)
	}

	w = do(s, "POST", "/api/pull", `{"model":"qwen"}`, nil)
	if w.Code != 501 || !strings.Contains(w.Body.String(), "OLLAMA_HOST="+strings.TrimPrefix(u.srv.URL, "http://")+" ollama pull qwen") {
		t.Errorf("pull = %d %s", w.Code, w.Body)
	}

	for _, tt := range []struct{ method, accept, want string }{
		{"GET", "", "Ollama is running"},
		{"HEAD", "", ""},
		{"GET", "text/html,application/xhtml+xml", "<html>ui</html>"},
	} {
		w := do(s, tt.method, "/", "", map[string]string{"Accept": tt.accept})
		if w.Code != 200 || w.Body.String() != tt.want {
			t.Errorf("%s / (Accept %q) = %d %q", tt.method, tt.accept, w.Code, w.Body)
		}
	}

	// Pass-through: unknown endpoints reach the server with the model's
	// own name and Switchyard's headers; the caller's key does not.
	w = do(s, "POST", "/api/anything?x=1", `{"model":"qwen","keep":"me"}`, map[string]string{"Authorization": "Bearer mine", "X-Custom": "y"})
	got := u.last()
	if w.Code != 200 || w.Body.String() != `{"ok":true}` || got.path != "/api/anything?x=1" || !sameJSON(got.body["model"], `"qwen3:0.6b"`) ||
		!sameJSON(got.body["keep"], `"me"`) || got.header.Get("Authorization") != "" || got.header.Get("X-Custom") != "y" ||
		w.Header().Get("X-Switchyard-Served-Model") != "qwen" {
		t.Errorf("pass-through = %d %s; upstream got %+v", w.Code, w.Body, got)
	}
	w = do(s, "POST", "/v1/audio/speech", `{"model":"tiny","input":"hi"}`, nil)
	if w.Code != 200 || w.Body.String() != "RIFF" || u.last().path != "/v1/audio/speech" || w.Header().Get("Content-Type") != "audio/wav" {
		t.Errorf("/v1 pass-through = %d %s to %s", w.Code, w.Body, u.last().path)
	}
	// A path Switchyard knows keeps its 405.
	if w := do(s, "PUT", "/api/chat", `{}`, nil); w.Code != 405 {
		t.Errorf("PUT /api/chat = %d", w.Code)
	}
}

func sameJSON(a []byte, b string) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// llama.cpp moves its timings to the usage event when usage is asked for,
// as Switchyard always asks. A caller that did not ask gets no event with
// empty choices, as OpenAI's streams promise and llama-server alone gives
// it: a client that reads choices[0] of every event failed on it. The
// timings come on the finish event (TestFinishEventTakesTheUsageEventsFields).
func TestNoUsageEventForACallerWhoDidNotAsk(t *testing.T) {
	usage := `{"choices":[],"created":1,"id":"c","model":"tiny","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":29,"total_tokens":30},"timings":{"predicted_n":1}}`
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream", body: sse(lcRole, lcHello, usage)}})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	w := do(s, "POST", "/v1/chat/completions", `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	body := w.Body.String()
	if strings.Contains(body, `"choices":[]`) || strings.Contains(body, `"usage"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream = %s; want no usage event", body)
	}
	w = do(s, "POST", "/v1/chat/completions", `{"model":"tiny","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, nil)
	if !strings.Contains(w.Body.String(), "data: "+usage+"\n\n") {
		t.Errorf("stream with usage = %s", w.Body)
	}
}

// An Ollama caller of an Ollama without call ids gets them, with type
// "function", streamed or not; the rest of the line is the server's.
func TestOllamaCallerGetsToolCallIDs(t *testing.T) {
	u := newUpstream(t, map[string]reply{"POST /api/chat": {contentType: "application/x-ndjson", body: olCall + "\n" + olDone + "\n"}})
	s := fleetServer(t, ollamaCand(u, "qwen", "qwen3:0.6b"))
	for _, stream := range []string{"true", "false"} {
		w := do(s, "POST", "/api/chat", `{"model":"qwen","stream":`+stream+`,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get_weather"}}]}`, nil)
		var calls []struct{ ID, Type string }
		for _, line := range strings.Split(strings.TrimSpace(w.Body.String()), "\n") {
			var l struct {
				Message struct {
					ToolCalls []struct{ ID, Type string } `json:"tool_calls"`
				} `json:"message"`
				CreatedAt string `json:"created_at"`
			}
			json.Unmarshal([]byte(line), &l)
			calls = append(calls, l.Message.ToolCalls...)
		}
		if len(calls) != 1 || !strings.HasPrefix(calls[0].ID, "call_") || calls[0].Type != "function" {
			t.Errorf("stream %s: calls %+v in %s", stream, calls, w.Body)
		}
	}
}

// A load (empty messages, empty prompt) goes where a chat would be served:
// past a first choice that does not answer, answers with a server error or
// lacks the model, with the routing headers; `ollama run auto` preloads
// that way before its first chat.
func TestLoadGoesWhereAChatWould(t *testing.T) {
	loaded := reply{contentType: "application/json", body: `{"model":"tiny","created_at":"2026-11-30T20:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"load"}`}
	live := newUpstream(t, map[string]reply{"POST /api/chat": loaded, "POST /api/generate": loaded})
	sick := newUpstream(t, map[string]reply{"POST /api/chat": {status: 500, contentType: "application/json", body: `{"error":"llama runner process has terminated"}`}})
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	dead := fleet.Candidate{ID: "dead", Provider: fleet.ProviderOllama, URL: gone.URL, Model: "tiny", Priority: 1}
	missing := ollamaCand(newUpstream(t, map[string]reply{}), "missing", "tiny") // the fake's 404
	ill, ok := ollamaCand(sick, "ill", "tiny"), ollamaCand(live, "ok", "tiny")
	missing.Priority, ill.Priority, ok.Priority = 2, 3, 4
	s := fleetServer(t, dead, missing, ill, ok)

	for _, tt := range []struct{ path, body string }{
		{"/api/chat", `{"model":"auto","messages":[]}`},
		{"/api/generate", `{"model":"auto"}`},
		{"/api/chat", `{"model":"dead","messages":[],"keep_alive":"5m"}`},
	} {
		w := do(s, "POST", tt.path, tt.body, nil)
		h := w.Header()
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"done_reason":"load"`) || h.Get("X-Switchyard-Served-Model") != "ok" ||
			h.Get("X-Switchyard-Fallback") != "true" || h.Get("X-Switchyard-Request-Id") == "" {
			t.Errorf("%s %s = %d %s %v; want the load from ok, a fallback", tt.path, tt.body, w.Code, w.Body, h)
		}
		if why := h.Get("X-Switchyard-Fallback-Reason"); why != "dead did not answer; missing answered with an error (HTTP 404); ill answered with an error (HTTP 500)" && tt.path == "/api/chat" {
			t.Errorf("%s reason %q", tt.path, why)
		}
		if got := live.last(); got.path != tt.path || !sameJSON(got.body["model"], `"tiny"`) {
			t.Errorf("ok's server got %s %s", got.path, got.raw)
		}
	}
	if !sameJSON(live.last().body["keep_alive"], `"5m"`) {
		t.Errorf("keep_alive not passed on: %s", live.last().raw)
	}
	if w := do(s, "POST", "/api/chat", `{"model":"ok","messages":[]}`, nil); w.Code != 200 || w.Header().Get("X-Switchyard-Fallback") != "false" {
		t.Errorf("load of the first choice = %d, fallback %q", w.Code, w.Header().Get("X-Switchyard-Fallback"))
	}

	s = fleetServer(t, dead, ill)
	w := do(s, "POST", "/api/chat", `{"model":"auto","messages":[]}`, nil)
	if w.Code != 503 || w.Body.String() != `{"error":"no candidate could load the model: dead did not answer; ill answered with an error (HTTP 500)"}`+"\n" ||
		w.Header().Get("Retry-After") == "" {
		t.Errorf("no server loads = %d %q", w.Code, w.Body)
	}
}

// The finish event waits for the next one and takes what else a usage
// event holds, for a caller that did not ask for usage; other events and
// a caller that asked go out as they came.
func TestFinishEventTakesTheUsageEventsFields(t *testing.T) {
	finish := `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"id":"c","object":"chat.completion.chunk"}`
	usage := `{"choices":[],"id":"c","usage":{"prompt_tokens":3},"timings":{"predicted_n":1},"x":[1,2]}`
	for _, tt := range []struct {
		name    string
		upEvent []string
		want    []string
	}{
		{"timings move to the finish event", []string{lcRole, finish, usage},
			[]string{lcRole, `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"id":"c","object":"chat.completion.chunk","timings":{"predicted_n":1},"x":[1,2]}`}},
		{"a usage event with nothing else", []string{lcRole, finish, `{"choices":[],"usage":{"prompt_tokens":3}}`}, []string{lcRole, finish}},
		{"no usage event", []string{lcRole, finish}, []string{lcRole, finish}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {contentType: "text/event-stream", body: sse(tt.upEvent...)}})
			s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
			w := do(s, "POST", "/v1/chat/completions", `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
			want := ""
			for _, ev := range tt.want {
				want += "data: " + ev + "\n\n"
			}
			if got := w.Body.String(); got != want+"data: [DONE]\n\n" {
				t.Errorf("stream =\n%s\nwant\n%sdata: [DONE]", got, want)
			}
		})
	}
}

// An upstream's refusal reaches the caller in its words, once, and an
// OpenAI caller gets its error type and code back: clients look for
// llama.cpp's exceed_context_size_error to trim their history.
func TestRefusalKeepsTheUpstreamsWords(t *testing.T) {
	const refusal = `{"error":{"code":400,"message":"request (3028 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3028,"n_ctx":1024}}`
	u := newUpstream(t, map[string]reply{"POST /v1/chat/completions": {status: 400, contentType: "application/json", body: refusal}})
	s := fleetServer(t, openaiCand(u, "tiny", "tiny"))
	const msg = "request (3028 tokens) exceeds the available context size (1024 tokens), try increasing it"
	for _, stream := range []string{"true", "false"} {
		w := do(s, "POST", "/v1/chat/completions", `{"model":"tiny","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`, nil)
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 400 || e.Error.Message != msg || e.Error.Type != "exceed_context_size_error" || e.Error.Code != "400" {
			t.Errorf("OpenAI caller, stream %s: %d %s; want 400 with the server's message, type and code", stream, w.Code, w.Body)
		}
		w = do(s, "POST", "/api/chat", `{"model":"tiny","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`, nil)
		if want := `{"error":"` + msg + `"}`; w.Code != 400 || strings.TrimSpace(w.Body.String()) != want {
			t.Errorf("Ollama caller, stream %s: %d %s; want 400 %s", stream, w.Code, w.Body, want)
		}
	}
}
