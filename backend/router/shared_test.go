package router

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// fakeLiveness answers liveness checks as scripted per candidate, after
// took, and counts them.
type fakeLiveness struct {
	mu     sync.Mutex
	pulse  map[string]Pulse
	took   time.Duration
	checks map[string]int
	// slow: how many of a candidate's next checks answer after the bound.
	slow map[string]int
}

func (f *fakeLiveness) Check(ctx context.Context, c fleet.Candidate) Pulse {
	f.mu.Lock()
	f.checks[c.ID]++
	p, took := f.pulse[c.ID], f.took
	if f.slow[c.ID] > 0 {
		f.slow[c.ID]--
		took = 2 * LivenessBound
	}
	f.mu.Unlock()
	if err := sleep(ctx, took); err != nil {
		return Pulse{Err: err}
	}
	return p
}

func (f *fakeLiveness) set(id string, p Pulse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulse[id] = p
}

func (f *fakeLiveness) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checks[id]
}

var (
	busyPulse = Pulse{Evidence: "alive: /api/ps answered in 3 ms"}
	idlePulse = Pulse{Idle: true, Evidence: "alive: /slots answered in 2 ms; 0 of 1 slots busy"}
	deadPulse = Pulse{Err: errors.New("/slots: context deadline exceeded")}
	// Ollama's /api/ps, its model not listed yet: it is loading it.
	loadingPulse = Pulse{Loading: true, Evidence: "alive: /api/ps answered in 1 ms; tiny not resident yet: loading it"}
)

// slowOrFallback is a fleet of a, which runs script slow, and b, which
// answers at once, or of a alone; first_token_timeout is 60 s.
func slowOrFallback(slow script, only bool) Fleet {
	fl := testFleet(newFake(map[string]script{"a": slow, "b": answer("B")}), Settings{FirstTokenTimeout: 60 * time.Second})
	fl.Targets = fl.Targets[:2]
	if only {
		fl.Targets = fl.Targets[:1]
	}
	return fl
}

// The decision table of a first-token deadline on a server other clients
// share (docs/DESIGN.md, "Shared servers"): a with a learned deadline of
// 300 ms and another client's work ahead; b answers at once.
func TestSharedServerDeadline(t *testing.T) {
	slow := script{steps: []step{role(), {wait: 5 * time.Second, chunk: fleet.Chunk{Content: "A"}}, finish()}}
	for _, tc := range []struct {
		name     string
		pulse    Pulse
		only     bool // a is the only candidate
		want     []string
		failures int
		served   string
		waited   time.Duration
		text     string
	}{
		{name: "alive and busy, with a fallback", pulse: busyPulse,
			want: []string{"a:busy/queued", "b:success/"}, served: "b", waited: 300 * time.Millisecond,
			text: "busy with work Switchyard did not send"},
		{name: "alive and busy, the only candidate", pulse: busyPulse, only: true,
			want: []string{"a:success/"}, served: "a", waited: 5 * time.Second},
		{name: "not answering", pulse: deadPulse,
			want: []string{"a:timeout/server", "b:success/"}, failures: 1, served: "b", waited: 300 * time.Millisecond,
			text: "not alive"},
		{name: "not answering, the only candidate", pulse: deadPulse, only: true,
			want: []string{"a:timeout/server"}, failures: 1, waited: 300 * time.Millisecond},
		// Giving up would abort the load, and the model would stay cold
		// however often it is asked (u1 review, item 1).
		{name: "loading the request's model, with a fallback", pulse: loadingPulse,
			want: []string{"a:success/"}, served: "a", waited: 5 * time.Second},
		{name: "idle with free slots", pulse: idlePulse,
			want: []string{"a:timeout/server", "b:success/"}, failures: 1, served: "b", waited: 300 * time.Millisecond,
			text: "alive but idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fl := slowOrFallback(slow, tc.only)
				rec := &memRecorder{}
				spy := &spyDeadlines{d: 300 * time.Millisecond}
				live := &fakeLiveness{pulse: map[string]Pulse{"a": tc.pulse}, took: 3 * time.Millisecond, checks: map[string]int{}}
				r := New(fl, Deps{Recorder: rec, Deadlines: spy, Liveness: live})
				start := time.Now()
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err == nil {
					drain(s)
				}
				if tc.served == "" && err == nil {
					t.Fatalf("Stream() succeeded; want an error")
				}
				if tc.served != "" && err != nil {
					t.Fatalf("Stream() = %v; want %s's answer", err, tc.served)
				}
				last := rec.last()
				if got := faults(last.Attempts); !equal(got, tc.want) {
					t.Errorf("attempts = %v; want %v", got, tc.want)
				}
				if last.ServedCandidate != tc.served {
					t.Errorf("served by %q; want %q", last.ServedCandidate, tc.served)
				}
				if n := r.Breaker("a").Snapshot().Failures; n != tc.failures {
					t.Errorf("a's breaker counted %d failures; want %d", n, tc.failures)
				}
				if tc.text != "" && !strings.Contains(last.Attempts[0].Error, tc.text) {
					t.Errorf("a's error %q does not say %q", last.Attempts[0].Error, tc.text)
				}
				if got := last.Attempts[0].TTFT + last.Attempts[0].Duration; tc.only && tc.served == "a" && last.TTFT < tc.waited {
					t.Errorf("answered after %v; want the server's own %v", got, tc.waited)
				}
				if busy := r.States()[0].BusyWithOthers; (tc.text == "busy with work Switchyard did not send") != (busy != "") {
					t.Errorf("status says a is busy with others: %q", busy)
				}
				if a := last.Attempts[0]; a.Outcome == fleet.OutcomeSuccess && a.Warm {
					t.Errorf("a's success after a wait in its queue is recorded a warm sample: a restart would learn it")
				}
				if live.count("a") != 1 {
					t.Errorf("a was checked %d times; want once", live.count("a"))
				}
				for _, smp := range spy.taught() {
					if smp.TTFT >= 5*time.Second && !smp.Queued {
						t.Errorf("a wait behind another client's work was taught as a warm sample")
					}
				}
				_ = start
			})
		})
	}
}

