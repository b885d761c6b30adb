package simfleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/format"
	"github.com/ollama/ollama/types/model"
)

// OllamaVersion is the version the Ollama simulation reports on
// /api/version: the version of the api package it speaks.
const OllamaVersion = "0.17.4"

// ollamaBusy is the body of Ollama's answer when its queue is full
// (server/sched.go ErrMaxQueue), two spaces included.
const ollamaBusy = "server busy, please try again.  maximum pending requests exceeded"

// OllamaLegacyVersion is the version an Ollama server with
// Config.LegacyToolCalls reports: the last release whose tool calls had no
// id.
const OllamaLegacyVersion = "0.12.9"

// ollamaBase is what Ollama's native endpoints share: their error bodies
// {"error":"..."}, and their metrics.
type ollamaBase struct{}

// notFound is the answer of /api/chat and /api/generate for a model the
// server lacks (backend/realserver/FINDINGS.md §8).
func (ollamaBase) notFound(name string) *httpError {
	return &httpError{http.StatusNotFound, fmt.Sprintf("model '%s' not found", name)}
}

func (ollamaBase) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (d ollamaBase) writeBusy(w http.ResponseWriter, _ time.Duration) {
	d.writeError(w, http.StatusServiceUnavailable, ollamaBusy)
}

func (ollamaBase) streamType() string { return "application/x-ndjson" }

func (ollamaBase) errorEvent(_ *exchange, msg string) []byte {
	return ndjson(map[string]string{"error": msg})
}

// metrics are the metrics of the done:true object, all in nanoseconds as
// Ollama reports them.
func (ollamaBase) metrics(x *exchange) api.Metrics {
	now := time.Now()
	m := api.Metrics{
		TotalDuration: now.Sub(x.start),
		// A warm Ollama still reports a few milliseconds of load.
		LoadDuration:    max(x.load, time.Millisecond),
		PromptEvalCount: x.req.promptTokens,
		EvalCount:       len(x.sent),
	}
	if x.first.IsZero() {
		m.PromptEvalDuration = max(now.Sub(x.start)-x.load, 1)
	} else {
		m.PromptEvalDuration = max(x.first.Sub(x.start)-x.load, 1)
		m.EvalDuration = max(now.Sub(x.first), 1)
	}
	return m
}

// doneReason is the done_reason of a finished answer: "stop", also when it
// ends in tool calls; "load" or "unload" for a request that only loads or
// unloads its model (FINDINGS.md §7).
func doneReason(x *exchange) string {
	switch x.req.op {
	case opLoad:
		return "load"
	case opUnload:
		return "unload"
	}
	return "stop"
}

// keepAliveZero reports whether keep_alive asks to unload the model.
func keepAliveZero(d *api.Duration) bool { return d != nil && d.Duration == 0 }

// formatOf reads Ollama's format: "json", a JSON schema, or nothing.
func formatOf(raw json.RawMessage) *outputFormat {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	switch string(raw) {
	case "", "null", `""`:
		return nil
	case `"json"`:
		return &outputFormat{}
	}
	return &outputFormat{schema: raw}
}

// ollamaChat renders answers as Ollama's native /api/chat: NDJSON lines of
// api.ChatResponse, ending with a done:true line that carries the
// metrics. Each tool call comes whole in the message.tool_calls of one
// line, with an id ("call_" and 8 characters) unless ids is false
// (Config.LegacyToolCalls).
type ollamaChat struct {
	ollamaBase
	ids bool
}

