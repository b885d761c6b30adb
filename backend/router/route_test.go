package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

var errRefused = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

func TestStreamProbeAndCommit(t *testing.T) {
	healthyB := answer("B1", "B2", "B3")
	tests := []struct {
		name         string
		a            script
		wantContent  string
		wantErr      bool // an error reaches the caller (after commit)
		wantServed   string
		wantFallback bool
		wantOutcomes []fleet.Outcome
		wantStatus   fleet.Status
		wantBreakerA int // consecutive failures on a's breaker afterwards
	}{
		{
			name: "healthy primary", a: answer("A1", "A2"),
			wantContent: "A1A2", wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK,
		},
		{
			name: "connection refused → silent switch", a: script{openErr: errRefused},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeError, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name:        "error event before first token → silent switch",
			a:           script{steps: []step{role(), fail(&fleet.EventError{Message: "CUDA out of memory"})}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeError, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name: "HTTP 500 → switch", a: script{openErr: &fleet.StatusError{StatusCode: 500, Message: "boom"}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeError, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name:        "role-only chunk then stall → timeout → switch",
			a:           script{steps: []step{role(), {block: true}}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeTimeout, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name: "hang before headers → timeout → switch", a: script{openHang: true},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeTimeout, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name: "empty stream without a finish marker → no_content → switch", a: script{steps: []step{role()}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeNoContent, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			// A stop sequence that matched at once: no server is to blame.
			name: "empty answer with a finish marker → no_content → switch, not counted", a: script{steps: []step{role(), finish()}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeNoContent, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 0,
		},
		{
			name: "truncated before first token → switch", a: script{steps: []step{role(), fail(fleet.ErrTruncated)}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeError, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK, wantBreakerA: 1,
		},
		{
			name:        "busy → skipped without a breaker failure",
			a:           script{openErr: &fleet.StatusError{StatusCode: 503, Busy: true, RetryAfter: 5 * time.Second}},
			wantContent: "B1B2B3", wantServed: "b", wantFallback: true,
			wantOutcomes: []fleet.Outcome{fleet.OutcomeBusy, fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK,
		},
		{
			name:        "first token then error → stream error, no switch",
			a:           script{steps: []step{role(), tok("A1"), fail(&fleet.EventError{Message: "died"})}},
			wantContent: "A1", wantErr: true, wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeFailedAfterCommit}, wantStatus: fleet.StatusUpstreamErrorAfterCommit, wantBreakerA: 1,
		},
		{
			name:        "truncated after commit → stream error",
			a:           script{steps: []step{role(), tok("A1"), tok("A2"), fail(fleet.ErrTruncated)}},
			wantContent: "A1A2", wantErr: true, wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeFailedAfterCommit}, wantStatus: fleet.StatusUpstreamErrorAfterCommit, wantBreakerA: 1,
		},
		{
			name:        "stall after commit → stream error at the stall timeout",
			a:           script{steps: []step{role(), tok("A1"), {block: true}}},
			wantContent: "A1", wantErr: true, wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeFailedAfterCommit}, wantStatus: fleet.StatusUpstreamErrorAfterCommit, wantBreakerA: 1,
		},
		{
			name:        "reasoning counts as first token",
			a:           script{steps: []step{role(), {chunk: fleet.Chunk{Reasoning: "hmm"}}, tok("A1"), finish()}},
			wantContent: "A1", wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK,
		},
		{
			name:        "tool-call delta counts as first token",
			a:           script{steps: []step{role(), {chunk: fleet.Chunk{ToolCalls: []fleet.ToolCall{{Name: "f"}}}}, finish()}},
			wantContent: "", wantServed: "a",
			wantOutcomes: []fleet.Outcome{fleet.OutcomeSuccess}, wantStatus: fleet.StatusOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(map[string]script{"a": tt.a, "b": healthyB, "c": answer("C1")})
				rec := &memRecorder{}
				r := New(testFleet(f, Settings{FirstTokenTimeout: 2 * time.Second, StallTimeout: 5 * time.Second}), Deps{Recorder: rec})
				s, err := r.Stream(t.Context(), &fleet.Request{Model: "auto", Stream: true})
				if err != nil {
					t.Fatalf("Stream() error = %v", err)
				}
				if m := s.Meta(); m.Candidate.ID != tt.wantServed || m.Fallback != tt.wantFallback {
					t.Errorf("Meta() = served %s fallback %v; want %s %v", m.Candidate.ID, m.Fallback, tt.wantServed, tt.wantFallback)
				}
				got, err := drain(s)
				s.Close()
				if got != tt.wantContent {
					t.Errorf("content = %q; want %q", got, tt.wantContent)
				}
				var ce *CommittedError
				if tt.wantErr != (err != nil) || (err != nil && !errors.As(err, &ce)) {
					t.Errorf("stream error = %v; want committed error %v", err, tt.wantErr)
				}
				last := rec.last()
				if last.Status != tt.wantStatus || last.ServedCandidate != tt.wantServed || last.IsFallback != tt.wantFallback {
					t.Errorf("record = status %s served %s fallback %v; want %s %s %v", last.Status, last.ServedCandidate, last.IsFallback, tt.wantStatus, tt.wantServed, tt.wantFallback)
				}
				if got := outcomes(last.Attempts); !equal(got, tt.wantOutcomes) {
					t.Errorf("attempts = %v; want %v", got, tt.wantOutcomes)
				}
				if n := r.Breaker("a").Snapshot().Failures; n != tt.wantBreakerA {
					t.Errorf("breaker a failures = %d; want %d", n, tt.wantBreakerA)
				}
				for _, id := range []string{"a", "b"} {
					if o, c := f.counts(id); o != c {
						t.Errorf("%s: opened %d streams, closed %d", id, o, c)
					}
				}
			})
		})
	}
}

func outcomes(as []fleet.Attempt) []fleet.Outcome {
	var out []fleet.Outcome
	for _, a := range as {
		out = append(out, a.Outcome)
	}
	return out
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTimeoutAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), {block: true}}}, "b": answer("B")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{FirstTokenTimeout: 3 * time.Second}), Deps{Recorder: rec})
		start := time.Now()
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("switched after %v; want exactly the 3s deadline", waited)
		}
		drain(s)
		a := rec.last().Attempts[0]
		if a.Deadline != 3*time.Second || a.Error != "no first token in 3s" {
			t.Errorf("attempt = deadline %v error %q; want 3s and the reason", a.Deadline, a.Error)
		}
	})
}

func TestEveryCandidateFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{
			"a": {openErr: errRefused},
			"b": {steps: []step{role(), {block: true}}},
			"c": {steps: []step{role()}}, // ends without a finish marker
		})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{FirstTokenTimeout: time.Second}), Deps{Recorder: rec})
		_, err := r.Stream(t.Context(), &fleet.Request{})
		var e *Error
		if !errors.As(err, &e) || e.Failure != fleet.FailureUnavailable || !errors.Is(err, ErrAllFailed) {
			t.Fatalf("Stream() error = %v; want *Error unavailable, all failed", err)
		}
		msg := err.Error()
		for _, want := range []string{"a: " + errRefused.Error(), "b: no first token in 1s", "c: empty answer"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
		if got := rec.last(); got.Status != fleet.StatusFailed || len(got.Attempts) != 3 {
			t.Errorf("record = %+v; want error with 3 attempts", got)
		}
	})
}

func TestClientAbort(t *testing.T) {
	t.Run("before commit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {steps: []step{role(), {wait: 10 * time.Second}, tok("late")}}, "b": answer("B")})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			_, err := r.Stream(ctx, &fleet.Request{})
			var e *Error
			if !errors.As(err, &e) || e.Failure != fleet.FailureClientGone {
				t.Fatalf("Stream() error = %v; want a client_gone *Error", err)
			}
			got := rec.last()
			if got.Status != fleet.StatusClientAbort || !equal(outcomes(got.Attempts), []fleet.Outcome{fleet.OutcomeClientAbort}) {
				t.Errorf("record = %s %v; want client_abort", got.Status, outcomes(got.Attempts))
			}
			if o, c := f.counts("a"); o != 1 || c != 1 {
				t.Errorf("a: opened %d closed %d; want 1 1", o, c)
			}
			if o, _ := f.counts("b"); o != 0 {
				t.Errorf("b was tried after the caller left")
			}
			if s := r.Breaker("a").Snapshot(); s.Failures != 0 {
				t.Errorf("abort counted on the breaker: %+v", s)
			}
		})
	})
	t.Run("after commit, by context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {steps: []step{role(), tok("A1"), {wait: 10 * time.Second}, tok("A2"), finish()}}})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			ctx, cancel := context.WithCancel(t.Context())
			s, err := r.Stream(ctx, &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(time.Second, cancel)
			got, err := drain(s)
			if got != "A1" || !errors.Is(err, context.Canceled) {
				t.Errorf("drain() = %q, %v; want A1, context.Canceled", got, err)
			}
			s.Close()
			assertAbort(t, f, r, rec)
		})
	})
	t.Run("after commit, by Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(map[string]script{"a": {steps: []step{role(), tok("A1"), {block: true}}}})
			rec := &memRecorder{}
			r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			s.Recv() // role
			s.Recv() // A1
			done := make(chan error)
			go func() { _, err := s.Recv(); done <- err }()
			synctest.Wait()
			s.Close()
			if err := <-done; err == nil {
				t.Error("Recv() after Close = nil error")
			}
			assertAbort(t, f, r, rec)
		})
	})
}

