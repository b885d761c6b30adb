package httpapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/openai"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// responsesRequest is a request of OpenAI's Responses API (POST
// /v1/responses). Ollama's type reads the subset local models can answer
// and translates it; beside it are the fields Switchyard reads itself: the
// ones it must refuse rather than ignore, those of the responses it keeps,
// and the input and tools, kept raw so that they are checked first and the
// tools' schemas pass on as sent. readResponses decodes the two in turn.
type responsesRequest struct {
	openai.ResponsesRequest `json:"-"`

	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Prompt             json.RawMessage   `json:"prompt"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`

	tools     []fleet.Tool      // the function tools, converted
	context   []json.RawMessage // the conversation of the previous response
	own       []json.RawMessage // the input items, references resolved; a string is one user message
	rewritten bool              // whether own differs from the input sent (references, tool outputs in parts)
}

// readResponses reads a request from body, a JSON object: Switchyard's
// fields, the input items (references to the items of kept responses
// resolved) and tools checked before Ollama's decoder reads them, then
// Ollama's type. It returns an error for what the caller must fix or
// cannot have.
func (s *Server) readResponses(body json.RawMessage) (*responsesRequest, error) {
	q := new(responsesRequest)
	// A type error of a field is worded as decodeBody words it. Errors of
	// Ollama's input decoder, type errors within an item included, keep
	// its wording, which names the item.
	decode := func(v any) error {
		err := json.Unmarshal(body, v)
		if _, ok := err.(*json.UnmarshalTypeError); ok {
			_, err = s.bodyError(err)
		}
		return err
	}
	if err := decode(q); err != nil {
		return nil, err
	}
	if err := q.resolve(s.responseStore()); err != nil {
		return nil, err
	}
	if err := checkInput(q.Input); err != nil {
		return nil, err
	}
	var err error
	if q.tools, err = q.functions(); err != nil {
		return nil, err
	}
	if q.rewritten {
		// Ollama's decoder reads the items referenced, not the
		// references, which it does not know, and a tool's output as a
		// string only.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, err
		}
		fields["input"] = q.Input
		if body, err = json.Marshal(fields); err != nil {
			return nil, err
		}
	}
	if err := decode(&q.ResponsesRequest); err != nil {
		return nil, err
	}
	if err := q.refuse(); err != nil {
		return nil, err
	}
	if !fleet.IsSet(q.Input) {
		return nil, errors.New("input: required (a string or a list of input items)")
	}
	if err := q.continued(); err != nil {
		return nil, err
	}
	return q, nil
}

