package router

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// fakeCapacity is what servers report about their own load.
type fakeCapacity struct {
	mu      sync.Mutex
	slots   map[string]int
	waiting map[string]bool
	loading map[string]bool
	queue   map[string][2]int // running, waiting as the server reports them
	at      time.Time
}

func (f *fakeCapacity) Slots(c fleet.Candidate) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[c.ID]
}

func (f *fakeCapacity) Waiting(c fleet.Candidate) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting[c.ID]
}

func (f *fakeCapacity) Queue(c fleet.Candidate) (int, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.queue[c.ID]
	return q[0], q[1], ok
}

func (f *fakeCapacity) Loading(c fleet.Candidate) (bool, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() {
		return false, time.Time{}, false
	}
	return f.loading[c.ID], f.at, true
}

func (f *fakeCapacity) report(loading map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loading, f.at = loading, time.Now()
}

// faults returns each attempt as "candidate:outcome/fault".
func faults(as []fleet.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Candidate+":"+string(a.Outcome)+"/"+string(a.Fault))
	}
	return out
}

// A server with one slot queues a second request behind the first: its
// first-token wait is a queue, not a sickness. The router tries a free
// server first, records a queued wait as busy, never counts it, never
// learns it, and waits in the last queue rather than give up.
func TestQueuedIsNotAFailure(t *testing.T) {
	t.Run("the first choice is waited for in its queue, then the next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{
				"a": {steps: []step{role(), tok("A"), {wait: 10 * time.Second}, finish()}},
				"b": answer("B"),
			})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 2 * time.Second},
				Capacity: &fakeCapacity{slots: map[string]int{"a": 1, "b": 1}}})
			first, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()                                                                    // a is still answering the first request
			f.set("a", script{steps: []step{role(), {wait: 5 * time.Second}, tok("A"), finish()}}) // queued
			start := time.Now()
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := drain(s); got != "B" {
				t.Errorf("second request = %q; want B", got)
			}
			if waited := time.Since(start); waited != 2*time.Second {
				t.Errorf("moved on after %v; want a's 2s deadline", waited)
			}
			if got, want := faults(rec.last().Attempts), []string{"a:busy/queued", "b:success/"}; !equal(got, want) {
				t.Errorf("attempts = %v; want %v", got, want)
			}
		})
	})
	t.Run("a queued timeout is busy, not counted, not learned", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			long := script{steps: []step{role(), tok("1"), {wait: time.Minute}, tok("2"), finish()}}
			f := newFake(map[string]script{"a": long, "b": long})
			rec := &memRecorder{}
			dl := &spyDeadlines{d: 2 * time.Second}
			caps := &fakeCapacity{slots: map[string]int{"a": 1, "b": 1}}
			fl := testFleet(f, Settings{})
			fl.Targets = fl.Targets[:2] // a and b
			r := New(fl, Deps{Recorder: rec, Deadlines: dl, Capacity: caps})
			for _, id := range []string{"a", "b"} { // one long answer on each server
				s, err := r.Stream(t.Context(), &fleet.Request{Model: id})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
			// Both are full now: the next request waits in a queue.
			queued := script{steps: []step{role(), {wait: 8 * time.Second}, tok("Q"), finish()}}
			f.set("a", queued)
			f.set("b", queued)
			start := time.Now()
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatalf("Stream() = %v; want the answer after a wait in b's queue", err)
			}
			if got, _ := drain(s); got != "Q" {
				t.Errorf("answer = %q; want Q", got)
			}
			if waited := time.Since(start); waited != 10*time.Second {
				t.Errorf("answered after %v; want 2s (a's learned deadline) + 8s in b's queue", waited)
			}
			want := []string{"a:busy/queued", "b:success/"}
			if got := faults(rec.last().Attempts); !equal(got, want) {
				t.Errorf("attempts = %v; want %v", got, want)
			}
			if a := rec.last().Attempts[0]; !strings.Contains(a.Error, "queued") {
				t.Errorf("a's error %q does not say it was queued", a.Error)
			}
			if n := r.Breaker("a").Snapshot().Failures; n != 0 {
				t.Errorf("a's breaker counted %d failures for a queued wait", n)
			}
			for _, smp := range dl.taught() {
				if smp.TTFT >= 8*time.Second && !smp.Queued {
					t.Errorf("a queued wait of %v was taught as a warm sample", smp.TTFT)
				}
			}
		})
	})
	t.Run("the server's own report of waiting requests", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {steps: []step{role(), {block: true}}}, "b": answer("B")})
			rec := &memRecorder{}
			caps := &fakeCapacity{waiting: map[string]bool{"a": true}}
			fl := testFleet(f, Settings{})
			fl.Targets = fl.Targets[:2]
			r := New(fl, Deps{Recorder: rec, Deadlines: &spyDeadlines{d: 2 * time.Second}, Capacity: caps})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatalf("Stream() = %v; want b's answer", err)
			}
			drain(s)
			if got := faults(rec.last().Attempts); !equal(got, []string{"a:busy/queued", "b:success/"}) {
				t.Errorf("attempts = %v; want a queued wait", got)
			}
			if n := r.Breaker("a").Snapshot().Failures; n != 0 {
				t.Errorf("a's breaker counted %d failures while its server said requests wait", n)
			}
		})
	})
}