func assertAbort(t *testing.T, f *fakeBackend, r *Router, rec *memRecorder) {
	t.Helper()
	got := rec.last()
	if got.Status != fleet.StatusClientAbort || !equal(outcomes(got.Attempts), []fleet.Outcome{fleet.OutcomeClientAbort}) {
		t.Errorf("record = %s %v; want client_abort", got.Status, outcomes(got.Attempts))
	}
	if rec.len() != 1 {
		t.Errorf("%d records; want 1", rec.len())
	}
	if o, c := f.counts("a"); o != c {
		t.Errorf("a: opened %d closed %d", o, c)
	}
	if s := r.Breaker("a").Snapshot(); s.Failures != 0 || s.State != fleet.BreakerClosed {
		t.Errorf("abort touched the breaker: %+v", s)
	}
}

func TestNotRetryableReturnsAtOnce(t *testing.T) {
	for _, status := range []int{400, 401, 403, 413, 422} {
		t.Run(fmt.Sprintf("HTTP %d", status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(map[string]script{"a": {openErr: &fleet.StatusError{StatusCode: status, Message: "nope"}}, "b": answer("B")})
				r := New(testFleet(f, Settings{}), Deps{})
				for _, stream := range []bool{true, false} {
					var err error
					if stream {
						_, err = r.Stream(t.Context(), &fleet.Request{})
					} else {
						_, err = r.Complete(t.Context(), &fleet.Request{})
					}
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("stream=%v: error = %v; want *Error", stream, err)
					}
					want := fleet.FailureRejected
					if status == 401 || status == 403 {
						want = fleet.FailureUpstreamAuth
					}
					if e.Failure != want {
						t.Errorf("stream=%v: failure = %s; want %s", stream, e.Failure, want)
					}
					// A refusal is said once, by whom (the history's error).
					if msg := fmt.Sprintf("a: upstream HTTP %d: nope", status); want == fleet.FailureRejected && err.Error() != msg {
						t.Errorf("stream=%v: error %q; want %q", stream, err, msg)
					}
				}
				if o, _ := f.counts("b"); o != 0 {
					t.Errorf("b was tried after a not-retryable error")
				}
				if s := r.Breaker("a").Snapshot(); s.Failures != 0 {
					t.Errorf("HTTP %d counted on the breaker", status)
				}
				// A refused key is shown loudly, in the status (SPEC 2.2),
				// until the server answers again.
				refused := func() string { return r.States()[0].Refused }
				if got := refused(); (status == 401 || status == 403) != strings.Contains(got, "refused Switchyard's credentials") {
					t.Errorf("HTTP %d: status says %q", status, got)
				}
				f.set("a", answer("A"))
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatal(err)
				}
				drain(s)
				if got := refused(); got != "" {
					t.Errorf("after an answer, status still says %q", got)
				}
			})
		})
	}
}

func TestCompleteFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{
			"a": {openErr: &fleet.StatusError{StatusCode: 502}},
			// b breaks after its first token: nothing reached the caller, so
			// a non-streaming request moves on.
			"b": {steps: []step{role(), tok("B1"), fail(fleet.ErrTruncated)}},
			"c": {steps: []step{role(), {chunk: fleet.Chunk{Reasoning: "think "}}, tok("C1"), tok("C2"),
				{chunk: fleet.Chunk{FinishReason: "stop", Usage: &fleet.Usage{PromptTokens: 3, CompletionTokens: 2}}}}},
		})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		ans, err := r.Complete(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if ans.Message.Content != "C1C2" || ans.Message.Thinking != "think " || ans.Candidate.ID != "c" || !ans.Fallback {
			t.Errorf("Complete() = %+v", ans)
		}
		if ans.Usage == nil || ans.Usage.CompletionTokens != 2 || ans.FinishReason != "stop" {
			t.Errorf("usage/finish = %+v %q", ans.Usage, ans.FinishReason)
		}
		got := rec.last()
		if !equal(outcomes(got.Attempts), []fleet.Outcome{fleet.OutcomeError, fleet.OutcomeError, fleet.OutcomeSuccess}) {
			t.Errorf("attempts = %v", outcomes(got.Attempts))
		}
		if got.PromptTokens != 3 || got.CompletionTokens != 2 {
			t.Errorf("tokens = %d/%d", got.PromptTokens, got.CompletionTokens)
		}
	})
}

func TestBreakerOpensAndSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: errRefused}, "b": answer("B")})
		rec := &memRecorder{}
		obs := &memObserver{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec, Observer: obs})
		for range 3 {
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
		}
		if got := outcomes(rec.last().Attempts); !equal(got, []fleet.Outcome{fleet.OutcomeSkippedOpen, fleet.OutcomeSuccess}) {
			t.Errorf("third request attempts = %v; want a skipped, b served", got)
		}
		if ch := obs.breakerChanges(); len(ch) != 1 || ch[0].To != fleet.BreakerOpen || ch[0].Candidate != "a" {
			t.Errorf("breaker events = %+v", ch)
		}
		// After the cool-down exactly one request probes a.
		time.Sleep(30 * time.Second)
		f.set("a", answer("A"))
		s, _ := r.Stream(t.Context(), &fleet.Request{})
		if got, _ := drain(s); got != "A" {
			t.Errorf("half-open probe answer = %q; want A", got)
		}
		if st := r.Breaker("a").Snapshot().State; st != fleet.BreakerClosed {
			t.Errorf("after a good probe state = %s", st)
		}
	})
}

func TestBusyBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: &fleet.StatusError{StatusCode: 429, RetryAfter: 2 * time.Second}}, "b": answer("B")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		for range 2 {
			s, err := r.Stream(t.Context(), &fleet.Request{})
			if err != nil {
				t.Fatal(err)
			}
			drain(s)
		}
		a := rec.last().Attempts[0]
		if a.Outcome != fleet.OutcomeBusy || !strings.Contains(a.Error, "back-off") {
			t.Errorf("second request's first attempt = %+v; want busy back-off", a)
		}
		time.Sleep(2 * time.Second)
		f.set("a", answer("A"))
		s, _ := r.Stream(t.Context(), &fleet.Request{})
		if got, _ := drain(s); got != "A" {
			t.Errorf("after Retry-After: answer %q; want A", got)
		}
		if st := r.Breaker("a").Snapshot(); st.Failures != 0 {
			t.Errorf("busy counted on the breaker: %+v", st)
		}
	})
}

func TestRecordDurableBeforeEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": answer("A")})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		s, _ := r.Stream(t.Context(), &fleet.Request{})
		for {
			_, err := s.Recv()
			if err != nil {
				break
			}
			if rec.len() != 0 {
				t.Fatal("request recorded before its end")
			}
		}
		if rec.len() != 1 || rec.last().Status != fleet.StatusOK {
			t.Fatalf("at EOF the record must already be written; got %d records", rec.len())
		}
	})
}

