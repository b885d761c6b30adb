package httpapi

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream"
)

// chatRequest is an OpenAI chat completions request (/v1/chat/completions):
// the fields Switchyard reads; unknown ones are ignored, as OpenAI's
// clients send many.
type chatRequest wire.ChatRequest

// toFleet converts the request; it returns an error for content the
// caller must fix.
func (q *chatRequest) toFleet() (*fleet.Request, error) {
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
	applyEffort(req, effort)
	if k := q.ChatTemplateKwargs; k != nil && k.EnableThinking != nil && !*k.EnableThinking && !req.Thinking {
		req.NoThinking = true
	}
	opts, err := q.options()
	if err != nil {
		return nil, err
	}
	req.Options = opts
	req.ToolChoice = q.ToolChoice
	if fleet.IsSet(q.LogitBias) {
		req.DialectOnly = append(req.DialectOnly, "logit_bias")
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

// options reads the sampling settings shared by chat and completions.
func (q *chatRequest) options() (fleet.Options, error) {
	o := fleet.Options{
		Temperature: q.Temperature, TopP: q.TopP, TopK: q.TopK, MinP: q.MinP, RepeatPenalty: q.RepeatPenalty,
		PresencePenalty: q.PresencePenalty, FrequencyPenalty: q.FrequencyPenalty,
		MaxTokens: cmp.Or(q.MaxCompletionTokens, q.MaxTokens), Seed: q.Seed, N: q.N, TopLogprobs: q.TopLogprobs,
	}
	if o.RepeatPenalty == nil {
		o.RepeatPenalty = q.RepetitionPenalty
	}
	if q.Logprobs != nil {
		o.Logprobs = *q.Logprobs
	}
	if len(q.Stop) > 0 && string(q.Stop) != "null" {
		var one string
		if json.Unmarshal(q.Stop, &one) == nil {
			o.Stop = []string{one}
		} else if err := json.Unmarshal(q.Stop, &o.Stop); err != nil {
			return o, errors.New("stop: expected a string or an array of strings")
		}
	}
	return o, nil
}

// openaiRoles are the roles of OpenAI chat messages.
var openaiRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// applyEffort sets req's thinking mode from an OpenAI reasoning effort:
// "" leaves the model's default, "none" turns thinking off, and any other
// effort turns it on at that level.
func applyEffort(req *fleet.Request, effort string) {
	switch effort {
	case "":
	case "none":
		req.NoThinking = true
	default:
		req.Thinking = true
		req.ThinkLevel = effort
	}
}

// tokenLimit is a request field that caps the tokens of an answer.
type tokenLimit struct {
	name string
	v    *int
}

// checkSampling refuses sampling settings out of their range, naming the
// field, rather than pass them on to fail somewhere else.
func checkSampling(temperature, topP *float64, limits ...tokenLimit) error {
	return checkRanges([]numberField{{"temperature", temperature, 0, 2}, {"top_p", topP, 0, 1}}, limits...)
}

// numberField is a request field that must lie in [min, max].
type numberField struct {
	name     string
	v        *float64
	min, max float64
}

func checkRanges(fields []numberField, limits ...tokenLimit) error {
	for _, f := range fields {
		if f.v != nil && (*f.v < f.min || *f.v > f.max) {
			return fmt.Errorf("%s: %g is out of range [%g, %g]", f.name, *f.v, f.min, f.max)
		}
	}
	for _, f := range limits {
		if f.v != nil && *f.v < 1 {
			return fmt.Errorf("%s: %d is not a positive number of tokens", f.name, *f.v)
		}
	}
	return nil
}

// checkOpenAIOptions refuses the settings of a chat or completion out of
// their range, naming the field.
func checkOpenAIOptions(q *chatRequest) error {
	err := checkRanges([]numberField{
		{"temperature", q.Temperature, 0, 2},
		{"top_p", q.TopP, 0, 1},
		{"min_p", q.MinP, 0, 1},
		{"presence_penalty", q.PresencePenalty, -2, 2},
		{"frequency_penalty", q.FrequencyPenalty, -2, 2},
	}, tokenLimit{"max_tokens", q.MaxTokens}, tokenLimit{"max_completion_tokens", q.MaxCompletionTokens})
	if err != nil {
		return err
	}
	switch {
	case q.N != nil && *q.N < 1:
		return fmt.Errorf("n: %d is not a positive number of answers", *q.N)
	case q.N != nil && *q.N > 1:
		// Failover, the first-token probe and the answer put together
		// from a stream follow one answer; n of them would come back as
		// one, or mixed.
		return fmt.Errorf("n: %d answers asked, and Switchyard gives one per request: send the request %d times", *q.N, *q.N)
	}
	if q.TopLogprobs != nil && (*q.TopLogprobs < 0 || *q.TopLogprobs > 20) {
		return fmt.Errorf("top_logprobs: %d is out of range [0, 20]", *q.TopLogprobs)
	}
	return nil
}

// checkRole refuses a message role that is not one of roles.
func checkRole(role string, roles []string) error {
	if role == "" {
		return errors.New("required")
	}
	if !slices.Contains(roles, role) {
		return fmt.Errorf("%q is not a role (use %s)", fleet.ClipTo(role, 40), strings.Join(roles, ", "))
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
		if s, ok := upstream.Plain(raw); ok { // the usual content
			m.Content = s
			return nil
		}
		return json.Unmarshal(raw, &m.Content)
	}
	var parts []wire.ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return errors.New("expected a string or an array of content parts")
	}
	var text strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "image_url":
			url := cmp.Or(p.ImageURL, &wire.ImageURL{}).URL
			_, data, ok := strings.Cut(url, ";base64,")
			if !ok || !strings.HasPrefix(url, "data:") {
				return errors.New("image_url: only data: URLs with base64 content are supported")
			}
			if _, err := base64.StdEncoding.DecodeString(data); err != nil {
				return errors.New("image_url: invalid base64")
			}
			m.Images = append(m.Images, data)
		default:
			return fmt.Errorf("unsupported content part type %q", fleet.ClipTo(p.Type, 40))
		}
	}
	m.Content = text.String()
	return nil
}