// spyDeadlines gives every attempt d and remembers the samples it was
// taught.
type spyDeadlines struct {
	mu      sync.Mutex
	d       time.Duration
	samples []fleet.TTFTSample
}

func (s *spyDeadlines) FirstToken(fleet.Candidate, time.Duration) (time.Duration, bool) {
	return s.d, false
}
func (s *spyDeadlines) HedgeAfter(fleet.Candidate) (time.Duration, bool)       { return 0, false }
func (s *spyDeadlines) Predict(fleet.Candidate) (time.Duration, time.Duration) { return 0, 0 }
func (s *spyDeadlines) Observe(_ fleet.Candidate, smp fleet.TTFTSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, smp)
}

func (s *spyDeadlines) taught() []fleet.TTFTSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fleet.TTFTSample(nil), s.samples...)
}

// llama.cpp answers 503 "Loading model" while it loads: the candidate is
// skipped, never counted, and back as soon as its health check says so.
func TestLoadingIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loading := &fleet.StatusError{StatusCode: 503, Message: "Loading model", Loading: true}
		f := newFake(map[string]script{"a": {openErr: loading}, "b": answer("B")})
		rec := &memRecorder{}
		caps := &fakeCapacity{}
		r := New(testFleet(f, Settings{BusyBackoff: time.Minute}), Deps{Recorder: rec, Capacity: caps})
		ask := func() []string {
			t.Helper()
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			return faults(rec.last().Attempts)
		}
		if got, want := ask(), []string{"a:busy/loading", "b:success/"}; !equal(got, want) {
			t.Errorf("first request: attempts = %v; want %v", got, want)
		}
		if got, want := ask(), []string{"a:busy/loading", "b:success/"}; !equal(got, want) {
			t.Errorf("while loading: attempts = %v; want %v", got, want)
		}
		if o, _ := f.counts("a"); o != 0 {
			t.Errorf("a was sent %d requests while loading", o)
		}
		// The server's health check says it has loaded: back at once, long
		// before the back-off would have ended.
		time.Sleep(time.Second)
		f.set("a", answer("A"))
		caps.report(map[string]bool{"a": false})
		if got, want := ask(), []string{"a:success/"}; !equal(got, want) {
			t.Errorf("after loading: attempts = %v; want %v", got, want)
		}
		if st := r.Breaker("a").Snapshot(); st.Failures != 0 || st.State != fleet.BreakerClosed {
			t.Errorf("loading touched the breaker: %+v", st)
		}
	})
}

