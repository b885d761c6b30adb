package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestSeries(t *testing.T) {
	m := New()
	m.SetCandidates([]string{"auto", "a", "b", "qwen3:8b", "c"}, map[string]fleet.BreakerState{"a": fleet.BreakerClosed, "b": fleet.BreakerClosed, "c": fleet.BreakerOpen})
	m.Observe(fleet.Event{Type: fleet.EventAttempt, Attempt: &fleet.Attempt{Candidate: "a", Outcome: fleet.OutcomeTimeout}})
	m.Observe(fleet.Event{Type: fleet.EventCommit, Attempt: &fleet.Attempt{Candidate: "b", TTFT: 300 * time.Millisecond}})
	m.Observe(fleet.Event{Type: fleet.EventRequestDone, Request: &fleet.RequestRecord{RequestedModel: "auto", ServedCandidate: "b", IsFallback: true, Status: fleet.StatusOK, Latency: time.Second}})
	m.Observe(fleet.Event{Type: fleet.EventRequestDone, Request: &fleet.RequestRecord{RequestedModel: "made-up-by-a-caller", Status: fleet.StatusFailed}})
	// Names as Ollama's tags list them, or in another case, are counted
	// under the name configured.
	for _, name := range []string{"A", "a:latest", "auto:latest", "QWEN3:8B"} {
		m.Observe(fleet.Event{Type: fleet.EventRequestDone, Request: &fleet.RequestRecord{RequestedModel: name, ServedCandidate: "a", Status: fleet.StatusOK}})
	}
	m.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "a", To: fleet.BreakerOpen}})
	m.SetGPU(0, 10<<30, 80<<30)

	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`switchyard_attempts_total{candidate="a",outcome="timeout"} 1`,
		`switchyard_ttft_seconds_bucket{candidate="b",le="0.5"} 1`,
		`switchyard_requests_total{fallback="true",requested_model="auto",served_candidate="b",status="ok"} 1`,
		`switchyard_requests_total{fallback="false",requested_model="other",served_candidate="",status="error"} 1`,
		`switchyard_requests_total{fallback="false",requested_model="a",served_candidate="a",status="ok"} 2`,
		`switchyard_requests_total{fallback="false",requested_model="auto",served_candidate="a",status="ok"} 1`,
		`switchyard_requests_total{fallback="false",requested_model="qwen3:8b",served_candidate="a",status="ok"} 1`,
		`switchyard_request_duration_seconds_count{status="ok"} 5`,
		`switchyard_breaker_state{candidate="a"} 2`,
		`switchyard_breaker_state{candidate="b"} 0`,
		`switchyard_breaker_state{candidate="c"} 2`, // restored open at start
		`switchyard_gpu_memory_used_bytes{gpu="0"} 1.073741824e+10`,
		`switchyard_gpu_memory_total_bytes{gpu="0"} 8.589934592e+10`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "made-up-by-a-caller") {
		t.Error("a caller-chosen model name became a label value")
	}

	// A reload removes a, whose breaker is open: its state goes, its counts stay.
	m.SetCandidates([]string{"auto", "b"}, map[string]fleet.BreakerState{"b": fleet.BreakerOpen})
	w = httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body = w.Body.String()
	if strings.Contains(body, `switchyard_breaker_state{candidate="a"}`) || !strings.Contains(body, `switchyard_breaker_state{candidate="b"} 0`) {
		t.Errorf("after a's removal, breaker series:\n%s", grepLines(body, "switchyard_breaker_state{"))
	}
	if !strings.Contains(body, `switchyard_attempts_total{candidate="a",outcome="timeout"} 1`) {
		t.Error("a's counts went with it")
	}
	// An attempt on a that was running when it went ends, and its breaker changes: no state comes back.
	m.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "a", To: fleet.BreakerOpen}})
	w = httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if body := w.Body.String(); strings.Contains(body, `switchyard_breaker_state{candidate="a"}`) {
		t.Errorf("a removed candidate's breaker came back:\n%s", grepLines(body, "switchyard_breaker_state{"))
	}
}

func grepLines(s, part string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestTeamSeries(t *testing.T) {
	m := New()
	h := TeamHealth{Online: false, Shipped: 7}
	m.WatchTeam(func() TeamHealth { return h })
	scrape := func() string {
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	if body := scrape(); !strings.Contains(body, "switchyard_team_link_online 0") || !strings.Contains(body, "switchyard_team_shipped_records_total 7") {
		t.Errorf("offline link:\n%s", grepLines(body, "switchyard_team_"))
	}
	h.Online = true
	if body := scrape(); !strings.Contains(body, "switchyard_team_link_online 1") {
		t.Errorf("online link:\n%s", grepLines(body, "switchyard_team_"))
	}
}
