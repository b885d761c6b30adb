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

// openaiDialect renders answers as vLLM's OpenAI-compatible
// /v1/chat/completions: SSE "data: {chunk}" events, reasoning in
// delta.reasoning, errors as {"error":{message,type,param,code}} with an
// integer code, and data: [DONE] at the end.
type openaiDialect struct{}

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
}

type oaChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage,omitempty"`
}

type oaChoice struct {
	Index        int        `json:"index"`
	Delta        *oaMessage `json:"delta,omitempty"`
	Message      *oaMessage `json:"message,omitempty"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type oaMessage struct {
	Role      string  `json:"role,omitempty"`
	Content   *string `json:"content,omitempty"`
	Reasoning string  `json:"reasoning,omitempty"`
}

type oaUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

type oaError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

func (openaiDialect) parse(body []byte) (chatRequest, *httpError) {
	var in oaRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return chatRequest{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return chatRequest{}, &httpError{http.StatusBadRequest, "the model field is required"}
	}
	effort := in.ReasoningEffort
	if effort == "" && in.Reasoning != nil {
		effort = in.Reasoning.Effort
	}
	contents := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			text = string(m.Content) // content parts: a rough count is enough
		}
		contents[i] = text
	}
	return chatRequest{
		model:        in.Model,
		stream:       in.Stream,
		think:        effort != "" && effort != "none",
		includeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage,
		promptTokens: promptTokens(contents),
	}, nil
}

// check accepts everything: vLLM ignores reasoning_effort for a model
// without a reasoning parser.
func (openaiDialect) check(chatRequest, Model) *httpError { return nil }

func (openaiDialect) notFound(name string) *httpError {
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

func (openaiDialect) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]oaError{"error": {Message: msg, Type: errorType(status), Code: status}})
}

func (d openaiDialect) writeBusy(w http.ResponseWriter, retryAfter time.Duration) {
	secs := int(math.Ceil(retryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	d.writeError(w, http.StatusTooManyRequests, "server busy: too many pending requests, retry later")
}

func (openaiDialect) streamType() string { return "text/event-stream; charset=utf-8" }

func (d openaiDialect) opening(x *exchange) []byte {
	empty := ""
	return d.event(x, &oaMessage{Role: "assistant", Content: &empty}, nil)
}

func (d openaiDialect) stall(x *exchange) []byte { return d.opening(x) }

func (d openaiDialect) token(x *exchange, t token) []byte {
	if t.thinking {
		return d.event(x, &oaMessage{Reasoning: t.text}, nil)
	}
	text := t.text
	return d.event(x, &oaMessage{Content: &text}, nil)
}

func (d openaiDialect) finish(x *exchange) []byte {
	empty, stop := "", "stop"
	b := d.event(x, &oaMessage{Content: &empty}, &stop)
	if x.req.includeUsage {
		b = append(b, sse(oaChunk{
			ID:      "chatcmpl-" + x.id,
			Object:  "chat.completion.chunk",
			Created: x.start.Unix(),
			Model:   x.req.model,
			Choices: []oaChoice{},
			Usage:   d.usage(x),
		})...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

func (openaiDialect) errorEvent(_ *exchange, msg string) []byte {
	b := sse(map[string]oaError{"error": {
		Message: msg,
		Type:    errorType(http.StatusInternalServerError),
		Code:    http.StatusInternalServerError,
	}})
	return append(b, "data: [DONE]\n\n"...)
}

func (openaiDialect) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,"choices":[{"index":0,"delta":{"content":`+"\n\n",
		x.id, x.start.Unix())
}

func (d openaiDialect) whole(x *exchange) []byte {
	thinking, content := x.text()
	stop := "stop"
	b, _ := json.Marshal(oaChunk{
		ID:      "chatcmpl-" + x.id,
		Object:  "chat.completion",
		Created: x.start.Unix(),
		Model:   x.req.model,
		Choices: []oaChoice{{
			Message:      &oaMessage{Role: "assistant", Content: &content, Reasoning: thinking},
			FinishReason: &stop,
		}},
		Usage: d.usage(x),
	})
	return b
}

// event is one chunk of the one choice.
func (openaiDialect) event(x *exchange, delta *oaMessage, finish *string) []byte {
	return sse(oaChunk{
		ID:      "chatcmpl-" + x.id,
		Object:  "chat.completion.chunk",
		Created: x.start.Unix(),
		Model:   x.req.model,
		Choices: []oaChoice{{Delta: delta, FinishReason: finish}},
	})
}

func (openaiDialect) usage(x *exchange) *oaUsage {
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

// sse encodes v as one SSE data event.
func sse(v any) []byte {
	b, _ := json.Marshal(v)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	type card struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		Parent      any    `json:"parent"`
		MaxModelLen int    `json:"max_model_len"`
	}
	resp := struct {
		Object string `json:"object"`
		Data   []card `json:"data"`
	}{Object: "list", Data: []card{}}
	for _, m := range s.cfg.Models {
		resp.Data = append(resp.Data, card{
			ID: m.Name, Object: "model", Created: time.Now().Unix(),
			OwnedBy: "vllm", Root: m.Name, MaxModelLen: 32768,
		})
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