func TestUnknownModel(t *testing.T) {
	f := newFake(map[string]script{"a": answer("A")})
	rec := &memRecorder{}
	r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
	_, err := r.Stream(t.Context(), &fleet.Request{Model: "gpt-17"})
	var e *Error
	if !errors.As(err, &e) || e.Failure != fleet.FailureUnknownModel || !errors.Is(err, fleet.ErrUnknownModel) {
		t.Fatalf("error = %v; want unknown model", err)
	}
	if o, _ := f.counts("a"); o != 0 {
		t.Error("an unknown model was routed")
	}
}

func TestCompleteFailureRecordsNoServedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{
			"a": {steps: []step{role(), tok("A1"), fail(fleet.ErrTruncated)}},
			"b": {openErr: errRefused},
			"c": {openErr: errRefused},
		})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		if _, err := r.Complete(t.Context(), &fleet.Request{}); err == nil {
			t.Fatal("Complete() succeeded")
		}
		if got := rec.last(); got.Status != fleet.StatusFailed || got.ServedCandidate != "" || got.IsFallback || got.TTFT != 0 {
			t.Errorf("record = status %s served %q fallback %v ttft %v; want a failure served by nobody", got.Status, got.ServedCandidate, got.IsFallback, got.TTFT)
		}
	})
}

func TestCompleteCallerLeavesAfterFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), tok("A1"), {wait: 10 * time.Second}, tok("A2"), finish()}}})
		r := New(testFleet(f, Settings{}), Deps{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		_, err := r.Complete(ctx, &fleet.Request{})
		var e *Error
		if !errors.As(err, &e) || e.Failure != fleet.FailureClientGone {
			t.Fatalf("Complete() error = %v; want a client_gone *Error", err)
		}
	})
}

func TestExclusionsRecordedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {openErr: errRefused}, "b": answer("B"), "c": {openErr: errRefused}})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{}), Deps{Recorder: rec})
		for _, id := range []string{"a", "c"} { // open a's and c's breakers
			for range 2 {
				tk, _ := r.Breaker(id).Allow()
				r.Breaker(id).Done(tk, breaker.Failure, "x")
			}
		}
		s, err := r.Stream(t.Context(), &fleet.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if m := s.Meta(); len(m.Attempts) != 1 || m.Attempts[0].Candidate != "a" {
			t.Errorf("Meta().Attempts = %+v; want only a, the one skipped before the server", m.Attempts)
		}
		drain(s)
		var got []string
		for _, a := range rec.last().Attempts {
			got = append(got, a.Candidate+":"+string(a.Outcome))
		}
		want := []string{"a:skipped_open", "b:success", "c:skipped_open"}
		if !equal(got, want) {
			t.Errorf("attempts = %v; want %v (the order the router went through them)", got, want)
		}
	})
}

// Stream.BeforeWait: the reader's function runs before the upstream
// waits, and the time it takes (a slow caller's write) is not counted
// against the upstream's stall deadline.
func TestBeforeWaitIsNotTheUpstreamsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), tok("x"), {wait: time.Second, chunk: fleet.Chunk{Content: "y"}}, finish()}}})
		rec := &memRecorder{}
		r := New(testFleet(f, Settings{FirstTokenTimeout: 2 * time.Second, StallTimeout: 5 * time.Second}), Deps{Recorder: rec})
		st, err := r.Stream(context.Background(), &fleet.Request{Model: "a"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		calls := 0
		if !st.BeforeWait(func() { calls++; time.Sleep(10 * time.Second) }) {
			t.Fatal("BeforeWait = false on a stream that can wait")
		}
		got, err := drain(st)
		if err != nil || got != "xy" {
			t.Fatalf("drain = %q, %v; want xy with no stall", got, err)
		}
		if calls != 2 {
			t.Errorf("the reader's function ran %d times; want twice, before the wait and before the record", calls)
		}
		if o := rec.last().Attempts[0].Outcome; o != fleet.OutcomeSuccess {
			t.Errorf("attempt outcome %s; want success", o)
		}
	})
}

