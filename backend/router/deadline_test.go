package router

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/deadline"
	"github.com/switchyard/switchyard/backend/fleet"
)

// learned returns a learner that knows n warm TTFTs of d for candidate id,
// as history seeds it at start.
func learned(id string, n int, d time.Duration, s deadline.Settings) *deadline.Learner {
	l := deadline.New(s)
	ttfts := make([]time.Duration, n)
	for i := range ttfts {
		ttfts[i] = d
	}
	l.Seed(id, ttfts)
	return l
}

func TestLearnedDeadlines(t *testing.T) {
	const ceiling = 60 * time.Second
	stall := script{steps: []step{role(), {block: true}}}
	tests := []struct {
		name       string
		learner    *deadline.Learner
		a          script
		wantSwitch time.Duration // when b's attempt starts; 0: a serves
		wantServed string
		wantCold   bool
	}{
		{
			name:    "warm candidate stalls: abandoned at its learned deadline, not the ceiling",
			learner: learned("a", 20, 700*time.Millisecond, deadline.Settings{}), a: stall,
			wantSwitch: 2800 * time.Millisecond, wantServed: "b",
		},
		{
			name:    "too few samples: the ceiling",
			learner: learned("a", 19, 700*time.Millisecond, deadline.Settings{}), a: stall,
			wantSwitch: ceiling, wantServed: "b",
		},
		{
			name: "cold candidate gets its load time on top and is not taken for stalled",
			learner: learned("a", 20, 700*time.Millisecond, deadline.Settings{
				Resident: func(c fleet.Candidate) (bool, bool, time.Time) { return c.ID != "a", true, time.Now() },
				LoadTime: func(fleet.Candidate) time.Duration { return 10 * time.Second },
			}),
			a:          script{steps: []step{role(), {wait: 8 * time.Second, chunk: fleet.Chunk{Content: "A"}}, finish()}},
			wantServed: "a", wantCold: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(map[string]script{"a": tt.a, "b": answer("B")})
				rec := &memRecorder{}
				r := New(testFleet(f, Settings{FirstTokenTimeout: ceiling}), Deps{Recorder: rec, Deadlines: tt.learner})
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatal(err)
				}
				drain(s)
				got := rec.last()
				if got.ServedCandidate != tt.wantServed {
					t.Fatalf("served by %s; want %s", got.ServedCandidate, tt.wantServed)
				}
				a := got.Attempts[0]
				if a.Cold != tt.wantCold {
					t.Errorf("attempt cold = %v; want %v", a.Cold, tt.wantCold)
				}
				if tt.wantSwitch > 0 {
					if a.Outcome != fleet.OutcomeTimeout || a.Duration != tt.wantSwitch || a.Deadline != tt.wantSwitch {
						t.Errorf("a: %s after %v (deadline %v); want timeout at %v", a.Outcome, a.Duration, a.Deadline, tt.wantSwitch)
					}
				}
			})
		})
	}
}

