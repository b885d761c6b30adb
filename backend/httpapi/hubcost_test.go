package httpapi

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func routerEvent() fleet.Event {
	return fleet.Event{Type: fleet.EventCommit, At: time.Unix(1, 0), RequestID: "r", Attempt: &fleet.Attempt{RequestID: "r", Candidate: "a"}}
}

// A request's events cost nothing while nobody subscribes, and reach a
// subscriber once there is one.
func TestObserveUnsubscribedIsFree(t *testing.T) {
	hub := NewHub()
	ev := routerEvent()
	if n := testing.AllocsPerRun(100, func() { hub.Observe(ev) }); n != 0 {
		t.Errorf("Observe without subscribers: %v allocations; want 0", n)
	}
	sub, end := hub.subscribe()
	defer end(false)
	hub.Observe(ev)
	select {
	case <-sub.ready:
	default:
		t.Fatal("the subscriber was not told of the event")
	}
	end(false)
	if n := testing.AllocsPerRun(100, func() { hub.Observe(ev) }); n != 0 {
		t.Errorf("Observe after the last subscriber left: %v allocations; want 0", n)
	}
}

// BenchmarkObserveUnsubscribed is a request event's cost on the hub when
// nobody watches the live view.
func BenchmarkObserveUnsubscribed(b *testing.B) {
	hub := NewHub()
	ev := routerEvent()
	b.ReportAllocs()
	for b.Loop() {
		hub.Observe(ev)
	}
}

// The router lends an event's attempt and record for the call and goes on
// changing them (fleet.Event): a subscriber is sent them as they were when
// observed.
func TestObserveKeepsItsOwnCopy(t *testing.T) {
	hub := NewHub()
	sub, end := hub.subscribe()
	defer end(false)
	a := fleet.Attempt{RequestID: "r", Candidate: "a"}
	rec := fleet.RequestRecord{ID: "r", Status: fleet.StatusOK, Attempts: []fleet.Attempt{{Candidate: "a", Outcome: fleet.OutcomeSuccess}}}
	hub.Observe(fleet.Event{Type: fleet.EventAttemptStarted, RequestID: "r", Attempt: &a})
	hub.Observe(fleet.Event{Type: fleet.EventRequestDone, RequestID: "r", Request: &rec})
	a.Candidate, a.Outcome = "changed", fleet.OutcomeError
	rec.Status, rec.Attempts[0].Outcome = fleet.StatusFailed, fleet.OutcomeError
	got, _ := sub.take(nil)
	if len(got) != 2 {
		t.Fatalf("take() = %d events; want 2", len(got))
	}
	if at := got[0].router.Attempt; at.Candidate != "a" || at.Outcome != "" {
		t.Errorf("attempt_started sent with candidate %q, outcome %q; want %q, none: the router's later change reached the subscriber", at.Candidate, at.Outcome, "a")
	}
	if r := got[1].router.Request; r.Status != fleet.StatusOK || r.Attempts[0].Outcome != fleet.OutcomeSuccess {
		t.Errorf("request_done sent with status %q, attempt outcome %q; want %q, %q", r.Status, r.Attempts[0].Outcome, fleet.StatusOK, fleet.OutcomeSuccess)
	}
}
