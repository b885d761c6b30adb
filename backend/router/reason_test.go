package router

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestReason(t *testing.T) {
	gpu0 := &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: 600 << 20, Reason: "GPU 0 had 0.6 GiB free (below 1 GiB)"}
	tests := []struct {
		a    fleet.Attempt
		want string
	}{
		{fleet.Attempt{Outcome: fleet.OutcomeDemoted, Demoted: true, Reading: gpu0}, "qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried last"},
		{fleet.Attempt{Outcome: fleet.OutcomeDemoted, Demoted: true}, "qwen3-8b: GPU memory pressure, tried last"},
		{fleet.Attempt{Outcome: fleet.OutcomeTimeout, Fault: fleet.FaultServer, Duration: 2100 * time.Millisecond}, "qwen3-8b: no first token in 2.1s"},
		{fleet.Attempt{Outcome: fleet.OutcomeFailedAfterCommit, Fault: fleet.FaultServer}, "qwen3-8b stopped before finishing its answer"},
		{fleet.Attempt{Outcome: fleet.OutcomeBusy, Fault: fleet.FaultQueued, Duration: 8 * time.Second}, "qwen3-8b was busy with other work"},
		{fleet.Attempt{Outcome: fleet.OutcomeBusy, Fault: fleet.FaultBusy, HTTPStatus: 503}, "qwen3-8b was busy with other work (HTTP 503)"},
		{fleet.Attempt{Outcome: fleet.OutcomeBusy, Fault: fleet.FaultLoading}, "qwen3-8b was still loading its model"},
		{fleet.Attempt{Outcome: fleet.OutcomeError, Fault: fleet.FaultServer, HTTPStatus: 500}, "qwen3-8b answered with an error (HTTP 500)"},
		{fleet.Attempt{Outcome: fleet.OutcomeError, Fault: fleet.FaultServer, Error: "dial tcp: connection refused"}, "qwen3-8b failed before its first token"},
		{fleet.Attempt{Outcome: fleet.OutcomeError, Fault: fleet.FaultServer, TTFT: 300 * time.Millisecond, Error: "truncated"}, "qwen3-8b stopped before finishing its answer"},
		{fleet.Attempt{Outcome: fleet.OutcomeError, Fault: fleet.FaultConfig}, "qwen3-8b: its server does not have the model"},
		{fleet.Attempt{Outcome: fleet.OutcomeNotRetryable, Fault: fleet.FaultConfig, HTTPStatus: 401}, "qwen3-8b refused Switchyard's credentials"},
		{fleet.Attempt{Outcome: fleet.OutcomeNotRetryable, Fault: fleet.FaultRequest, HTTPStatus: 400}, "qwen3-8b refused this request (HTTP 400)"},
		{fleet.Attempt{Outcome: fleet.OutcomeError, Fault: fleet.FaultCapability}, "qwen3-8b can't do what this request asks"},
		{fleet.Attempt{Outcome: fleet.OutcomeNoContent, Fault: fleet.FaultServer}, "qwen3-8b sent an empty answer"},
		{fleet.Attempt{Outcome: fleet.OutcomeSkippedOpen}, "qwen3-8b was skipped: it failed repeatedly and is cooling down"},
		{fleet.Attempt{Outcome: fleet.OutcomeClientAbort, Fault: fleet.FaultClient}, "the caller went away while qwen3-8b was answering"},
		{fleet.Attempt{Outcome: fleet.OutcomeShutdown}, "qwen3-8b was cut short: Switchyard was shutting down"},
		{fleet.Attempt{Outcome: fleet.OutcomeSuccess}, "qwen3-8b answered"},
	}
	for _, tt := range tests {
		tt.a.Candidate = "qwen3-8b"
		if got := Reason(tt.a); got != tt.want {
			t.Errorf("Reason(%s/%s) = %q; want %q", tt.a.Outcome, tt.a.Fault, got, tt.want)
		}
	}
}

