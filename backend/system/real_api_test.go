package system

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/realserver"
)

// These tests hold Switchyard's API surface against the real servers:
// what a server receives through Switchyard is what its caller sent, what
// the caller gets keeps the server's own fields, and the apps' other
// calls (the ollama CLI, embeddings, generation) work as they do against
// the server itself.

// recorder is a reverse proxy in front of a real server that keeps the
// body of every request it passes on.
type recorder struct {
	URL    string
	mu     sync.Mutex
	bodies []map[string]json.RawMessage
	paths  []string
}

func record(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		rec.mu.Lock()
		rec.bodies, rec.paths = append(rec.bodies, m), append(rec.paths, r.URL.Path)
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL + u.Path
	return rec
}

// last returns the last request sent to path.
func (r *recorder) last(t *testing.T, path string) map[string]json.RawMessage {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.paths) - 1; i >= 0; i-- {
		if r.paths[i] == path {
			return r.bodies[i]
		}
	}
	t.Fatalf("no request to %s among %v", path, r.paths)
	return nil
}

// post sends body to base+path and returns the status and the decoded
// JSON answer (for a stream: its events or lines, one object each).
func post(t *testing.T, base, path, body string) (int, []map[string]json.RawMessage) {
	t.Helper()
	resp, err := realClient.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []map[string]json.RawMessage
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		if line == "" || line == "[DONE]" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return resp.StatusCode, out
}

func keysOf(ms []map[string]json.RawMessage) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	var keys []string
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sameFields compares what the caller sent with what the server got: all
// but the fields Switchyard owns.
func sameFields(t *testing.T, name string, sent string, got map[string]json.RawMessage, owned ...string) {
	t.Helper()
	var want map[string]json.RawMessage
	if err := json.Unmarshal([]byte(sent), &want); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if slices.Contains(owned, k) {
			continue
		}
		var a, b any
		json.Unmarshal(v, &a)
		json.Unmarshal(got[k], &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the server got %s = %s; the caller sent %s", name, k, got[k], v)
		}
	}
}