// A request that commits before its deadline costs no liveness check; a
// first token that arrives while the check is under way commits.
func TestLivenessCheckCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A")})
		fl := testFleet(f, Settings{})
		live := &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, checks: map[string]int{}}
		r := New(fl, Deps{Recorder: &memRecorder{}, Deadlines: &spyDeadlines{d: 300 * time.Millisecond}, Liveness: live})
		for range 5 {
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
		}
		if n := live.count("a"); n != 0 {
			t.Errorf("%d liveness checks for requests that committed in time; want 0", n)
		}

		// The first token comes 200 ms into a check that takes 500 ms.
		f.set("a", script{steps: []step{role(), {wait: 500 * time.Millisecond, chunk: fleet.Chunk{Content: "A"}}, finish()}})
		live.took = 500 * time.Millisecond
		rec := &memRecorder{}
		r = New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 300 * time.Millisecond}, Liveness: live})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatalf("Stream() = %v; want the answer that came during the check", err)
		}
		if got, _ := drain(s); got != "A" {
			t.Errorf("content = %q; want A", got)
		}
		if got := faults(rec.last().Attempts); !equal(got, []string{"a:success/"}) {
			t.Errorf("attempts = %v; want a's success", got)
		}
	})
}

// A server that stays alive but answers nobody (Ollama with its runner
// stopped: /api/ps still answers) is failing after all once nothing sent
// to it has had a first token for longer than the ceiling.
func TestAliveButAnsweringNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := script{steps: []step{{block: true}}}
		f := newFake(map[string]script{"a": hung, "b": answer("B")})
		fl := testFleet(f, Settings{FirstTokenTimeout: 10 * time.Second})
		fl.Targets = fl.Targets[:2]
		rec := &memRecorder{}
		live := &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, checks: map[string]int{}}
		r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: time.Second}, Liveness: live})
		var got [][]string
		for range 14 {
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatalf("Stream() = %v; want b's answer", err)
			}
			drain(s)
			got = append(got, faults(rec.last().Attempts))
		}
		// Each request gives a a second; after ten seconds without an
		// answer a counts, and two such failures open its breaker.
		if !equal(got[0], []string{"a:busy/queued", "b:success/"}) {
			t.Errorf("first request: %v; want a queued", got[0])
		}
		if st := r.Breaker("a").Snapshot().State; st != fleet.BreakerOpen {
			t.Errorf("a's breaker is %s after 14 s of no answer; want open. Requests: %v", st, got)
		}
		if !strings.Contains(rec.recs[11].Attempts[0].Error, "nothing sent to it produced a first token") &&
			!strings.Contains(rec.recs[10].Attempts[0].Error, "nothing sent to it produced a first token") {
			t.Errorf("no attempt says nothing answered: %q", rec.recs[11].Attempts[0].Error)
		}

		// The only candidate waits to the ceiling, then counts.
		synctest.Wait()
		f2 := newFake(map[string]script{"a": hung})
		fl2 := testFleet(f2, Settings{FirstTokenTimeout: 10 * time.Second})
		fl2.Targets = fl2.Targets[:1]
		rec2 := &memRecorder{}
		r2 := New(fl2, Deps{Recorder: rec2, Deadlines: &spyDeadlines{d: time.Second}, Liveness: live})
		start := time.Now()
		if _, err := r2.Stream(t.Context(), &fleet.Request{}); err == nil {
			t.Fatal("Stream() succeeded on a hung server")
		}
		if waited := time.Since(start); waited < 10*time.Second {
			t.Errorf("gave up after %v; want the ceiling, 10s", waited)
		}
		if got := faults(rec2.last().Attempts); !equal(got, []string{"a:timeout/server"}) {
			t.Errorf("attempts = %v; want a timeout counted", got)
		}
	})
}