func writeOpenAIError(w http.ResponseWriter, status int, typ, msg string) {
	writeOpenAIErrorCode(w, status, typ, "", msg)
}

// writeOpenAIErrorCode writes OpenAI's error object with a code
// ("model_not_found"); "" is a null code.
func writeOpenAIErrorCode(w http.ResponseWriter, status int, typ, code, msg string) {
	writeOpenAIErrorParam(w, status, typ, code, "", msg)
}

// writeOpenAIErrorParam writes OpenAI's error object naming the request
// field at fault (param) and a code; "" is null for either.
func writeOpenAIErrorParam(w http.ResponseWriter, status int, typ, code, param, msg string) {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": orNull(param), "code": orNull(code)}})
}

// writeOpenAIStatus writes an OpenAI error whose type follows from status.
func writeOpenAIStatus(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, openaiErrorType(status), msg)
}

// writeOpenAIRouteError writes a routing failure (a routeWriter): an
// unknown model is OpenAI's 404 with code model_not_found, which the SDKs
// read; an upstream's refusal keeps its error type and code
// (llama.cpp's exceed_context_size_error, which clients look for).
func writeOpenAIRouteError(w http.ResponseWriter, status int, msg string, upstream *fleet.StatusError) {
	typ, code := openaiErrorType(status), ""
	switch {
	case upstream != nil && upstream.Type != "":
		typ, code = upstream.Type, upstream.Code
	case status == http.StatusNotFound:
		code = "model_not_found"
	}
	writeOpenAIErrorCode(w, status, typ, code, msg)
}

