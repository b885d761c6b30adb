// Package ollama is the adapter for Ollama's native API: it sends a
// fleet.Request to a candidate's /api/chat and turns the NDJSON answer into
// a fleet.Stream, and it reads the server's model list (/api/tags,
// /api/show), resident models (/api/ps) and version for discovery.
//
// The wire types are those of github.com/ollama/ollama/api. The official
// api.Client is used for the small request/response endpoints; /api/chat is
// read by this package's own line reader, because the client of v0.17.4
// returns nil when a stream is cut or cancelled (see stream.go).
package ollama

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// maxLine bounds one NDJSON line of a chat answer. Ollama's own client
// allows 8 MB; a line carries one token or one complete tool call, so 16 MiB
// is far above anything legitimate and still bounds a broken upstream.
const maxLine = 16 << 20

// Backend opens chat streams on Ollama servers and reads their model lists.
// It is safe for concurrent use. The zero value is not usable; call New.
type Backend struct {
	pool *upstream.Pool
}

// New returns a Backend that takes its HTTP clients from pool, one per
// upstream host, so connections to a server are kept alive across requests.
// A nil pool means a pool of its own with default settings. The Backend
// never closes the pool's connections; the pool's owner does (CloseIdle).
func New(pool *upstream.Pool) *Backend {
	if pool == nil {
		pool = upstream.NewPool(upstream.Settings{})
	}
	return &Backend{pool: pool}
}

var _ fleet.Backend = (*Backend)(nil)

// Open POSTs req to c.URL as a streaming request for c.Model, on the
// endpoint of its kind (/api/chat, /api/generate, /api/embed; a caller of
// Ollama's own API keeps the endpoint it called, legacy /api/embeddings
// included), and returns the answer once its response headers arrived. The
// returned Stream owns the response body: the caller closes it, and closing
// it (or cancelling ctx) closes the connection, which makes Ollama stop
// generating.
//
// Each NDJSON line becomes one chunk: message.content (or a generation's
// response) is Content, message.thinking is Reasoning, and each tool call is
// one ToolCall whose Index numbers the calls across the whole stream and
// whose Arguments are the JSON of its arguments object. The done:true line
// is the final chunk, with FinishReason (done_reason, "stop" when absent)
// and Usage; Recv then returns io.EOF. Ollama's "load" and "unload" answers
// are a final chunk without content. An {"error":...} line is a
// *fleet.EventError, an end before done:true is fleet.ErrTruncated, a line
// that is not a JSON object of this shape (or longer than 16 MiB) is a
// *fleet.MalformedError. An embedding answer is one chunk with the vectors.
// Every chunk's Raw is the line as Ollama sent it.
//
// An HTTP error status is a *fleet.StatusError; Ollama's 503 "server busy"
// (its request queue is full) and 429 are marked Busy. A 2xx answer that is
// an HTML page (a captive portal or a proxy's error page) is a
// *fleet.MalformedError wrapping a *fleet.StatusError that keeps the status.
// A request that Ollama would reject on any server (an image that is not
// base64, tool arguments or parameters that are not JSON objects) is
// reported as a *fleet.StatusError with status 400 without being sent.
func (b *Backend) Open(ctx context.Context, c fleet.Candidate, req *fleet.Request) (fleet.Stream, error) {
	path, body, err := requestBody(c, req)
	if err != nil {
		return nil, err
	}
	resp, err := b.pool.Send(ctx, upstream.Call{Method: http.MethodPost, URL: c.URL, Path: path, APIKey: c.APIKey, Body: body,
		Accept: "application/x-ndjson"})
	if err != nil {
		return nil, callersFault(req, err)
	}
	if isHTML(resp.Header.Get("Content-Type")) {
		se := upstream.StatusError(resp, nil)
		resp.Body.Close()
		return nil, &fleet.MalformedError{Detail: "ollama answered an HTML page", Err: se}
	}
	if req.KindOf() == fleet.KindEmbed {
		return newEmbedStream(ctx, resp.Body, path == pathEmbeddings), nil
	}
	return newStream(ctx, resp.Body, maxLine), nil
}

// callersFault marks as the request's (StatusError.Invalid) Ollama's 500s
// about what the caller sent it to use as is: a template it could not
// parse or run ("template: :1: unclosed action", "undefined template
// specified"), a context it could not read ("detokenize error: ..."),
// seen with the real v0.33. Only when the
// request carried that field: the model's own template failing is the
// server's.
func callersFault(req *fleet.Request, err error) error {
	se, ok := errors.AsType[*fleet.StatusError](err)
	if !ok || se.StatusCode < 500 || se.Invalid {
		return err
	}
	fields := req.RawFor(fleet.ProviderOllama)
	_, hasTemplate := fields["template"]
	_, hasContext := fields["context"]
	se.Invalid = hasTemplate && strings.Contains(se.Message, "template") || hasContext && strings.HasPrefix(se.Message, "detokenize error")
	return err
}

