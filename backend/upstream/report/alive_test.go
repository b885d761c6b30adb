package report

import (
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Alive's Progress changes when a server gets on with its work, and only
// then: Ollama's expiry moves when its runner has finished all it was
// given (seen with the real Ollama), llama.cpp's slots move their task and
// tokens decoded, /metrics counts the tokens generated.
func TestAliveProgress(t *testing.T) {
	srv := newFakeServer(t)
	ol := fleet.Candidate{ID: "ol", Provider: fleet.ProviderOllama, URL: srv.URL, Model: "tiny", Enabled: true}
	lc := openaiCand("lc", srv.URL+"/v1", "tiny")
	p, _ := newTestPoller(t, ol, lc)
	progress := func(c fleet.Candidate) string {
		t.Helper()
		a := p.Alive(t.Context(), c)
		if a.Err != nil {
			t.Fatalf("Alive(%s) = %v", c.ID, a.Err)
		}
		return a.Progress
	}
	step := func(what string, c fleet.Candidate, path, body string, moved bool) {
		t.Helper()
		before := progress(c)
		srv.answer(path, 200, body)
		if after := progress(c); (after != before) != moved || after == "" {
			t.Errorf("%s: Progress %q → %q; want moved %v", what, before, after, moved)
		}
	}

	srv.answer("/api/ps", 200, `{"models":[{"name":"tiny:latest","model":"tiny:latest","size":1,"expires_at":"2026-12-07T00:43:01.3Z"}]}`)
	step("Ollama working, its expiry the same", ol, "/api/ps", `{"models":[{"name":"tiny:latest","model":"tiny:latest","size":1,"expires_at":"2026-12-07T00:43:01.3Z"}]}`, false)
	step("Ollama's runner finished", ol, "/api/ps", `{"models":[{"name":"tiny:latest","model":"tiny:latest","size":1,"expires_at":"2026-12-07T00:43:11.2Z"}]}`, true)
	step("Ollama's model unloaded", ol, "/api/ps", `{"models":[]}`, true)

	srv.answer("/metrics", 404, "")
	srv.answer("/slots", 200, `[{"id":0,"is_processing":true,"id_task":1,"next_token":[{"n_decoded":477}]}]`)
	step("llama.cpp stuck on a token", lc, "/slots", `[{"id":0,"is_processing":true,"id_task":1,"next_token":[{"n_decoded":477}]}]`, false)
	step("llama.cpp decoding", lc, "/slots", `[{"id":0,"is_processing":true,"id_task":1,"next_token":[{"n_decoded":480}]}]`, true)
	step("llama.cpp on the next task", lc, "/slots", `[{"id":0,"is_processing":true,"id_task":2,"next_token":[{"n_decoded":3}]}]`, true)

	srv.answer("/slots", 404, "")
	srv.answer("/metrics", 200, "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\nllamacpp:tokens_predicted_total 100\n")
	step("llama.cpp --metrics, nothing generated", lc, "/metrics", "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\nllamacpp:tokens_predicted_total 100\n", false)
	step("llama.cpp --metrics, tokens generated", lc, "/metrics", "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\nllamacpp:tokens_predicted_total 130\n", true)
}

// Ollama lists a model in /api/ps once it has loaded it: a late request
// whose model is not listed waits for its load (u1 review, item 1).
// So does an Ollama configured through its OpenAI-compatible /v1, which
// has no /slots or /metrics.
func TestAliveSaysLoading(t *testing.T) {
	srv := newFakeServer(t)
	ol := fleet.Candidate{ID: "ol", Provider: fleet.ProviderOllama, URL: srv.URL, Model: "tiny", Enabled: true}
	ov1 := openaiCand("ov1", srv.URL+"/v1", "tiny")
	p, _ := newTestPoller(t, ol, ov1)
	srv.answer("/v1/models", 200, `{"data":[{"id":"tiny"}]}`)
	for _, c := range []fleet.Candidate{ol, ov1} {
		for _, tt := range []struct {
			ps      string
			loading bool
		}{
			{`{"models":[]}`, true},
			{`{"models":[{"name":"other:7b","model":"other:7b","size":1}]}`, true},
			{`{"models":[{"name":"tiny:latest","model":"tiny:latest","size":1}]}`, false},
		} {
			srv.answer("/api/ps", 200, tt.ps)
			a := p.Alive(t.Context(), c)
			if a.Err != nil || a.Loading != tt.loading {
				t.Errorf("%s, /api/ps %s: Alive = %+v; want Loading %v", c.ID, tt.ps, a, tt.loading)
			}
			if tt.loading && !strings.Contains(a.Evidence, "tiny not resident yet") {
				t.Errorf("%s: evidence %q does not say the model is loading", c.ID, a.Evidence)
			}
		}
	}
}