// openaiErrorType is the OpenAI error type for an HTTP status.
func openaiErrorType(status int) string {
	switch status {
	case 400, 405, 408, 413, 415, 422:
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

// decodeFields reads a JSON object body into q, and keeps its fields as
// sent for an upstream of the caller's dialect (docs/API.md, "Fidelity").
func (s *Server) decodeFields(w http.ResponseWriter, r *http.Request, q any) (map[string]json.RawMessage, int, error) {
	qr, _ := q.(quickRequest)
	body, fields, took, status, err := s.readFields(w, r, qr)
	if err != nil {
		return nil, status, err
	}
	if took {
		return fields, 0, nil
	}
	if err := json.Unmarshal(body, q); err != nil {
		status, err := s.bodyError(err)
		return nil, status, err
	}
	return fields, 0, nil
}

// quickRequest is a request type with a fast path through its usual
// bodies (quickChat): decodeQuick reads the body into the request and
// returns its top-level fields, as mergeFields reads them, in one pass;
// false leaves the request as it was, and the body to mergeFields and
// json.Unmarshal.
type quickRequest interface {
	decodeQuick(body []byte) (fields map[string]json.RawMessage, ok bool)
}

// readRequest decodes a request body of type T, keeping its fields as
// decodeFields does; a bad body is answered with write, and ok is false.
func readRequest[T any](s *Server, w http.ResponseWriter, r *http.Request, write func(http.ResponseWriter, int, string)) (q T, fields map[string]json.RawMessage, ok bool) {
	fields, status, err := s.decodeFields(w, r, &q)
	if err != nil {
		write(w, status, err.Error())
		return q, nil, false
	}
	return q, fields, true
}

func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request) {
	req, stream, includeUsage := s.readChat(w, r)
	switch {
	case req == nil:
	case !stream:
		s.openaiComplete(w, r, req)
	default:
		s.openaiStream(w, r, req, includeUsage, chatChunks)
	}
}

// readChat reads a chat completions request; on a nil req it has answered
// the caller. The decoded request stays in its frame, which has returned
// before the request is routed: the handler's stack is what an open
// stream holds, and a frame that kept it there made the stack outgrow
// 8 KiB.
//
//go:noinline
func (s *Server) readChat(w http.ResponseWriter, r *http.Request) (req *fleet.Request, stream, includeUsage bool) {
	q, fields, ok := readRequest[chatRequest](s, w, r, writeOpenAIStatus)
	if !ok {
		return nil, false, false
	}
	req, err := q.toFleet()
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return nil, false, false
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOpenAI)
	if req.Protocol == fleet.ProtocolOpenAI {
		req.Raw = &fleet.Raw{Dialect: fleet.ProviderOpenAI, Endpoint: "/v1/chat/completions", Fields: fields}
	}
	return req, q.Stream, q.StreamOptions != nil && q.StreamOptions.IncludeUsage
}

// The two kinds of OpenAI stream: chat.completion.chunk and
// text_completion.
const (
	chatChunks = iota
	textChunks
)

// openaiStream routes req and writes its answer as OpenAI's SSE: the
// upstream's own events when it speaks OpenAI too, else events made from
// the chunks.
func (s *Server) openaiStream(w http.ResponseWriter, r *http.Request, req *fleet.Request, includeUsage bool, kind int) {
	st := s.routeStream(w, r, req, writeOpenAIRouteError)
	if st == nil {
		return
	}
	defer st.Close()
	cw, enc := s.startOpenAIStream(w, req, st, includeUsage, kind)
	s.pump(r, st, cw, enc, enc.same)
}

// startOpenAIStream starts the SSE answer of st and makes its writer and
// encoder. Apart from openaiStream, whose frame is under every write of an
// open stream: what this needs made that stack outgrow 8 KiB.
//
//go:noinline
func (s *Server) startOpenAIStream(w http.ResponseWriter, req *fleet.Request, st *router.Stream, includeUsage bool, kind int) (*chunkWriter, *openaiEncoder) {
	meta := st.Meta()
	startSSE(w)
	same := sameDialect(req, meta, fleet.ProviderOpenAI)
	if same {
		st.Passthrough()
	}
	cw := newChunkWriter(w, s.o.WriteTimeout)
	cw.flushBeforeWait(st)
	e := &openaiEncoder{chunks: oaChunkEncoder{id: "chatcmpl-" + meta.RequestID, created: time.Now().Unix(), model: meta.Candidate.Model,
		ids: callIDs{prefix: meta.RequestID}, text: kind == textChunks}, includeUsage: includeUsage, same: same}
	if e.chunks.text {
		e.chunks.id = "cmpl-" + meta.RequestID
	}
	return cw, e
}

// openaiEncoder writes OpenAI's SSE events (encoder).
type openaiEncoder struct {
	chunks       oaChunkEncoder
	includeUsage bool // the caller asked for usage (stream_options.include_usage)
	same         bool // the upstream's own events go out
	usage        *fleet.Usage
	// finishEnd is where the upstream's finish event ends in the buffer
	// raw appended it to, 0 when the last event was another (raw).
	finishEnd int
}

func (e *openaiEncoder) chunk(dst []byte, ch *fleet.Chunk) ([]byte, bool) {
	if ch.Usage != nil {
		e.usage = ch.Usage
	}
	if !e.chunks.wants(ch) {
		return dst, false
	}
	return e.chunks.appendChunk(dst, ch), true
}

