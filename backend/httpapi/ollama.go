package httpapi

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream"
)

// OllamaAPIVersion is the Ollama API level Switchyard speaks; apps that
// check /api/version for features see the release whose types it uses.
const OllamaAPIVersion = "0.17.4"

func writeOllamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// writeOllamaRouteError writes a routing failure (a routeWriter): Ollama's
// errors are a message alone.
func writeOllamaRouteError(w http.ResponseWriter, status int, msg string, _ *fleet.StatusError) {
	writeOllamaError(w, status, msg)
}

// ollamaRequest converts an Ollama chat request (the official types).
func ollamaRequest(q *api.ChatRequest) (*fleet.Request, error) {
	if err := checkModel(q.Model); err != nil {
		return nil, err
	}
	if len(q.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	if err := checkFormat(q.Format); err != nil {
		return nil, err
	}
	req := &fleet.Request{Model: q.Model, Stream: q.Stream == nil || *q.Stream, Format: q.Format}
	if err := ollamaThink(q.Think, req); err != nil {
		return nil, err
	}
	for i, m := range q.Messages {
		fm := fleet.Message{Role: m.Role, Content: m.Content, Thinking: m.Thinking, Name: m.ToolName, ToolCallID: m.ToolCallID}
		if err := checkRole(m.Role, ollamaRoles); err != nil {
			return nil, fmt.Errorf("messages[%d].role: %w", i, err)
		}
		for _, img := range m.Images {
			fm.Images = append(fm.Images, base64.StdEncoding.EncodeToString(img))
		}
		for j, tc := range m.ToolCalls {
			args, err := json.Marshal(tc.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d]: %w", i, j, err)
			}
			fm.ToolCalls = append(fm.ToolCalls, fleet.ToolCall{Index: j, ID: tc.ID, Type: "function", Name: tc.Function.Name, Arguments: string(args)})
		}
		req.Messages = append(req.Messages, fm)
	}
	for i, t := range q.Tools {
		params, err := json.Marshal(t.Function.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tools[%d].function.parameters: %w", i, err)
		}
		req.Tools = append(req.Tools, fleet.Tool{Type: t.Type, Function: fleet.ToolFunction{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: params}})
	}
	opts, err := ollamaOptions(q.Options)
	if err != nil {
		return nil, err
	}
	opts.Logprobs = q.Logprobs
	if q.TopLogprobs > 0 {
		opts.TopLogprobs = &q.TopLogprobs
	}
	req.Options = opts
	return req, nil
}

// ollamaThink reads think: true or false, or a level.
func ollamaThink(t *api.ThinkValue, req *fleet.Request) error {
	if !t.IsValid() {
		return fmt.Errorf("think: invalid value %s (use true, false, \"low\", \"medium\" or \"high\")", fleet.ClipTo(fmt.Sprint(t.Value), 40))
	}
	if t == nil {
		return nil
	}
	if t.IsString() {
		req.Thinking, req.ThinkLevel = true, t.String()
	} else {
		req.Thinking = t.Bool()
		req.NoThinking = !req.Thinking
	}
	return nil
}

// checkFormat refuses an Ollama format other than "json" or a JSON
// schema (an object), in Ollama's words: an OpenAI-compatible candidate
// would otherwise be asked for JSON, and a request for "xml" answered
// with it.
func checkFormat(format json.RawMessage) error {
	f := bytes.TrimSpace(format)
	if len(f) == 0 || f[0] == '{' || string(f) == "null" || string(f) == `""` || string(f) == `"json"` {
		return nil
	}
	return fmt.Errorf(`invalid format: %s; expected "json" or a valid JSON Schema object`, fleet.ClipTo(string(f), 80))
}

// ollamaOptionKinds are the options the Ollama module's api.Options
// knows, by their JSON names, with the kind of value each takes.
var ollamaOptionKinds = func() map[string]reflect.Kind {
	kinds := map[string]reflect.Kind{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[api.Options]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch k := f.Type.Kind(); {
		case name == "":
		case k == reflect.Pointer && f.Type.Elem().Kind() == reflect.Bool:
			kinds[name] = reflect.Bool
		case k == reflect.Int, k == reflect.Float32, k == reflect.Bool, k == reflect.String, k == reflect.Slice:
			kinds[name] = k
		}
	}
	return kinds
}()