func (ollamaChat) parse(body []byte) (request, *httpError) {
	var in api.ChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "model is required"}
	}
	// The tools again, with their schemas whole: api.Tool keeps only the
	// keywords Ollama's templates use.
	var raw struct {
		Tools []wireTool `json:"tools"`
	}
	json.Unmarshal(body, &raw)
	req := request{
		kind:   kindChat,
		model:  in.Model,
		stream: in.Stream == nil || *in.Stream,
		think:  in.Think != nil && in.Think.Bool(),
		tools:  tools(raw.Tools),
		format: formatOf(in.Format),
	}
	contents := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		contents[i] = m.Content
	}
	req.promptTokens = promptTokens(contents)
	if len(contents) > 0 {
		req.prompt = contents[len(contents)-1]
	}
	switch {
	case len(in.Messages) == 0 && keepAliveZero(in.KeepAlive):
		req.op, req.stream = opUnload, false
	case len(in.Messages) == 0:
		req.op, req.stream = opLoad, false
	case keepAliveZero(in.KeepAlive):
		req.unloadAfter = true
	}
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "tool" {
		req.toolResult = &in.Messages[n-1].Content
	}
	return req, nil
}

// check refuses what Ollama refuses: chat with an embedding model,
// thinking with a model that cannot think (FINDINGS.md §5, §9).
func (ollamaChat) check(req request, m Model) *httpError {
	if m.Embedding {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support chat", req.model)}
	}
	if req.think && !m.Thinking {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support thinking", req.model)}
	}
	return nil
}

func (d ollamaChat) call(x *exchange, c toolCall) []token {
	if d.ids {
		c.id = callID(x, c, "call_", "abcdefghijklmnopqrstuvwxyz0123456789", 8)
	}
	return wholeCall(c)
}

func (ollamaChat) opening(*exchange) []byte { return nil }

func (d ollamaChat) stall(x *exchange) []byte {
	return d.line(x, api.Message{Role: "assistant"})
}

func (d ollamaChat) token(x *exchange, t token) []byte {
	msg := api.Message{Role: "assistant"}
	switch {
	case t.call != nil:
		msg.ToolCalls = []api.ToolCall{apiToolCall(*t.call, t.text)}
	case t.thinking:
		msg.Thinking = t.text
	default:
		msg.Content = t.text
	}
	return d.line(x, msg)
}

func (d ollamaChat) finish(x *exchange) []byte {
	return ndjson(d.done(x, api.Message{Role: "assistant"}))
}

func (ollamaChat) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `{"model":%q,"created_at":%q,"message":{"role":"assistant","content":"`+"\n",
		x.req.model, time.Now().UTC().Format(time.RFC3339Nano))
}

func (d ollamaChat) whole(x *exchange) []byte {
	thinking, content := x.text()
	msg := api.Message{Role: "assistant", Content: content, Thinking: thinking}
	for _, c := range x.calls() {
		msg.ToolCalls = append(msg.ToolCalls, apiToolCall(c, c.arguments))
	}
	b, _ := json.Marshal(d.done(x, msg))
	return b
}

// line is one not-done line of a stream.
func (ollamaChat) line(x *exchange, msg api.Message) []byte {
	return ndjson(api.ChatResponse{Model: x.req.model, CreatedAt: time.Now().UTC(), Message: msg})
}

// done is the last object of an answer: done:true with the metrics; only
// done_reason for a request that loads or unloads its model.
func (d ollamaChat) done(x *exchange, msg api.Message) api.ChatResponse {
	resp := api.ChatResponse{
		Model:      x.req.model,
		CreatedAt:  time.Now().UTC(),
		Message:    msg,
		Done:       true,
		DoneReason: doneReason(x),
	}
	if x.req.op == opAnswer {
		resp.Metrics = d.metrics(x)
	}
	return resp
}

// apiToolCall is c as Ollama's api package has it, with args as its
// arguments.
func apiToolCall(c toolCall, args string) api.ToolCall {
	arguments := api.NewToolCallFunctionArguments()
	json.Unmarshal([]byte(args), &arguments)
	return api.ToolCall{ID: c.id, Function: api.ToolCallFunction{Index: c.index, Name: c.name, Arguments: arguments}}
}

