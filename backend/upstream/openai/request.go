package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/upstream"
)

// The endpoints below a candidate's base URL (which ends in /v1).
const (
	pathChat        = "/chat/completions"
	pathCompletions = "/completions"
	pathEmbeddings  = "/embeddings"
)

// requestBody returns the endpoint and body for req on c: a chat or a
// completion as a stream with usage, or, when stream is false, as one
// answer (the form a server takes where it refuses the streamed one).
func requestBody(c fleet.Candidate, req *fleet.Request, stream bool) (string, []byte, error) {
	if raw := req.RawFor(fleet.ProviderOpenAI); raw != nil {
		return rawBody(c, req, raw, stream)
	}
	return typedBody(c, req, stream)
}

// typedBody is the body of a request from another dialect, made from its
// fields. Apart from requestBody: the request types it fills are large,
// and the usual request, the caller's own bytes, went through their
// frame, which made the handler's stack outgrow 8 KiB.
//
//go:noinline
func typedBody(c fleet.Candidate, req *fleet.Request, stream bool) (string, []byte, error) {
	kind := req.KindOf()
	var (
		path = pathChat
		v    any
	)
	switch {
	case kind == fleet.KindEmbed:
		path, v = pathEmbeddings, wire.EmbeddingRequest{Model: c.Model, Input: jsonOf(req.Input), Dimensions: req.Dimensions}
	case kind == fleet.KindGenerate && (req.RawPrompt || req.Suffix != ""):
		cr := newCompletionRequest(c.Model, req)
		if !stream {
			cr.Stream, cr.StreamOptions = false, nil
		}
		path, v = pathCompletions, cr
	default:
		cr := newChatRequest(c.Model, req)
		if !stream {
			cr.Stream, cr.StreamOptions = false, nil
		}
		v = cr
	}
	body, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("encode request: %w", err)
	}
	return path, body, nil
}

// includeUsage is the stream options sent for a caller that sent none.
var includeUsage = json.RawMessage(`{"include_usage":true}`)

// rawBody forwards the fields of an OpenAI caller to the endpoint it
// called, with the candidate's model, a stream with usage (or, when stream
// is false, one answer), and thinking as the router resolved it where the
// caller did not say.
func rawBody(c fleet.Candidate, req *fleet.Request, raw map[string]json.RawMessage, stream bool) (string, []byte, error) {
	set := map[string]any{"model": c.Model}
	path := pathChat
	switch req.KindOf() {
	case fleet.KindEmbed:
		body, err := upstream.MergeRaw(raw, set)
		return pathEmbeddings, body, err
	case fleet.KindGenerate:
		path = pathCompletions
	}
	set["stream"] = stream
	if !stream {
		set["stream_options"] = nil // a server may refuse it without a stream
	}
	// include_usage for the history; dropped for a caller that did not
	// ask. A caller's own options are read even without a stream, to
	// refuse ones that are no object.
	var opts any = includeUsage
	if so := raw["stream_options"]; len(so) > 0 && string(so) != "null" {
		m := map[string]json.RawMessage{}
		if err := json.Unmarshal(so, &m); err != nil {
			return "", nil, badRequest("stream_options: expected an object")
		}
		m["include_usage"] = json.RawMessage("true")
		opts = m
	}
	if stream {
		set["stream_options"] = opts
	}
	_, effort := raw["reasoning_effort"]
	_, reasoning := raw["reasoning"]
	_, kwargs := raw["chat_template_kwargs"]
	switch {
	case req.Thinking && !effort && !reasoning:
		set["reasoning_effort"] = "medium" // the deep-thinking model named as the model
	case req.NoThinking && !kwargs && path == pathChat:
		set["chat_template_kwargs"] = thinkingOff()
	}
	body, err := upstream.MergeRaw(raw, set)
	return path, body, err
}

// Check reports what of req an OpenAI-compatible server can't be sent
// without changing the answer (fleet.Checker): a generation with images or
// a format that must go to /v1/completions, which takes neither. A caller of
// the OpenAI API is never refused; fields of an Ollama caller that these
// servers fix at start (num_ctx, keep_alive) are dropped, as docs/API.md
// says.
func (b *Backend) Check(_ fleet.Candidate, req *fleet.Request) error {
	if req.RawFor(fleet.ProviderOpenAI) != nil {
		return nil
	}
	if len(req.DialectOnly) > 0 {
		return fmt.Errorf("%s: only an Ollama server takes it", strings.Join(req.DialectOnly, ", "))
	}
	if req.KindOf() != fleet.KindGenerate {
		return nil
	}
	if !req.RawPrompt && req.Suffix == "" {
		return nil // sent as a chat
	}
	switch {
	case len(req.Images) > 0:
		return errors.New("images with raw or suffix: /v1/completions takes no images")
	case len(req.Format) > 0 && string(req.Format) != "null":
		return errors.New("format with raw or suffix: /v1/completions has no format")
	}
	return nil
}

// badRequest reports a request that is wrong whatever the server.
func badRequest(msg string) *fleet.StatusError {
	return &fleet.StatusError{StatusCode: 400, Message: "invalid request: " + msg}
}

// newCompletionRequest maps a raw generation (Ollama raw: true, or one
// with a suffix) to /completions.
func newCompletionRequest(model string, req *fleet.Request) *wire.CompletionRequest {
	o := req.Options
	cr := &wire.CompletionRequest{
		Model: model, Prompt: jsonOf(req.Prompt), Suffix: req.Suffix, Stream: true, StreamOptions: &wire.StreamOptions{IncludeUsage: true},
		Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, MinP: o.MinP,
		RepeatPenalty: o.RepeatPenalty, RepetitionPenalty: o.RepeatPenalty,
		PresencePenalty: o.PresencePenalty, FrequencyPenalty: o.FrequencyPenalty,
		MaxTokens: o.MaxTokens, Seed: o.Seed, Stop: stopWords(o.Stop),
	}
	if o.Logprobs {
		n := 0
		if o.TopLogprobs != nil {
			n = *o.TopLogprobs
		}
		cr.Logprobs = &n
	}
	return cr
}