// isHTML reports whether a Content-Type names a web page rather than the
// NDJSON or JSON Ollama sends.
func isHTML(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// chatRequest builds Ollama's streaming chat request for c from req.
func chatRequest(c fleet.Candidate, req *fleet.Request) (*api.ChatRequest, error) {
	stream := true
	cr := &api.ChatRequest{
		Model:    c.Model,
		Stream:   &stream,
		Messages: make([]api.Message, 0, len(req.Messages)),
		Options:  options(req.Options),
		Format:   format(req.Format),
	}
	for i, m := range req.Messages {
		am, err := message(m)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
		cr.Messages = append(cr.Messages, am)
	}
	tools := req.Tools
	if toolChoice(req.ToolChoice) == "none" {
		tools = nil // what "none" means: answer without calling
	}
	for i, t := range tools {
		at, err := tool(t)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tool %d (%s): %v", i, t.Function.Name, err))
		}
		cr.Tools = append(cr.Tools, at)
	}
	cr.Think = think(c, req)
	cr.KeepAlive = keepAlive(req.KeepAlive)
	cr.Logprobs = req.Options.Logprobs
	if req.Options.TopLogprobs != nil {
		cr.TopLogprobs = *req.Options.TopLogprobs
	}
	return cr, nil
}

// think is the think value for c: a level only for models that take one
// (gpt-oss), true for other models in thinking mode, false when the caller
// turned thinking off (Ollama thinks by default with a thinking-capable
// model), and nothing otherwise, which leaves the model's own default.
func think(c fleet.Candidate, req *fleet.Request) *api.ThinkValue {
	switch {
	case req.Thinking && req.ThinkLevel != "" && c.ThinkLevels:
		return &api.ThinkValue{Value: req.ThinkLevel}
	case req.Thinking:
		return &api.ThinkValue{Value: true}
	case req.NoThinking:
		return &api.ThinkValue{Value: false}
	}
	return nil
}

// badRequest reports a request Ollama would reject on every server, so that
// the router returns it to the caller instead of trying other candidates.
func badRequest(msg string) *fleet.StatusError {
	return &fleet.StatusError{StatusCode: http.StatusBadRequest, Message: "invalid request for ollama: " + msg}
}

func message(m fleet.Message) (api.Message, error) {
	am := api.Message{
		Role:       m.Role,
		Content:    m.Content,
		Thinking:   m.Thinking,
		ToolName:   m.Name,
		ToolCallID: m.ToolCallID,
	}
	for j, img := range m.Images {
		data, err := decodeImage(img)
		if err != nil {
			return api.Message{}, fmt.Errorf("image %d: %w", j, err)
		}
		am.Images = append(am.Images, api.ImageData(data))
	}
	for j, tc := range m.ToolCalls {
		var args api.ToolCallFunctionArguments
		if a := strings.TrimSpace(tc.Arguments); a != "" {
			if err := json.Unmarshal([]byte(a), &args); err != nil {
				return api.Message{}, fmt.Errorf("tool call %d arguments: %w", j, err)
			}
		}
		am.ToolCalls = append(am.ToolCalls, api.ToolCall{
			ID:       tc.ID,
			Function: api.ToolCallFunction{Index: j, Name: tc.Name, Arguments: args},
		})
	}
	return am, nil
}

// decodeImage turns a base64 image (optionally a data: URL) into bytes;
// api.ImageData encodes them as base64 again on the wire.
func decodeImage(s string) ([]byte, error) {
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ";base64,"); i >= 0 {
			s = s[i+len(";base64,"):]
		}
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		data, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	return data, nil
}

func tool(t fleet.Tool) (api.Tool, error) {
	at := api.Tool{
		Type: t.Type,
		Function: api.ToolFunction{
			Name:        t.Function.Name,
			Description: t.Function.Description,
		},
	}
	if at.Type == "" {
		at.Type = "function"
	}
	// Ollama decodes parameters into these same types on the server, so
	// whatever JSON Schema they cannot hold it would drop anyway.
	if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, &at.Function.Parameters); err != nil {
			return api.Tool{}, fmt.Errorf("parameters: %w", err)
		}
	}
	if at.Function.Parameters.Type == "" {
		at.Function.Parameters.Type = "object"
	}
	return at, nil
}

// options maps the caller's sampling settings to Ollama's option names; nil
// when none is set, so Ollama applies the model's defaults.
func options(o fleet.Options) map[string]any {
	m := make(map[string]any, 8)
	for name, v := range map[string]*float64{
		"temperature": o.Temperature, "top_p": o.TopP, "min_p": o.MinP, "repeat_penalty": o.RepeatPenalty,
		"presence_penalty": o.PresencePenalty, "frequency_penalty": o.FrequencyPenalty,
	} {
		if v != nil {
			m[name] = *v
		}
	}
	for name, v := range map[string]*int{"top_k": o.TopK, "num_predict": o.MaxTokens, "seed": o.Seed, "num_ctx": o.NumCtx} {
		if v != nil {
			m[name] = *v
		}
	}
	if len(o.Stop) > 0 {
		m["stop"] = o.Stop
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// format turns the caller's format into Ollama's. An Ollama caller's value
// ("json" or a JSON schema) passes through; an OpenAI response_format is
// translated the way Ollama's own /v1 layer does: json_object → "json",
// json_schema → its schema, text → none. The three type names are not JSON
// Schema types, so a schema is never mistaken for a response_format.
func format(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] != '{' {
		return raw
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return raw
	}
	switch rf.Type {
	case "text":
		return nil
	case "json_object":
		return json.RawMessage(`"json"`)
	case "json_schema":
		if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
			return rf.JSONSchema.Schema
		}
		return json.RawMessage(`"json"`)
	}
	return raw
}
