// Package openai is the adapter for upstreams that speak the OpenAI chat
// completions API: vLLM, llama.cpp server, LM Studio, Ollama's /v1 and
// anything alike. It turns a fleet.Request into a streaming POST to
// {base}/chat/completions and the server-sent events of the answer into a
// fleet.Stream, reading every dialect of the end marker and of mid-stream
// errors these servers use (docs/DESIGN.md, "OpenAI-compatible servers").
package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/upstream"
)

// Backend opens chat streams on OpenAI-compatible candidates. It is safe
// for concurrent use. The zero value is not usable; call New.
type Backend struct {
	pool *upstream.Pool
}

var _ fleet.Backend = (*Backend)(nil)

// New returns a Backend whose requests go through pool's keep-alive
// clients. A nil pool means a private pool with default settings.
func New(pool *upstream.Pool) *Backend {
	if pool == nil {
		pool = upstream.NewPool(upstream.Settings{})
	}
	return &Backend{pool: pool}
}

// Open POSTs req to c's {URL} on the endpoint of its kind
// (/chat/completions, /completions, /embeddings) and returns the answer once
// its headers arrived. A chat or completion is sent as a stream with usage;
// an embedding answer is one chunk with the vectors. The request lives
// under ctx: cancelling ctx closes the connection and makes the stream's
// Recv return ctx's error. The caller must Close the returned stream.
//
// A caller of the OpenAI API gets its body forwarded whole, with only the
// model, stream and stream_options.include_usage put in; any other
// caller's request is mapped field by field (docs/API.md, "Fields across
// dialects"). Every chunk's Raw is the event's data as the server sent it.
//
// An HTTP error answer is a *fleet.StatusError (Busy for 429, and for 503
// with Retry-After or Ollama's "server busy"). So is a 2xx answer that is
// not text/event-stream (an HTML page from a proxy, a JSON error, a server
// that ignored stream: true); it keeps its status code.
//
// A caller that wants one answer is still sent a stream, so that the
// first-token deadline catches a server that hangs (docs/DESIGN.md,
// "Non-streaming requests"). A server that refuses only the streamed form
// (a 400 that names the stream, as llama-server's "logprobs is not
// supported with tools + stream") is asked again, once, for one answer,
// which comes back as one chunk.
func (b *Backend) Open(ctx context.Context, c fleet.Candidate, req *fleet.Request) (fleet.Stream, error) {
	path, body, err := requestBody(c, req, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := b.pool.Send(ctx, post(c, path, body))
	if err != nil && refusesStream(req, err) {
		resp, err = b.openWhole(ctx, c, req)
		if err == nil {
			return newWholeStream(ctx, cancel, resp.Body), nil
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if req.KindOf() == fleet.KindEmbed {
		return newEmbedStream(ctx, cancel, resp.Body), nil
	}
	if err := checkEventStream(resp); err != nil {
		resp.Body.Close()
		cancel()
		return nil, err
	}
	return newStream(ctx, cancel, resp.Body, maxLine), nil
}

// refusesStream reports whether err is a server's refusal of the
// streamed form of a request whose caller wants one answer: a 400 whose
// message names the stream.
func refusesStream(req *fleet.Request, err error) bool {
	if req.Stream || req.KindOf() == fleet.KindEmbed {
		return false
	}
	se, ok := errors.AsType[*fleet.StatusError](err)
	return ok && se.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(se.Message), "stream")
}

// openWhole sends req to c for one answer, not a stream.
func (b *Backend) openWhole(ctx context.Context, c fleet.Candidate, req *fleet.Request) (*http.Response, error) {
	path, body, err := requestBody(c, req, false)
	if err != nil {
		return nil, err
	}
	call := post(c, path, body)
	call.Accept = "application/json"
	return b.pool.Send(ctx, call)
}

// post is the POST of body to c's endpoint path; the answer is asked as
// a stream (an embedding's JSON comes back all the same); openWhole asks
// for JSON.
func post(c fleet.Candidate, path string, body []byte) upstream.Call {
	return upstream.Call{Method: http.MethodPost, URL: c.URL, Path: path, APIKey: c.APIKey, Body: body, Accept: "text/event-stream"}
}

// maxModelsBody bounds a /models answer.
const maxModelsBody = 8 << 20

// Models lists the model ids the server at baseURL (like
// http://127.0.0.1:8000/v1) offers on GET {baseURL}/models. apiKey, when
// set, is sent as a bearer token. An HTTP error answer is a
// *fleet.StatusError.
func (b *Backend) Models(ctx context.Context, baseURL, apiKey string) ([]string, error) {
	resp, err := b.pool.Send(ctx, upstream.Call{Method: http.MethodGet, URL: baseURL, Path: "/models", APIKey: apiKey, Accept: "application/json"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBody)).Decode(&list); err != nil {
		return nil, &fleet.MalformedError{Detail: "models list", Err: err}
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// checkEventStream rejects a 2xx answer that is not an event stream; it
// reads (part of) the body for the message but does not close it.
func checkEventStream(resp *http.Response) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
		return nil
	}
	se := upstream.StatusError(resp, nil)
	if ct == "" {
		ct = "none"
	}
	se.Message = fmt.Sprintf("content type %s, not text/event-stream: %s", ct, se.Message)
	return se
}

func newChatRequest(model string, req *fleet.Request) *wire.ChatRequest {
	o := req.Options
	cr := &wire.ChatRequest{
		Model:             model,
		Messages:          make([]wire.Message, 0, len(req.Messages)+1),
		Tools:             tools(req.Tools),
		ToolChoice:        req.ToolChoice,
		Stream:            true,
		StreamOptions:     &wire.StreamOptions{IncludeUsage: true},
		Temperature:       o.Temperature,
		TopP:              o.TopP,
		TopK:              o.TopK,
		MinP:              o.MinP,
		RepeatPenalty:     o.RepeatPenalty,
		RepetitionPenalty: o.RepeatPenalty,
		PresencePenalty:   o.PresencePenalty,
		FrequencyPenalty:  o.FrequencyPenalty,
		MaxTokens:         o.MaxTokens,
		Seed:              o.Seed,
		Stop:              stopWords(o.Stop),
		N:                 o.N,
		TopLogprobs:       o.TopLogprobs,
		ResponseFormat:    responseFormat(req.Format),
	}
	if o.Logprobs {
		cr.Logprobs = &o.Logprobs
	}
	switch {
	case req.Thinking:
		cr.ReasoningEffort = req.ThinkLevel
		if cr.ReasoningEffort == "" {
			cr.ReasoningEffort = "medium"
		}
	case req.NoThinking:
		cr.ChatTemplateKwargs = thinkingOff()
	}
	if req.KindOf() == fleet.KindGenerate {
		// A templated generation (Ollama /api/generate without raw) is a
		// chat of one turn.
		if req.System != "" {
			cr.Messages = append(cr.Messages, wire.Message{Role: "system", Content: jsonOf(req.System)})
		}
		cr.Messages = append(cr.Messages, newMessage(fleet.Message{Role: "user", Content: req.Prompt, Images: req.Images}))
		return cr
	}
	for _, m := range req.Messages {
		cr.Messages = append(cr.Messages, newMessage(m))
	}
	return cr
}

// tools returns ts as chat completions take them, each empty type set to
// "function", which servers require.
func tools(ts []fleet.Tool) []wire.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]wire.Tool, len(ts))
	for i, t := range ts {
		out[i] = wire.Tool{Type: t.Type, Function: wire.ToolFunction{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}}
		if out[i].Type == "" {
			out[i].Type = "function"
		}
	}
	return out
}

