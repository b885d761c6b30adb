package simfleet

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// flavor is whose OpenAI-compatible API a server speaks.
type flavor int

const (
	// flavorVLLM is vLLM's (and, for tool calls, llama-server's): errors
	// {"error":{message,type,param,code}} with an integer code and vLLM's
	// exception names as types, a tool call streamed in fragments.
	flavorVLLM flavor = iota
	// flavorOllama is Ollama's /v1 (its openai package): errors with
	// OpenAI's type names and a null code, system_fingerprint "fp_ollama",
	// each tool call whole in one delta, 503 when busy.
	flavorOllama
)

// openaiBase is what the OpenAI-compatible endpoints of one flavor share:
// error bodies, ids, usage.
type openaiBase struct{ flavor flavor }

type oaError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

func (b openaiBase) notFound(name string) *httpError {
	if b.flavor == flavorOllama {
		return &httpError{http.StatusNotFound, fmt.Sprintf("model '%s' not found", name)}
	}
	return &httpError{http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", name)}
}

// errorType names an HTTP error status as vLLM's exception classes do.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusForbidden:
		return "PermissionDeniedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

// ollamaErrorType names an HTTP error status as Ollama's openai.NewError
// does.
func ollamaErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusNotFound:
		return "not_found_error"
	}
	return "api_error"
}

func (b openaiBase) errorBody(status int, msg string) map[string]oaError {
	if b.flavor == flavorOllama {
		return map[string]oaError{"error": {Message: msg, Type: ollamaErrorType(status)}}
	}
	return map[string]oaError{"error": {Message: msg, Type: errorType(status), Code: status}}
}

func (b openaiBase) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, b.errorBody(status, msg))
}

// writeBusy answers as vLLM behind a load shedder does (429 with
// Retry-After), or as Ollama does (503 "server busy", FINDINGS.md §6).
func (b openaiBase) writeBusy(w http.ResponseWriter, retryAfter time.Duration) {
	if b.flavor == flavorOllama {
		b.writeError(w, http.StatusServiceUnavailable, ollamaBusy)
		return
	}
	secs := int(math.Ceil(retryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	b.writeError(w, http.StatusTooManyRequests, "server busy: too many pending requests, retry later")
}

func (openaiBase) streamType() string { return "text/event-stream; charset=utf-8" }

// errorEvent is vLLM's mid-stream error: an error event, then [DONE].
func (b openaiBase) errorEvent(_ *exchange, msg string) []byte {
	return append(sse(b.errorBody(http.StatusInternalServerError, msg)), "data: [DONE]\n\n"...)
}

func (b openaiBase) fingerprint() string {
	if b.flavor == flavorOllama {
		return "fp_ollama"
	}
	return ""
}

func (openaiBase) usage(x *exchange) *oaUsage {
	thinking, content := x.count()
	u := &oaUsage{
		PromptTokens:     x.req.promptTokens,
		CompletionTokens: thinking + content,
		TotalTokens:      x.req.promptTokens + thinking + content,
	}
	if thinking > 0 {
		u.CompletionTokensDetails = &struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		}{thinking}
	}
	return u
}

// usageEvent is the chunk of stream_options.include_usage, if asked for:
// no choices, the usage.
func (b openaiBase) usageEvent(x *exchange, id, object string) []byte {
	if !x.req.includeUsage {
		return nil
	}
	return sse(map[string]any{
		"id": id, "object": object, "created": x.start.Unix(), "model": x.req.model,
		"choices": []any{}, "usage": b.usage(x),
	})
}

// openaiChat renders answers as /v1/chat/completions: SSE "data: {chunk}"
// events, reasoning in delta.reasoning, data: [DONE] at the end. A tool
// call streams as its flavor streams it; its finish_reason is
// "tool_calls".
type openaiChat struct{ openaiBase }

// The OpenAI wire types below are simfleet's own, not backend/openai/wire's,
// on purpose: the simulated servers are the other side of the wire in the
// tests of httpapi and upstream/openai, and a shape both sides took from
// one package would hide a bug in it from every test. They are written
// from the real servers' answers (backend/realserver/FINDINGS.md).
type oaRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReasoningEffort string `json:"reasoning_effort"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Tools          []wireTool      `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

type oaChunk struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint,omitempty"`
	Choices           []oaChoice `json:"choices"`
	Usage             *oaUsage   `json:"usage,omitempty"`
}