// checkOptionTypes refuses an option of the wrong type as Ollama does,
// in its words (`option "repeat_last_n" must be of type integer`, from
// the module's api.Options.FromMap): whichever candidate is tried, the
// request is malformed, and a server of another kind would answer it,
// ignoring the option. A value of the right type costs a type switch;
// options the module does not know (a newer server's) are left to the
// server.
func checkOptionTypes(m map[string]any) error {
	for k, v := range m {
		kind, known := ollamaOptionKinds[k]
		if !known || v == nil || fits(kind, v) {
			continue
		}
		var o api.Options
		if err := o.FromMap(map[string]any{k: v}); err != nil {
			return err
		}
	}
	return nil
}

// fits reports whether v, as encoding/json decodes it, is a value of kind.
func fits(kind reflect.Kind, v any) bool {
	switch kind {
	case reflect.Int, reflect.Float32:
		_, ok := v.(float64)
		return ok
	case reflect.Bool:
		_, ok := v.(bool)
		return ok
	case reflect.String:
		_, ok := v.(string)
		return ok
	case reflect.Slice:
		list, ok := v.([]any)
		for _, e := range list {
			if _, isString := e.(string); !isString {
				return false
			}
		}
		return ok
	}
	return true
}

// ollamaRoles are the roles of Ollama chat messages.
var ollamaRoles = []string{"system", "user", "assistant", "tool"}

// ollamaOptions reads the options that map to other dialects (docs/API.md,
// "Fields across dialects"); an Ollama upstream gets all of them as sent.
func ollamaOptions(m map[string]any) (fleet.Options, error) {
	var o fleet.Options
	num := func(key string) (*float64, error) {
		v, ok := m[key]
		if !ok || v == nil {
			return nil, nil
		}
		f, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("options.%s: expected a number", key)
		}
		return &f, nil
	}
	// By key, in order, into o after: a table of pointers into o (it
	// was a map) moves o to the heap, and the table with it, for every
	// request.
	var floats [6]*float64
	for i, key := range [...]string{"temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"} {
		f, err := num(key)
		if err != nil {
			return o, err
		}
		floats[i] = f
	}
	o.Temperature, o.TopP, o.MinP, o.RepeatPenalty, o.PresencePenalty, o.FrequencyPenalty = floats[0], floats[1], floats[2], floats[3], floats[4], floats[5]
	if o.Temperature != nil && *o.Temperature < 0 {
		return o, fmt.Errorf("options.temperature: %g is negative", *o.Temperature)
	}
	for _, p := range []struct {
		name string
		v    *float64
	}{{"top_p", o.TopP}, {"min_p", o.MinP}} {
		if p.v != nil && (*p.v < 0 || *p.v > 1) {
			return o, fmt.Errorf("options.%s: %g is out of range [0, 1]", p.name, *p.v)
		}
	}
	var ints [4]*int
	for i, key := range [...]string{"num_predict", "seed", "top_k", "num_ctx"} {
		f, err := num(key)
		if err != nil {
			return o, err
		}
		if f != nil {
			n := int(*f)
			ints[i] = &n
		}
	}
	o.MaxTokens, o.Seed, o.TopK, o.NumCtx = ints[0], ints[1], ints[2], ints[3]
	if v, ok := m["stop"]; ok {
		list, ok := v.([]any)
		if !ok {
			return o, errors.New("options.stop: expected an array of strings")
		}
		for _, s := range list {
			str, ok := s.(string)
			if !ok {
				return o, errors.New("options.stop: expected an array of strings")
			}
			o.Stop = append(o.Stop, str)
		}
	}
	// What Switchyard reads is checked above, in its words; the rest as
	// Ollama checks it.
	return o, checkOptionTypes(m)
}

// ollamaOnly names the fields of an Ollama request that change the answer
// and that only Ollama takes (fleet.Request.DialectOnly).
func ollamaOnly(fields map[string]json.RawMessage, options map[string]any) []string {
	var only []string
	for _, k := range []string{"context", "template"} {
		if v := fields[k]; fleet.IsSet(v) && string(v) != `""` && string(v) != "[]" {
			only = append(only, k)
		}
	}
	for _, k := range []string{"mirostat", "mirostat_eta", "mirostat_tau", "typical_p", "tfs_z", "num_keep"} {
		if _, ok := options[k]; ok {
			only = append(only, "options."+k)
		}
	}
	return only
}