// resolve reads the conversation of the previous response and the input
// items from st, each item_reference replaced by the item it names.
func (q *responsesRequest) resolve(st *responseStore) error {
	if q.PreviousResponseID != "" {
		var ok bool
		if q.context, ok = st.conversation(q.PreviousResponseID); !ok {
			return &paramError{param: "previous_response_id", code: "previous_response_not_found", err: fmt.Errorf(
				"previous_response_id: no response %q is kept here (Switchyard keeps responses in memory %s, "+
					"and not those made with store: false); send the whole conversation as input", fleet.ClipTo(q.PreviousResponseID, 100), st.kept())}
		}
	}
	var text string
	if json.Unmarshal(q.Input, &text) == nil {
		item, err := json.Marshal(struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{"user", text})
		q.own = []json.RawMessage{item}
		return err
	}
	if json.Unmarshal(q.Input, &q.own) != nil {
		return nil // not set, or something Ollama's decoder names better
	}
	for i, raw := range q.own {
		var ref struct {
			Type   string          `json:"type"`
			ID     string          `json:"id"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(raw, &ref) != nil {
			continue
		}
		if ref.Type == "function_call_output" {
			item, err := flatOutput(raw, ref.Output)
			if err != nil {
				return fmt.Errorf("input[%d].%w", i, err)
			}
			if item != nil {
				q.own[i], q.rewritten = item, true
			}
			continue
		}
		if ref.Type != "item_reference" {
			continue
		}
		if ref.ID == "" {
			return fmt.Errorf("input[%d].id: required (the id of an output item of an earlier response)", i)
		}
		item, ok := st.item(ref.ID)
		if !ok {
			return &paramError{param: "input", err: fmt.Errorf(
				"input[%d]: item_reference %q names no item kept here (Switchyard keeps the output items of responses in memory %s, "+
					"and not those of responses made with store: false); send the item itself (with the AI SDK: providerOptions: {openai: {store: false}})",
				i, fleet.ClipTo(ref.ID, 100), st.kept())}
		}
		q.own[i], q.rewritten = item, true
	}
	if !q.rewritten {
		return nil
	}
	var err error
	q.Input, err = json.Marshal(q.own)
	return err
}

// flatOutput returns the function_call_output item raw with its output, a
// list of content parts (as OpenAI's Responses API allows), as the one
// string the pinned Ollama module decodes: the parts' texts joined by
// newlines. It returns nil when output is not such a list, and an error
// for a part a local model's tool result cannot hold.
func flatOutput(raw, output json.RawMessage) (json.RawMessage, error) {
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(output, &parts) != nil {
		return nil, nil // a string, or something Ollama's decoder names better
	}
	texts := make([]string, len(parts))
	for j, p := range parts {
		switch {
		case p.Type != "input_text" && p.Type != "output_text":
			return nil, fmt.Errorf("output[%d]: a tool result passes on text parts only (input_text), not %q", j, fleet.ClipTo(p.Type, 50))
		case p.Text == nil:
			return nil, fmt.Errorf("output[%d].text: required", j)
		}
		texts[j] = *p.Text
	}
	var item map[string]json.RawMessage
	if err := json.Unmarshal(raw, &item); err != nil {
		return nil, err
	}
	var err error
	item["output"], err = json.Marshal(strings.Join(texts, "\n"))
	if err != nil {
		return nil, err
	}
	return json.Marshal(item)
}

// continued puts the conversation of the previous response before the
// input items Ollama's decoder read from the request, whose errors name
// the caller's items.
func (q *responsesRequest) continued() error {
	if len(q.context) == 0 {
		return nil
	}
	all, err := json.Marshal(q.conversation())
	if err == nil {
		q.ResponsesRequest.Input = openai.ResponsesInput{}
		err = json.Unmarshal(all, &q.ResponsesRequest.Input)
	}
	if err != nil {
		return fmt.Errorf("previous_response_id: %w", err)
	}
	return nil
}

// conversation returns the input items the response answers: the
// previous response's conversation, then the request's own.
func (q *responsesRequest) conversation() []json.RawMessage {
	return slices.Concat(q.context, q.own)
}

// stored reports whether the response is kept, as the caller asked
// (store, true unless false).
func (q *responsesRequest) stored() bool {
	return q.Store == nil || *q.Store
}

// paramError is a request error about one parameter, which OpenAI's error
// object names (param), with a code where OpenAI has one.
type paramError struct {
	param, code string
	err         error
}

func (e *paramError) Error() string { return e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }

// writeRequestError writes err, an error in a request, in OpenAI's shape:
// with its param and code when it is a paramError.
func writeRequestError(w http.ResponseWriter, err error) {
	msg := fleet.ClipTo(err.Error(), maxErrorBody)
	var pe *paramError
	if !errors.As(err, &pe) {
		writeOpenAIStatus(w, http.StatusBadRequest, msg)
		return
	}
	writeOpenAIErrorParam(w, http.StatusBadRequest, openaiErrorType(http.StatusBadRequest), pe.code, pe.param, msg)
}

// responsesRoles are the roles of Responses input messages.
var responsesRoles = []string{"user", "system", "developer", "assistant"}

// toFleet checks the request and converts it as Ollama's own
// /v1/responses does (openai.FromResponsesRequest, then the /api/chat
// conversion); it returns an error for what the caller must fix or cannot
// have.
func (q *responsesRequest) toFleet() (*fleet.Request, error) {
	if err := checkSampling(q.Temperature, q.TopP, tokenLimit{"max_output_tokens", q.MaxOutputTokens}); err != nil {
		return nil, err
	}
	chat, err := openai.FromResponsesRequest(q.ResponsesRequest)
	if err != nil {
		return nil, err
	}
	if len(chat.Messages) == 0 {
		return nil, errors.New("input: at least one input item is required")
	}
	if err := q.format(chat); err != nil {
		return nil, err
	}
	names := make(map[string]string) // call_id → the function's name
	for i := range chat.Messages {
		m := &chat.Messages[i]
		if m.Role == "developer" {
			m.Role = "system"
		}
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
		}
		if m.Role == "tool" && m.ToolName == "" {
			m.ToolName = names[m.ToolCallID] // Ollama's chat templates name the function a result is of
		}
	}
	stream := q.Stream != nil && *q.Stream
	chat.Stream = &stream
	// Options and tools are set below from the request itself: Ollama's
	// translation sets a temperature the caller did not ask for, holds
	// max_output_tokens where ollamaOptions reads no number, and passes
	// tool schemas through types that drop what they cannot hold.
	chat.Options, chat.Tools = nil, nil
	req, err := ollamaRequest(chat)
	if err != nil {
		return nil, err
	}
	req.Options = fleet.Options{Temperature: q.Temperature, TopP: q.TopP, MaxTokens: q.MaxOutputTokens}
	req.Tools = q.tools
	applyEffort(req, q.Reasoning.Effort)
	return req, nil
}

// refuse returns why the request asks for something Switchyard cannot do
// where ignoring it would change the answer; nil when it asks for nothing
// such.
func (q *responsesRequest) refuse() error {
	switch {
	case fleet.IsSet(q.Conversation):
		return errors.New("conversation: Switchyard stores no conversations; send the whole conversation as input")
	case q.Background:
		return errors.New("background: Switchyard answers in the foreground only; it stores no responses to poll")
	case fleet.IsSet(q.Prompt):
		return errors.New("prompt: stored prompt templates live at OpenAI; send instructions and input instead")
	}
	return nil
}

// checkInput checks the input items, references resolved, for what
// Ollama's translation would get wrong: a message role it does not check,
// and an image by file_id, which it drops.
func checkInput(raw json.RawMessage) error {
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil // a string, or something the decoder names better
	}
	for i, it := range items {
		if it.Type == "message" || it.Type == "" && it.Role != "" {
			if err := checkRole(it.Role, responsesRoles); err != nil {
				return fmt.Errorf("input[%d].role: %w", i, err)
			}
			var parts []struct {
				Type     string `json:"type"`
				ImageURL string `json:"image_url"`
			}
			json.Unmarshal(it.Content, &parts) // a string has no parts
			for j, p := range parts {
				if p.Type == "input_image" && p.ImageURL == "" {
					return fmt.Errorf("input[%d].content[%d]: an image by file_id is stored at OpenAI; send it as image_url, a base64 data URL", i, j)
				}
			}
		}
	}
	return nil
}

// functions returns the function tools with their parameters as sent. The
// tools OpenAI runs on its own servers (web_search, file_search, ...) are
// refused: no local server has them. tool_choice "none" leaves the model
// no tools; a forced choice is refused, since it cannot be passed on.
func (q *responsesRequest) functions() ([]fleet.Tool, error) {
	var out []fleet.Tool
	for i, raw := range q.Tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %v", i, err)
		}
		if t.Type != "function" {
			return nil, fmt.Errorf("tools[%d]: %q is a tool OpenAI runs on its own servers; Switchyard's servers have none, only \"function\" tools", i, fleet.ClipTo(t.Type, 40))
		}
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d].name: required", i)
		}
		out = append(out, fleet.Tool{Type: "function", Function: fleet.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if !fleet.IsSet(q.ToolChoice) {
		return out, nil
	}
	var choice string
	if json.Unmarshal(q.ToolChoice, &choice) == nil {
		switch choice {
		case "auto":
			return out, nil
		case "none":
			return nil, nil
		}
	}
	return nil, fmt.Errorf("tool_choice: only \"auto\" and \"none\" are supported; Switchyard cannot make its servers call a tool (got %s)", fleet.ClipTo(string(q.ToolChoice), 100))
}

// format completes the format Ollama's translation set from text.format: it
// translates json_schema only, and a json_schema without a schema into no
// format at all.
func (q *responsesRequest) format(chat *api.ChatRequest) error {
	if q.Text == nil || q.Text.Format == nil {
		return nil
	}
	switch f := q.Text.Format; f.Type {
	case "", "text":
	case "json_object":
		chat.Format = json.RawMessage(`"json"`)
	case "json_schema":
		if !fleet.IsSet(f.Schema) {
			return errors.New("text.format.schema: required with type json_schema")
		}
	default:
		return fmt.Errorf("text.format.type: %q is not a format (use text, json_schema or json_object)", fleet.ClipTo(f.Type, 40))
	}
	return nil
}

// openaiResponses is POST /v1/responses (docs/API.md).
func (s *Server) openaiResponses(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if status, err := s.decodeBody(w, r, &body); err != nil {
		writeOpenAIStatus(w, status, err.Error())
		return
	}
	q, err := s.readResponses(body)
	var req *fleet.Request
	if err == nil {
		req, err = q.toFleet()
	}
	if err != nil {
		writeRequestError(w, err)
		return
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOpenAI)
	if !req.Stream {
		s.responsesComplete(w, r, q, req)
		return
	}
	st := s.routeStream(w, r, req, writeOpenAIRouteError)
	if st == nil {
		return
	}
	defer st.Close()
	meta := st.Meta()
	startSSE(w)

	rs := newResponseStream(*meta, q)
	enc := &responsesEncoder{s: s, q: q, rs: rs}
	cw := newChunkWriter(w, s.o.WriteTimeout)
	cw.buf = enc.append(cw.hold(), rs.begin())
	if cw.flush() != nil {
		return
	}
	if err := s.pump(r, st, cw, enc, false); err != nil {
		s.keepResponse(q, rs.ids, rs.cut())
	}
}

// responsesEncoder writes Responses API events (encoder), made by
// responseStream; a response is kept for the caller's next request before
// the caller reads its end.
type responsesEncoder struct {
	s   *Server
	q   *responsesRequest
	rs  *responseStream
	seq int // the next sequence_number
}

func (e *responsesEncoder) chunk(dst []byte, ch *fleet.Chunk) ([]byte, bool) {
	events := e.rs.add(ch)
	return e.append(dst, events), len(events) > 0
}

// raw is chunk: a Responses caller never gets an upstream's own events.
func (e *responsesEncoder) raw(dst []byte, ch *fleet.Chunk) ([]byte, bool) { return e.chunk(dst, ch) }

func (e *responsesEncoder) end(dst []byte) []byte {
	events := e.rs.end()
	e.s.keepResponse(e.q, e.rs.ids, finalOutput(events))
	return e.append(dst, events)
}

func (e *responsesEncoder) fail(dst []byte, msg string) []byte {
	return e.append(dst, []openai.ResponsesStreamEvent{{Event: "error", Data: map[string]any{
		"type": "error", "code": "upstream_error", "message": msg, "param": nil}}})
}

// append appends events as SSE, each with its sequence_number.
func (e *responsesEncoder) append(dst []byte, events []openai.ResponsesStreamEvent) []byte {
	for _, ev := range events {
		if d, ok := ev.Data.(map[string]any); ok {
			d["sequence_number"] = e.seq
		}
		e.seq++
		b, err := json.Marshal(ev.Data)
		if err != nil {
			continue // the converter's own maps and structs always marshal
		}
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Event...)
		dst = append(dst, "\ndata: "...)
		dst = append(dst, b...)
		dst = append(dst, "\n\n"...)
	}
	return dst
}

// keepResponse keeps the response named by ids, which answered q, with
// its output items, unless q asked store: false.
func (s *Server) keepResponse(q *responsesRequest, ids responseIDs, output []json.RawMessage) {
	if q.stored() {
		s.responseStore().keep(ids.response(), q.conversation(), output)
	}
}

// responseStream turns the chunks of a routed answer into Responses API
// events, through Ollama's converter. Tool calls are merged from their
// fragments and handed to the converter whole when the answer ends, as it
// expects them. The items get Switchyard's ids (the converter makes
// random ones) and the response objects the fields the converter leaves
// at their defaults.
type responseStream struct {
	conv   *openai.ResponsesStreamConverter
	meta   router.Meta
	ids    responseIDs
	fields map[string]any    // set on every response object
	names  map[string]string // item id the converter made → Switchyard's
	nCalls int               // function call items named so far
	text   strings.Builder   // the message's text so far
	calls  []fleet.ToolCall
	usage  *fleet.Usage
	finish string
}

func newResponseStream(meta router.Meta, q *responsesRequest) *responseStream {
	ids := responseIDs(meta.RequestID)
	fields := map[string]any{"store": q.stored(), "previous_response_id": nil}
	if q.PreviousResponseID != "" {
		fields["previous_response_id"] = q.PreviousResponseID
	}
	return &responseStream{
		conv: openai.NewResponsesStreamConverter(ids.response(), ids.message(), meta.Candidate.Model, q.ResponsesRequest),
		meta: meta, ids: ids, fields: fields, names: make(map[string]string),
	}
}

// begin returns response.created and response.in_progress.
func (rs *responseStream) begin() []openai.ResponsesStreamEvent {
	return rs.own(rs.conv.Process(api.ChatResponse{Model: rs.meta.Candidate.Model}))
}

// add returns the events of one chunk.
func (rs *responseStream) add(ch *fleet.Chunk) []openai.ResponsesStreamEvent {
	if ch.Usage != nil {
		rs.usage = ch.Usage
	}
	if ch.FinishReason != "" {
		rs.finish = ch.FinishReason
	}
	for _, tc := range ch.ToolCalls {
		rs.calls = fleet.MergeToolCall(rs.calls, tc)
	}
	if ch.Content == "" && ch.Reasoning == "" {
		return nil
	}
	rs.text.WriteString(ch.Content)
	msg := api.Message{Role: "assistant", Content: ch.Content, Thinking: ch.Reasoning}
	return rs.own(rs.conv.Process(api.ChatResponse{Model: rs.meta.Candidate.Model, Message: msg}))
}

// end returns the events that end a complete answer: its tool calls, then
// response.completed, or response.incomplete for an answer cut short.
func (rs *responseStream) end() []openai.ResponsesStreamEvent {
	done := api.ChatResponse{Model: rs.meta.Candidate.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: cmp.Or(rs.finish, "stop")}
	done.Message = api.Message{Role: "assistant", ToolCalls: withCallIDs(rs.calls, rs.meta.RequestID)}
	if rs.usage != nil {
		done.PromptEvalCount, done.EvalCount = rs.usage.PromptTokens, rs.usage.CompletionTokens
	}
	events := rs.conv.Process(done)
	if rs.text.Len() > 0 && len(rs.calls) > 0 {
		events = messageBeforeCalls(events, rs.ids.message(), rs.text.String())
	}
	if reason := incompleteReason(rs.finish); reason != "" {
		markIncomplete(events, reason)
	}
	return rs.own(events)
}

// cut returns the output items the caller was sent of an answer that
// ended early: the reasoning and the text so far, the message marked
// incomplete. The tool calls, sent only at the end, it has not seen.
func (rs *responseStream) cut() []json.RawMessage {
	rs.calls = nil
	events := rs.end()
	for _, e := range events {
		d, _ := e.Data.(map[string]any)
		if resp, ok := d["response"].(map[string]any); ok {
			for _, o := range outputOf(resp) {
				if item, ok := o.(map[string]any); ok && item["type"] == "message" {
					item["status"] = "incomplete"
				}
			}
		}
	}
	return finalOutput(events)
}

// finalOutput returns the output items of the response that ends events,
// as JSON.
func finalOutput(events []openai.ResponsesStreamEvent) []json.RawMessage {
	for _, e := range slices.Backward(events) {
		d, _ := e.Data.(map[string]any)
		if resp, ok := d["response"].(map[string]any); ok {
			return rawItems(outputOf(resp))
		}
	}
	return nil
}

// outputOf returns the output items of a response object of the
// converter's.
func outputOf(resp map[string]any) []any {
	out, _ := resp["output"].([]any)
	return out
}

// own gives events Switchyard's item ids and response fields.
func (rs *responseStream) own(events []openai.ResponsesStreamEvent) []openai.ResponsesStreamEvent {
	for _, e := range events {
		d, _ := e.Data.(map[string]any)
		if item, ok := d["item"].(map[string]any); ok {
			rs.name(item)
		}
		if id, ok := d["item_id"].(string); ok && rs.names[id] != "" {
			d["item_id"] = rs.names[id]
		}
		if resp, ok := d["response"].(map[string]any); ok {
			maps.Copy(resp, rs.fields)
			for _, o := range outputOf(resp) {
				if item, ok := o.(map[string]any); ok {
					rs.name(item)
				}
			}
		}
	}
	return events
}

// name gives a reasoning or function call item Switchyard's id in place of
// the converter's, the same in every event that names the item.
func (rs *responseStream) name(item map[string]any) {
	id, _ := item["id"].(string)
	name, ok := rs.names[id]
	if !ok {
		switch item["type"] {
		case "reasoning":
			name = rs.ids.reasoning()
		case "function_call":
			name = rs.ids.call(rs.nCalls)
			rs.nCalls++
		default:
			return
		}
		rs.names[id], rs.names[name] = name, name
	}
	item["id"] = name
}

func (s *Server) responsesComplete(w http.ResponseWriter, r *http.Request, q *responsesRequest, req *fleet.Request) {
	created := time.Now().UTC()
	ans := s.routeComplete(w, r, req, writeOpenAIRouteError)
	if ans == nil {
		return
	}
	ids := responseIDs(ans.RequestID)
	chat := api.ChatResponse{Model: ans.Candidate.Model, CreatedAt: created, Done: true, DoneReason: cmp.Or(ans.FinishReason, "stop")}
	chat.Message = api.Message{Role: "assistant", Content: ans.Message.Content, Thinking: ans.Message.Thinking,
		ToolCalls: withCallIDs(ans.Message.ToolCalls, ans.RequestID)}
	if ans.Usage != nil {
		chat.PromptEvalCount, chat.EvalCount = ans.Usage.PromptTokens, ans.Usage.CompletionTokens
	}
	resp := openai.ToResponse(ans.Candidate.Model, ids.response(), ids.message(), chat, q.ResponsesRequest)
	if chat.Message.Content != "" && len(chat.Message.ToolCalls) > 0 {
		// ToResponse leaves out the text of an answer that also calls
		// tools; it goes before the calls, as it was said.
		i := slices.IndexFunc(resp.Output, func(o openai.ResponsesOutputItem) bool { return o.Type == "function_call" })
		resp.Output = slices.Insert(resp.Output, i, openai.ResponsesOutputItem{
			ID: ids.message(), Type: "message", Status: "completed", Role: "assistant",
			Content: []openai.ResponsesOutputContent{{Type: "output_text", Text: chat.Message.Content, Annotations: []any{}, Logprobs: []any{}}},
		})
	}
	calls := 0
	for i := range resp.Output {
		switch o := &resp.Output[i]; o.Type {
		case "reasoning":
			o.ID = ids.reasoning()
		case "function_call":
			o.ID = ids.call(calls)
			calls++
		}
	}
	if reason := incompleteReason(ans.FinishReason); reason != "" {
		resp.Status, resp.IncompleteDetails = "incomplete", &openai.ResponsesIncompleteDetails{Reason: reason}
	} else {
		completed := time.Now().Unix()
		resp.CompletedAt = &completed
	}
	resp.Store = q.stored()
	if q.PreviousResponseID != "" {
		resp.PreviousResponseID = &q.PreviousResponseID
	}
	s.keepResponse(q, ids, rawItems(resp.Output))
	writeJSON(w, http.StatusOK, resp)
}

// responseIDs names a response and its items after the request id: a
// response leads to its record in the history and the logs, and an item
// id names one item of one response (docs/API.md).
type responseIDs string

func (id responseIDs) response() string  { return "resp_" + string(id) }
func (id responseIDs) message() string   { return "msg_" + string(id) }
func (id responseIDs) reasoning() string { return "rs_" + string(id) }
func (id responseIDs) call(n int) string { return "fc_" + string(id) + "_" + strconv.Itoa(n) }

// rawItems returns items as JSON, one each.
func rawItems[T any](items []T) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		if b, err := json.Marshal(it); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// withCallIDs returns calls as Ollama's types, each with an id: the
// upstream's, or one made from the request id and the call's place, since
// a caller answers a call by naming its call_id.
func withCallIDs(calls []fleet.ToolCall, requestID string) []api.ToolCall {
	out := make([]api.ToolCall, len(calls))
	for i, tc := range calls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%s_%d", requestID, i)
		}
		out[i] = ollamaToolCall(tc)
	}
	return out
}

// incompleteReason is the incomplete_details.reason of an answer that
// ended with finish, "" when the answer is complete.
func incompleteReason(finish string) string {
	switch finish {
	case "length":
		return "max_output_tokens"
	case "content_filter":
		return "content_filter"
	}
	return ""
}

// messageBeforeCalls mends the last events of an answer whose text came
// before its tool calls. Ollama's converter (v0.17.4) expects one or the
// other: it leaves the message open, gives the first call the message's
// output_index and leaves the message out of the final response. This
// closes the message before the first call, moves the calls one place on
// and puts the message into the response's output ahead of them.
func messageBeforeCalls(events []openai.ResponsesStreamEvent, itemID, text string) []openai.ResponsesStreamEvent {
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
	item := map[string]any{"id": itemID, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
	out := make([]openai.ResponsesStreamEvent, 0, len(events)+3)
	closed := false
	for _, e := range events {
		d, _ := e.Data.(map[string]any)
		if idx, ok := d["output_index"].(int); ok {
			if !closed {
				closed = true
				out = append(out,
					openai.ResponsesStreamEvent{Event: "response.output_text.done", Data: map[string]any{"type": "response.output_text.done",
						"item_id": itemID, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}}},
					openai.ResponsesStreamEvent{Event: "response.content_part.done", Data: map[string]any{"type": "response.content_part.done",
						"item_id": itemID, "output_index": idx, "content_index": 0, "part": part}},
					openai.ResponsesStreamEvent{Event: "response.output_item.done", Data: map[string]any{"type": "response.output_item.done",
						"output_index": idx, "item": item}})
			}
			d["output_index"] = idx + 1
		}
		if resp, ok := d["response"].(map[string]any); ok && e.Event == "response.completed" {
			if output, ok := resp["output"].([]any); ok {
				i := slices.IndexFunc(output, func(o any) bool { m, _ := o.(map[string]any); return m["type"] == "function_call" })
				if i >= 0 {
					resp["output"] = slices.Insert(output, i, any(item))
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// markIncomplete turns the response.completed among events into
// response.incomplete, for an answer cut short for reason.
func markIncomplete(events []openai.ResponsesStreamEvent, reason string) {
	for i, e := range events {
		d, _ := e.Data.(map[string]any)
		resp, ok := d["response"].(map[string]any)
		if e.Event != "response.completed" || !ok {
			continue
		}
		events[i].Event, d["type"] = "response.incomplete", "response.incomplete"
		resp["status"], resp["incomplete_details"], resp["completed_at"] = "incomplete", map[string]any{"reason": reason}, nil
	}
}