// The same failure on a second server is the request's own: it goes back
// to the caller after one switch and counts against no breaker, however
// often it is sent. The same failure on one server only is that server's.
func TestRequestFaultsLockNobodyOut(t *testing.T) {
	formatErr := func(pos string) error {
		return &fleet.StatusError{StatusCode: 500, Message: "Failed to parse input at pos " + pos + ": the output does not match the expected format"}
	}
	t.Run("same failure twice: the request's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {openErr: formatErr("12")}, "b": {openErr: formatErr("31")}, "c": answer("C")})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			for i := range 3 {
				_, err := r.Stream(t.Context(), &fleet.Request{})
				var e *Error
				if !errors.As(err, &e) || e.Failure != fleet.FailureRequest {
					t.Fatalf("request %d: error = %v; want the request's own failure", i, err)
				}
				if got, want := faults(rec.last().Attempts), []string{"a:error/request", "b:error/request"}; !equal(got, want) {
					t.Errorf("request %d: attempts = %v; want %v", i, got, want)
				}
			}
			if o, _ := f.counts("c"); o != 0 {
				t.Errorf("c was tried %d times: a request's fault goes back after one switch", o)
			}
			for _, id := range []string{"a", "b"} {
				if st := r.Breaker(id).Snapshot(); st.Failures != 0 || st.State != fleet.BreakerClosed {
					t.Errorf("%s: breaker %+v after request faults; want closed, 0", id, st)
				}
			}
			// The next normal request is served by the first choice.
			f.set("a", answer("A"))
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := drain(s); got != "A" {
				t.Errorf("next request = %q; want A", got)
			}
		})
	})
	t.Run("a failure another server does not share: the server's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {openErr: formatErr("12")}, "b": answer("B")})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			if got, want := faults(rec.last().Attempts), []string{"a:error/server", "b:success/"}; !equal(got, want) {
				t.Errorf("attempts = %v; want %v", got, want)
			}
			if n := r.Breaker("a").Snapshot().Failures; n != 1 {
				t.Errorf("a's failures = %d; want 1", n)
			}
		})
	})
	t.Run("same failure on two models of one server: the server's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			crash := &fleet.StatusError{StatusCode: 500, Message: "model requires more system memory (5.5 GiB) than is available (3.2 GiB)"}
			f := newFake(map[string]script{"a": {openErr: crash}, "b": {openErr: crash}, "c": answer("C")})
			fl := testFleet(f, Settings{})
			fl.Targets[0].Candidate.URL = "http://127.0.0.1:11434"
			fl.Targets[1].Candidate.URL = "http://127.0.0.1:11434"
			fl.Targets[2].Candidate.URL = "http://127.0.0.1:11435"
			rec := &memRecorder{}
			r := New(fl, Deps{Recorder: rec})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatalf("error = %v; want the other server's answer", err)
			}
			if got, _ := drain(s); got != "C" {
				t.Errorf("answer = %q; want C", got)
			}
			if got, want := faults(rec.last().Attempts), []string{"a:error/server", "b:error/server", "c:success/"}; !equal(got, want) {
				t.Errorf("attempts = %v; want %v", got, want)
			}
			for _, id := range []string{"a", "b"} {
				if n := r.Breaker(id).Snapshot().Failures; n != 1 {
					t.Errorf("%s's failures = %d; want 1: its server is sick", id, n)
				}
			}
		})
	})
	t.Run("different failures: each server's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{
				"a": {openErr: formatErr("12")},
				"b": {openErr: &fleet.StatusError{StatusCode: 502, Message: "bad gateway"}},
				"c": answer("C"),
			})
			r := New(testFleet(f, Settings{}), Deps{})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			for _, id := range []string{"a", "b"} {
				if n := r.Breaker(id).Snapshot().Failures; n != 1 {
					t.Errorf("%s's failures = %d; want 1", id, n)
				}
			}
		})
	})
}