// recorderFunc is a Recorder that calls f with each record.
type recorderFunc func(fleet.RequestRecord)

func (f recorderFunc) Record(_ context.Context, rec fleet.RequestRecord) error {
	f(rec)
	return nil
}

// The reader's BeforeWait function runs before the record is written,
// also when the rest of the answer came without a wait: what the reader
// holds (the first token) goes out before the history's write, not after
// it. Before, an answer whose events came in one read reached its caller
// only once its record was durable.
func TestBeforeWaitRunsBeforeTheRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"complete", []step{role(), tok("x"), tok("y"), finish()}},
		{"failed after the first token", []step{role(), tok("x"), {err: errors.New("connection reset")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(map[string]script{"a": {steps: tc.steps}})
				var events []string
				rec := recorderFunc(func(fleet.RequestRecord) { events = append(events, "record") })
				r := New(testFleet(f, Settings{FirstTokenTimeout: 2 * time.Second, StallTimeout: 5 * time.Second}), Deps{Recorder: rec})
				st, err := r.Stream(context.Background(), &fleet.Request{Model: "a"})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if !st.BeforeWait(func() { events = append(events, "flush") }) {
					t.Fatal("BeforeWait = false on a stream that can wait")
				}
				drain(st)
				if want := []string{"flush", "record"}; !equal(events, want) {
					t.Errorf("events %v; want %v", events, want)
				}
			})
		})
	}
}

// The stall timeout runs only while Recv waits for the upstream: a
// caller that takes longer than it between chunks stalls nothing, and a
// wait after that one stalls the full timeout after it began.
func TestSlowCallerIsNotTheUpstreamsStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(map[string]script{"a": {steps: []step{role(), tok("x"), tok("y"), {wait: 6 * time.Second, chunk: fleet.Chunk{Content: "z"}}, finish()}}})
		r := New(testFleet(f, Settings{FirstTokenTimeout: 2 * time.Second, StallTimeout: 5 * time.Second}), Deps{})
		st, err := r.Stream(context.Background(), &fleet.Request{Model: "a"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var got string
		for range 3 { // role, x (buffered by the probe), y (read after the caller's 20 s)
			ch, err := st.Recv()
			if err != nil {
				t.Fatalf("Recv after %q: %v; want no stall while the caller is slow", got, err)
			}
			got += ch.Content
			time.Sleep(20 * time.Second)
		}
		start := time.Now()
		_, err = st.Recv()
		if !errors.Is(err, fleet.ErrStalled) || time.Since(start) != 5*time.Second {
			t.Errorf("Recv of an upstream silent for 6 s = %v after %v; want ErrStalled after 5s", err, time.Since(start))
		}
		if got != "xy" {
			t.Errorf("got %q before the stall; want xy", got)
		}
	})
}

// An upstream that sends events without a first token is cut once they
// pass the preface's bounds, rather than held until the deadline: events
// or bytes, whichever comes first. The next candidate answers.
func TestPrefaceIsBounded(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	for name, flood := range map[string]step{
		"events": role(),
		"bytes":  {chunk: fleet.Chunk{Role: "assistant", Raw: big}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				steps := slices.Repeat([]step{flood}, prefaceEvents+1)
				f := newFake(map[string]script{"a": {steps: append(steps, tok("late"))}, "b": answer("B")})
				rec := &memRecorder{}
				r := New(testFleet(f, Settings{FirstTokenTimeout: time.Minute}), Deps{Recorder: rec})
				s, err := r.Stream(t.Context(), &fleet.Request{})
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := drain(s); got != "B" {
					t.Errorf("answer %q; want b's", got)
				}
				a := rec.last().Attempts[0]
				if a.Candidate != "a" || a.Fault != fleet.FaultServer || !strings.Contains(a.Error, "before a first token") {
					t.Errorf("a's attempt = %+v; want a server fault for its preface", a)
				}
			})
		})
	}
}