// Candidates of equal priority share the load: the one predicted to give
// the first token soonest goes first.
func TestBands(t *testing.T) {
	band := func(balance string, warm map[string]time.Duration, caps *fakeCapacity, inflight map[string]int, model string) string {
		f := newFake(map[string]script{"a": answer("A"), "b": answer("B"), "c": answer("C")})
		fl := testFleet(f, Settings{Balance: balance})
		for i := range fl.Targets {
			fl.Targets[i].Candidate.Priority = 1
			fl.Targets[i].Candidate.Model = "qwen3:8b"
		}
		deps := Deps{Deadlines: predicted(warm)}
		if caps != nil {
			deps.Capacity = caps
		}
		r := New(fl, deps)
		for id, n := range inflight {
			r.mark(id).inflight.Add(int64(n))
		}
		p, err := r.plan(r.state.Load(), &fleet.Request{Model: model}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range p.entries {
			ids = append(ids, e.target.Candidate.ID)
		}
		return strings.Join(ids, ",")
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name, balance string
		warm          map[string]time.Duration
		caps          *fakeCapacity
		inflight      map[string]int
		model, want   string
	}{
		{"nothing known: id order", "", nil, nil, nil, "", "a,b,c"},
		{"the fastest first", "", map[string]time.Duration{"a": 900 * ms, "b": 300 * ms, "c": 500 * ms}, nil, nil, "", "b,c,a"},
		{"ordered keeps the ids", "ordered", map[string]time.Duration{"a": 900 * ms, "b": 300 * ms, "c": 500 * ms}, nil, nil, "", "a,b,c"},
		{"a queue ahead of the fastest", "", map[string]time.Duration{"a": 400 * ms, "b": 300 * ms, "c": 500 * ms},
			&fakeCapacity{slots: map[string]int{"a": 1, "b": 1, "c": 1}}, map[string]int{"b": 1}, "", "a,c,b"},
		{"another client's work the server reports", "", map[string]time.Duration{"a": 400 * ms, "b": 300 * ms, "c": 500 * ms},
			&fakeCapacity{slots: map[string]int{"a": 1, "b": 1, "c": 1}, queue: map[string][2]int{"b": {1, 2}}}, nil, "", "a,c,b"},
		{"a model name served by all three", "", map[string]time.Duration{"a": 900 * ms, "b": 300 * ms, "c": 500 * ms}, nil, nil, "qwen3:8b", "b,c,a"},
		{"a candidate named by its id keeps its place", "", map[string]time.Duration{"a": 900 * ms, "b": 300 * ms, "c": 500 * ms}, nil, nil, "a", "a,b,c"},
		// A request ahead costs an answer's time, not a first token's: an
		// idle server beats a busy one whose first tokens are faster.
		{"an idle server before a faster one busy with another client's work", "", map[string]time.Duration{"a": 50 * ms, "b": 150 * ms, "c": 150 * ms},
			&fakeCapacity{slots: map[string]int{"a": 1, "b": 1, "c": 1}, queue: map[string][2]int{"a": {1, 0}, "c": {1, 0}}}, nil, "", "b,a,c"},
		// Nobody has timed b: it is taken to be as fast as the fastest, and
		// its queue counts.
		{"an untimed server full of requests after an idle timed one", "", map[string]time.Duration{"a": 51 * ms, "c": 400 * ms},
			&fakeCapacity{slots: map[string]int{"a": 4, "b": 4, "c": 4}}, map[string]int{"b": 6}, "", "a,c,b"},
		{"an untimed idle server as fast as the fastest", "", map[string]time.Duration{"a": 51 * ms, "c": 400 * ms}, nil, nil, "", "a,b,c"},
		// Servers that report no capacity: the fewest requests in flight first.
		{"servers that say nothing share by the requests Switchyard has on them", "", map[string]time.Duration{"a": 50 * ms, "b": 50 * ms, "c": 50 * ms},
			nil, map[string]int{"a": 10, "b": 2}, "", "c,b,a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := band(tc.balance, tc.warm, tc.caps, tc.inflight, tc.model); got != tc.want {
				t.Errorf("order = %s; want %s", got, tc.want)
			}
		})
	}
}