// raw appends the upstream's event as it came, every field kept. The
// usage event (choices empty) goes out only to a caller that asked for
// usage: one that did not reads choices[0] of every event, as OpenAI and
// llama-server alone give it (an outside review's client failed on it).
// What else that event holds (llama.cpp moves its timings there when
// usage is asked for, as Switchyard always asks) goes onto the finish
// event before it, where llama-server puts it for such a caller, while
// that event is still in dst: the two come in one write.
func (e *openaiEncoder) raw(dst []byte, ch *fleet.Chunk) ([]byte, bool) {
	raw := ch.Raw
	finishEnd := e.finishEnd
	e.finishEnd = 0
	switch {
	case len(raw) == 0:
		return dst, false
	case ch.UsageOnly && !e.includeUsage:
		// The finish event ends dst with "}\n\n" still unwritten.
		if finishEnd == 0 || finishEnd != len(dst) || dst[finishEnd-3] != '}' {
			return dst, false
		}
		extra := extraFields(raw)
		if len(extra) == 0 {
			return dst, false
		}
		dst = append(append(dst[:finishEnd-3], extra...), "}\n\n"...)
		return dst, true
	}
	dst = append(dst, "data: "...)
	dst = append(dst, raw...)
	dst = append(dst, "\n\n"...)
	if ch.FinishReason != "" {
		e.finishEnd = len(dst)
	}
	return dst, true
}

