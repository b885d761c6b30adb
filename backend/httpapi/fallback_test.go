package httpapi

import (
	"context"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// status500Backend answers every call with an HTTP 500.
type status500Backend struct{}

func (status500Backend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return nil, &fleet.StatusError{StatusCode: 500, Message: "boom"}
}

// A fallback says why in plain words beside X-Switchyard-Fallback, for
// streamed and complete answers alike; a first choice that served says
// nothing of reasons.
func TestFallbackReasonHeader(t *testing.T) {
	ok := &countingBackend{}
	s := New(Options{Listen: "127.0.0.1:8484", Router: router.New(router.Fleet{
		Targets: []router.Target{
			{Candidate: fleet.Candidate{ID: "first", Model: "model-1", Enabled: true, Priority: 1}, Backend: status500Backend{}},
			{Candidate: fleet.Candidate{ID: "second", Model: "model-2", Enabled: true, Priority: 2}, Backend: ok},
		},
		DefaultModel: "first",
	}, router.Deps{})})
	for _, body := range []string{
		`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		w := do(s, "POST", "/v1/chat/completions", body, nil)
		h := w.Header()
		if w.Code != 200 || h.Get("X-Switchyard-Fallback") != "true" || h.Get("X-Switchyard-Served-Model") != "second" {
			t.Fatalf("%s: %d, headers %v", body, w.Code, h)
		}
		if got, want := h.Get("X-Switchyard-Fallback-Reason"), "first answered with an error (HTTP 500)"; got != want {
			t.Errorf("%s: X-Switchyard-Fallback-Reason = %q; want %q", body, got, want)
		}
	}
	w := do(s, "POST", "/v1/chat/completions", `{"model":"second","messages":[{"role":"user","content":"hi"}]}`, nil)
	if _, set := w.Header()["X-Switchyard-Fallback-Reason"]; set || w.Header().Get("X-Switchyard-Fallback") != "false" {
		t.Errorf("first choice served: headers %v; want no fallback reason", w.Header())
	}
}