// predicted is a Deadlines that predicts the given warm TTFTs.
type predicted map[string]time.Duration

func (p predicted) FirstToken(_ fleet.Candidate, ceiling time.Duration) (time.Duration, bool) {
	return ceiling, false
}
func (p predicted) HedgeAfter(fleet.Candidate) (time.Duration, bool) { return 0, false }
func (p predicted) Observe(fleet.Candidate, fleet.TTFTSample)        {}
func (p predicted) Predict(c fleet.Candidate) (time.Duration, time.Duration) {
	return p[c.ID], 0
}

// A 503 names the wait of the candidates that could serve this request,
// not the shortest of the whole fleet.
func TestRetryAfterOfThisRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: &fleet.StatusError{StatusCode: 502}}, "b": answer("B"), "c": answer("C")})
		fl := testFleet(f, Settings{Breaker: breaker.Settings{FailureThreshold: 1, OpenDuration: 30 * time.Second}})
		for i := range fl.Targets {
			fl.Targets[i].Candidate.Embeds = fl.Targets[i].Candidate.ID == "a"
		}
		r := New(fl, Deps{Recorder: &memRecorder{}})
		r.Stream(t.Context(), &fleet.Request{Kind: fleet.KindEmbed, Model: "a"}) // opens a's breaker
		time.Sleep(time.Second)
		r.backOff("b", time.Now().Add(time.Second)) // b: 1 s of busy back-off, but b serves another model
		_, err := r.Stream(t.Context(), &fleet.Request{Kind: fleet.KindEmbed, Model: "a"})
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Stream() = %v; want an *Error", err)
		}
		if e.RetryAfter != 29*time.Second {
			t.Errorf("RetryAfter = %v; want a's cool-down left, 29s", e.RetryAfter)
		}
	})
}

// A request cut because Switchyard shuts down is recorded as that, not as
// a caller who went away.
func TestShutdownIsNotAClientAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), tok("A"), {block: true}}}})
		fl := testFleet(f, Settings{})
		fl.Targets = fl.Targets[:1]
		rec := &memRecorder{}
		r := New(fl, Deps{Recorder: rec})
		ctx, stop := context.WithCancelCause(t.Context())
		s, err := r.Stream(ctx, &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(time.Second); stop(fleet.ErrShutdown) }()
		drain(s)
		s.Close()
		last := rec.last()
		if last.Status != fleet.StatusShutdown || last.Failure != fleet.FailureShutdown {
			t.Errorf("committed stream: status %s, failure %s; want shutdown", last.Status, last.Failure)
		}
		if got := faults(last.Attempts); !equal(got, []string{"a:shutdown/"}) {
			t.Errorf("attempts = %v; want a:shutdown/", got)
		}

		// Before commit.
		f.set("a", script{steps: []step{{block: true}}})
		ctx, stop = context.WithCancelCause(t.Context())
		go func() { time.Sleep(time.Second); stop(fleet.ErrShutdown) }()
		_, err = r.Stream(ctx, &fleet.Request{})
		var e *Error
		if !errors.As(err, &e) || e.Failure != fleet.FailureShutdown {
			t.Errorf("Stream() = %v; want failure shutdown", err)
		}
		if last := rec.last(); last.Status != fleet.StatusShutdown {
			t.Errorf("status %s; want shutdown", last.Status)
		}
	})
}