// extraFields is the top-level fields of a usage event that a chunk does
// not always have (not its usage, choices, id, object, created, model or
// system fingerprint), each with a comma before it; nil when there are
// none or the event does not read.
func extraFields(usage []byte) []byte {
	d := jsontext.NewDecoder(bytes.NewReader(usage), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	var out []byte
	for d.PeekKind() == '"' {
		// A value read is good until the next read.
		name, err := d.ReadValue()
		if err != nil {
			return nil
		}
		keep := true
		switch string(name) {
		case `"id"`, `"object"`, `"created"`, `"model"`, `"system_fingerprint"`, `"choices"`, `"usage"`:
			keep = false
		}
		if keep {
			out = append(append(append(out, ','), name...), ':')
		}
		v, err := d.ReadValue()
		if err != nil {
			return nil
		}
		if keep {
			out = append(out, v...)
		}
	}
	return out
}

func (e *openaiEncoder) end(dst []byte) []byte {
	if e.includeUsage && !e.same {
		dst = e.chunks.appendUsage(dst, e.usage)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

func (e *openaiEncoder) fail(dst []byte, msg string) []byte {
	dst = append(dst, `data: {"error":{"message":`...)
	dst = appendString(dst, msg)
	return append(dst, `,"type":"upstream_error","param":null,"code":null}}`+"\n\n"...)
}

// sameDialect reports whether the upstream that serves req speaks the
// caller's dialect p, so its events may go out as they came. Switchyard's
// own UI always reads Switchyard's events.
func sameDialect(req *fleet.Request, meta *router.Meta, p fleet.Provider) bool {
	return req.RawFor(p) != nil && meta.Candidate.Provider == p && req.Protocol != fleet.ProtocolUI
}

// callIDs gives a tool call without an id one (an Ollama before 0.12
// sends none; OpenAI's clients need one to answer the call), the same for
// every delta of the call.
type callIDs struct {
	prefix string
	given  []bool // by call index: an id was sent
}

// fill sets tc's id when the caller has not had one for its call yet.
func (ids *callIDs) fill(tc *fleet.ToolCall) {
	if tc.Index < 0 || tc.Index > 1024 {
		return
	}
	for len(ids.given) <= tc.Index {
		ids.given = append(ids.given, false)
	}
	if ids.given[tc.Index] {
		return
	}
	if tc.ID == "" {
		tc.ID = "call_" + ids.prefix + "_" + strconv.Itoa(tc.Index)
	}
	ids.given[tc.Index] = true
}

// oaChunkEncoder writes chat.completion.chunk events (or text_completion
// ones) by hand: they are the hot path of every stream, and appending to
// one buffer costs no allocation per chunk.
type oaChunkEncoder struct {
	id      string
	created int64
	model   string
	text    bool // text_completion events (/v1/completions)
	sawRole bool
	called  bool // a tool call was sent: a "stop" that ends the answer is "tool_calls"
	ids     callIDs
}

// wants reports whether ch has anything an OpenAI caller should see.
func (e *oaChunkEncoder) wants(ch *fleet.Chunk) bool {
	return ch.IsFirstToken() || ch.FinishReason != "" || (ch.Role != "" && !e.sawRole && !e.text)
}

func (e *oaChunkEncoder) head(dst []byte) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = appendString(dst, e.id)
	if e.text {
		dst = append(dst, `,"object":"text_completion","created":`...)
	} else {
		dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	}
	dst = strconv.AppendInt(dst, e.created, 10)
	dst = append(dst, `,"model":`...)
	return appendString(dst, e.model)
}

// finish is the finish_reason an OpenAI caller sees for reason.
func (e *oaChunkEncoder) finish(reason string) string {
	if reason == "stop" && e.called {
		return "tool_calls"
	}
	return reason
}

func (e *oaChunkEncoder) appendChunk(dst []byte, ch *fleet.Chunk) []byte {
	dst = e.head(dst)
	if e.text {
		dst = append(dst, `,"choices":[{"index":0,"text":`...)
		dst = appendString(dst, ch.Content)
		dst = append(dst, `,"logprobs":null,"finish_reason":`...)
		return e.appendFinish(dst, ch)
	}
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
		e.called = true
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, `"tool_calls":[`...)
		for i := range ch.ToolCalls {
			tc := ch.ToolCalls[i]
			e.ids.fill(&tc)
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
	dst = append(dst, '}')
	if len(ch.Logprobs) > 0 {
		dst = append(dst, `,"logprobs":{"content":`...)
		dst = append(dst, ch.Logprobs...)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"finish_reason":`...)
	return e.appendFinish(dst, ch)
}

func (e *oaChunkEncoder) appendFinish(dst []byte, ch *fleet.Chunk) []byte {
	if ch.FinishReason != "" {
		dst = appendString(dst, e.finish(ch.FinishReason))
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

//go:noinline
func (s *Server) openaiComplete(w http.ResponseWriter, r *http.Request, req *fleet.Request) {
	ans := s.routeComplete(w, r, req, writeOpenAIRouteError)
	if ans == nil {
		return
	}
	writeJSON(w, http.StatusOK, openaiAnswer(req, ans, "chat.completion"))
}

// openaiAnswer is the non-streamed answer to req: a chat.completion, or a
// text_completion (object). From an upstream of the same dialect it keeps
// every top-level field the upstream sent (system_fingerprint, usage with
// its details, timings, ...), with the answer put together from the stream.
func openaiAnswer(req *fleet.Request, ans *answer, object string) any {
	choice := wire.Choice{FinishReason: cmp.Or(ans.FinishReason, "stop")}
	if len(ans.Logprobs) > 0 {
		choice.Logprobs = &wire.Logprobs{Content: ans.Logprobs}
	}
	if object == "text_completion" {
		choice.Text = &ans.Message.Content
		choice.Logprobs = nil // the legacy logprobs shape comes only with the upstream's own fields
	} else {
		msg := &wire.AssistantMessage{Role: "assistant", Content: ans.Message.Content, Reasoning: ans.Message.Thinking, ReasoningContent: ans.Message.Thinking}
		ids := callIDs{prefix: ans.RequestID}
		for _, tc := range ans.Message.ToolCalls {
			ids.fill(&tc)
			msg.ToolCalls = append(msg.ToolCalls, wire.ToolCall{ID: tc.ID, Type: "function",
				Function: wire.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		if len(msg.ToolCalls) > 0 && choice.FinishReason == "stop" {
			choice.FinishReason = "tool_calls"
		}
		choice.Message = msg
	}
	prefix := "chatcmpl-"
	if object == "text_completion" {
		prefix = "cmpl-"
	}
	out := wire.Completion{
		ID: prefix + ans.RequestID, Object: object, Created: time.Now().Unix(), Model: ans.Candidate.Model,
		Choices: []wire.Choice{choice},
	}
	if ans.Usage != nil {
		out.Usage = wire.UsageWithTotal{Usage: wire.Usage{PromptTokens: ans.Usage.PromptTokens, CompletionTokens: ans.Usage.CompletionTokens},
			TotalTokens: ans.Usage.PromptTokens + ans.Usage.CompletionTokens}
	}
	if !sameDialect(req, &ans.Meta, fleet.ProviderOpenAI) || len(ans.Fields) == 0 {
		return out
	}
	// The upstream's fields, with what the stream's events could not say
	// in their own shape put over them, written as one object in one go
	// rather than a map encoded by reflection (writeJSON compacts and
	// escapes it as it would the map).
	set := map[string]any{"object": out.Object, "choices": out.Choices}
	absent := func(name string) bool { _, ok := ans.Fields[name]; return !ok }
	if absent("id") {
		set["id"] = out.ID
	}
	if absent("created") {
		set["created"] = out.Created
	}
	if absent("model") {
		set["model"] = out.Model
	}
	if absent("usage") {
		set["usage"] = out.Usage
	}
	body, err := upstream.MergeRaw(ans.Fields, set)
	if err != nil {
		return out // the values set always encode
	}
	return json.RawMessage(body)
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