// ollamaGenerate renders answers as Ollama's /api/generate: NDJSON lines of
// api.GenerateResponse with the text in response (and thinking), ending
// with a done:true line with the metrics and a context. A suffix gets the
// infill text; an empty prompt only loads (or, with keep_alive 0, unloads)
// the model.
type ollamaGenerate struct{ ollamaBase }

func (ollamaGenerate) parse(body []byte) (request, *httpError) {
	var in api.GenerateRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return request{}, &httpError{http.StatusBadRequest, "model is required"}
	}
	req := request{
		kind:         kindGenerate,
		model:        in.Model,
		stream:       in.Stream == nil || *in.Stream,
		think:        in.Think != nil && in.Think.Bool(),
		format:       formatOf(in.Format),
		suffix:       in.Suffix,
		promptTokens: promptTokens([]string{in.System, in.Prompt, in.Suffix}),
	}
	switch {
	case in.Prompt == "" && keepAliveZero(in.KeepAlive):
		req.op, req.stream = opUnload, false
	case in.Prompt == "":
		req.op, req.stream = opLoad, false
	case keepAliveZero(in.KeepAlive):
		req.unloadAfter = true
	}
	return req, nil
}

// check refuses what Ollama refuses: generate with an embedding model
// (unloading it is fine), thinking with a model that cannot think.
func (ollamaGenerate) check(req request, m Model) *httpError {
	if m.Embedding && req.op != opUnload {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support generate", req.model)}
	}
	if req.think && !m.Thinking {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support thinking", req.model)}
	}
	return nil
}

// call is never needed: generate takes no tools.
func (ollamaGenerate) call(_ *exchange, c toolCall) []token { return wholeCall(c) }

func (ollamaGenerate) opening(*exchange) []byte { return nil }

func (d ollamaGenerate) stall(x *exchange) []byte { return d.line(x, token{}) }

func (d ollamaGenerate) token(x *exchange, t token) []byte { return d.line(x, t) }

func (d ollamaGenerate) finish(x *exchange) []byte { return ndjson(d.done(x, "", "")) }

func (ollamaGenerate) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `{"model":%q,"created_at":%q,"response":"`+"\n",
		x.req.model, time.Now().UTC().Format(time.RFC3339Nano))
}

func (d ollamaGenerate) whole(x *exchange) []byte {
	thinking, content := x.text()
	b, _ := json.Marshal(d.done(x, content, thinking))
	return b
}

func (ollamaGenerate) line(x *exchange, t token) []byte {
	r := api.GenerateResponse{Model: x.req.model, CreatedAt: time.Now().UTC()}
	if t.thinking {
		r.Thinking = t.text
	} else {
		r.Response = t.text
	}
	return ndjson(r)
}

// done is the last object: done:true with the metrics and the context (the
// token ids of prompt and answer); only done_reason for a request that
// loads or unloads its model.
func (d ollamaGenerate) done(x *exchange, response, thinking string) api.GenerateResponse {
	r := api.GenerateResponse{
		Model:      x.req.model,
		CreatedAt:  time.Now().UTC(),
		Response:   response,
		Thinking:   thinking,
		Done:       true,
		DoneReason: doneReason(x),
	}
	if x.req.op == opAnswer {
		r.Metrics = d.metrics(x)
		r.Context = make([]int, x.req.promptTokens+len(x.sent))
		for i := range r.Context {
			r.Context[i] = 1 + (i*7919)%32000
		}
	}
	return r
}

