package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
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

// POST config/write answers the path, 409 for a file that exists, 404 for
// nothing to write.
func TestWriteConfigAnswers(t *testing.T) {
	for _, tt := range []struct {
		write func() (string, error)
		code  int
		body  string
	}{
		{func() (string, error) { return "/x/config.yaml", nil }, 200, `{"path":"/x/config.yaml"}`},
		{func() (string, error) { return "", fmt.Errorf("/x/config.yaml exists already (%w)", fs.ErrExist) }, 409, "exists already"},
		{func() (string, error) { return "", errors.New("the demo's config") }, 404, "the demo's config"},
		{nil, 404, "there is no config to write"},
	} {
		s := New(Options{Listen: "127.0.0.1:8484", WriteConfig: tt.write})
		w := do(s, "POST", "/switchyard/v1/config/write", "", nil)
		if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.body) {
			t.Errorf("POST config/write = %d %s; want %d with %q", w.Code, w.Body.String(), tt.code, tt.body)
		}
	}
}
