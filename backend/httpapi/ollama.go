package httpapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// OllamaAPIVersion is the Ollama API level Switchyard speaks; apps that
// check /api/version for features see the release whose types it uses.
const OllamaAPIVersion = "0.17.4"

func writeOllamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// ollamaRequest converts an Ollama chat request (the official types).
func ollamaRequest(q *api.ChatRequest) (*fleet.Request, error) {
	if err := checkModel(q.Model); err != nil {
		return nil, err
	}
	if len(q.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	if !q.Think.IsValid() {
		return nil, fmt.Errorf("think: invalid value %s (use true, false, \"low\", \"medium\" or \"high\")", clipText(fmt.Sprint(q.Think.Value), 40))
	}
	req := &fleet.Request{Model: q.Model, Stream: q.Stream == nil || *q.Stream, Format: q.Format}
	if q.Think != nil {
		if q.Think.IsString() {
			req.Thinking, req.ThinkLevel = true, q.Think.String()
		} else {
			req.Thinking = q.Think.Bool()
			req.NoThinking = !req.Thinking
		}
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
	req.Options = opts
	return req, nil
}

// ollamaRoles are the roles of Ollama chat messages.
var ollamaRoles = []string{"system", "user", "assistant", "tool"}

// ollamaOptions reads the sampling options Switchyard forwards.
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
	var err error
	if o.Temperature, err = num("temperature"); err != nil {
		return o, err
	}
	if o.Temperature != nil && *o.Temperature < 0 {
		return o, fmt.Errorf("options.temperature: %g is negative", *o.Temperature)
	}
	if o.TopP, err = num("top_p"); err != nil {
		return o, err
	}
	if o.TopP != nil && (*o.TopP < 0 || *o.TopP > 1) {
		return o, fmt.Errorf("options.top_p: %g is out of range [0, 1]", *o.TopP)
	}
	for key, dst := range map[string]**int{"num_predict": &o.MaxTokens, "seed": &o.Seed} {
		f, err := num(key)
		if err != nil {
			return o, err
		}
		if f != nil {
			n := int(*f)
			*dst = &n
		}
	}
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
	return o, nil
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	var q api.ChatRequest
	if status, err := s.decodeBody(w, r, &q); err != nil {
		writeOllamaError(w, status, err.Error())
		return
	}
	req, err := ollamaRequest(&q)
	if err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Protocol = protocolOf(r, fleet.ProtocolOllama)
	if !req.Stream {
		s.ollamaComplete(w, r, req)
		return
	}
	st, err := s.o.Router.Stream(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, writeOllamaError)
		return
	}
	defer st.Close()
	meta := st.Meta()
	routeHeaders(w.Header(), meta)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)

	cw := newChunkWriter(w, s.o.WriteTimeout)
	start := time.Now()
	var final *api.ChatResponse // held back until the router says the answer is complete
	var usage *fleet.Usage
	// Tool calls are sent whole, as Ollama does, once the answer is
	// complete: an OpenAI-compatible upstream streams them in fragments.
	var calls []fleet.ToolCall
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			if len(calls) > 0 {
				line := ollamaLine(meta.Candidate.Model, &fleet.Chunk{ToolCalls: calls})
				cw.buf, _ = appendJSONLine(cw.buf, line)
			}
			if final == nil {
				final = &api.ChatResponse{Model: meta.Candidate.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: "stop"}
				final.Message.Role = "assistant"
			}
			final.TotalDuration = time.Since(start)
			if usage != nil {
				final.PromptEvalCount, final.EvalCount, final.LoadDuration = usage.PromptTokens, usage.CompletionTokens, usage.LoadDuration
			}
			cw.buf, _ = appendJSONLine(cw.buf, final)
			cw.flush()
			return
		}
		if err != nil {
			if !s.callerGone(r) {
				cw.buf = append(cw.buf, `{"error":`...)
				cw.buf = appendString(cw.buf, s.streamErrorText(r, err))
				cw.buf = append(cw.buf, "}\n"...)
				cw.flush()
			}
			return
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, tc := range ch.ToolCalls {
			calls = fleet.MergeToolCall(calls, tc)
		}
		ch.ToolCalls = nil
		line := ollamaLine(meta.Candidate.Model, &ch)
		if ch.FinishReason != "" && !ch.IsFirstToken() {
			line.Done, line.DoneReason = true, ch.FinishReason
			final = line
			continue
		}
		if !ch.IsFirstToken() {
			continue
		}
		cw.buf, _ = appendJSONLine(cw.buf, line)
		if ch.FinishReason != "" {
			// A last chunk with content: send the content now, the done
			// line at the end.
			final = &api.ChatResponse{Model: line.Model, CreatedAt: line.CreatedAt, Done: true, DoneReason: ch.FinishReason}
			final.Message.Role = "assistant"
		}
		if err := cw.flush(); err != nil {
			return
		}
	}
}

// ollamaLine is one NDJSON line of an answer.
func ollamaLine(model string, ch *fleet.Chunk) *api.ChatResponse {
	resp := &api.ChatResponse{Model: model, CreatedAt: time.Now().UTC()}
	resp.Message.Role = "assistant"
	resp.Message.Content = ch.Content
	resp.Message.Thinking = ch.Reasoning
	for _, tc := range ch.ToolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, ollamaToolCall(tc))
	}
	return resp
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

func appendJSONLine(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

func (s *Server) ollamaComplete(w http.ResponseWriter, r *http.Request, req *fleet.Request) {
	start := time.Now()
	ans, err := s.o.Router.Complete(r.Context(), req)
	if err != nil {
		s.failRoute(w, r, err, writeOllamaError)
		return
	}
	routeHeaders(w.Header(), ans.Meta)
	resp := api.ChatResponse{Model: ans.Candidate.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: cmp.Or(ans.FinishReason, "stop")}
	resp.Message.Role = "assistant"
	resp.Message.Content = ans.Message.Content
	resp.Message.Thinking = ans.Message.Thinking
	for _, tc := range ans.Message.ToolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, ollamaToolCall(tc))
	}
	resp.TotalDuration = time.Since(start)
	if ans.Usage != nil {
		resp.PromptEvalCount, resp.EvalCount, resp.LoadDuration = ans.Usage.PromptTokens, ans.Usage.CompletionTokens, ans.Usage.LoadDuration
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	resp := api.ListResponse{Models: []api.ListModelResponse{{Name: router.AliasAuto, Model: router.AliasAuto, ModifiedAt: now}}}
	for _, t := range s.o.Router.Fleet().Targets {
		if !t.Candidate.Enabled {
			continue
		}
		resp.Models = append(resp.Models, api.ListModelResponse{
			Name: t.Candidate.ID, Model: t.Candidate.ID, ModifiedAt: now,
			Details: api.ModelDetails{Format: string(t.Candidate.Provider), ParentModel: t.Candidate.Model},
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": OllamaAPIVersion})
}