type oaChoice struct {
	Index        int        `json:"index"`
	Delta        *oaMessage `json:"delta,omitempty"`
	Message      *oaWhole   `json:"message,omitempty"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

// oaMessage is a delta: only what it carries.
type oaMessage struct {
	Role      string       `json:"role,omitempty"`
	Content   *string      `json:"content,omitempty"`
	Reasoning string       `json:"reasoning,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaWhole is the message of a chat.completion: content is null when the
// answer is only tool calls.
type oaWhole struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Reasoning string       `json:"reasoning,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"` // deltas only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

func (d openaiChat) parse(body []byte) (request, *httpError) {
	var in oaRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "the model field is required"}
	}
	effort := in.ReasoningEffort
	if effort == "" && in.Reasoning != nil {
		effort = in.Reasoning.Effort
	}
	contents := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		contents[i] = contentText(m.Content)
	}
	req := request{
		kind:         kindChat,
		model:        in.Model,
		stream:       in.Stream,
		think:        effort != "" && effort != "none",
		includeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage,
		promptTokens: promptTokens(contents),
		tools:        chosen(tools(in.Tools), in.ToolChoice),
	}
	if n := len(contents); n > 0 {
		req.prompt = contents[n-1]
	}
	if n := len(in.Messages); n > 0 && (in.Messages[n-1].Role == "tool" || in.Messages[n-1].Role == "function") {
		req.toolResult = &contents[n-1]
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			req.format = &outputFormat{}
		case "json_schema":
			req.format = &outputFormat{}
			if rf.JSONSchema != nil {
				req.format.schema = rf.JSONSchema.Schema
			}
		}
	}
	return req, nil
}