// A request whose options crash the server's runner is the request's
// fault while the server answers others; a server that crashes on one
// request after another is sick.
func TestRunnerCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crash := script{openErr: &fleet.StatusError{StatusCode: 500, Message: "llama-server process has terminated: GGML_ASSERT", Crash: true}}
		f := newFake(map[string]script{"a": crash})
		fl := testFleet(f, Settings{Breaker: breaker.Settings{FailureThreshold: 2}})
		fl.Targets = fl.Targets[:1]
		rec := &memRecorder{}
		r := New(fl, Deps{Recorder: rec})
		bad := &fleet.Request{Kind: fleet.KindEmbed, Model: "a", Input: []string{"x"}, Options: fleet.Options{NumCtx: new(1)}}
		for range 3 {
			r.Stream(t.Context(), bad)
		}
		if got := faults(rec.last().Attempts); !equal(got, []string{"a:error/request"}) {
			t.Errorf("attempts = %v; want the request's fault", got)
		}
		if st := r.Breaker("a").Snapshot(); st.State != fleet.BreakerClosed || st.Failures != 0 {
			t.Errorf("breaker %s with %d failures after one request crashed the runner three times; want closed, 0", st.State, st.Failures)
		}
		// Crashes on different requests, with no answer between: sick.
		for i := range 3 {
			r.Stream(t.Context(), &fleet.Request{Kind: fleet.KindEmbed, Model: "a", Input: []string{strings.Repeat("y", i+1)}})
		}
		if st := r.Breaker("a").Snapshot().State; st != fleet.BreakerOpen {
			t.Errorf("breaker %s after crashes on three different requests; want open", st)
		}
	})
}

// Keep-alive comments do not hold off the stall watchdog: it counts
// content, not bytes.
func TestPingsDoNotHoldOffTheStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), tok("A"), {wait: time.Hour, ping: 30 * time.Second, chunk: fleet.Chunk{Content: "late"}}, finish()}}})
		fl := testFleet(f, Settings{StallTimeout: 60 * time.Second})
		fl.Targets = fl.Targets[:1]
		rec := &memRecorder{}
		r := New(fl, Deps{Recorder: rec})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if !s.BeforeWait(func() {}) {
			t.Fatal("the fake stream takes no BeforeWait")
		}
		start := time.Now()
		_, err = drain(s)
		var ce *CommittedError
		if !errors.As(err, &ce) || !errors.Is(err, fleet.ErrStalled) {
			t.Fatalf("drain() = %v; want a stall after commit", err)
		}
		if waited := time.Since(start); waited > 61*time.Second {
			t.Errorf("stall found after %v; want the stall timeout, 60s", waited)
		}
		if got := faults(rec.last().Attempts); !equal(got, []string{"a:failed_after_commit/server"}) {
			t.Errorf("attempts = %v", got)
		}
	})
}

// A whole answer asked for unstreamed (a server that refused the streamed
// form) arrives when the answer is done: its time is no TTFT sample.
func TestWholeAnswerIsNoSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		whole := script{steps: []step{{wait: 3 * time.Second, chunk: fleet.Chunk{Content: "A", FinishReason: "stop", Whole: true}}}}
		f := newFake(map[string]script{"a": whole})
		fl := testFleet(f, Settings{})
		spy := &spyDeadlines{d: 10 * time.Second}
		r := New(fl, Deps{Recorder: &memRecorder{}, Deadlines: spy})
		if _, err := r.Complete(t.Context(), &fleet.Request{Model: "a"}); err != nil {
			t.Fatal(err)
		}
		samples := spy.taught()
		if len(samples) != 1 || !samples[0].Queued {
			t.Errorf("samples %+v; want one, not taken for a warm TTFT", samples)
		}
	})
}