// newMessage is m as a chat turn: its content a string, or a list of parts
// when the turn carries images.
func newMessage(m fleet.Message) wire.Message {
	out := wire.Message{Role: m.Role, ToolCallID: m.ToolCallID, Name: m.Name}
	if len(m.Images) > 0 {
		parts := make([]wire.ContentPart, 0, len(m.Images)+1)
		if m.Content != "" {
			parts = append(parts, wire.ContentPart{Type: "text", Text: m.Content})
		}
		for _, img := range m.Images {
			parts = append(parts, wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: dataURL(img)}})
		}
		out.Content = jsonOf(parts)
	} else {
		out.Content = jsonOf(m.Content)
	}
	for _, tc := range m.ToolCalls {
		call := wire.ToolCall{ID: tc.ID, Type: tc.Type, Function: wire.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}}
		if call.Type == "" {
			call.Type = "function"
		}
		if call.Function.Arguments == "" {
			call.Function.Arguments = "{}" // servers parse it as JSON
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out
}

// dataURL turns an Ollama-style base64 image into the data URL OpenAI
// servers take, naming its type from its first bytes (image/jpeg when they
// do not tell). A value that already is a URL passes unchanged.
func dataURL(b64 string) string {
	if strings.HasPrefix(b64, "data:") || strings.HasPrefix(b64, "http://") || strings.HasPrefix(b64, "https://") {
		return b64
	}
	head := b64[:min(len(b64), 64)]
	head = head[:len(head)/4*4]
	raw, _ := base64.StdEncoding.DecodeString(head)
	mime := http.DetectContentType(raw)
	if !strings.HasPrefix(mime, "image/") {
		mime = "image/jpeg" // servers decode the bytes whatever the label says
	}
	return "data:" + mime + ";base64," + b64
}

// responseFormat maps the request's format to OpenAI's response_format:
// an OpenAI response_format ({"type":"text"|"json_object"|"json_schema"})
// passes through; Ollama's "json" becomes json_object and an Ollama JSON
// schema becomes json_schema. Nothing, null or "" means no field.
func responseFormat(format json.RawMessage) json.RawMessage {
	f := json.RawMessage(bytes.TrimSpace(format))
	if len(f) == 0 || string(f) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(f, &s) == nil {
		if s == "" {
			return nil
		}
		return json.RawMessage(`{"type":"json_object"}`) // Ollama "json"
	}
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(f, &probe) == nil {
		switch string(probe.Type) {
		case `"text"`, `"json_object"`, `"json_schema"`:
			return f
		}
	}
	type jsonSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	wrapped, err := json.Marshal(struct {
		Type       string     `json:"type"`
		JSONSchema jsonSchema `json:"json_schema"`
	}{"json_schema", jsonSchema{"response", f}})
	if err != nil {
		return nil // not JSON at all: let the server decide without it
	}
	return wrapped
}

// jsonOf is v encoded; the values it is given always encode.
func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// stopWords is the stop field for words: none is no field.
func stopWords(words []string) json.RawMessage {
	if len(words) == 0 {
		return nil
	}
	return jsonOf(words)
}

// thinkingOff is the chat template's argument that turns thinking off.
func thinkingOff() *wire.TemplateKwargs {
	off := false
	return &wire.TemplateKwargs{EnableThinking: &off}
}