// contentText is the text of a message's content: a string, or the text
// parts of an array of parts.
func contentText(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw) // something else: a rough count is enough
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// chosen applies tool_choice to the tools offered: "none" offers none, a
// named function puts it first, "auto" and "required" keep the tools.
func chosen(offered []tool, choice json.RawMessage) []tool {
	var mode string
	if json.Unmarshal(choice, &mode) == nil && mode == "none" {
		return nil
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(choice, &named) == nil && named.Function.Name != "" {
		for i, t := range offered {
			if t.name == named.Function.Name {
				return append([]tool{t}, append(offered[:i:i], offered[i+1:]...)...)
			}
		}
	}
	return offered
}

// check refuses chat with an embedding model, as vLLM ("The model does not
// support Chat Completions API", a 400) and Ollama do; Ollama's /v1 also
// refuses reasoning for a model that cannot think (FINDINGS.md §5), while
// vLLM ignores reasoning_effort for a model without a reasoning parser.
func (d openaiChat) check(req request, m Model) *httpError {
	if d.flavor == flavorOllama {
		return ollamaChat{}.check(req, m)
	}
	if m.Embedding {
		return &httpError{http.StatusBadRequest, "The model does not support Chat Completions API"}
	}
	return nil
}

// call streams a vLLM call in fragments: the head delta has the index, the
// id ("chatcmpl-tool-" and 32 hex digits), type "function", the name and
// empty arguments; the arguments follow in pieces. Ollama's /v1 sends the
// whole call in one delta, with an id as its native API makes them.
func (d openaiChat) call(x *exchange, c toolCall) []token {
	if d.flavor == flavorOllama {
		c.id = callID(x, c, "call_", "abcdefghijklmnopqrstuvwxyz0123456789", 8)
		return wholeCall(c)
	}
	c.id = "chatcmpl-tool-" + hexID(x, strconv.Itoa(c.index))
	return fragmentedCall(c)
}

func (d openaiChat) opening(x *exchange) []byte {
	empty := ""
	return d.event(x, &oaMessage{Role: "assistant", Content: &empty}, nil)
}

func (d openaiChat) stall(x *exchange) []byte { return d.opening(x) }

func (d openaiChat) token(x *exchange, t token) []byte {
	switch {
	case t.call != nil:
		tc := oaToolCall{Index: &t.call.index}
		if t.head {
			tc.ID, tc.Type, tc.Function.Name = t.call.id, "function", t.call.name
		}
		tc.Function.Arguments = t.text
		return d.event(x, &oaMessage{ToolCalls: []oaToolCall{tc}}, nil)
	case t.thinking:
		return d.event(x, &oaMessage{Reasoning: t.text}, nil)
	}
	text := t.text
	return d.event(x, &oaMessage{Content: &text}, nil)
}

func (d openaiChat) finish(x *exchange) []byte {
	empty, reason := "", finishReason(x)
	b := d.event(x, &oaMessage{Content: &empty}, &reason)
	b = append(b, d.usageEvent(x, "chatcmpl-"+x.id, "chat.completion.chunk")...)
	return append(b, "data: [DONE]\n\n"...)
}

// finishReason is "tool_calls" for an answer that made tool calls, else
// "stop".
func finishReason(x *exchange) string {
	if len(x.calls()) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (openaiChat) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,"choices":[{"index":0,"delta":{"content":`+"\n\n",
		x.id, x.start.Unix())
}

func (d openaiChat) whole(x *exchange) []byte {
	thinking, content := x.text()
	msg := &oaWhole{Role: "assistant", Content: &content, Reasoning: thinking}
	for _, c := range x.calls() {
		tc := oaToolCall{ID: c.id, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = c.name, c.arguments
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	if len(msg.ToolCalls) > 0 && content == "" {
		msg.Content = nil
	}
	reason := finishReason(x)
	b, _ := json.Marshal(oaChunk{
		ID:                "chatcmpl-" + x.id,
		Object:            "chat.completion",
		Created:           x.start.Unix(),
		Model:             x.req.model,
		SystemFingerprint: d.fingerprint(),
		Choices:           []oaChoice{{Message: msg, FinishReason: &reason}},
		Usage:             d.usage(x),
	})
	return b
}

// event is one chunk of the one choice.
func (d openaiChat) event(x *exchange, delta *oaMessage, finish *string) []byte {
	return sse(oaChunk{
		ID:                "chatcmpl-" + x.id,
		Object:            "chat.completion.chunk",
		Created:           x.start.Unix(),
		Model:             x.req.model,
		SystemFingerprint: d.fingerprint(),
		Choices:           []oaChoice{{Delta: delta, FinishReason: finish}},
	})
}

// openaiCompletions renders answers as /v1/completions: text_completion
// objects whose choices carry text; a suffix gets the infill text.
type openaiCompletions struct{ openaiBase }

type oaCompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	SystemFingerprint string         `json:"system_fingerprint,omitempty"`
	Choices           []oaTextChoice `json:"choices"`
	Usage             *oaUsage       `json:"usage,omitempty"`
}

type oaTextChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

func (openaiCompletions) parse(body []byte) (request, *httpError) {
	var in struct {
		Model         string          `json:"model"`
		Prompt        json.RawMessage `json:"prompt"`
		Suffix        string          `json:"suffix"`
		Stream        bool            `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "the model field is required"}
	}
	return request{
		kind:         kindGenerate,
		model:        in.Model,
		stream:       in.Stream,
		includeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage,
		suffix:       in.Suffix,
		promptTokens: promptTokens(texts(in.Prompt)),
	}, nil
}

// check refuses completions with an embedding model.
func (d openaiCompletions) check(req request, m Model) *httpError {
	switch {
	case !m.Embedding:
		return nil
	case d.flavor == flavorOllama:
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support generate", req.model)}
	}
	return &httpError{http.StatusBadRequest, "The model does not support Completions API"}
}

// call is never needed: completions take no tools.
func (openaiCompletions) call(_ *exchange, c toolCall) []token { return wholeCall(c) }

// opening is nothing: a completion stream has no role chunk.
func (openaiCompletions) opening(*exchange) []byte { return nil }

func (d openaiCompletions) stall(x *exchange) []byte { return d.event(x, "", nil) }

func (d openaiCompletions) token(x *exchange, t token) []byte { return d.event(x, t.text, nil) }

func (d openaiCompletions) finish(x *exchange) []byte {
	stop := "stop"
	b := d.event(x, "", &stop)
	b = append(b, d.usageEvent(x, "cmpl-"+x.id, "text_completion")...)
	return append(b, "data: [DONE]\n\n"...)
}

func (openaiCompletions) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `data: {"id":"cmpl-%s","object":"text_completion","created":%d,"choices":[{"index":0,"text":`+"\n\n",
		x.id, x.start.Unix())
}

