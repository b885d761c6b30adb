package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// askTimeout bounds what the model endpoints wait for a server's own
// answer (/api/tags, /api/ps, /api/show): a server that does not answer
// in time is shown from Switchyard's view alone.
const askTimeout = 3 * time.Second

// maxAskBody bounds such an answer.
const maxAskBody = 16 << 20

// ask GETs (body nil) or POSTs path on c's server and decodes its JSON
// answer into v. An error status is an error naming the server.
func (s *Server) ask(ctx context.Context, c fleet.Candidate, path string, body, v any) error {
	if s.o.Upstreams == nil {
		return fmt.Errorf("no upstream access")
	}
	method, rd := http.MethodGet, io.Reader(nil)
	h := http.Header{"Accept": {"application/json"}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	resp, err := s.o.Upstreams.Do(ctx, c, method, path, h, rd)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAskBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &upstreamStatus{code: resp.StatusCode, body: b}
	}
	return json.Unmarshal(b, v)
}

// upstreamStatus is a server's error answer to ask.
type upstreamStatus struct {
	code int
	body []byte
}

func (e *upstreamStatus) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.code, fleet.ClipTo(string(bytes.TrimSpace(e.body)), 300))
}

// byServer asks each distinct server of the enabled candidates that match
// keep, at once, and returns the answers by base URL.
func byServer[T any](s *Server, ctx context.Context, keep func(fleet.Candidate) bool, ask func(context.Context, fleet.Candidate) (T, error)) map[string]T {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  = map[string]T{}
		seen = map[string]bool{}
	)
	for _, t := range s.o.Router.Fleet().Targets {
		c := t.Candidate
		key := string(c.Provider) + " " + c.URL
		if !c.Enabled || !keep(c) || seen[key] {
			continue
		}
		seen[key] = true
		wg.Go(func() {
			v, err := ask(ctx, c)
			if err != nil {
				return
			}
			mu.Lock()
			out[key] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func isOllama(c fleet.Candidate) bool { return c.Provider == fleet.ProviderOllama }

// ollamaTags is GET /api/tags: every enabled candidate under its id, named
// as Ollama names models (with ":latest" when the id has no tag), with
// every field its Ollama server reports of the model (size, digest,
// details, and what newer servers add that the module's types lack:
// details.context_length, capabilities ...), and the alias auto with the
// size, details and capabilities of the default candidate.
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	lists := byServer(s, r.Context(), isOllama, func(ctx context.Context, c fleet.Candidate) ([]map[string]json.RawMessage, error) {
		var l struct {
			Models []map[string]json.RawMessage `json:"models"`
		}
		err := s.ask(ctx, c, "/api/tags", nil, &l)
		return l.Models, err
	})
	fl := s.o.Router.Fleet()
	now := time.Now().UTC()
	models := []map[string]json.RawMessage{}
	var first map[string]json.RawMessage
	for _, t := range fl.Targets {
		c := t.Candidate
		if !c.Enabled {
			continue
		}
		m := upstreamModel(lists[string(c.Provider)+" "+c.URL], c.Model)
		if m == nil {
			m = fieldsOf(api.ListModelResponse{ModifiedAt: now, Digest: digestOf(c),
				Details: api.ModelDetails{Format: string(c.Provider), ParentModel: c.Model, Family: familyOf(c.Model)}})
		}
		name, _ := json.Marshal(fleet.Tagged(c.ID))
		m["name"], m["model"] = name, name
		models = append(models, m)
		if c.ID == fl.DefaultModel {
			first = m
		}
	}
	auto := fieldsOf(api.ListModelResponse{Name: fleet.Tagged(router.AliasAuto), Model: fleet.Tagged(router.AliasAuto), ModifiedAt: now, Digest: hashHex("auto")})
	for _, k := range []string{"size", "details", "capabilities"} {
		if v, ok := first[k]; ok {
			auto[k] = v
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": append([]map[string]json.RawMessage{auto}, models...)})
}

// upstreamModel is the model of list, a server's /api/tags, that model
// names, as the server wrote it; nil when none.
func upstreamModel(list []map[string]json.RawMessage, model string) map[string]json.RawMessage {
	for _, up := range list {
		var name, tagged string
		json.Unmarshal(up["name"], &name)
		json.Unmarshal(up["model"], &tagged)
		if fleet.SameModel(name, model) || fleet.SameModel(tagged, model) {
			return maps.Clone(up)
		}
	}
	return nil
}

// fieldsOf is v's JSON object as its fields.
func fieldsOf(v any) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(v)
	json.Unmarshal(b, &m)
	return m
}

// digestOf is a stable digest for a candidate whose server reports none.
func digestOf(c fleet.Candidate) string {
	return hashHex(string(c.Provider) + " " + c.URL + " " + c.Model)
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// familyOf guesses a model's family from its name, for servers that do
// not tell ("Qwen/Qwen3-8B" → "qwen3").
func familyOf(model string) string {
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	for _, f := range []string{"qwen3", "qwen2", "qwen", "llama", "mistral", "mixtral", "gemma3", "gemma", "phi", "deepseek", "gpt-oss", "granite", "olmo"} {
		if strings.HasPrefix(name, f) {
			return strings.ReplaceAll(f, "-", "")
		}
	}
	return "unknown"
}

// ollamaShow is POST /api/show: the details of a candidate's model, as its
// Ollama server gives them (context length, capabilities, template ...),
// or as Switchyard knows them for a server of another kind. An alias shows
// its first choice.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var q api.ShowRequest
	if status, err := s.decodeBody(w, r, &q); err != nil {
		writeOllamaError(w, status, err.Error())
		return
	}
	name := cmp.Or(q.Model, q.Name)
	if err := checkModel(name); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	c, err := s.o.Router.Resolve(name, false)
	if err != nil {
		s.ollamaNotFound(w, name, err)
		return
	}
	w.Header().Set("X-Switchyard-Served-Model", c.ID)
	view := map[string]any{"candidate": c.ID, "provider": c.Provider, "url": c.URL, "model": c.Model}
	if name != c.ID && !fleet.SameModel(name, c.Model) {
		view["alias"] = name
	}
	if c.Provider == fleet.ProviderOllama && s.o.Upstreams != nil {
		var show map[string]json.RawMessage
		ctx, cancel := context.WithTimeout(r.Context(), askTimeout)
		err := s.ask(ctx, c, "/api/show", map[string]any{"model": c.Model, "verbose": q.Verbose}, &show)
		cancel()
		var us *upstreamStatus
		switch {
		case errors.As(err, &us) && us.code == http.StatusNotFound:
			writeOllamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found on %s (candidate %s): pull it there", c.Model, c.URL, c.ID))
			return
		case err == nil:
			b, _ := json.Marshal(view)
			show["switchyard"] = b
			writeJSON(w, http.StatusOK, show)
			return
		}
		view["note"] = "the server did not answer: " + fleet.ClipTo(err.Error(), 200)
	}
	writeJSON(w, http.StatusOK, s.showOf(r.Context(), c, view))
}

// showOf is what Switchyard knows of c's model, in /api/show's shape.
func (s *Server) showOf(ctx context.Context, c fleet.Candidate, view map[string]any) any {
	fam := familyOf(c.Model)
	caps := []string{"completion", "tools"}
	switch {
	case c.EmbedOnly:
		caps = []string{"embedding"}
	case c.Embeds:
		caps = append(caps, "embedding")
	}
	if c.SupportsThinking && !c.EmbedOnly {
		caps = append(caps, "thinking")
	}
	info := map[string]any{"general.architecture": fam, "general.basename": c.Model}
	if n := s.contextLength(ctx, c); n > 0 {
		info[fam+".context_length"] = n
	}
	return map[string]any{
		"modelfile":    fmt.Sprintf("# Switchyard candidate %s: model %q on the %s server at %s\nFROM %s\n", c.ID, c.Model, c.Provider, c.URL, c.Model),
		"parameters":   "",
		"template":     "{{ .Prompt }}",
		"details":      api.ModelDetails{Format: string(c.Provider), Family: fam, Families: []string{fam}, ParentModel: c.Model},
		"model_info":   info,
		"capabilities": caps,
		"modified_at":  time.Now().UTC(),
		"switchyard":   view,
	}
}

// contextLength asks an OpenAI-compatible server for its context window:
// llama.cpp's /props (n_ctx), vLLM's /v1/models (max_model_len). 0 when
// neither tells.
func (s *Server) contextLength(ctx context.Context, c fleet.Candidate) int {
	if s.o.Upstreams == nil || c.Provider != fleet.ProviderOpenAI {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if s.ask(ctx, c, "/props", nil, &props) == nil && props.Settings.NCtx > 0 {
		return props.Settings.NCtx
	}
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if s.ask(ctx, c, "/v1/models", nil, &models) == nil {
		for _, m := range models.Data {
			if m.ID == c.Model && m.MaxModelLen > 0 {
				return m.MaxModelLen
			}
		}
	}
	return 0
}

// ollamaPS is GET /api/ps: the models the fleet holds in memory, under
// their candidate ids (named as /api/tags names them), as each Ollama
// server reports them; a candidate of another kind is listed while its
// server lists its model.
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	ollama := byServer(s, r.Context(), isOllama, func(ctx context.Context, c fleet.Candidate) ([]api.ProcessModelResponse, error) {
		var l api.ProcessResponse
		err := s.ask(ctx, c, "/api/ps", nil, &l)
		return l.Models, err
	})
	others := byServer(s, r.Context(), func(c fleet.Candidate) bool { return !isOllama(c) }, func(ctx context.Context, c fleet.Candidate) ([]string, error) {
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		err := s.ask(ctx, c, "/v1/models", nil, &l)
		ids := make([]string, len(l.Data))
		for i, m := range l.Data {
			ids[i] = m.ID
		}
		return ids, err
	})
	resp := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	for _, t := range s.o.Router.Fleet().Targets {
		c := t.Candidate
		if !c.Enabled {
			continue
		}
		key := string(c.Provider) + " " + c.URL
		if isOllama(c) {
			for _, m := range ollama[key] {
				if fleet.SameModel(m.Name, c.Model) || fleet.SameModel(m.Model, c.Model) {
					m.Name, m.Model = fleet.Tagged(c.ID), fleet.Tagged(c.ID)
					resp.Models = append(resp.Models, m)
					break
				}
			}
			continue
		}
		if ids, ok := others[key]; ok && (slices.Contains(ids, c.Model) || len(ids) == 1) {
			// Its server keeps the model loaded: an expiry far off, which
			// Ollama's CLI shows as "Forever" (a zero one reads "Stopping...").
			resp.Models = append(resp.Models, api.ProcessModelResponse{Name: fleet.Tagged(c.ID), Model: fleet.Tagged(c.ID), Digest: digestOf(c),
				Details:       api.ModelDetails{Format: string(c.Provider), ParentModel: c.Model, Family: familyOf(c.Model)},
				ContextLength: s.contextLength(r.Context(), c), ExpiresAt: time.Now().UTC().AddDate(100, 0, 0)})
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// ollamaManage answers the operations that change a server's models
// (pull, push, create, delete, copy, blobs): Switchyard routes to the
// servers and owns no models, so it says which server to ask.
func (s *Server) ollamaManage(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, "/api/")
	op, _, _ = strings.Cut(op, "/")
	var q struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if r.Body != nil {
		json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&q)
	}
	model := fleet.ClipTo(cmp.Or(q.Model, q.Name), MaxModelName)
	var hosts []string
	for _, t := range s.o.Router.Fleet().Targets {
		c := t.Candidate
		if !isOllama(c) || !c.Enabled {
			continue
		}
		if model != "" && (c.ID == model || fleet.SameModel(c.Model, model)) {
			hosts = []string{hostOf(c.URL)}
			break
		}
		if !slices.Contains(hosts, hostOf(c.URL)) {
			hosts = append(hosts, hostOf(c.URL))
		}
	}
	msg := fmt.Sprintf("Switchyard routes requests to model servers and does not %s models itself", op)
	switch len(hosts) {
	case 0:
		msg += ": do it on the model server directly"
	default:
		msg += fmt.Sprintf(": run it against the Ollama server, e.g. OLLAMA_HOST=%s ollama %s %s", hosts[0], op, cmp.Or(model, "MODEL"))
		if len(hosts) > 1 {
			msg += " (Ollama servers of this fleet: " + strings.Join(hosts, ", ") + ")"
		}
	}
	writeOllamaError(w, http.StatusNotImplemented, msg)
}

// hostOf is host:port of a base URL.
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	return u.Host
}

// root is GET / and HEAD /: the UI for a browser, and Ollama's "Ollama is
// running" for everyone else (the Ollama CLI and apps check it first).
func (s *Server) root(ui http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ui != nil && strings.Contains(r.Header.Get("Accept"), "text/html") {
			ui.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			io.WriteString(w, "Ollama is running")
		}
	}
}