// ndjson encodes v as one line.
func ndjson(v any) []byte {
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

// writeJSON answers status with v as its JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// ollamaDetails makes plausible model details for m: its architecture as
// family, its parameter count (from the tag of a name like "qwen3:8b",
// else from its size) and quantisation.
func ollamaDetails(m Model) api.ModelDetails {
	d := api.ModelDetails{
		Format:            "gguf",
		Family:            m.Arch,
		Families:          []string{m.Arch},
		ParameterSize:     format.HumanNumber(uint64(parameters(m))),
		QuantizationLevel: "Q4_K_M",
	}
	if m.Embedding {
		d.QuantizationLevel = "F16"
	}
	if _, tag, ok := strings.Cut(m.Name, ":"); ok && len(tag) > 1 && strings.HasSuffix(tag, "b") {
		d.ParameterSize = strings.ToUpper(tag)
	}
	return d
}

// parameters estimates m's parameter count from its size: two per byte at
// 4 bits, one per two bytes for an F16 embedding model.
func parameters(m Model) int64 {
	if m.Embedding {
		return m.SizeBytes / 2
	}
	return m.SizeBytes * 2
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, m := range s.cfg.Models {
		resp.Models = append(resp.Models, api.ListModelResponse{
			Name:       m.Name,
			Model:      m.Name,
			ModifiedAt: modifiedAt(),
			Size:       m.SizeBytes,
			Digest:     digest(m.Name),
			Details:    ollamaDetails(m),
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	resp := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.cfg.Models {
		if !s.resident[m.Name] {
			continue
		}
		resp.Models = append(resp.Models, api.ProcessModelResponse{
			Name:          m.Name,
			Model:         m.Name,
			Size:          m.SizeBytes,
			Digest:        digest(m.Name),
			Details:       ollamaDetails(m),
			ExpiresAt:     time.Now().Add(5 * time.Minute).UTC(),
			SizeVRAM:      m.SizeBytes,
			ContextLength: 4096,
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

// ollamaShow answers /api/show with the keys Ollama answers
// (FINDINGS.md §10): capabilities ("completion", "tools", and "thinking"
// for a thinking model; only "embedding" for an embedding model), details,
// model_info with general.architecture, general.parameter_count and the
// "<arch>." keys context_length and embedding_length (which apps like Zed
// read), the tokenizer arrays null as without verbose, and a tensor.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var in api.ShowRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil {
		ollamaBase{}.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := in.Model
	if name == "" {
		name = in.Name
	}
	m, ok := s.model(name)
	if !ok {
		if !strings.Contains(name, ":") {
			name += ":latest"
		}
		ollamaBase{}.writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	caps := []model.Capability{model.CapabilityCompletion, model.CapabilityTools}
	if m.Thinking {
		caps = append(caps, model.CapabilityThinking)
	}
	params := `stop                           "<|im_end|>"`
	if m.Embedding {
		caps = []model.Capability{model.CapabilityEmbedding}
		params = `num_ctx                        ` + strconv.Itoa(m.ContextLength)
	}
	writeJSON(w, http.StatusOK, api.ShowResponse{
		Modelfile:  "# Modelfile generated by simfleet\nFROM " + m.Name + "\n",
		Parameters: params,
		Template:   "{{ .Prompt }}",
		Details:    ollamaDetails(m),
		ModelInfo: map[string]any{
			"general.architecture":         m.Arch,
			"general.parameter_count":      parameters(m),
			m.Arch + ".context_length":     m.ContextLength,
			m.Arch + ".embedding_length":   m.Dimensions,
			"general.file_type":            15,
			"general.quantization_version": 2,
			"tokenizer.ggml.model":         "gpt2",
			"tokenizer.ggml.tokens":        nil,
			"tokenizer.ggml.token_type":    nil,
			"tokenizer.ggml.merges":        nil,
		},
		Capabilities: caps,
		ModifiedAt:   modifiedAt(),
		Tensors: []api.Tensor{
			{Name: "token_embd.weight", Type: ollamaDetails(m).QuantizationLevel, Shape: []uint64{uint64(m.Dimensions), 32000}},
		},
	})
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	v := OllamaVersion
	if s.cfg.LegacyToolCalls {
		v = OllamaLegacyVersion
	}
	writeJSON(w, http.StatusOK, map[string]string{"version": v})
}

// modifiedAt is when every simulated model was last modified.
func modifiedAt() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
