package simfleet

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard/switchyard/backend/fleet"
)

// embedConfig is a fast server of p with a chat model and an embedding
// model of 16 dimensions.
func embedConfig(p proto) Config {
	cfg := p.config("alpha")
	cfg.Models = append(cfg.Models, Model{Name: embedModel(p), Embedding: true, Dimensions: 16, Arch: "nomic-bert"})
	return cfg
}

func embedModel(p proto) string {
	if p.provider == fleet.ProviderOllama {
		return "nomic-embed-text:latest"
	}
	return "Qwen/Qwen3-Embedding-0.6B"
}

func norm(v []float32) float64 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return math.Sqrt(n)
}

// Embedding makes unit vectors: the same for the same text, different for
// different texts and models.
func TestEmbedding(t *testing.T) {
	a := Embedding("m", "hello", 768)
	if len(a) != 768 || math.Abs(norm(a)-1) > 1e-5 {
		t.Errorf("Embedding has %d numbers of norm %v; want 768 of norm 1", len(a), norm(a))
	}
	if !slices.Equal(a, Embedding("m", "hello", 768)) {
		t.Error("the same text gave two vectors")
	}
	if slices.Equal(a, Embedding("m", "hello!", 768)) || slices.Equal(a, Embedding("n", "hello", 768)) {
		t.Error("another text or model gave the same vector")
	}
	for _, x := range a {
		if x <= -1 || x >= 1 || x == 0 {
			t.Fatalf("component %v of a 768-vector", x)
		}
	}
}

// Ollama's /api/embed and /api/embeddings, through Ollama's own client.
func TestOllamaEmbed(t *testing.T) {
	ctx := testContext(t)
	s := start(t, embedConfig(protos[0]))
	base, _ := url.Parse(s.URL())
	c := api.NewClient(base, client(t))
	want := [][]float32{Embedding("nomic-embed-text:latest", "hello", 16), Embedding("nomic-embed-text:latest", "big world", 16)}

	for _, tt := range []struct {
		input  any
		want   [][]float32
		tokens int // a word and an end-of-sequence token each
	}{
		{"hello", want[:1], 2},
		{[]string{"hello", "big world"}, want, 5},
		{"", [][]float32{}, 0},
		{[]string{}, [][]float32{}, 0},
	} {
		resp, err := c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: tt.input})
		if err != nil {
			t.Fatalf("Embed(%v) = %v", tt.input, err)
		}
		if resp.Model != "nomic-embed-text" || len(resp.Embeddings) != len(tt.want) {
			t.Fatalf("Embed(%v) = %+v; want %d vectors", tt.input, resp, len(tt.want))
		}
		for i := range tt.want {
			if !slices.Equal(resp.Embeddings[i], tt.want[i]) {
				t.Errorf("Embed(%v)[%d] = %v; want %v", tt.input, i, resp.Embeddings[i], tt.want[i])
			}
		}
		if len(tt.want) > 0 && (resp.TotalDuration <= 0 || resp.LoadDuration <= 0 || resp.PromptEvalCount != tt.tokens) {
			t.Errorf("Embed(%v) metrics = %+v; want durations and the prompt tokens", tt.input, resp)
		}
	}

	// dimensions cuts a vector and makes it unit again.
	resp, err := c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: "hello", Dimensions: 4})
	if err != nil || len(resp.Embeddings[0]) != 4 || math.Abs(norm(resp.Embeddings[0])-1) > 1e-5 {
		t.Errorf("Embed with dimensions 4 = %+v, %v; want a unit 4-vector", resp, err)
	}

	// The legacy endpoint gives the same vector, as float64.
	legacy, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "nomic-embed-text", Prompt: "hello"})
	if err != nil || len(legacy.Embedding) != 16 {
		t.Fatalf("Embeddings = %+v, %v", legacy, err)
	}
	for i, x := range legacy.Embedding {
		if float32(x) != want[0][i] {
			t.Fatalf("Embeddings[%d] = %v; want %v", i, x, want[0][i])
		}
	}
	if empty, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "nomic-embed-text"}); err != nil || empty.Embedding == nil || len(empty.Embedding) != 0 {
		t.Errorf("Embeddings of an empty prompt = %+v, %v; want []", empty, err)
	}

	// What apps read from /api/show.
	show, err := c.Show(ctx, &api.ShowRequest{Model: "nomic-embed-text"})
	if err != nil || !slices.Equal(show.Capabilities, []model.Capability{model.CapabilityEmbedding}) ||
		show.ModelInfo["general.architecture"] != "nomic-bert" || show.ModelInfo["nomic-bert.embedding_length"] != float64(16) ||
		show.ModelInfo["nomic-bert.context_length"] != float64(DefaultContextLength) || show.Details.Family != "nomic-bert" {
		t.Errorf("Show(nomic-embed-text) = %+v, %v; want the embedding capability and model_info", show, err)
	}
	if st := s.Stats(); st.Requests != 7 || st.Completed != 7 {
		t.Errorf("Stats() = %+v; want the 7 embedding requests counted", st)
	}
}