// What counts as "answers nobody" (the stuck rule): the time requests to a
// server waited without any answer from it. Time when Switchyard sent it
// nothing is not counted; a change in what the server shows of its work
// (Ollama's expiry times, llama.cpp's slots) is an answer to someone else;
// a stream it is sending to Switchyard is an answer too.
func TestStuckCountsOnlyUnansweredWaiting(t *testing.T) {
	hung := script{steps: []step{{block: true}}}
	t.Run("a change in the server's work between two requests is an answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": hung})
			fl := firstOf(f, 1, 5*time.Second)
			rec := &memRecorder{}
			working := Pulse{Evidence: "alive: /api/ps answered in 1 ms", Progress: "ollama a@1"}
			live := &fakeLiveness{pulse: map[string]Pulse{"a": working}, checks: map[string]int{}}
			r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 300 * time.Millisecond}, Liveness: live})
			// Another client's long job: the only candidate is waited for to
			// the ceiling, and then it has answered nobody for that long.
			if _, err := r.Stream(t.Context(), &fleet.Request{}); err == nil {
				t.Fatal("Stream() succeeded on a server busy for longer than the ceiling")
			}
			first := rec.last().Attempts[0]
			if first.Outcome != fleet.OutcomeTimeout || first.Deadline != 5*time.Second {
				t.Errorf("first attempt = %s, deadline %v; want timeout under the ceiling it waited for, 5s", first.Outcome, first.Deadline)
			}
			time.Sleep(12 * time.Second) // nothing sent to it
			// The job ended (its expiry moved); the next one takes 3 s.
			working.Progress = "ollama a@2"
			live.set("a", working)
			f.set("a", script{steps: []step{role(), {wait: 3 * time.Second}, tok("A"), finish()}})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatalf("Stream() = %v, attempts %v; want a's answer after its 3 s job", err, faults(rec.last().Attempts))
			}
			if got, _ := drain(s); got != "A" {
				t.Errorf("answer = %q; want A", got)
			}
			if st := r.Breaker("a").Snapshot(); st.State != fleet.BreakerClosed {
				t.Errorf("a's breaker is %s; want closed", st.State)
			}
		})
	})
	t.Run("the time nothing waits is not counted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": hung, "b": answer("B")})
			fl := firstOf(f, 2, 10*time.Second)
			rec := &memRecorder{}
			live := &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, checks: map[string]int{}}
			r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: time.Second}, Liveness: live})
			// Requests a minute apart each wait a second on a: nine of them
			// are nine seconds of waiting, not nine minutes.
			for i := range 9 {
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatal(err)
				}
				drain(s)
				if got := faults(rec.last().Attempts); !equal(got, []string{"a:busy/queued", "b:success/"}) {
					t.Fatalf("request %d: %v; want a queued", i, got)
				}
				time.Sleep(time.Minute)
			}
			// The tenth second of waiting makes ten: a answers nobody.
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			if got := faults(rec.last().Attempts); !equal(got, []string{"a:timeout/server", "b:success/"}) {
				t.Errorf("tenth request: %v; want a failing", got)
			}
		})
	})
	t.Run("requests queued behind its own long answer are busy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			long := script{steps: []step{role(), tok("1"), {wait: 12 * time.Second}, tok("2"), finish()}}
			f := newFake(map[string]script{"a": long})
			fl := firstOf(f, 1, 5*time.Second)
			rec := &memRecorder{}
			r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 300 * time.Millisecond}, Liveness: &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, checks: map[string]int{}},
				Capacity: &fakeCapacity{slots: map[string]int{"a": 1}}})
			first, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan string)
			go func() { got, _ := drain(first); done <- got }()
			f.set("a", hung) // the server's one slot is taken
			for range 2 {
				if _, err := r.Stream(t.Context(), &fleet.Request{}); err == nil {
					t.Fatal("a request behind a 12 s answer with a 5 s ceiling succeeded")
				}
				if got := faults(rec.last().Attempts); !equal(got, []string{"a:busy/queued"}) {
					t.Errorf("queued request: %v; want busy/queued", got)
				}
			}
			if got := <-done; got != "12" {
				t.Errorf("the long answer = %q; want 12", got)
			}
			if st := r.Breaker("a").Snapshot(); st.State != fleet.BreakerClosed || st.Failures != 0 {
				t.Errorf("a's breaker: %s with %d failures; want closed, none", st.State, st.Failures)
			}
		})
	})
	t.Run("a frozen server is cut at its deadline though it looked full", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": hung})
			fl := firstOf(f, 1, 20*time.Second)
			rec := &memRecorder{}
			r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 500 * time.Millisecond},
				Liveness: &fakeLiveness{pulse: map[string]Pulse{"a": deadPulse}, checks: map[string]int{}},
				Capacity: &fakeCapacity{slots: map[string]int{"a": 1}}})
			ctx, cancel := context.WithCancel(t.Context())
			go r.Stream(ctx, &fleet.Request{}) // takes a's one slot, and hangs
			synctest.Wait()
			start := time.Now()
			if _, err := r.Stream(t.Context(), &fleet.Request{}); err == nil {
				t.Fatal("Stream() succeeded on a frozen server")
			}
			if waited := time.Since(start); waited != 500*time.Millisecond {
				t.Errorf("waited %v on a frozen server; want its 500ms deadline", waited)
			}
			cancel()
			synctest.Wait()
		})
	})
}