func TestRealFidelityLlamaServer(t *testing.T) {
	b := realserver.Find(t)
	llama := b.LlamaServer(t, realserver.LlamaOptions{})
	rec := record(t, llama.URL)
	sy := startReal(t, quietSelection, realCandidate{id: "alpha", provider: "openai", url: rec.URL, model: "tiny"})

	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"alpha","stream":%v,"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"seed":3,
			"top_k":30,"min_p":0.1,"repeat_penalty":1.2,"presence_penalty":0.5,"frequency_penalty":0.25,"logprobs":true,"top_logprobs":2,
			"n_probs":0,"cache_prompt":false,"samplers":["top_k","min_p","temperature"],"tool_choice":"none"}`, stream)
		name := fmt.Sprintf("stream=%v", stream)
		status, via := post(t, sy.url, "/v1/chat/completions", body)
		if status != 200 || len(via) == 0 {
			t.Fatalf("%s: %d %v", name, status, via)
		}
		sameFields(t, name, body, rec.last(t, "/v1/chat/completions"), "model", "stream")
		direct := strings.Replace(body, `"model":"alpha"`, `"model":"tiny"`, 1)
		_, own := post(t, llama.URL, "/chat/completions", direct)
		// Every field the server sends reaches the caller (timings,
		// system_fingerprint, logprobs, ...). The server's usage event
		// comes only to a caller that asked for it, as it would.
		if got, want := keysOf(via), keysOf(own); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the caller got fields %v; the server sends %v", name, got, want)
		}
		if !stream && !strings.Contains(string(via[0]["choices"]), `"logprobs":{"content":[`) {
			t.Errorf("%s: logprobs lost: %s", name, via[0]["choices"])
		}
	}
}

func TestRealFidelityOllama(t *testing.T) {
	b := realserver.Find(t)
	oll := ollamaWith(t, b, nil, map[string]string{"tiny": realserver.ChatMLModelfile(b.Tiny(t))})
	rec := record(t, oll.Root)
	sy := startReal(t, quietSelection, realCandidate{id: "ollie", provider: "ollama", url: rec.URL, model: "tiny"})

	for _, tt := range []struct{ path, body string }{
		{"/api/chat", `{"model":"ollie","stream":false,"messages":[{"role":"user","content":"hi"}],"keep_alive":"2m","options":{"num_predict":5,"seed":4,"num_ctx":1024,"top_k":20,"mirostat":0,"repeat_last_n":8},"truncate":true,"shift":false}`},
		{"/api/chat", `{"model":"ollie","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":5,"seed":4},"logprobs":true,"top_logprobs":2}`},
		{"/api/generate", `{"model":"ollie","prompt":"hi","stream":false,"options":{"num_predict":5,"seed":4},"system":"be brief","keep_alive":"1m"}`},
		{"/api/generate", `{"model":"ollie","prompt":"hi","raw":true,"options":{"num_predict":5,"seed":4}}`},
	} {
		name := tt.path + " " + tt.body[:min(60, len(tt.body))]
		status, via := post(t, sy.url, tt.path, tt.body)
		if status != 200 || len(via) == 0 {
			t.Fatalf("%s: %d %v", name, status, via)
		}
		sameFields(t, name, tt.body, rec.last(t, tt.path), "model", "stream")
		_, own := post(t, oll.Root, tt.path, strings.Replace(tt.body, `"model":"ollie"`, `"model":"tiny"`, 1))
		if got, want := keysOf(via), keysOf(own); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the caller got fields %v; Ollama sends %v", name, got, want)
		}
		last := via[len(via)-1]
		for _, k := range []string{"prompt_eval_duration", "eval_duration", "total_duration", "done_reason"} {
			if _, ok := last[k]; !ok {
				t.Errorf("%s: the last object lacks Ollama's %s", name, k)
			}
		}
	}
}

// TestRealOllamaCLI runs the real ollama CLI against Switchyard.
func TestRealOllamaCLI(t *testing.T) {
	b := realserver.Find(t)
	tiny := b.Tiny(t)
	// num_predict bounds `ollama run`: the random model writes no end token.
	oll := ollamaWith(t, b, nil, map[string]string{"tiny": realserver.ChatMLModelfile(tiny) + "PARAMETER num_predict 6\n"})
	llama := b.LlamaServer(t, realserver.LlamaOptions{})
	sy := startReal(t, quietSelection, ollamaCand("ollie", oll, "tiny", ""), llamaCand("alpha", llama, ""))
	host := strings.TrimPrefix(sy.url, "http://")

	out, err := b.CLI(t, host, time.Minute, "list")
	if err != nil || !strings.Contains(out, "ollie") || !strings.Contains(out, "alpha") || !strings.Contains(out, "auto") {
		t.Errorf("ollama list: %v\n%s", err, out)
	}
	out, err = b.CLI(t, host, time.Minute, "show", "ollie")
	if err != nil || !strings.Contains(out, "llama") || !strings.Contains(out, "completion") {
		t.Errorf("ollama show ollie: %v\n%s", err, out)
	}
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	resp, err := realClient.Get(strings.TrimSuffix(llama.URL, "/v1") + "/props")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&props)
	resp.Body.Close()
	out, err = b.CLI(t, host, time.Minute, "show", "alpha")
	if err != nil || props.Settings.NCtx == 0 || !regexp.MustCompile(`context length\s+`+fmt.Sprint(props.Settings.NCtx)).MatchString(out) {
		t.Errorf("ollama show alpha: %v\n%s; want llama-server's context length %d", err, out, props.Settings.NCtx)
	}
	for _, model := range []string{"ollie", "alpha"} {
		out, err = b.CLI(t, host, 2*time.Minute, "run", model, "hi")
		if err != nil || strings.TrimSpace(out) == "" || strings.Contains(strings.ToLower(out), "error") {
			t.Errorf("ollama run %s hi: %v\n%q", model, err, out)
		}
	}
	out, err = b.CLI(t, host, time.Minute, "ps")
	if err != nil || !strings.Contains(out, "ollie") || !strings.Contains(out, "alpha") {
		t.Errorf("ollama ps: %v\n%s", err, out)
	}
	out, err = b.CLI(t, host, time.Minute, "pull", "ollie")
	if err == nil || !strings.Contains(out, "OLLAMA_HOST="+oll.Addr) {
		t.Errorf("ollama pull through Switchyard: %v\n%s; want an error naming the server", err, out)
	}
}

// TestRealEmbeddings: embeddings through Switchyard equal the server's
// own, in both dialects, and fail over only to the same model.
func TestRealEmbeddings(t *testing.T) {
	b := realserver.Find(t)
	gguf := filepath.Join(t.TempDir(), "embed.gguf")
	b.WriteGGUF(t, gguf, realserver.EmbeddingModel())
	oll := ollamaWith(t, b, nil, map[string]string{"embed": realserver.ChatMLModelfile(gguf), "tiny": realserver.ChatMLModelfile(b.Tiny(t))})
	llama := b.LlamaServer(t, realserver.LlamaOptions{Embeddings: true, Pooling: "mean"})
	sy := startReal(t, quietSelection, ollamaCand("chatty", oll, "tiny", ""), ollamaCand("embed", oll, "embed", ""),
		llamaCand("alpha", llama, "embeddings: true"))

	// Ollama's own /api/show says "embedding" without "completion":
	// learned, auto goes to it, and chats skip it.
	eventually(t, 10*time.Second, "embed learned as an embedding model", func() bool {
		for _, tg := range sy.router.Fleet().Targets {
			if tg.Candidate.ID == "embed" {
				return tg.Candidate.EmbedOnly
			}
		}
		return false
	})
	for _, tt := range []struct{ path, body, direct string }{
		{"/api/embed", `{"model":"embed","input":["hello","world"]}`, oll.Root},
		{"/api/embeddings", `{"model":"embed","prompt":"hello"}`, oll.Root},
		{"/api/embed", `{"model":"auto","input":"hello"}`, oll.Root},
	} {
		status, via := post(t, sy.url, tt.path, tt.body)
		_, own := post(t, tt.direct, tt.path, strings.Replace(tt.body, `"model":"auto"`, `"model":"embed"`, 1))
		if status != 200 || len(via) != 1 || len(own) != 1 {
			t.Fatalf("%s %s: %d %v", tt.path, tt.body, status, via)
		}
		for _, k := range []string{"embeddings", "embedding"} {
			if string(via[0][k]) != string(own[0][k]) {
				t.Errorf("%s %s: %s differs from the server's own", tt.path, tt.body, k)
			}
		}
	}
	status, via := post(t, sy.url, "/v1/embeddings", `{"model":"alpha","input":["a","b c"]}`)
	_, own := post(t, llama.URL, "/embeddings", `{"model":"tiny","input":["a","b c"]}`)
	if status != 200 || len(via) != 1 || string(via[0]["data"]) != string(own[0]["data"]) {
		t.Errorf("/v1/embeddings: %d, data differs from llama-server's own", status)
	}
	// An OpenAI caller of the Ollama model, an Ollama caller of llama-server.
	if status, via := post(t, sy.url, "/v1/embeddings", `{"model":"embed","input":"hello"}`); status != 200 || !strings.Contains(string(via[0]["data"]), `"embedding":[`) {
		t.Errorf("/v1/embeddings to Ollama: %d %v", status, via)
	}
	if status, via := post(t, sy.url, "/api/embed", `{"model":"alpha","input":"hello"}`); status != 200 || !strings.HasPrefix(string(via[0]["embeddings"]), "[[") {
		t.Errorf("/api/embed to llama-server: %d %v", status, via)
	}
	// A chat named for the embedding model is served by a chat model.
	a := chat(t, sy.url, "/api/chat", ollamaBody("embed", false, `,"options":{"num_predict":3}`))
	if a.status != 200 || a.header.Get("X-Switchyard-Served-Model") != "chatty" {
		t.Errorf("chat to embed: %d served by %q: %s", a.status, a.header.Get("X-Switchyard-Served-Model"), a.body)
	}
}

// TestRealGeneration: /api/generate and /v1/completions through Switchyard,
// to each kind of server.
func TestRealGeneration(t *testing.T) {
	b := realserver.Find(t)
	oll := ollamaWith(t, b, nil, map[string]string{"tiny": realserver.ChatMLModelfile(b.Tiny(t))})
	llama := b.LlamaServer(t, realserver.LlamaOptions{})
	sy := startReal(t, quietSelection, ollamaCand("ollie", oll, "tiny", ""), llamaCand("alpha", llama, ""))

	gen := `{"model":"ollie","prompt":"hi","stream":false,"options":{"num_predict":6,"seed":5}}`
	_, via := post(t, sy.url, "/api/generate", gen)
	_, own := post(t, oll.Root, "/api/generate", strings.Replace(gen, "ollie", "tiny", 1))
	if len(via) != 1 || string(via[0]["response"]) != string(own[0]["response"]) || len(via[0]["context"]) == 0 {
		t.Errorf("/api/generate: %v; the server's own %v", via, own)
	}
	// To llama-server: templated → chat, with a suffix → /completions.
	for _, body := range []string{
		`{"model":"alpha","prompt":"hi","stream":false,"options":{"num_predict":4}}`,
		`{"model":"alpha","prompt":"def f(","suffix":"    return x","stream":false,"options":{"num_predict":4}}`,
		`{"model":"alpha","prompt":"hi","options":{"num_predict":4}}`,
	} {
		status, via := post(t, sy.url, "/api/generate", body)
		last := via[len(via)-1]
		if status != 200 || string(last["done"]) != "true" || string(last["done_reason"]) != `"length"` {
			t.Errorf("%s: %d %v", body, status, via)
		}
	}
	// /v1/completions to both.
	for _, model := range []string{"alpha", "ollie"} {
		status, via := post(t, sy.url, "/v1/completions", `{"model":"`+model+`","prompt":"hi","max_tokens":4}`)
		if status != 200 || !strings.Contains(string(via[0]["choices"]), `"text":`) || string(via[0]["object"]) != `"text_completion"` {
			t.Errorf("/v1/completions to %s: %d %v", model, status, via)
		}
	}
}
