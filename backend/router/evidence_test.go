package router

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// evidenceOf reports fixed remote evidence per candidate id.
type evidenceOf map[string]Remote

func (e evidenceOf) Remote(c fleet.Candidate, _ time.Time) Remote { return e[c.ID] }

func TestRemoteEvidenceExcludesDemotesAndCounts(t *testing.T) {
	f := newFake(map[string]script{})
	ev := evidenceOf{
		"a": {Out: true, Until: time.Now().Add(time.Minute), Reason: "node b: breaker open since 18:41; node c: breaker open since 18:41"},
		"b": {Suspect: true, Reason: "node b: probe failed since 18:42"},
		"c": {InFlight: 3},
	}
	r := New(testFleet(f, Settings{}), Deps{Evidence: ev})
	pl, err := r.plan(r.state.Load(), &fleet.Request{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range pl.entries {
		switch id := e.target.Candidate.ID; {
		case e.skip != nil:
			got = append(got, id+":skip")
			if e.skip.Outcome != fleet.OutcomeSkippedOpen || !strings.Contains(e.skip.Error, "node b: breaker open") {
				t.Errorf("skip of %s = %s %q; want skipped_open with the reason", id, e.skip.Outcome, e.skip.Error)
			}
			if got, want := Reason(*e.skip), "a was skipped: other Switchyards of the team see its server failing"; got != want {
				t.Errorf("Reason(skip of %s) = %q; want %q", id, got, want)
			}
		case e.demoted:
			got = append(got, id+":demoted")
			if e.reading == nil || e.reading.Reason != ev["b"].Reason {
				t.Errorf("demotion of %s reads %+v; want the reason %q", id, e.reading, ev["b"].Reason)
			}
		default:
			got = append(got, id)
		}
	}
	if want := []string{"a:skip", "c", "b:demoted"}; !equal(got, want) {
		t.Errorf("plan = %v; want %v", got, want)
	}
	if v := r.view(fleet.Candidate{ID: "c"}, time.Now()); v.inflight != 3 {
		t.Errorf("view(c).inflight = %d; want the 3 other nodes run", v.inflight)
	}
	if got, _ := r.Available("auto"); len(got) != 2 || got[0].ID != "b" || got[1].ID != "c" {
		t.Errorf("Available() = %v; want b and c, a kept out", got)
	}
	for _, cs := range r.States() {
		if cs.Candidate.ID == "c" && (cs.InFlight != 0 || cs.RemoteInFlight != 3) {
			t.Errorf("States() c: InFlight %d, RemoteInFlight %d; want 0, 3 (this node's own count stays its own)", cs.InFlight, cs.RemoteInFlight)
		}
	}
}

// Requests other nodes run on a one-slot server fill it: a first-token
// wait there is a queue, not a failure.
func TestRemoteInFlightMakesAWaitAQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{
			"a": {steps: []step{role(), {wait: 5 * time.Second}, tok("A"), finish()}},
			"b": answer("B"),
		})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 2 * time.Second},
			Capacity: &fakeCapacity{slots: map[string]int{"a": 1, "b": 1}}, Evidence: evidenceOf{"a": {InFlight: 1}}})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := drain(s); got != "B" {
			t.Errorf("answer = %q; want B", got)
		}
		if got, want := faults(rec.last().Attempts), []string{"a:busy/queued", "b:success/"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v", got, want)
		}
		if n := r.Breaker("a").Snapshot().Failures; n != 0 {
			t.Errorf("a's breaker counted %d failures for a wait behind other nodes' requests", n)
		}
	})
}

func TestRetryAfterWaitsForRemoteEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A")})
		fl := testFleet(f, Settings{})
		fl.Targets = fl.Targets[:1]
		r := New(fl, Deps{Recorder: &memRecorder{}, Evidence: evidenceOf{"a": {Out: true, Until: time.Now().Add(time.Minute), Reason: "node b, node c"}}})
		_, err := r.Stream(t.Context(), &fleet.Request{})
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Stream() = %v; want an *Error", err)
		}
		if e.RetryAfter != time.Minute {
			t.Errorf("RetryAfter with the only candidate kept out for a minute = %v; want 1m", e.RetryAfter)
		}
	})
}
