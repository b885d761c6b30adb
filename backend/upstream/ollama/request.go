package ollama

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// The endpoints of Ollama's API Switchyard sends requests to.
const (
	pathChat       = "/api/chat"
	pathGenerate   = "/api/generate"
	pathEmbed      = "/api/embed"
	pathEmbeddings = "/api/embeddings" // the legacy single-prompt form
)

// requestBody returns the endpoint and body for req on c. A caller of
// Ollama's own API gets its body forwarded whole, with only the model,
// stream and think put in; any other caller's request is mapped field by
// field (docs/API.md, "Fields across dialects").
func requestBody(c fleet.Candidate, req *fleet.Request) (string, []byte, error) {
	kind := req.KindOf()
	if raw := req.RawFor(fleet.ProviderOllama); raw != nil {
		set := map[string]any{"model": c.Model}
		path := pathChat
		switch kind {
		case fleet.KindGenerate:
			path = pathGenerate
		case fleet.KindEmbed:
			path = pathEmbed
			if req.Raw.Endpoint == pathEmbeddings {
				path = pathEmbeddings
			}
		}
		if kind != fleet.KindEmbed {
			set["stream"] = true
			if t := think(c, req); t != nil {
				set["think"] = t
			}
		}
		body, err := upstream.MergeRaw(raw, set)
		return path, body, err
	}
	var (
		v    any
		path string
		err  error
	)
	switch kind {
	case fleet.KindGenerate:
		path, v = pathGenerate, generateRequest(c, req)
	case fleet.KindEmbed:
		path, v = pathEmbed, embedRequest(c, req)
	default:
		path = pathChat
		v, err = chatRequest(c, req)
	}
	if err != nil {
		return "", nil, err
	}
	body, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("encode ollama request: %w", err)
	}
	return path, body, nil
}

// Check reports what of req an Ollama server can't be sent without
// changing the answer (fleet.Checker): more than one answer, or a tool
// call forced by tool_choice, which Ollama has no field for. A caller of
// Ollama's own API is never refused.
func (b *Backend) Check(_ fleet.Candidate, req *fleet.Request) error {
	if req.RawFor(fleet.ProviderOllama) != nil {
		return nil
	}
	if len(req.DialectOnly) > 0 {
		return fmt.Errorf("%s: only an OpenAI-compatible server takes it", strings.Join(req.DialectOnly, ", "))
	}
	if n := req.Options.N; n != nil && *n > 1 {
		return fmt.Errorf("n: %d answers asked, and Ollama gives one per request", *n)
	}
	switch choice := toolChoice(req.ToolChoice); choice {
	case "", "auto", "none":
	default:
		return fmt.Errorf("tool_choice %s: Ollama can't be made to call a tool", choice)
	}
	return nil
}

// toolChoice is OpenAI's tool_choice as one word: "auto", "none",
// "required", or "function NAME" for a named one; "" when absent.
func toolChoice(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	json.Unmarshal(raw, &named)
	return "function " + fleet.ClipTo(named.Function.Name, 64)
}

// keepAlive reads Ollama's keep_alive as the caller sent it; nil when
// absent or not a duration (Ollama would refuse it; the model's default is
// the gentler answer to a caller of another dialect).
func keepAlive(raw json.RawMessage) *api.Duration {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var d api.Duration
	if d.UnmarshalJSON(raw) != nil {
		return nil
	}
	return &d
}

// generateRequest builds /api/generate's body from a request of the OpenAI
// dialect (/v1/completions): the prompt is sent raw, as a completion is.
func generateRequest(c fleet.Candidate, req *fleet.Request) *api.GenerateRequest {
	stream := true
	gr := &api.GenerateRequest{
		Model:     c.Model,
		Prompt:    req.Prompt,
		Suffix:    req.Suffix,
		System:    req.System,
		Raw:       req.RawPrompt,
		Stream:    &stream,
		Format:    format(req.Format),
		KeepAlive: keepAlive(req.KeepAlive),
		Options:   options(req.Options),
		Think:     think(c, req),
		Logprobs:  req.Options.Logprobs,
	}
	if req.Options.TopLogprobs != nil {
		gr.TopLogprobs = *req.Options.TopLogprobs
	}
	for _, img := range req.Images {
		if data, err := decodeImage(img); err == nil {
			gr.Images = append(gr.Images, data)
		}
	}
	return gr
}

// embedRequest builds /api/embed's body.
func embedRequest(c fleet.Candidate, req *fleet.Request) *api.EmbedRequest {
	er := &api.EmbedRequest{Model: c.Model, Input: req.Input, Dimensions: req.Dimensions, KeepAlive: keepAlive(req.KeepAlive)}
	if len(req.Input) == 1 {
		er.Input = req.Input[0]
	}
	return er
}