func TestHedgedFirstToken(t *testing.T) {
	slow := script{steps: []step{role(), {wait: 5 * time.Second, chunk: fleet.Chunk{Content: "A"}}, finish()}}
	fast := script{steps: []step{role(), {wait: 100 * time.Millisecond, chunk: fleet.Chunk{Content: "B1"}}, tok("B2"), finish()}}

	t.Run("slow primary loses to a fast secondary", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": slow, "b": fast})
			rec := &memRecorder{}
			l := learned("a", 20, 500*time.Millisecond, deadline.Settings{})
			r := New(testFleet(f, Settings{Hedge: true}), Deps{Recorder: rec, Deadlines: l})
			start := time.Now()
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if ttft := time.Since(start); ttft != 600*time.Millisecond {
				t.Errorf("first token after %v; want 600ms (hedge at the 500ms p95 + 100ms)", ttft)
			}
			if o, c := f.counts("a"); o != 1 || c != 1 {
				t.Errorf("loser a: opened %d closed %d; want its connection closed at once", o, c)
			}
			got, err := drain(s)
			if err != nil || got != "B1B2" {
				t.Errorf("caller saw %q, %v; want one clean stream B1B2", got, err)
			}
			s.Close()
			rr := rec.last()
			if !equal(outcomes(rr.Attempts), []fleet.Outcome{fleet.OutcomeHedgeLost, fleet.OutcomeSuccess}) || rr.ServedCandidate != "b" {
				t.Errorf("attempts = %v served %s; want hedge_lost then success by b", outcomes(rr.Attempts), rr.ServedCandidate)
			}
			if n := r.Breaker("a").Snapshot().Failures; n != 0 {
				t.Errorf("hedge_lost counted as a failure on a's breaker")
			}
		})
	})
	t.Run("primary wins the race: the hedge is cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			primary := script{steps: []step{role(), {wait: 700 * time.Millisecond, chunk: fleet.Chunk{Content: "A"}}, finish()}}
			hedge := script{steps: []step{role(), {wait: 5 * time.Second, chunk: fleet.Chunk{Content: "B"}}, finish()}}
			f := newFake(map[string]script{"a": primary, "b": hedge})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{Hedge: true}), Deps{Recorder: rec, Deadlines: learned("a", 20, 500*time.Millisecond, deadline.Settings{})})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := drain(s); got != "A" {
				t.Errorf("content = %q; want A", got)
			}
			if o, c := f.counts("b"); o != 1 || c != 1 {
				t.Errorf("hedge b: opened %d closed %d", o, c)
			}
			if got := outcomes(rec.last().Attempts); !equal(got, []fleet.Outcome{fleet.OutcomeHedgeLost, fleet.OutcomeSuccess}) {
				t.Errorf("attempts = %v", got)
			}
		})
	})
	t.Run("hedging off: nothing starts in parallel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": slow, "b": fast})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec, Deadlines: learned("a", 20, 500*time.Millisecond, deadline.Settings{Floor: 10 * time.Second})})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			if o, _ := f.counts("b"); o != 0 {
				t.Errorf("b was opened %d times with hedging off", o)
			}
			if rec.last().ServedCandidate != "a" {
				t.Errorf("served by %s; want a", rec.last().ServedCandidate)
			}
		})
	})
	t.Run("too few samples: no hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": slow, "b": fast})
			r := New(testFleet(f, Settings{Hedge: true}), Deps{Deadlines: learned("a", 5, 500*time.Millisecond, deadline.Settings{})})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			if o, _ := f.counts("b"); o != 0 {
				t.Errorf("hedged without a learned p95")
			}
		})
	})
}

func TestAtMostOneHedgePerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// a is slow and then fails; its hedge b fails too; c is slow again,
		// but the request already had its hedge: d must not start.
		slowFail := script{steps: []step{role(), {wait: time.Second, err: &fleet.EventError{Message: "boom"}}}}
		f := newFake(map[string]script{
			"a": slowFail,
			"b": {steps: []step{role(), {wait: 2 * time.Second, err: &fleet.EventError{Message: "engine died"}}}},
			"c": {steps: []step{role(), {wait: 1500 * time.Millisecond, chunk: fleet.Chunk{Content: "C"}}, finish()}},
			"d": answer("D"),
		})
		fl := testFleet(f, Settings{Hedge: true})
		fl.Targets = append(fl.Targets, Target{Candidate: fleet.Candidate{ID: "d", Priority: 4, Enabled: true}, Backend: f})
		l := deadline.New(deadline.Settings{})
		for _, id := range []string{"a", "b", "c"} {
			for range 20 {
				l.Observe(fleet.Candidate{ID: id}, fleet.TTFTSample{TTFT: 500 * time.Millisecond})
			}
		}
		r := New(fl, Deps{Deadlines: l})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := drain(s); got != "C" {
			t.Errorf("content = %q; want C", got)
		}
		if o, _ := f.counts("d"); o != 0 {
			t.Errorf("a second hedge started d")
		}
	})
}
