package httpapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// oaRequest is the part of an OpenAI chat completions request Switchyard
// reads; unknown fields are ignored, as OpenAI's clients send many.
type oaRequest struct {
	Model         string      `json:"model"`
	Messages      []oaMessage `json:"messages"`
	Stream        bool        `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReasoningEffort string `json:"reasoning_effort"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Tools               []oaTool        `json:"tools"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Seed                *int            `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	ResponseFormat      json.RawMessage `json:"response_format"`
}

// oaTool is a function the model may call.
type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []oaToolCall    `json:"tool_calls,omitempty"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toFleet converts the request; it returns an error for content the
// caller must fix.
func (q *oaRequest) toFleet() (*fleet.Request, error) {
	if err := checkModel(q.Model); err != nil {
		return nil, err
	}
	if len(q.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	if err := checkOpenAIOptions(q); err != nil {
		return nil, err
	}
	req := &fleet.Request{Model: q.Model, Stream: q.Stream, Format: q.ResponseFormat}
	for _, t := range q.Tools {
		req.Tools = append(req.Tools, fleet.Tool{Type: t.Type, Function: fleet.ToolFunction{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}})
	}
	effort := q.ReasoningEffort
	if effort == "" && q.Reasoning != nil {
		effort = q.Reasoning.Effort
	}
	switch effort {
	case "":
	case "none":
		req.NoThinking = true
	default:
		req.Thinking = true
		req.ThinkLevel = effort
	}
	req.Options = fleet.Options{Temperature: q.Temperature, TopP: q.TopP, MaxTokens: q.MaxTokens, Seed: q.Seed}
	if q.MaxCompletionTokens != nil {
		req.Options.MaxTokens = q.MaxCompletionTokens
	}
	if len(q.Stop) > 0 && string(q.Stop) != "null" {
		var one string
		if json.Unmarshal(q.Stop, &one) == nil {
			req.Options.Stop = []string{one}
		} else if err := json.Unmarshal(q.Stop, &req.Options.Stop); err != nil {
			return nil, errors.New("stop: expected a string or an array of strings")
		}
	}
	for i, m := range q.Messages {
		fm := fleet.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if err := checkRole(m.Role, openaiRoles); err != nil {
			return nil, fmt.Errorf("messages[%d].role: %w", i, err)
		}
		if err := oaContent(m.Content, &fm); err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		for j, tc := range m.ToolCalls {
			idx := j
			if tc.Index != nil {
				idx = *tc.Index
			}
			fm.ToolCalls = append(fm.ToolCalls, fleet.ToolCall{Index: idx, ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, fm)
	}
	return req, nil
}

// openaiRoles are the roles of OpenAI chat messages.
var openaiRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// checkOpenAIOptions refuses sampling settings out of their range, naming
// the field, rather than pass them on to fail somewhere else.
func checkOpenAIOptions(q *oaRequest) error {
	for _, f := range []struct {
		name     string
		v        *float64
		min, max float64
	}{
		{"temperature", q.Temperature, 0, 2},
		{"top_p", q.TopP, 0, 1},
	} {
		if f.v != nil && (*f.v < f.min || *f.v > f.max) {
			return fmt.Errorf("%s: %g is out of range [%g, %g]", f.name, *f.v, f.min, f.max)
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if f.v != nil && *f.v < 1 {
			return fmt.Errorf("%s: %d is not a positive number of tokens", f.name, *f.v)
		}
	}
	return nil
}

// checkRole refuses a message role that is not one of roles.
func checkRole(role string, roles []string) error {
	if role == "" {
		return errors.New("required")
	}
	if !slices.Contains(roles, role) {
		return fmt.Errorf("%q is not a role (use %s)", clipText(role, 40), strings.Join(roles, ", "))
	}
	return nil
}

// oaContent reads a message's content: a string, null, or an array of
// parts (text, and images as data URLs).
func oaContent(raw json.RawMessage, m *fleet.Message) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		return json.Unmarshal(raw, &m.Content)
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return errors.New("expected a string or an array of content parts")
	}
	var text strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "image_url":
			_, data, ok := strings.Cut(p.ImageURL.URL, ";base64,")
			if !ok || !strings.HasPrefix(p.ImageURL.URL, "data:") {
				return errors.New("image_url: only data: URLs with base64 content are supported")
			}
			if _, err := base64.StdEncoding.DecodeString(data); err != nil {
				return errors.New("image_url: invalid base64")
			}
			m.Images = append(m.Images, data)
		default:
			return fmt.Errorf("unsupported content part type %q", clipText(p.Type, 40))
		}
	}
	m.Content = text.String()
	return nil
}

func writeOpenAIError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// writeOpenAIStatus writes an OpenAI error whose type follows from status.
func writeOpenAIStatus(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, openaiErrorType(status), msg)
}

// openaiErrorType is the OpenAI error type for an HTTP status.
func openaiErrorType(status int) string {
	switch status {
	case 400, 413, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	}
	return "server_error"
}

func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request) {
	var q oaRequest
	if status, err := s.decodeBody(w, r, &q); err != nil {
		writeOpenAIError(w, status, openaiErrorType(status), err.Error())
		return
	}
	req, err := q.toFleet()
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOpenAI)
	if !q.Stream {
		s.openaiComplete(w, r, req)
		return
	}
	st, err := s.o.Router.Stream(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, writeOpenAIStatus)
		return
	}
	defer st.Close()
	meta := st.Meta()
	h := w.Header()
	routeHeaders(h, meta)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	includeUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	cw := newChunkWriter(w, s.o.WriteTimeout)
	enc := oaChunkEncoder{id: "chatcmpl-" + meta.RequestID, created: time.Now().Unix(), model: meta.Candidate.Model}
	var usage *fleet.Usage
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			if includeUsage {
				cw.buf = enc.appendUsage(cw.buf, usage)
			}
			cw.buf = append(cw.buf, "data: [DONE]\n\n"...)
			cw.flush()
			return
		}
		if err != nil {
			if !s.callerGone(r) {
				cw.buf = append(cw.buf, `data: {"error":{"message":`...)
				cw.buf = appendString(cw.buf, s.streamErrorText(r, err))
				cw.buf = append(cw.buf, `,"type":"upstream_error","param":null,"code":null}}`+"\n\n"...)
				cw.flush()
			}
			return
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		if !enc.wants(&ch) {
			continue
		}
		cw.buf = enc.appendChunk(cw.buf, &ch)
		if err := cw.flush(); err != nil {
			return // the caller went away; Close records the abort
		}
	}
}

// oaChunkEncoder writes chat.completion.chunk events by hand: they are the
// hot path of every stream, and appending to one buffer costs no
// allocation per chunk.
type oaChunkEncoder struct {
	id      string
	created int64
	model   string
	sawRole bool
}

// wants reports whether ch has anything an OpenAI caller should see.
func (e *oaChunkEncoder) wants(ch *fleet.Chunk) bool {
	return ch.IsFirstToken() || ch.FinishReason != "" || (ch.Role != "" && !e.sawRole)
}

func (e *oaChunkEncoder) head(dst []byte) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = appendString(dst, e.id)
	dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	dst = strconv.AppendInt(dst, e.created, 10)
	dst = append(dst, `,"model":`...)
	return appendString(dst, e.model)
}

func (e *oaChunkEncoder) appendChunk(dst []byte, ch *fleet.Chunk) []byte {
	dst = e.head(dst)
	dst = append(dst, `,"choices":[{"index":0,"delta":{`...)
	comma := false
	field := func(name, v string) {
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
		dst = appendString(dst, v)
		comma = true
	}
	if !e.sawRole {
		field("role", "assistant")
		e.sawRole = true
	}
	if ch.Content != "" {
		field("content", ch.Content)
	}
	if ch.Reasoning != "" {
		field("reasoning", ch.Reasoning)
		field("reasoning_content", ch.Reasoning)
	}
	if len(ch.ToolCalls) > 0 {
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, `"tool_calls":[`...)
		for i, tc := range ch.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(tc.Index), 10)
			if tc.ID != "" {
				dst = append(dst, `,"id":`...)
				dst = appendString(dst, tc.ID)
				dst = append(dst, `,"type":"function"`...)
			}
			dst = append(dst, `,"function":{`...)
			if tc.Name != "" {
				dst = append(dst, `"name":`...)
				dst = appendString(dst, tc.Name)
				dst = append(dst, ',')
			}
			dst = append(dst, `"arguments":`...)
			dst = appendString(dst, tc.Arguments)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"finish_reason":`...)
	if ch.FinishReason != "" {
		dst = appendString(dst, ch.FinishReason)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, "}]}\n\n"...)
}

func (e *oaChunkEncoder) appendUsage(dst []byte, u *fleet.Usage) []byte {
	var p, c int
	if u != nil {
		p, c = u.PromptTokens, u.CompletionTokens
	}
	dst = e.head(dst)
	dst = append(dst, `,"choices":[],"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(c), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p+c), 10)
	return append(dst, "}}\n\n"...)
}

type oaCompletion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   oaUsage    `json:"usage"`
}

type oaChoice struct {
	Index        int       `json:"index"`
	Message      oaAnswer  `json:"message"`
	FinishReason string    `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type oaAnswer struct {
	Role             string       `json:"role"`
	Content          string       `json:"content"`
	Reasoning        string       `json:"reasoning,omitempty"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (s *Server) openaiComplete(w http.ResponseWriter, r *http.Request, req *fleet.Request) {
	ans, err := s.o.Router.Complete(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, writeOpenAIStatus)
		return
	}
	routeHeaders(w.Header(), ans.Meta)
	msg := oaAnswer{Role: "assistant", Content: ans.Message.Content, Reasoning: ans.Message.Thinking, ReasoningContent: ans.Message.Thinking}
	for _, tc := range ans.Message.ToolCalls {
		var c oaToolCall
		c.ID, c.Type = tc.ID, "function"
		c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	out := oaCompletion{
		ID: "chatcmpl-" + ans.RequestID, Object: "chat.completion", Created: time.Now().Unix(), Model: ans.Candidate.Model,
		Choices: []oaChoice{{Message: msg, FinishReason: cmp.Or(ans.FinishReason, "stop")}},
	}
	if ans.Usage != nil {
		out.Usage = oaUsage{ans.Usage.PromptTokens, ans.Usage.CompletionTokens, ans.Usage.PromptTokens + ans.Usage.CompletionTokens}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	now := time.Now().Unix()
	data := []model{{router.AliasAuto, "model", now, "switchyard"}}
	for _, t := range s.o.Router.Fleet().Targets {
		if t.Candidate.Enabled {
			data = append(data, model{t.Candidate.ID, "model", now, "switchyard"})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
