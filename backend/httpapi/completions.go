package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/router"
)

// completionRequest is an OpenAI completions request (/v1/completions).
type completionRequest wire.CompletionRequest

// toFleet converts the request; it returns an error for content the
// caller must fix.
func (q *completionRequest) toFleet() (*fleet.Request, error) {
	if err := checkModel(q.Model); err != nil {
		return nil, err
	}
	prompt, err := onePrompt(q.Prompt)
	if err != nil {
		return nil, err
	}
	common := chatRequest{
		Temperature: q.Temperature, TopP: q.TopP, TopK: q.TopK, MinP: q.MinP, RepeatPenalty: q.RepeatPenalty,
		RepetitionPenalty: q.RepetitionPenalty, PresencePenalty: q.PresencePenalty, FrequencyPenalty: q.FrequencyPenalty,
		MaxTokens: q.MaxTokens, Seed: q.Seed, N: q.N, Stop: q.Stop,
	}
	if err := checkOpenAIOptions(&common); err != nil {
		return nil, err
	}
	opts, err := common.options()
	if err != nil {
		return nil, err
	}
	if q.Logprobs != nil {
		opts.Logprobs, opts.TopLogprobs = true, q.Logprobs
	}
	req := &fleet.Request{Kind: fleet.KindGenerate, Model: q.Model, Prompt: prompt, Suffix: q.Suffix, RawPrompt: true,
		Stream: q.Stream, Options: opts}
	if q.Echo {
		req.DialectOnly = append(req.DialectOnly, "echo")
	}
	if q.BestOf != nil && *q.BestOf > 1 {
		req.DialectOnly = append(req.DialectOnly, "best_of")
	}
	if fleet.IsSet(q.LogitBias) {
		req.DialectOnly = append(req.DialectOnly, "logit_bias")
	}
	return req, nil
}

// onePrompt reads a completion's prompt: a string, or an array of one
// string. Several prompts (several answers) and token ids are refused.
func onePrompt(raw json.RawMessage) (string, error) {
	if !fleet.IsSet(raw) {
		return "", errors.New("prompt: required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return list[0], nil
	}
	return "", errors.New("prompt: Switchyard takes one prompt per request, as a string")
}

// openaiCompletions is POST /v1/completions: a prompt's continuation,
// routed like a chat.
func (s *Server) openaiCompletions(w http.ResponseWriter, r *http.Request) {
	q, fields, ok := readRequest[completionRequest](s, w, r, writeOpenAIStatus)
	if !ok {
		return
	}
	req, err := q.toFleet()
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOpenAI)
	req.Raw = &fleet.Raw{Dialect: fleet.ProviderOpenAI, Endpoint: "/v1/completions", Fields: fields}
	if !q.Stream {
		ans := s.routeComplete(w, r, req, writeOpenAIRouteError)
		if ans == nil {
			return
		}
		writeJSON(w, http.StatusOK, openaiAnswer(req, ans, "text_completion"))
		return
	}
	s.openaiStream(w, r, req, q.StreamOptions != nil && q.StreamOptions.IncludeUsage, textChunks)
}

// embedInput reads the texts to embed: a string or an array of strings.
// Token ids are refused: they belong to one model's vocabulary.
func embedInput(raw json.RawMessage, field string) ([]string, error) {
	if !fleet.IsSet(raw) {
		return nil, errors.New(field + ": required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, errors.New(field + ": expected a string or an array of strings")
	}
	if len(list) == 0 {
		return nil, errors.New(field + ": at least one text is required")
	}
	return list, nil
}

// openaiEmbeddings is POST /v1/embeddings, routed to candidates of one
// embedding model (docs/API.md, "Embeddings").
func (s *Server) openaiEmbeddings(w http.ResponseWriter, r *http.Request) {
	q, fields, ok := readRequest[wire.EmbeddingRequest](s, w, r, writeOpenAIStatus)
	if !ok {
		return
	}
	input, err := embedInput(q.Input, "input")
	if err == nil {
		err = checkModel(q.Model)
	}
	if err == nil && q.EncodingFormat != "" && q.EncodingFormat != "float" && q.EncodingFormat != "base64" {
		err = errors.New(`encoding_format: use "float" or "base64"`)
	}
	if err == nil && q.Dimensions < 0 {
		err = errors.New("dimensions: must be positive")
	}
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	req := &fleet.Request{Kind: fleet.KindEmbed, Model: q.Model, Input: input, Dimensions: q.Dimensions,
		Protocol: protocolOf(r, fleet.ProtocolOpenAI),
		Raw:      &fleet.Raw{Dialect: fleet.ProviderOpenAI, Endpoint: "/v1/embeddings", Fields: fields}}
	ans := s.routeComplete(w, r, req, writeOpenAIRouteError)
	if ans == nil {
		return
	}
	if sameDialect(req, &ans.Meta, fleet.ProviderOpenAI) && len(ans.Fields) > 0 {
		writeJSON(w, http.StatusOK, ans.Fields) // the upstream's answer, every field
		return
	}
	writeJSON(w, http.StatusOK, embeddingList(ans, q.EncodingFormat == "base64"))
}

// embeddingList is OpenAI's answer for vectors from another dialect.
func embeddingList(ans *answer, b64 bool) any {
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(ans.Embeddings))
	for i, v := range ans.Embeddings {
		data[i] = item{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			data[i].Embedding = floatsBase64(v)
		}
	}
	var prompt int
	if ans.Usage != nil {
		prompt = ans.Usage.PromptTokens
	}
	return map[string]any{
		"object": "list", "data": data, "model": ans.Candidate.Model,
		"usage": map[string]int{"prompt_tokens": prompt, "total_tokens": prompt},
	}
}

// floatsBase64 is encoding_format "base64": the little-endian float32s.
func floatsBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// openaiModel is GET /v1/models/{id}.
func (s *Server) openaiModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.modelIDs() {
		if m == id || (id != router.AliasAuto && strings.EqualFold(m, id)) {
			writeJSON(w, http.StatusOK, map[string]any{"id": m, "object": "model", "created": time.Now().Unix(), "owned_by": "switchyard"})
			return
		}
	}
	writeOpenAIErrorCode(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
		"The model '"+fleet.ClipTo(id, MaxModelName)+"' does not exist (GET /v1/models lists them)")
}

// modelIDs are the names /v1/models lists: auto and the enabled candidates.
func (s *Server) modelIDs() []string {
	ids := []string{router.AliasAuto}
	for _, t := range s.o.Router.Fleet().Targets {
		if t.Candidate.Enabled {
			ids = append(ids, t.Candidate.ID)
		}
	}
	return ids
}