// ollamaRaw completes req with what an Ollama caller sent as is.
func ollamaRaw(req *fleet.Request, endpoint string, fields map[string]json.RawMessage, options map[string]any) {
	req.Raw = &fleet.Raw{Dialect: fleet.ProviderOllama, Endpoint: endpoint, Fields: fields}
	req.KeepAlive = fields["keep_alive"]
	req.DialectOnly = ollamaOnly(fields, options)
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	if req := s.readOllamaChat(w, r); req != nil {
		s.ollamaAnswer(w, r, req, false)
	}
}

// readOllamaChat reads a chat request; on nil it has answered (an error,
// or a model loaded or unloaded). Apart from ollamaChat, for the reason
// readChat is (an open stream holds the handler's stack).
//
//go:noinline
func (s *Server) readOllamaChat(w http.ResponseWriter, r *http.Request) *fleet.Request {
	oq, fields, ok := readRequest[ollamaChatRequest](s, w, r, writeOllamaError)
	if !ok {
		return nil
	}
	q := (*api.ChatRequest)(&oq)
	if len(q.Messages) == 0 {
		// Ollama's way to load a model, or with keep_alive 0 to unload it.
		s.ollamaLoad(w, r, q.Model, fields, false)
		return nil
	}
	req, err := ollamaRequest(q)
	if err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOllama)
	ollamaRaw(req, "/api/chat", fields, q.Options)
	return req
}

// ollamaGenerate is POST /api/generate: a prompt's continuation (editor
// completion with suffix, `ollama run`), routed like a chat.
func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	if req := s.readOllamaGenerate(w, r); req != nil {
		s.ollamaAnswer(w, r, req, true)
	}
}

// readOllamaGenerate reads a generate request; on nil it has answered.
// Apart from ollamaGenerate, for the reason readOllamaChat is.
//
//go:noinline
func (s *Server) readOllamaGenerate(w http.ResponseWriter, r *http.Request) *fleet.Request {
	q, fields, ok := readRequest[api.GenerateRequest](s, w, r, writeOllamaError)
	if !ok {
		return nil
	}
	if err := checkModel(q.Model); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	if q.Prompt == "" && q.Suffix == "" && len(q.Images) == 0 {
		s.ollamaLoad(w, r, q.Model, fields, true)
		return nil
	}
	if err := checkFormat(q.Format); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	req := &fleet.Request{Kind: fleet.KindGenerate, Model: q.Model, Prompt: q.Prompt, Suffix: q.Suffix, System: q.System,
		RawPrompt: q.Raw, Stream: q.Stream == nil || *q.Stream, Format: q.Format, Protocol: protocolOf(r, fleet.ProtocolOllama)}
	if err := ollamaThink(q.Think, req); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	for _, img := range q.Images {
		req.Images = append(req.Images, base64.StdEncoding.EncodeToString(img))
	}
	opts, err := ollamaOptions(q.Options)
	if err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	opts.Logprobs = q.Logprobs
	if q.TopLogprobs > 0 {
		opts.TopLogprobs = &q.TopLogprobs
	}
	req.Options = opts
	ollamaRaw(req, "/api/generate", fields, q.Options)
	return req
}

// ollamaAnswer routes req and writes the answer as Ollama does: NDJSON
// lines, or one object for stream: false. gen is true for /api/generate.
func (s *Server) ollamaAnswer(w http.ResponseWriter, r *http.Request, req *fleet.Request, gen bool) {
	start := time.Now()
	if !req.Stream {
		s.ollamaWholeAnswer(w, r, req, gen, start)
		return
	}
	st := s.routeStream(w, r, req, writeOllamaRouteError)
	if st == nil {
		return
	}
	defer st.Close()
	cw, enc := s.startOllamaStream(w, req, st, gen, start)
	s.pump(r, st, cw, enc, enc.same)
}