func TestFallbackReasonIsOneBoundedLine(t *testing.T) {
	m := Meta{Attempts: []fleet.Attempt{
		{Candidate: "a", Outcome: fleet.OutcomeTimeout, Fault: fleet.FaultServer, Duration: 3 * time.Second},
		{Candidate: "b", Outcome: fleet.OutcomeHedgeLost},
		{Candidate: "c", Outcome: fleet.OutcomeDemoted, Reading: &fleet.GPUReading{Reason: "line\r\nbreak"}},
	}}
	if got, want := m.FallbackReason(), "a: no first token in 3s; c: line  break, tried last"; got != want {
		t.Errorf("FallbackReason() = %q; want %q", got, want)
	}
	hedged := Meta{Attempts: []fleet.Attempt{{Candidate: "a", Outcome: fleet.OutcomeHedgeLost}, {Candidate: "b", Outcome: fleet.OutcomeSuccess}}}
	if got, want := hedged.FallbackReason(), "a was slower than another candidate asked at the same time"; got != want {
		t.Errorf("FallbackReason() of a hedge won by the second = %q; want %q", got, want)
	}
	if got := (Meta{}).FallbackReason(); got != "" {
		t.Errorf("FallbackReason() of no attempts = %q; want empty", got)
	}
	long := Meta{Attempts: []fleet.Attempt{{Candidate: strings.Repeat("é", 300), Outcome: fleet.OutcomeSkippedOpen}}}
	if got := long.FallbackReason(); len(got) > FallbackReasonLimit || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("FallbackReason() of a long line = %d bytes %q; want at most %d, clipped with …", len(got), got[:20], FallbackReasonLimit)
	}
}

// A candidate demoted for memory pressure stands in the way of the one
// that served although its turn never came: the routing metadata, which
// the X-Switchyard-Fallback-Reason header is made of, says so at commit.
func TestFallbackReasonNamesTheDemotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A"), "b": {openErr: errors.New("boom")}, "c": answer("C")})
		r := New(testFleet(f, Settings{}), Deps{Pressure: pressureOn{"a": true}})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		want := "b failed before its first token; a: free 1 MiB < 1 GiB, tried last"
		if got := s.Meta().FallbackReason(); !s.Meta().Fallback || got != want {
			t.Errorf("Meta() fallback %v, FallbackReason() = %q; want true, %q", s.Meta().Fallback, got, want)
		}
	})
}

// An unknown model's error says which names are known.
func TestUnknownModelListsTheNames(t *testing.T) {
	f := newFake(map[string]script{"a": answer("A"), "b": answer("B"), "c": answer("C")})
	r := New(testFleet(f, Settings{}), Deps{})
	_, err := r.Stream(t.Context(), &fleet.Request{Model: "gpt-4o"})
	if !errors.Is(err, fleet.ErrUnknownModel) || !strings.Contains(err.Error(), `unknown model "gpt-4o": use auto, a, b, c, or a candidate's model name`) {
		t.Errorf("Stream(gpt-4o) = %v; want the known names", err)
	}
}

// Names are matched as Ollama matches them, without regard to case, ids
// and aliases too (its clients show ids as model names): an exact id
// first, with or without ":latest".
func TestNamesFoldCase(t *testing.T) {
	f := newFake(map[string]script{})
	fl := testFleet(f, Settings{})
	fl.Targets = append(fl.Targets, Target{Candidate: fleet.Candidate{ID: "A", Model: "other", Priority: 9, Enabled: true}, Backend: f})
	r := New(fl, Deps{})
	for _, tt := range []struct{ model, want string }{
		{"B", "b"}, {"b:LATEST", "b"}, {"AUTO", "a"}, {"Auto:latest", "a"}, {"a", "a"}, {"A", "A"}, {"MODEL-C", "c"},
	} {
		if c, err := r.Resolve(tt.model, false); err != nil || c.ID != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.model, c.ID, err, tt.want)
		}
	}
	if _, err := r.Resolve("bb", false); !errors.Is(err, fleet.ErrUnknownModel) {
		t.Errorf("Resolve(bb) = %v; want unknown", err)
	}
}
