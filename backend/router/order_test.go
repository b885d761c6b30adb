package router

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// pressureOn demotes the listed candidates.
type pressureOn map[string]bool

func (p pressureOn) Pressure(c fleet.Candidate) *fleet.GPUReading {
	if p[c.ID] {
		return &fleet.GPUReading{GPU: 0, Source: "test", FreeBytes: 1 << 20, Reason: "free 1 MiB < 1 GiB"}
	}
	return nil
}

func TestOrder(t *testing.T) {
	cands := []fleet.Candidate{
		{ID: "small", Priority: 1, Enabled: true},
		{ID: "big", Priority: 2, Enabled: true, SupportsThinking: true},
		{ID: "zeta", Priority: 3, Enabled: true, SupportsThinking: true},
		{ID: "alpha", Priority: 3, Enabled: true},
		{ID: "off", Priority: 0, Enabled: false, SupportsThinking: true},
	}
	tests := []struct {
		name      string
		model     string
		thinking  bool
		open      []string // breakers to trip first
		busy      []string
		demote    []string
		want      []string
		excluded  []fleet.Outcome
		preferred string
	}{
		{name: "auto: default first, then priority, ties by id", want: []string{"small", "big", "alpha", "zeta"}, preferred: "small"},
		{name: "named candidate first", model: "zeta", want: []string{"zeta", "small", "big", "alpha"}, preferred: "zeta"},
		{name: "upstream model name picks its candidate", model: "model-alpha", want: []string{"alpha", "small", "big", "zeta"}, preferred: "alpha"},
		{name: "thinking filter and deep-thinking first choice", thinking: true, want: []string{"big", "zeta"}, preferred: "big"},
		{name: "naming the deep-thinking model turns thinking on", model: "big", want: []string{"big", "zeta"}, preferred: "big"},
		{name: "disabled never tried", model: "off", want: []string{"small", "big", "alpha", "zeta"}, preferred: "small"},
		{name: "open breaker excluded", open: []string{"small"}, want: []string{"big", "alpha", "zeta"},
			excluded: []fleet.Outcome{fleet.OutcomeSkippedOpen}, preferred: "small"},
		{name: "busy back-off excluded", busy: []string{"big"}, want: []string{"small", "alpha", "zeta"},
			excluded: []fleet.Outcome{fleet.OutcomeBusy}, preferred: "small"},
		{name: "demoted moved to the end in order", demote: []string{"small", "big"}, want: []string{"alpha", "zeta", "small", "big"}, preferred: "small"},
		{name: "all demoted still tried", demote: []string{"small", "big", "alpha", "zeta"}, want: []string{"small", "big", "alpha", "zeta"}, preferred: "small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ts []Target
				for _, c := range cands {
					c.Model = "model-" + c.ID
					ts = append(ts, Target{Candidate: c})
				}
				const deep = "big"
				p := pressureOn{}
				for _, id := range tt.demote {
					p[id] = true
				}
				r := New(Fleet{Targets: ts, DefaultModel: "small", DeepThinkingModel: deep}, Deps{Pressure: p})
				for _, id := range tt.open {
					for range 2 {
						tk, _ := r.Breaker(id).Allow()
						r.Breaker(id).Done(tk, breaker.Failure, "test")
					}
				}
				for _, id := range tt.busy {
					r.backOff(id, time.Now().Add(time.Second))
				}
				req := &fleet.Request{Model: tt.model, Thinking: tt.thinking}
				pl, err := r.plan(r.state.Load(), req, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				var excluded []fleet.Attempt
				for _, e := range pl.entries {
					if e.skip != nil {
						excluded = append(excluded, *e.skip)
						continue
					}
					got = append(got, e.target.Candidate.ID)
					if e.demoted != p[e.target.Candidate.ID] || (e.demoted && e.reading == nil) {
						t.Errorf("%s: demoted = %v reading %v", e.target.Candidate.ID, e.demoted, e.reading)
					}
				}
				if !equal(got, tt.want) {
					t.Errorf("order = %v; want %v", got, tt.want)
				}
				if !equal(outcomes(excluded), tt.excluded) {
					t.Errorf("excluded = %v; want %v", outcomes(excluded), tt.excluded)
				}
				if pl.preferred != tt.preferred {
					t.Errorf("preferred = %s; want %s", pl.preferred, tt.preferred)
				}
				if tt.model == deep && !pl.thinking {
					t.Error("naming the deep-thinking model did not turn thinking on")
				}
			})
		})
	}
}

func TestBusyBackOffExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Fleet{Targets: []Target{{Candidate: fleet.Candidate{ID: "a", Enabled: true}}}, DefaultModel: "a"}, Deps{})
		r.backOff("a", time.Now().Add(time.Second))
		a := fleet.Candidate{ID: "a"}
		if r.view(a, time.Now()).busyFor == 0 {
			t.Fatal("not busy right after back-off")
		}
		time.Sleep(time.Second)
		if r.view(a, time.Now()).busyFor != 0 {
			t.Fatal("still busy after Retry-After")
		}
	})
}

func TestUpdateKeepsBreakersOfUnchangedCandidates(t *testing.T) {
	f := newFake(map[string]script{})
	fl := testFleet(f, Settings{})
	r := New(fl, Deps{})
	for range 2 {
		tk, _ := r.Breaker("a").Allow()
		r.Breaker("a").Done(tk, breaker.Failure, "x")
		tk, _ = r.Breaker("b").Allow()
		r.Breaker("b").Done(tk, breaker.Failure, "x")
	}
	fl.Targets[1].Candidate.URL = "http://elsewhere.invalid" // b changed
	fl.Targets = append(fl.Targets, Target{Candidate: fleet.Candidate{ID: "d", Enabled: true}, Backend: f})
	r.Update(fl)
	if st := r.Breaker("a").Snapshot().State; st != fleet.BreakerOpen {
		t.Errorf("unchanged a: breaker %s; want open kept", st)
	}
	if st := r.Breaker("b").Snapshot().State; st != fleet.BreakerClosed {
		t.Errorf("changed b: breaker %s; want a fresh closed one", st)
	}
	if r.Breaker("d") == nil {
		t.Error("new candidate d has no breaker")
	}
	// New breaker settings keep the state of unchanged candidates too.
	fl.Settings.Breaker = breaker.Settings{FailureThreshold: 5, OpenDuration: time.Hour}
	r.Update(fl)
	if s := r.Breaker("a").Snapshot(); s.State != fleet.BreakerOpen || s.Remaining <= 30*time.Second {
		t.Errorf("a after new breaker settings: %s, %v left; want open, for the new hour", s.State, s.Remaining)
	}
}

// A plan made before an Update keeps the candidates as they were when it
// was made: its entries point into the state it was made from, which
// Update replaces and never changes.
func TestPlanOutlivesUpdate(t *testing.T) {
	f := newFake(map[string]script{})
	fl := testFleet(f, Settings{})
	r := New(fl, Deps{})
	pl, err := r.plan(r.state.Load(), &fleet.Request{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	changed := testFleet(f, Settings{})
	changed.Targets[0].Candidate.URL = "http://elsewhere.invalid"
	changed.Targets[0].Candidate.Priority = 9
	changed.Targets = changed.Targets[:2]
	r.Update(changed)
	fl.Targets[1].Candidate.Model = "changed by the caller"
	var got []string
	for _, e := range pl.entries {
		c := e.target.Candidate
		got = append(got, fmt.Sprintf("%s %s %q %d", c.ID, c.Model, c.URL, c.Priority))
	}
	want := []string{`a model-a "" 1`, `b model-b "" 2`, `c model-c "" 3`}
	if !slices.Equal(got, want) {
		t.Errorf("plan after Update = %q; want %q", got, want)
	}
}

func TestDemotionRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A"), "b": answer("B"), "c": answer("C")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec, Pressure: pressureOn{"a": true}})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := drain(s); got != "B" {
			t.Errorf("content = %q; want B (a is demoted behind b and c)", got)
		}
		got := rec.last()
		if !got.IsFallback || got.ServedCandidate != "b" {
			t.Errorf("served %s fallback %v; want b, true", got.ServedCandidate, got.IsFallback)
		}
		d := got.Attempts[len(got.Attempts)-1] // after the attempt that served
		if got.Attempts[0].Candidate != "b" || d.Candidate != "a" || d.Outcome != fleet.OutcomeDemoted || !d.Demoted || d.Reading == nil || d.Error != "free 1 MiB < 1 GiB" {
			t.Errorf("demotion record = %+v; want a demoted with its reading", d)
		}

		// When every candidate is demoted they are still tried, in order,
		// and the attempt that served carries its reading.
		r2 := New(testFleet(f, Settings{}), Deps{Recorder: rec, Pressure: pressureOn{"a": true, "b": true, "c": true}})
		s, _ = r2.Stream(t.Context(), &fleet.Request{})
		if got, _ := drain(s); got != "A" {
			t.Errorf("all demoted: content = %q; want A", got)
		}
		if a := rec.last().Attempts; len(a) != 3 || a[0].Outcome != fleet.OutcomeSuccess || !a[0].Demoted || a[0].Reading == nil {
			t.Errorf("all demoted: attempts = %+v", a)
		}
	})
}