// /v1/embeddings as openai-go reads it, and as base64, of vLLM and of
// Ollama's /v1.
func TestOpenAIEmbeddings(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, embedConfig(p))
			base := s.URL()
			if p.provider == fleet.ProviderOllama {
				base += "/v1"
			}
			m := embedModel(p)
			c := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("unused"), option.WithHTTPClient(client(t)), option.WithMaxRetries(0))
			resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model: m,
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "big world"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Object != "list" || resp.Model != m || len(resp.Data) != 2 || resp.Usage.PromptTokens != 5 || resp.Usage.TotalTokens != 5 {
				t.Fatalf("Embeddings.New = %+v; want a list of 2 and usage 5", resp)
			}
			for i, text := range []string{"hello", "big world"} {
				d := resp.Data[i]
				want := Embedding(m, text, 16)
				if d.Object != "embedding" || d.Index != int64(i) || len(d.Embedding) != 16 {
					t.Fatalf("data[%d] = %+v", i, d)
				}
				for j := range want {
					if float32(d.Embedding[j]) != want[j] {
						t.Fatalf("data[%d][%d] = %v; want %v", i, j, d.Embedding[j], want[j])
					}
				}
			}

			// base64: the little-endian float32s.
			r := postJSON(ctx, t, base+"/embeddings", `{"model":"`+m+`","input":"hello","encoding_format":"base64"}`)
			var b64 struct {
				Data []struct {
					Embedding string `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r, &b64); err != nil || len(b64.Data) != 1 {
				t.Fatalf("base64 answer %s: %v", r, err)
			}
			bytes, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
			if err != nil || len(bytes) != 64 {
				t.Fatalf("base64 embedding %q: %v", b64.Data[0].Embedding, err)
			}
			for j, want := range Embedding(m, "hello", 16) {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(bytes[4*j:])); got != want {
					t.Fatalf("base64 component %d = %v; want %v", j, got, want)
				}
			}
		})
	}
}

// Each endpoint refuses a model of the wrong kind as the real servers do.
func TestModelKindRefusals(t *testing.T) {
	ollama, vllm := protos[0], protos[1]
	for _, tt := range []struct {
		name   string
		p      proto
		path   string // after the server's root
		body   string
		status int
		msg    string
	}{
		{"ollama chat with an embedding model", ollama, "/api/chat", `{"model":"nomic-embed-text","messages":[{"role":"user","content":"hi"}]}`,
			400, `"nomic-embed-text" does not support chat`},
		{"ollama generate with an embedding model", ollama, "/api/generate", `{"model":"nomic-embed-text","prompt":"hi"}`,
			400, `"nomic-embed-text" does not support generate`},
		{"ollama embed with a chat model", ollama, "/api/embed", `{"model":"qwen3:8b","input":"hi"}`, 501, noEmbeddings},
		{"ollama embeddings with a chat model", ollama, "/api/embeddings", `{"model":"qwen3:8b","prompt":"hi"}`, 500, noEmbeddings},
		{"ollama embed, unknown model", ollama, "/api/embed", `{"model":"nope","input":"hi"}`, 404, `model "nope" not found, try pulling it first`},
		{"ollama embed, bad input", ollama, "/api/embed", `{"model":"nomic-embed-text","input":[1,2]}`, 400, "invalid input type"},
		{"ollama generate, unknown model", ollama, "/api/generate", `{"model":"nope","prompt":"hi"}`, 404, `model 'nope' not found`},
		{"ollama /v1 chat with an embedding model", ollama, "/v1/chat/completions", `{"model":"nomic-embed-text","messages":[{"role":"user","content":"hi"}]}`,
			400, `"nomic-embed-text" does not support chat`},
		{"ollama /v1 embeddings with a chat model", ollama, "/v1/embeddings", `{"model":"qwen3:8b","input":"hi"}`, 501, noEmbeddings},
		{"ollama /v1 thinking without the capability", ollama, "/v1/chat/completions", `{"model":"llama3.2:3b","reasoning_effort":"high","messages":[]}`,
			400, `"llama3.2:3b" does not support thinking`},
		{"ollama /v1, unknown model", ollama, "/v1/chat/completions", `{"model":"nope","messages":[]}`, 404, `model 'nope' not found`},
		{"vllm chat with an embedding model", vllm, "/chat/completions", `{"model":"Qwen/Qwen3-Embedding-0.6B","messages":[{"role":"user","content":"hi"}]}`,
			400, "The model does not support Chat Completions API"},
		{"vllm completions with an embedding model", vllm, "/completions", `{"model":"Qwen/Qwen3-Embedding-0.6B","prompt":"hi"}`,
			400, "The model does not support Completions API"},
		{"vllm embeddings with a chat model", vllm, "/embeddings", `{"model":"Qwen/Qwen3-32B","input":"hi"}`,
			400, "The model does not support Embeddings API"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, embedConfig(tt.p))
			req := httpPost(ctx, t, s.URL()+tt.path, tt.body)
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			expectStatus(t, resp, tt.status)
			raw, _ := readAll(resp)
			var msg string
			if strings.HasPrefix(tt.path, "/api/") {
				var body struct{ Error string }
				json.Unmarshal(raw, &body)
				msg = body.Error
			} else {
				l := decode[struct {
					Error struct {
						Message string
						Type    string
						Code    any
					}
				}](t, string(raw))
				msg = l.Error.Message
				// Ollama's /v1 has a null code, vLLM the status.
				if ollamaV1 := tt.p.provider == fleet.ProviderOllama; ollamaV1 != (l.Error.Code == nil) || l.Error.Type == "" {
					t.Errorf("error body %s; want a type, and code null exactly for Ollama", raw)
				}
			}
			if msg != tt.msg {
				t.Errorf("error message %q; want %q", msg, tt.msg)
			}
		})
	}
}

// Faults work on the embeddings endpoints: an HTTP error, busy, a crash, a
// cut body.
func TestEmbedFaults(t *testing.T) {
	for _, p := range protos {
		path := "/api/embed"
		if p.provider == fleet.ProviderOpenAI {
			path = "/embeddings"
		}
		for _, tt := range []struct {
			fault  string
			status int  // 0: no response
			valid  bool // the body is a complete JSON object
		}{
			{"status:503", 503, true},
			{"busy", map[fleet.Provider]int{fleet.ProviderOllama: 503, fleet.ProviderOpenAI: 429}[p.provider], true},
			{"close_before_first", 200, false},
			{"error_event", 500, true},
			{"truncated", 200, false},
			{"malformed", 200, false},
			{"slow", 200, true},
		} {
			t.Run(p.name+"/"+tt.fault, func(t *testing.T) {
				ctx := testContext(t)
				s := start(t, embedConfig(p))
				setFault(t, s, tt.fault)
				resp, err := client(t).Do(httpPost(ctx, t, s.URL()+path, `{"model":"`+embedModel(p)+`","input":"hello"}`))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				expectStatus(t, resp, tt.status)
				raw, _ := readAll(resp)
				if json.Valid(raw) != tt.valid {
					t.Errorf("body %q: valid JSON = %v; want %v", raw, !tt.valid, tt.valid)
				}
				if err := s.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
				if st := s.Stats(); st.Requests != 1 || st.Faulted != 1 {
					t.Errorf("Stats() = %+v; want one faulted request", st)
				}
			})
		}
	}
}
