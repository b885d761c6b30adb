package simfleet

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/ollama/ollama/api"
)

// Embedding returns the vector model gives text, of dims numbers: a unit
// vector drawn from a hash of the model and the text, the same every time,
// and different for different texts. The embeddings endpoints answer with
// it (cut to a request's dimensions and made unit again).
func Embedding(model, text string, dims int) []float32 {
	v := make([]float64, dims)
	var sum [sha256.Size]byte
	for i := range v {
		if i%(sha256.Size/4) == 0 {
			sum = sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", model, text, i/(sha256.Size/4)))
		}
		u := binary.BigEndian.Uint32(sum[i%(sha256.Size/4)*4:])
		v[i] = float64(u)/(1<<31) - 1
	}
	return unit(v)
}

// unit returns v scaled to length 1, as float32.
func unit(v []float64) []float32 {
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, len(v))
	for i, x := range v {
		if norm > 0 {
			x /= norm
		}
		out[i] = float32(x)
	}
	return out
}

// vectors returns the vectors of x's inputs: the model's, cut to the
// request's dimensions and made unit again (as Ollama's /api/embed does).
func vectors(x *exchange) [][]float32 {
	out := make([][]float32, len(x.req.inputs))
	for i, text := range x.req.inputs {
		v := Embedding(x.model.Name, text, x.model.Dimensions)
		if d := x.req.dimensions; d > 0 && d < len(v) {
			cut := make([]float64, d)
			for j := range cut {
				cut[j] = float64(v[j])
			}
			v = unit(cut)
		}
		out[i] = v
	}
	return out
}

// embedTokens estimates the prompt tokens of embedding inputs: their
// words, plus one for the end-of-sequence token ("hello" is 2 on Ollama,
// FINDINGS.md §9).
func embedTokens(inputs []string) int {
	n := 0
	for _, in := range inputs {
		n += len(strings.Fields(in)) + 1
	}
	return n
}

// wholeOnly is the stream side of an endpoint that never streams.
type wholeOnly struct{}

func (wholeOnly) call(_ *exchange, c toolCall) []token { return wholeCall(c) }
func (wholeOnly) opening(*exchange) []byte             { return nil }
func (wholeOnly) stall(*exchange) []byte               { return nil }
func (wholeOnly) token(*exchange, token) []byte        { return nil }
func (wholeOnly) finish(*exchange) []byte              { return nil }
func (wholeOnly) garbage(*exchange) []byte             { return nil }

// noEmbeddings is the answer of a server asked for embeddings of a chat
// model (FINDINGS.md §9: Ollama 501 on /api/embed and /v1/embeddings, 500
// on /api/embeddings).
const noEmbeddings = "This server does not support embeddings. Start it with `--embeddings`"

// ollamaEmbed answers Ollama's /api/embed: input a string or an array of
// strings; {"model","embeddings":[[...]],"total_duration",
// "load_duration","prompt_eval_count"}.
type ollamaEmbed struct {
	ollamaBase
	wholeOnly
}