func (d openaiCompletions) whole(x *exchange) []byte {
	_, content := x.text()
	stop := "stop"
	c := d.completion(x, content, &stop)
	c.Usage = d.usage(x)
	b, _ := json.Marshal(c)
	return b
}

func (d openaiCompletions) event(x *exchange, text string, finish *string) []byte {
	return sse(d.completion(x, text, finish))
}

func (d openaiCompletions) completion(x *exchange, text string, finish *string) oaCompletion {
	return oaCompletion{
		ID:                "cmpl-" + x.id,
		Object:            "text_completion",
		Created:           x.start.Unix(),
		Model:             x.req.model,
		SystemFingerprint: d.fingerprint(),
		Choices:           []oaTextChoice{{Text: text, FinishReason: finish}},
	}
}

// texts reads a prompt or an embeddings input: a string, an array of
// strings, or token ids (an array of numbers, or of arrays of numbers),
// each of which becomes one text of its numbers.
func texts(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) != nil {
		return nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return []string{string(compact(raw))}
	}
	out := make([]string, 0, len(many))
	for _, m := range many {
		if json.Unmarshal(m, &one) == nil {
			out = append(out, one)
		} else {
			out = append(out, string(compact(m)))
		}
	}
	return out
}

// sse encodes v as one SSE data event.
func sse(v any) []byte {
	b, _ := json.Marshal(v)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// openaiModels answers /v1/models as f's servers do: vLLM's model cards
// with max_model_len, or Ollama's list owned by "library".
func (s *Server) openaiModels(w http.ResponseWriter, f flavor) {
	type card struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root,omitempty"`
		Parent      any    `json:"parent,omitempty"`
		MaxModelLen int    `json:"max_model_len,omitempty"`
	}
	resp := struct {
		Object string `json:"object"`
		Data   []card `json:"data"`
	}{Object: "list", Data: []card{}}
	for _, m := range s.cfg.Models {
		c := card{ID: m.Name, Object: "model", Created: time.Now().Unix(), OwnedBy: "vllm", Root: m.Name, MaxModelLen: m.ContextLength}
		if f == flavorOllama {
			c = card{ID: m.Name, Object: "model", Created: modifiedAt().Unix(), OwnedBy: "library"}
		}
		resp.Data = append(resp.Data, c)
	}
	writeJSON(w, http.StatusOK, resp)
}

// vllmMetrics serves the pressure gauges of vLLM's Prometheus /metrics:
// running requests (the open chat requests), waiting requests
// (SetWaiting) and KV-cache usage (SetKVCacheUsage), one series per model.
func (s *Server) vllmMetrics(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	running, waiting, kv := s.stats.OpenStreams, s.waiting, s.kvCache
	s.mu.Unlock()

	var b strings.Builder
	gauge := func(name, help string, value float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, m := range s.cfg.Models {
			fmt.Fprintf(&b, "%s{engine=\"0\",model_name=%q} %s\n", name, m.Name, promFloat(value))
		}
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(waiting))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}

// promFloat formats v as Python's prometheus_client does ("1.0", "0.25").
func promFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}