// A whole answer that broke after its first tokens goes on to the next
// candidate, and its reason says so, not "before its first token" (u3
// review).
func TestWholeAnswerBrokenMidwaySaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := tok("A1")
		first.wait = 300 * time.Millisecond
		f := newFake(map[string]script{"a": {steps: []step{role(), first, tok("A2"), fail(fleet.ErrTruncated)}}, "b": answer("B")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		ans, err := r.Complete(t.Context(), &fleet.Request{})
		if err != nil || ans.Message.Content != "B" {
			t.Fatalf("Complete() = %v, %v; want b's whole answer", ans, err)
		}
		a := rec.last().Attempts[0]
		if got, want := Reason(a), "a stopped before finishing its answer"; got != want {
			t.Errorf("reason = %q; want %q (attempt %+v)", got, want, a)
		}
	})
}

// A first token with no wait in a queue and no load is a warm sample, and
// its record says so, for the seed of the next start; a cold one is not.
func TestWarmSampleIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := tok("A")
		first.wait = 300 * time.Millisecond
		f := newFake(map[string]script{"a": {steps: []step{role(), first, finish()}}})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		drain(s)
		if a := rec.last().Attempts[0]; !a.Warm || a.TTFT != 300*time.Millisecond {
			t.Errorf("attempt = %+v; want a warm sample of 300ms", a)
		}
	})
}

// A server without an endpoint for prompt completions answers them 404:
// it is skipped for those, and still serves chat (u3 review, item 1).
func TestMissingEndpointIsNotAMissingModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: &fleet.StatusError{StatusCode: 404, Message: "Not Found"}}, "b": answer("B")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		ask := func(kind fleet.Kind) string {
			t.Helper()
			s, err := r.Stream(t.Context(), &fleet.Request{Kind: kind, Prompt: "def f("})
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			got, _ := drain(s)
			return got
		}
		if got := ask(fleet.KindGenerate); got != "B" {
			t.Errorf("generate = %q; want B's", got)
		}
		f.set("a", answer("A"))
		if got := ask(fleet.KindChat); got != "A" {
			t.Errorf("chat after a's 404 on generate = %q; want A's: a serves its model", got)
		}
		if got := ask(fleet.KindGenerate); got != "B" {
			t.Errorf("the next generate = %q; want B's", got)
		}
		if got, want := faults(rec.last().Attempts), []string{"a:error/capability", "b:success/"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v (a skipped: no endpoint for it)", got, want)
		}
	})
}

// An answer that ended normally without content (a stop sequence that
// matched at once) is tried elsewhere once; when every server answers
// empty, the empty answer is the answer, and nobody is blamed.
func TestEmptyAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		empty := script{steps: []step{role(), {chunk: fleet.Chunk{FinishReason: "stop", Usage: &fleet.Usage{PromptTokens: 7}}}}}
		f := newFake(map[string]script{"a": empty, "b": empty, "c": answer("C")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		for _, stream := range []bool{true, false} {
			var content, finish string
			if stream {
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatalf("Stream() = %v; want the empty answer", err)
				}
				for {
					ch, err := s.Recv()
					if err != nil {
						break
					}
					content += ch.Content
					if ch.FinishReason != "" {
						finish = ch.FinishReason
					}
				}
				s.Close()
			} else {
				ans, err := r.Complete(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatalf("Complete() = %v; want the empty answer", err)
				}
				content, finish = ans.Message.Content, ans.FinishReason
			}
			if content != "" || finish != "stop" {
				t.Errorf("stream=%v: answer %q finish %q; want the empty answer with its finish reason", stream, content, finish)
			}
			got := rec.last()
			if got.Status != fleet.StatusOK || got.ServedCandidate != "a" || got.PromptTokens != 7 {
				t.Errorf("stream=%v: record = %s served %q prompt %d; want ok by a", stream, got.Status, got.ServedCandidate, got.PromptTokens)
			}
			if want := []string{"a:no_content/request", "b:no_content/request"}; !equal(faults(got.Attempts), want) {
				t.Errorf("stream=%v: attempts = %v; want %v", stream, faults(got.Attempts), want)
			}
		}
		for _, id := range []string{"a", "b"} {
			if n := r.Breaker(id).Snapshot().Failures; n != 0 {
				t.Errorf("%s: %d failures for empty answers", id, n)
			}
		}
	})
}