// A live server that was only busy is gone back to when every candidate
// after it failed: a fleet of a busy Ollama and a dead backup answers what
// the busy Ollama alone would, not 503.
func TestBackToTheBusyServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := script{steps: []step{role(), {wait: 5 * time.Second}, tok("A"), finish()}}
		f := newFake(map[string]script{"a": slow, "b": {openErr: errors.New("connection refused")}})
		fl := firstOf(f, 2, time.Minute)
		rec := &memRecorder{}
		live := &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, checks: map[string]int{}}
		r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 2 * time.Second}, Liveness: live})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatalf("Stream() = %v, attempts %v; want a's answer", err, faults(rec.last().Attempts))
		}
		if got, _ := drain(s); got != "A" {
			t.Errorf("answer = %q; want A", got)
		}
		if got, want := faults(rec.last().Attempts), []string{"a:busy/queued", "b:error/server", "a:success/"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v", got, want)
		}
		if n := r.Breaker("a").Snapshot().Failures; n != 0 {
			t.Errorf("a's breaker counted %d failures; want none", n)
		}

		// The wait of the attempt gone back is a wait in a queue, never a
		// sample of the server's first token, even when it ends before
		// its deadline (the other client's job was nearly done).
		spy := &spyDeadlines{d: 2 * time.Second}
		then := &thenBackend{fakeBackend: f, id: "a", next: script{steps: []step{role(), {wait: time.Second}, tok("A"), finish()}}}
		fl2 := firstOf(f, 2, time.Minute)
		for i := range fl2.Targets {
			fl2.Targets[i].Backend = then
		}
		r2 := New(fl2, Deps{Recorder: rec, Deadlines: spy, Liveness: live})
		f.set("a", slow)
		s, err = r2.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatalf("Stream() = %v; want a's answer", err)
		}
		drain(s)
		if got, want := faults(rec.last().Attempts), []string{"a:busy/queued", "b:error/server", "a:success/"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v", got, want)
		}
		for _, smp := range spy.taught() {
			if !smp.Queued {
				t.Errorf("the attempt gone back to taught a warm sample of %v", smp.TTFT)
			}
		}

		// A server found not alive is not gone back to.
		live.set("a", deadPulse)
		f.set("a", script{steps: []step{{block: true}}})
		if _, err := r.Stream(t.Context(), &fleet.Request{}); err == nil {
			t.Fatal("Stream() succeeded with a frozen first choice and a dead second")
		}
		if got, want := faults(rec.last().Attempts), []string{"a:timeout/server", "b:error/server"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v", got, want)
		}
	})
}

