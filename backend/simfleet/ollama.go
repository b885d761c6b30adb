package simfleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
)

// OllamaVersion is the version the Ollama simulation reports on
// /api/version: the version of the api package it speaks.
const OllamaVersion = "0.17.4"

// ollamaBusy is the body of Ollama's answer when its queue is full
// (server/sched.go ErrMaxQueue), two spaces included.
const ollamaBusy = "server busy, please try again.  maximum pending requests exceeded"

// ollamaDialect renders answers as Ollama's native /api/chat: NDJSON lines
// of api.ChatResponse, ending with a done:true line that carries the
// metrics.
type ollamaDialect struct{}

func (ollamaDialect) parse(body []byte) (chatRequest, *httpError) {
	var in api.ChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return chatRequest{}, &httpError{http.StatusBadRequest, err.Error()}
	}
	if in.Model == "" {
		return chatRequest{}, &httpError{http.StatusBadRequest, "model is required"}
	}
	contents := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		contents[i] = m.Content
	}
	return chatRequest{
		model:        in.Model,
		stream:       in.Stream == nil || *in.Stream,
		think:        in.Think != nil && in.Think.Bool(),
		promptTokens: promptTokens(contents),
	}, nil
}

func (ollamaDialect) check(req chatRequest, m Model) *httpError {
	if req.think && !m.Thinking {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("%q does not support thinking", req.model)}
	}
	return nil
}

func (ollamaDialect) notFound(name string) *httpError {
	return &httpError{http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", name)}
}

func (ollamaDialect) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (d ollamaDialect) writeBusy(w http.ResponseWriter, _ time.Duration) {
	d.writeError(w, http.StatusServiceUnavailable, ollamaBusy)
}

func (ollamaDialect) streamType() string { return "application/x-ndjson" }

func (ollamaDialect) opening(*exchange) []byte { return nil }

func (d ollamaDialect) stall(x *exchange) []byte {
	return d.line(x, api.Message{Role: "assistant"})
}

func (d ollamaDialect) token(x *exchange, t token) []byte {
	msg := api.Message{Role: "assistant"}
	if t.thinking {
		msg.Thinking = t.text
	} else {
		msg.Content = t.text
	}
	return d.line(x, msg)
}

func (d ollamaDialect) finish(x *exchange) []byte {
	return ndjson(d.done(x, api.Message{Role: "assistant"}))
}

func (ollamaDialect) errorEvent(_ *exchange, msg string) []byte {
	return ndjson(map[string]string{"error": msg})
}

func (ollamaDialect) garbage(x *exchange) []byte {
	return fmt.Appendf(nil, `{"model":%q,"created_at":%q,"message":{"role":"assistant","content":"`+"\n",
		x.req.model, time.Now().UTC().Format(time.RFC3339Nano))
}

func (d ollamaDialect) whole(x *exchange) []byte {
	thinking, content := x.text()
	b, _ := json.Marshal(d.done(x, api.Message{Role: "assistant", Content: content, Thinking: thinking}))
	return b
}

// line is one not-done line of a stream.
func (ollamaDialect) line(x *exchange, msg api.Message) []byte {
	return ndjson(api.ChatResponse{Model: x.req.model, CreatedAt: time.Now().UTC(), Message: msg})
}

// done is the last object of an answer: done:true with the metrics, all in
// nanoseconds as Ollama reports them.
func (ollamaDialect) done(x *exchange, msg api.Message) api.ChatResponse {
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
	return api.ChatResponse{
		Model:      x.req.model,
		CreatedAt:  now.UTC(),
		Message:    msg,
		Done:       true,
		DoneReason: "stop",
		Metrics:    m,
	}
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

// ollamaDetails makes plausible model details from a name like "qwen3:8b".
func ollamaDetails(name string) api.ModelDetails {
	family, tag, _ := strings.Cut(name, ":")
	family = strings.TrimRight(family, "0123456789.-")
	size := "7B"
	if strings.HasSuffix(tag, "b") && len(tag) > 1 {
		size = strings.ToUpper(tag)
	}
	return api.ModelDetails{
		Format:            "gguf",
		Family:            family,
		Families:          []string{family},
		ParameterSize:     size,
		QuantizationLevel: "Q4_K_M",
	}
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, m := range s.cfg.Models {
		resp.Models = append(resp.Models, api.ListModelResponse{
			Name:       m.Name,
			Model:      m.Name,
			ModifiedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			Size:       m.SizeBytes,
			Digest:     digest(m.Name),
			Details:    ollamaDetails(m.Name),
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
			Details:       ollamaDetails(m.Name),
			ExpiresAt:     time.Now().Add(5 * time.Minute).UTC(),
			SizeVRAM:      m.SizeBytes,
			ContextLength: 4096,
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var in api.ShowRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil {
		ollamaDialect{}.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := in.Model
	if name == "" {
		name = in.Name
	}
	m, ok := s.model(name)
	if !ok {
		ollamaDialect{}.writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	caps := []model.Capability{model.CapabilityCompletion}
	if m.Thinking {
		caps = append(caps, model.CapabilityThinking)
	}
	details := ollamaDetails(m.Name)
	writeJSON(w, http.StatusOK, api.ShowResponse{
		Modelfile:  "# Modelfile generated by simfleet\nFROM " + m.Name + "\n",
		Parameters: "temperature 0.6",
		Template:   "{{ .Prompt }}",
		Details:    details,
		ModelInfo: map[string]any{
			"general.architecture":    details.Family,
			"general.parameter_count": m.SizeBytes * 2,
		},
		Capabilities: caps,
		ModifiedAt:   time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	})
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": OllamaVersion})
}