// A 404 says the server does not have the model: Switchyard's
// configuration is wrong, not the server sick. The candidate is skipped
// (not re-probed every cool-down) until the config changes, discovery
// finds the model, or a long re-check time passes.
func TestModelNotFoundIsAConfigurationFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: &fleet.StatusError{StatusCode: 404, Message: "model 'qwen3' not found"}}, "b": answer("B")})
		rec := &memRecorder{}
		fl := testFleet(f, Settings{})
		r := New(fl, Deps{Recorder: rec})
		ask := func() []string {
			t.Helper()
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
			return faults(rec.last().Attempts)
		}
		if got, want := ask(), []string{"a:error/config", "b:success/"}; !equal(got, want) {
			t.Errorf("attempts = %v; want %v", got, want)
		}
		time.Sleep(time.Minute) // two breaker cool-downs
		if got, want := ask(), []string{"a:error/config", "b:success/"}; !equal(got, want) {
			t.Errorf("later: attempts = %v; want %v", got, want)
		}
		if o, _ := f.counts("a"); o != 0 {
			t.Errorf("a opened %d streams", o)
		}
		var st CandidateState
		for _, s := range r.States() {
			if s.Candidate.ID == "a" {
				st = s
			}
		}
		if !strings.Contains(st.Missing, "model-a") || st.Breaker.Failures != 0 {
			t.Errorf("status of a = missing %q, failures %d; want the model named loudly and no failure", st.Missing, st.Breaker.Failures)
		}
		// Discovery found the model: back at once.
		f.set("a", answer("A"))
		r.Found("a")
		if got, want := ask(), []string{"a:success/"}; !equal(got, want) {
			t.Errorf("after Found: attempts = %v; want %v", got, want)
		}
		// A config change of the candidate also puts it back.
		f.set("a", script{openErr: &fleet.StatusError{StatusCode: 404}})
		ask()
		fl.Targets[0].Candidate.Model = "model-a2"
		f.set("a", answer("A"))
		r.Update(fl)
		if got, want := ask(), []string{"a:success/"}; !equal(got, want) {
			t.Errorf("after a config change: attempts = %v; want %v", got, want)
		}
	})
}

// A thinking request that reaches a model which can't think was routed
// by mistake: the next capable candidate serves it, and the model is not
// asked to think again.
func TestUnsupportedCapabilityMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		noThink := &fleet.StatusError{StatusCode: 400, Message: `"tiny" does not support thinking`, Unsupported: "thinking"}
		f := newFake(map[string]script{"a": answer("A"), "b": {openErr: noThink}, "c": answer("C")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		for i, want := range [][]string{
			{"b:error/capability", "c:success/"},
			{"b:error/capability", "c:success/"},
		} {
			req := &fleet.Request{Thinking: true}
			s, err := r.Stream(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := drain(s); got != "C" {
				t.Errorf("request %d = %q; want C", i, got)
			}
			if got := faults(rec.last().Attempts); !equal(got, want) {
				t.Errorf("request %d: attempts = %v; want %v", i, got, want)
			}
		}
		if o, _ := f.counts("b"); o != 0 {
			t.Errorf("b opened %d streams", o)
		}
		if n := r.Breaker("b").Snapshot().Failures; n != 0 {
			t.Errorf("b: %d failures for a routing mistake", n)
		}
	})
}

// The router never writes into the caller's request.
func TestRequestIsNotModified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A"), "b": answer("B")})
		r := New(testFleet(f, Settings{}), Deps{})
		req := &fleet.Request{Model: "b"} // the deep-thinking model
		s, err := r.Stream(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		drain(s)
		if req.ID != "" || req.Thinking {
			t.Errorf("request after routing = id %q thinking %v; want it untouched", req.ID, req.Thinking)
		}
		if m := s.Meta(); m.RequestID == "" || !m.Thinking {
			t.Errorf("Meta() = id %q thinking %v; want the id and thinking mode", m.RequestID, m.Thinking)
		}
	})
}