func (ollamaEmbed) parse(body []byte) (request, *httpError) {
	var in struct {
		Model      string        `json:"model"`
		Input      any           `json:"input"`
		Dimensions int           `json:"dimensions"`
		KeepAlive  *api.Duration `json:"keep_alive"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "model is required"}
	}
	req := request{kind: kindEmbed, model: in.Model, dimensions: in.Dimensions, unloadAfter: keepAliveZero(in.KeepAlive)}
	switch input := in.Input.(type) {
	case nil:
	case string:
		if input != "" {
			req.inputs = []string{input}
		}
	case []any:
		for _, v := range input {
			s, ok := v.(string)
			if !ok {
				return request{}, &httpError{http.StatusBadRequest, "invalid input type"}
			}
			req.inputs = append(req.inputs, s)
		}
	default:
		return request{}, &httpError{http.StatusBadRequest, "invalid input type"}
	}
	req.promptTokens = embedTokens(req.inputs)
	return req, nil
}

// notFound is the answer of /api/embed for a model the server lacks
// (FINDINGS.md §8), unlike that of chat.
func (ollamaEmbed) notFound(name string) *httpError {
	return &httpError{http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", name)}
}

func (ollamaEmbed) check(_ request, m Model) *httpError {
	if !m.Embedding {
		return &httpError{http.StatusNotImplemented, noEmbeddings}
	}
	return nil
}

func (d ollamaEmbed) whole(x *exchange) []byte {
	m := d.metrics(x)
	b, _ := json.Marshal(api.EmbedResponse{
		Model:           x.req.model,
		Embeddings:      vectors(x),
		TotalDuration:   m.TotalDuration,
		LoadDuration:    m.LoadDuration,
		PromptEvalCount: m.PromptEvalCount,
	})
	return b
}

// ollamaEmbeddings answers Ollama's legacy /api/embeddings: prompt, and
// {"embedding":[...]} (empty for an empty prompt).
type ollamaEmbeddings struct {
	ollamaBase
	wholeOnly
}

func (ollamaEmbeddings) parse(body []byte) (request, *httpError) {
	var in api.EmbeddingRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "model is required"}
	}
	req := request{kind: kindEmbed, model: in.Model, unloadAfter: keepAliveZero(in.KeepAlive)}
	if in.Prompt != "" {
		req.inputs = []string{in.Prompt}
	}
	req.promptTokens = embedTokens(req.inputs)
	return req, nil
}

func (ollamaEmbeddings) notFound(name string) *httpError { return ollamaEmbed{}.notFound(name) }

func (ollamaEmbeddings) check(_ request, m Model) *httpError {
	if !m.Embedding {
		return &httpError{http.StatusInternalServerError, noEmbeddings}
	}
	return nil
}

func (ollamaEmbeddings) whole(x *exchange) []byte {
	resp := api.EmbeddingResponse{Embedding: []float64{}}
	if vs := vectors(x); len(vs) == 1 {
		for _, f := range vs[0] {
			resp.Embedding = append(resp.Embedding, float64(f))
		}
	}
	b, _ := json.Marshal(resp)
	return b
}

// openaiEmbeddings answers /v1/embeddings: input a string, an array of
// strings or token ids; {"object":"list","data":[{"object":"embedding",
// "embedding","index"}],"model","usage":{"prompt_tokens","total_tokens"}},
// each embedding an array of numbers or, with encoding_format "base64",
// the base64 of its little-endian float32s (as vLLM, llama-server and
// Ollama encode it; the openai npm client asks for base64 by default).
type openaiEmbeddings struct {
	openaiBase
	wholeOnly
}

func (openaiEmbeddings) parse(body []byte) (request, *httpError) {
	var in struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "the model field is required"}
	}
	inputs := texts(in.Input)
	return request{
		kind:         kindEmbed,
		model:        in.Model,
		inputs:       inputs,
		dimensions:   in.Dimensions,
		base64:       strings.EqualFold(in.EncodingFormat, "base64"),
		promptTokens: embedTokens(inputs),
	}, nil
}

// check refuses embeddings of a chat model: vLLM with a 400 ("The model
// does not support Embeddings API"), Ollama's /v1 with its 501.
func (d openaiEmbeddings) check(_ request, m Model) *httpError {
	switch {
	case m.Embedding:
		return nil
	case d.flavor == flavorOllama:
		return &httpError{http.StatusNotImplemented, noEmbeddings}
	}
	return &httpError{http.StatusBadRequest, "The model does not support Embeddings API"}
}

func (d openaiEmbeddings) whole(x *exchange) []byte {
	type item struct {
		Object    string `json:"object"`
		Embedding any    `json:"embedding"`
		Index     int    `json:"index"`
	}
	resp := struct {
		ID      string `json:"id,omitempty"`
		Object  string `json:"object"`
		Created int64  `json:"created,omitempty"`
		Model   string `json:"model"`
		Data    []item `json:"data"`
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: x.req.model, Data: []item{}}
	resp.Usage.PromptTokens, resp.Usage.TotalTokens = x.req.promptTokens, x.req.promptTokens
	if d.flavor == flavorVLLM {
		resp.ID, resp.Created = "embd-"+hexID(x, "embd"), x.start.Unix()
	}
	for i, v := range vectors(x) {
		var e any = v
		if x.req.base64 {
			e = floatsBase64(v)
		}
		resp.Data = append(resp.Data, item{Object: "embedding", Embedding: e, Index: i})
	}
	b, _ := json.Marshal(resp)
	return b
}

// floatsBase64 encodes v as the base64 of its little-endian float32s.
func floatsBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