// firstOf is the test fleet's first n candidates, under a first-token
// ceiling.
func firstOf(f *fakeBackend, n int, ceiling time.Duration) Fleet {
	fl := testFleet(f, Settings{FirstTokenTimeout: ceiling})
	fl.Targets = fl.Targets[:n]
	return fl
}

// thenBackend serves id's first call as its fake's script says, and its
// later calls with next.
type thenBackend struct {
	*fakeBackend
	id   string
	next script
	once sync.Once
}

func (b *thenBackend) Open(ctx context.Context, c fleet.Candidate, req *fleet.Request) (fleet.Stream, error) {
	s, err := b.fakeBackend.Open(ctx, c, req)
	if c.ID == b.id {
		b.once.Do(func() { b.set(b.id, b.next) })
	}
	return s, err
}

// A request ahead costs what the server's answers take, learned from the
// answers it gave: of two busy servers, the one that ends its answers
// sooner goes first.
func TestBandsLearnHowLongAnswersTake(t *testing.T) {
	f := newFake(map[string]script{"a": answer("A"), "b": answer("B")})
	fl := testFleet(f, Settings{})
	fl.Targets = fl.Targets[:2]
	for i := range fl.Targets {
		fl.Targets[i].Candidate.Priority = 1
		fl.Targets[i].Candidate.Model = "qwen3:8b"
	}
	caps := &fakeCapacity{slots: map[string]int{"a": 1, "b": 1}, queue: map[string][2]int{"a": {1, 0}, "b": {1, 0}}}
	r := New(fl, Deps{Deadlines: predicted{"a": 50 * time.Millisecond, "b": 80 * time.Millisecond}, Capacity: caps})
	now := time.Now()
	for range 8 {
		r.mark("a").answering++
		r.waitEnded("a", now, true, 20*time.Second)
		r.mark("b").answering++
		r.waitEnded("b", now, true, 3*time.Second)
	}
	p, err := r.plan(r.state.Load(), &fleet.Request{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if first := p.entries[0].target.Candidate.ID; first != "b" {
		t.Errorf("first = %s; want b, whose answers end in 3 s where a's take 20", first)
	}
	if s := r.mark("a").service; s < 15*time.Second || s > 20*time.Second {
		t.Errorf("a's answers take %v by its average; want about 20s", s)
	}
}

// A liveness check that gets no answer within its bound is asked once
// more of the last candidate's server, which a machine with every core
// busy may slow that much: cutting it would answer 503 where the server
// alone answers (v4 re-check: 1 run in 7 at load 9). A hung one is still
// cut, a bound later; one with a fallback is not asked twice.
func TestLateLivenessAnswer(t *testing.T) {
	slow := script{steps: []step{role(), {wait: 5 * time.Second, chunk: fleet.Chunk{Content: "A"}}, finish()}}
	for _, tc := range []struct {
		name     string
		only     bool
		late     int // checks that answer after the bound
		want     []string
		checks   int
		failures int
	}{
		{name: "the last candidate, late once", only: true, late: 1, want: []string{"a:success/"}, checks: 2},
		{name: "the last candidate, hung", only: true, late: 2, want: []string{"a:timeout/server"}, checks: 2, failures: 1},
		{name: "with a fallback, late once", late: 1, want: []string{"a:timeout/server", "b:success/"}, checks: 1, failures: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fl := slowOrFallback(slow, tc.only)
				rec := &memRecorder{}
				live := &fakeLiveness{pulse: map[string]Pulse{"a": busyPulse}, took: 3 * time.Millisecond,
					checks: map[string]int{}, slow: map[string]int{"a": tc.late}}
				r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 300 * time.Millisecond}, Liveness: live})
				if s, err := r.Stream(t.Context(), &fleet.Request{}); err == nil {
					drain(s)
				}
				if got := faults(rec.last().Attempts); !equal(got, tc.want) {
					t.Errorf("attempts = %v; want %v", got, tc.want)
				}
				if n := live.count("a"); n != tc.checks {
					t.Errorf("a was checked %d times; want %d", n, tc.checks)
				}
				if n := r.Breaker("a").Snapshot().Failures; n != tc.failures {
					t.Errorf("a's breaker counted %d failures; want %d", n, tc.failures)
				}
			})
		})
	}
}