// A server that says the model's output for this request did not parse
// (llama.cpp's "does not match the expected format", Ollama's answer that
// stops without done) is not sick: after commit the caller gets the error
// and the breaker hears nothing; before the caller saw anything, one
// other candidate is tried, and a second such failure is the answer.
func TestModelOutputFailuresAreTheRequests(t *testing.T) {
	unparsed := &fleet.EventError{Message: "The model produced output that does not match the expected peg-native format", Output: true}
	broken := script{steps: []step{role(), tok("Dieu"), tok("・"), fail(unparsed)}}
	t.Run("after commit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": broken, "b": answer("B")})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			for range 3 {
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatal(err)
				}
				_, err = drain(s)
				var ce *CommittedError
				if !errors.As(err, &ce) || !errors.Is(err, fleet.ErrModelOutput) {
					t.Errorf("stream error = %v; want the committed model-output error", err)
				}
				if got, want := faults(rec.last().Attempts), []string{"a:failed_after_commit/request"}; !equal(got, want) {
					t.Errorf("attempts = %v; want %v", got, want)
				}
			}
			if st := r.Breaker("a").Snapshot(); st.Failures != 0 || st.State != fleet.BreakerClosed {
				t.Errorf("a's breaker = %+v after three model-output failures; want closed, 0", st)
			}
		})
	})
	t.Run("non-streaming", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": broken, "b": broken, "c": answer("C")})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			_, err := r.Complete(t.Context(), &fleet.Request{})
			var e *Error
			if !errors.As(err, &e) || e.Failure != fleet.FailureRequest {
				t.Fatalf("Complete() error = %v; want the request's own failure", err)
			}
			if got, want := faults(rec.last().Attempts), []string{"a:error/request", "b:error/request"}; !equal(got, want) {
				t.Errorf("attempts = %v; want %v", got, want)
			}
			if o, _ := f.counts("c"); o != 0 {
				t.Error("c was tried after two model-output failures")
			}
			for _, id := range []string{"a", "b"} {
				if n := r.Breaker(id).Snapshot().Failures; n != 0 {
					t.Errorf("%s: %d failures", id, n)
				}
			}
		})
	})
}

// A request that started after this one may go ahead of it in the
// server's queue and end before this one's first token comes: its wait
// is still a queued wait, not a sample of how fast the model answers. It
// used to be taught as warm (llama-server --parallel 1, TestRealQueueing).
func TestWaitBehindALaterRequestIsNoSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), {wait: 2 * time.Second, chunk: fleet.Chunk{Content: "Y"}}, finish()}}})
		spy := &spyDeadlines{d: 10 * time.Second}
		fl := testFleet(f, Settings{FirstTokenTimeout: 10 * time.Second, StallTimeout: time.Minute})
		fl.Targets[0].Candidate.Slots = 1
		r := New(fl, Deps{Recorder: &memRecorder{}, Deadlines: spy})
		var wg sync.WaitGroup
		wg.Go(func() {
			s, err := r.Stream(t.Context(), &fleet.Request{Model: "a"})
			if err != nil {
				t.Error(err)
				return
			}
			drain(s)
		})
		synctest.Wait() // Y waits for its first token, the server idle as far as Switchyard knows
		f.set("a", answer("W"))
		s, err := r.Stream(t.Context(), &fleet.Request{Model: "a"})
		if err != nil {
			t.Fatal(err)
		}
		drain(s) // W went ahead and is done
		wg.Wait()
		var found bool
		for _, smp := range spy.taught() {
			if smp.TTFT == 2*time.Second {
				found = true
				if !smp.Queued {
					t.Error("a wait behind a request that started later was taught as a warm sample")
				}
			}
		}
		if !found {
			t.Fatalf("no sample of Y's wait among %+v", spy.taught())
		}
	})
}