// ollamaWholeAnswer routes req for one answer and writes it as one object.
// Apart from ollamaAnswer, whose frame an open stream holds.
//
//go:noinline
func (s *Server) ollamaWholeAnswer(w http.ResponseWriter, r *http.Request, req *fleet.Request, gen bool, start time.Time) {
	ans := s.routeComplete(w, r, req, writeOllamaRouteError)
	if ans == nil {
		return
	}
	b, _ := json.Marshal(ollamaWhole(req, ans, gen, time.Since(start)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write((&ollamaCallIDs{prefix: ans.RequestID}).typed(b))
}

// startOllamaStream starts the NDJSON answer of st and makes its writer
// and encoder. Apart from ollamaAnswer, for the reason startOpenAIStream
// is.
//
//go:noinline
func (s *Server) startOllamaStream(w http.ResponseWriter, req *fleet.Request, st *router.Stream, gen bool, start time.Time) (*chunkWriter, *ollamaEncoder) {
	meta := st.Meta()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	cw := newChunkWriter(w, s.o.WriteTimeout)
	cw.flushBeforeWait(st)
	same := sameDialect(req, meta, fleet.ProviderOllama)
	if same {
		st.Passthrough()
	}
	enc := &ollamaEncoder{lines: ollamaLines{model: meta.Candidate.Model, gen: gen}, ids: &ollamaCallIDs{prefix: meta.RequestID},
		start: start, same: same}
	return cw, enc
}

// ollamaEncoder writes Ollama's NDJSON lines (encoder).
type ollamaEncoder struct {
	lines ollamaLines
	ids   *ollamaCallIDs
	start time.Time
	same  bool // the upstream's own lines go out
	// done is the upstream's own done:true line, held back for end: the
	// caller reads it only once the request's record is durable, and the
	// reader's buffer goes out before the record is written.
	done []byte
}

func (e *ollamaEncoder) chunk(dst []byte, ch *fleet.Chunk) ([]byte, bool) {
	if !e.lines.add(ch) {
		return dst, false
	}
	return e.lines.appendLine(dst, ch), true
}

// raw appends Ollama's own line, every field kept.
func (e *ollamaEncoder) raw(dst []byte, ch *fleet.Chunk) ([]byte, bool) {
	if len(ch.Raw) == 0 {
		return dst, false
	}
	if ch.FinishReason != "" {
		// The done:true line, every other line's end.
		e.done = append(append(e.done[:0], e.ids.typed(ch.Raw)...), '\n')
		return dst, false
	}
	return append(append(dst, e.ids.typed(ch.Raw)...), '\n'), true
}

func (e *ollamaEncoder) end(dst []byte) []byte {
	if e.same {
		return append(dst, e.done...) // the upstream's done:true line, as it came
	}
	return e.lines.appendEnd(dst, time.Since(e.start), e.ids)
}

func (e *ollamaEncoder) fail(dst []byte, msg string) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendString(dst, msg)
	return append(dst, "}\n"...)
}

// ollamaLines turns chunks of another dialect into Ollama's lines. Tool
// calls are sent whole, as Ollama does, once the answer is complete: an
// OpenAI-compatible upstream streams them in fragments.
type ollamaLines struct {
	model  string
	gen    bool
	calls  []fleet.ToolCall
	reason string // the finish reason, once known
	usage  *fleet.Usage
}

// add takes in ch and reports whether it has a line of its own to send.
func (l *ollamaLines) add(ch *fleet.Chunk) bool {
	if ch.Usage != nil {
		l.usage = ch.Usage
	}
	for _, tc := range ch.ToolCalls {
		l.calls = fleet.MergeToolCall(l.calls, tc)
	}
	if ch.FinishReason != "" {
		l.reason = ch.FinishReason
	}
	return ch.Content != "" || ch.Reasoning != ""
}

func (l *ollamaLines) appendLine(dst []byte, ch *fleet.Chunk) []byte {
	var lp []api.Logprob
	if len(ch.Logprobs) > 0 {
		json.Unmarshal(ch.Logprobs, &lp)
	}
	if l.gen {
		b, _ := json.Marshal(api.GenerateResponse{Model: l.model, CreatedAt: time.Now().UTC(), Response: ch.Content, Thinking: ch.Reasoning, Logprobs: lp})
		return append(append(dst, b...), '\n')
	}
	resp := api.ChatResponse{Model: l.model, CreatedAt: time.Now().UTC(), Logprobs: lp}
	resp.Message.Role = "assistant"
	resp.Message.Content = ch.Content
	resp.Message.Thinking = ch.Reasoning
	b, _ := json.Marshal(resp)
	return append(append(dst, b...), '\n')
}

// appendEnd appends the tool calls, if any, and the done line.
func (l *ollamaLines) appendEnd(dst []byte, took time.Duration, ids *ollamaCallIDs) []byte {
	m := api.Metrics{TotalDuration: took}
	if u := l.usage; u != nil {
		m.PromptEvalCount, m.EvalCount, m.LoadDuration = u.PromptTokens, u.CompletionTokens, u.LoadDuration
	}
	reason := ollamaReason(l.reason)
	var calls []api.ToolCall
	for _, tc := range l.calls {
		calls = append(calls, ollamaToolCall(tc))
	}
	var b []byte
	if l.gen {
		if len(calls) > 0 {
			b, _ = json.Marshal(api.GenerateResponse{Model: l.model, CreatedAt: time.Now().UTC(), ToolCalls: calls})
			dst = append(append(dst, ids.typed(b)...), '\n')
		}
		b, _ = json.Marshal(api.GenerateResponse{Model: l.model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason, Metrics: m})
		return append(append(dst, b...), '\n')
	}
	if len(calls) > 0 {
		resp := api.ChatResponse{Model: l.model, CreatedAt: time.Now().UTC()}
		resp.Message.Role = "assistant"
		resp.Message.ToolCalls = calls
		b, _ = json.Marshal(resp)
		dst = append(append(dst, ids.typed(b)...), '\n')
	}
	resp := api.ChatResponse{Model: l.model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason, Metrics: m}
	resp.Message.Role = "assistant"
	b, _ = json.Marshal(resp)
	return append(append(dst, b...), '\n')
}

// ollamaReason is Ollama's done_reason for a finish reason of any
// dialect: Ollama says "stop" when tool calls end the answer.
func ollamaReason(reason string) string {
	switch reason {
	case "", "tool_calls", "function_call":
		return "stop"
	}
	return reason
}

// ollamaCallIDs gives each tool call of an Ollama answer an id, when its
// server gave none (Ollama before 0.12), and type "function": clients
// that answer a call by its id (LangChain) need both, and Ollama's own
// clients ignore the type.
type ollamaCallIDs struct {
	prefix string
	n      int // calls seen so far
}

// typed returns the line or answer b with its tool calls (message.tool_calls,
// or a generation's tool_calls) given an id and a type; b itself when it
// has none.
func (ids *ollamaCallIDs) typed(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"tool_calls"`)) {
		return b
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return b
	}
	fix := func(raw json.RawMessage) json.RawMessage {
		var calls []map[string]json.RawMessage
		if json.Unmarshal(raw, &calls) != nil {
			return raw
		}
		for _, c := range calls {
			var id string
			json.Unmarshal(c["id"], &id)
			if id == "" {
				c["id"], _ = json.Marshal("call_" + ids.prefix + "_" + strconv.Itoa(ids.n))
			}
			if _, ok := c["type"]; !ok {
				c["type"] = json.RawMessage(`"function"`)
			}
			ids.n++
		}
		out, _ := json.Marshal(calls)
		return out
	}
	if tc, ok := obj["tool_calls"]; ok {
		obj["tool_calls"] = fix(tc)
	}
	if m, ok := obj["message"]; ok {
		var msg map[string]json.RawMessage
		if json.Unmarshal(m, &msg) == nil {
			if tc, ok := msg["tool_calls"]; ok {
				msg["tool_calls"] = fix(tc)
				obj["message"], _ = json.Marshal(msg)
			}
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return b
	}
	return out
}

func ollamaToolCall(tc fleet.ToolCall) api.ToolCall {
	var c api.ToolCall
	c.ID = tc.ID
	c.Function.Index = tc.Index
	c.Function.Name = tc.Name
	c.Function.Arguments = api.NewToolCallFunctionArguments()
	if tc.Arguments != "" {
		// Arguments that are not a JSON object stay empty rather than
		// failing the whole answer.
		_ = json.Unmarshal([]byte(tc.Arguments), &c.Function.Arguments)
	}
	return c
}

// ollamaWhole is the answer of stream: false. From an Ollama upstream it
// is the upstream's last line (durations, context, done_reason as Ollama
// measured and said them) with the answer put together from the stream.
func ollamaWhole(req *fleet.Request, ans *answer, gen bool, took time.Duration) any {
	var calls []api.ToolCall
	for _, tc := range ans.Message.ToolCalls {
		calls = append(calls, ollamaToolCall(tc))
	}
	var lp []api.Logprob
	if len(ans.Logprobs) > 0 {
		json.Unmarshal(ans.Logprobs, &lp)
	}
	if sameDialect(req, &ans.Meta, fleet.ProviderOllama) && len(ans.Fields) > 0 {
		set := map[string]any{"done": true}
		if gen {
			set["response"] = ans.Message.Content
			if ans.Message.Thinking != "" {
				set["thinking"] = ans.Message.Thinking
			}
			if len(calls) > 0 {
				set["tool_calls"] = calls
			}
		} else {
			var msg api.Message
			msg.Role, msg.Content, msg.Thinking, msg.ToolCalls = "assistant", ans.Message.Content, ans.Message.Thinking, calls
			set["message"] = msg
		}
		if lp != nil {
			set["logprobs"] = lp
		}
		if body, err := upstream.MergeRaw(ans.Fields, set); err == nil { // the values set always encode
			return json.RawMessage(body) // writeJSON compacts and escapes it as it would a map
		}
	}
	m := api.Metrics{TotalDuration: took}
	if u := ans.Usage; u != nil {
		m.PromptEvalCount, m.EvalCount, m.LoadDuration = u.PromptTokens, u.CompletionTokens, u.LoadDuration
	}
	reason := ollamaReason(cmp.Or(ans.FinishReason, "stop"))
	if gen {
		return api.GenerateResponse{Model: ans.Candidate.Model, CreatedAt: time.Now().UTC(), Response: ans.Message.Content,
			Thinking: ans.Message.Thinking, ToolCalls: calls, Done: true, DoneReason: reason, Metrics: m, Logprobs: lp}
	}
	resp := api.ChatResponse{Model: ans.Candidate.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason, Metrics: m, Logprobs: lp}
	resp.Message.Role = "assistant"
	resp.Message.Content = ans.Message.Content
	resp.Message.Thinking = ans.Message.Thinking
	resp.Message.ToolCalls = calls
	return resp
}

// ollamaLoad answers a chat without messages or a generation without a
// prompt: Ollama loads the model (keep_alive 0: unloads it). It goes to the
// candidate a chat naming model would be served by: the first that may
// take a request now, in the chain's order, and the next when a server
// does not answer, answers with a server error or lacks the model, so that preloading
// `auto` (`ollama run auto`) works while the first choice is down. An
// Ollama candidate's server is asked to load; a server of another kind
// keeps its model loaded, so there is nothing to do but say so. Loads are
// not recorded in the history and count against no breaker.
func (s *Server) ollamaLoad(w http.ResponseWriter, r *http.Request, model string, fields map[string]json.RawMessage, gen bool) {
	if err := checkModel(model); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	first, err := s.o.Router.Resolve(model, false)
	if err == nil {
		var cands []fleet.Candidate
		if cands, err = s.o.Router.Available(model); err == nil {
			s.loadFirst(w, r, first, cands, fields, gen)
			return
		}
	}
	s.ollamaNotFound(w, model, err)
}

// loadFirst asks cands in turn to load their model, as ollamaLoad says,
// and answers with the first that does.
func (s *Server) loadFirst(w http.ResponseWriter, r *http.Request, first fleet.Candidate, cands []fleet.Candidate, fields map[string]json.RawMessage, gen bool) {
	var why []string
	if len(cands) == 0 || cands[0].ID != first.ID {
		why = append(why, first.ID+" is not taking requests now")
	}
	path := "/api/chat"
	if gen {
		path = "/api/generate"
	}
	for _, c := range cands {
		m := &router.Meta{RequestID: router.NewID(), Candidate: c, Fallback: c.ID != first.ID}
		if c.Provider != fleet.ProviderOllama || s.o.Upstreams == nil {
			loadHeaders(w.Header(), m, why)
			writeLoaded(w, c, fields, gen)
			return
		}
		body := map[string]any{"model": c.Model, "stream": false}
		if !gen {
			body["messages"] = []any{}
		}
		if ka := fields["keep_alive"]; fleet.IsSet(ka) {
			body["keep_alive"] = ka
		}
		b, _ := json.Marshal(body) // strings and raw JSON always encode
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {r.Header.Get("Accept")}}
		resp, err := s.o.Upstreams.Do(r.Context(), c, http.MethodPost, path, h, bytes.NewReader(b))
		switch {
		case err != nil:
			why = append(why, c.ID+" did not answer")
			if r.Context().Err() != nil {
				return // the caller went away
			}
			continue
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusNotFound: // a sick server, or one without the model
			resp.Body.Close()
			why = append(why, fmt.Sprintf("%s answered with an error (HTTP %d)", c.ID, resp.StatusCode))
			continue
		}
		loadHeaders(w.Header(), m, why)
		s.copyAnswer(w, resp)
		resp.Body.Close()
		return
	}
	w.Header().Set("Retry-After", "1")
	writeOllamaError(w, http.StatusServiceUnavailable, fleet.ClipTo("no candidate could load the model: "+strings.Join(why, "; "), 4<<10))
}

// loadHeaders sets a load's routing headers: those of a routed answer,
// with why the first choice did not load it when another did.
func loadHeaders(h http.Header, m *router.Meta, why []string) {
	routeHeaders(h, m)
	if m.Fallback && len(why) > 0 {
		h.Set("X-Switchyard-Fallback-Reason", fleet.ClipTo(strings.Join(why, "; "), router.FallbackReasonLimit))
	}
}

// writeLoaded answers a load for a server that keeps its model loaded:
// done, "load" (keep_alive 0: "unload").
func writeLoaded(w http.ResponseWriter, c fleet.Candidate, fields map[string]json.RawMessage, gen bool) {
	reason := "load"
	if ka := strings.TrimSpace(string(fields["keep_alive"])); ka == "0" || ka == `"0"` || ka == `"0s"` {
		reason = "unload"
	}
	if gen {
		writeJSON(w, http.StatusOK, api.GenerateResponse{Model: c.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason})
		return
	}
	resp := api.ChatResponse{Model: c.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason}
	resp.Message.Role = "assistant"
	writeJSON(w, http.StatusOK, resp)
}

// ollamaNotFound answers a model no candidate serves, as Ollama words it.
func (s *Server) ollamaNotFound(w http.ResponseWriter, model string, err error) {
	if errors.Is(err, fleet.ErrUnknownModel) {
		writeOllamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found (GET /api/tags lists the models Switchyard serves)", fleet.ClipTo(model, MaxModelName)))
		return
	}
	writeOllamaError(w, http.StatusServiceUnavailable, err.Error())
}

// ollamaEmbed is POST /api/embed.
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	q, fields, ok := readRequest[api.EmbedRequest](s, w, r, writeOllamaError)
	if !ok {
		return
	}
	input, err := embedInput(fields["input"], "input")
	if err == nil {
		err = checkModel(q.Model)
	}
	if err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	req := &fleet.Request{Kind: fleet.KindEmbed, Model: q.Model, Input: input, Dimensions: q.Dimensions, Protocol: protocolOf(r, fleet.ProtocolOllama)}
	ollamaRaw(req, "/api/embed", fields, q.Options)
	s.ollamaEmbedAnswer(w, r, req, false)
}

// ollamaEmbeddings is POST /api/embeddings, Ollama's older single-prompt
// form.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	q, fields, ok := readRequest[api.EmbeddingRequest](s, w, r, writeOllamaError)
	if !ok {
		return
	}
	if err := checkModel(q.Model); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	req := &fleet.Request{Kind: fleet.KindEmbed, Model: q.Model, Input: []string{q.Prompt}, Protocol: protocolOf(r, fleet.ProtocolOllama)}
	ollamaRaw(req, "/api/embeddings", fields, q.Options)
	s.ollamaEmbedAnswer(w, r, req, true)
}

func (s *Server) ollamaEmbedAnswer(w http.ResponseWriter, r *http.Request, req *fleet.Request, legacy bool) {
	start := time.Now()
	ans := s.routeComplete(w, r, req, writeOllamaRouteError)
	if ans == nil {
		return
	}
	if sameDialect(req, &ans.Meta, fleet.ProviderOllama) && len(ans.Fields) > 0 {
		writeJSON(w, http.StatusOK, ans.Fields)
		return
	}
	if legacy {
		var vec []float32
		if len(ans.Embeddings) > 0 {
			vec = ans.Embeddings[0]
		}
		writeJSON(w, http.StatusOK, map[string]any{"embedding": vec})
		return
	}
	resp := api.EmbedResponse{Model: ans.Candidate.Model, Embeddings: ans.Embeddings, TotalDuration: time.Since(start)}
	if ans.Usage != nil {
		resp.PromptEvalCount, resp.LoadDuration = ans.Usage.PromptTokens, ans.Usage.LoadDuration
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": OllamaAPIVersion})
}
