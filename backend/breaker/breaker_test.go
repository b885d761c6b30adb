package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// step is one action on a breaker in a scripted sequence.
type step struct {
	wait   time.Duration // advance the fake clock first
	result Result        // reported for a call that Allow admitted
	skip   bool          // expect Allow to refuse
	want   fleet.BreakerState
}

func TestSequences(t *testing.T) {
	open := 30 * time.Second
	tests := []struct {
		name  string
		s     Settings
		steps []step
	}{
		{"success keeps closed", Settings{}, []step{
			{result: Success, want: fleet.BreakerClosed},
			{result: Success, want: fleet.BreakerClosed},
		}},
		{"threshold 2 opens on the second consecutive failure", Settings{}, []step{
			{result: Failure, want: fleet.BreakerClosed},
			{result: Failure, want: fleet.BreakerOpen},
			{skip: true, want: fleet.BreakerOpen},
		}},
		{"a success resets the count", Settings{}, []step{
			{result: Failure, want: fleet.BreakerClosed},
			{result: Success, want: fleet.BreakerClosed},
			{result: Failure, want: fleet.BreakerClosed},
			{result: Failure, want: fleet.BreakerOpen},
		}},
		{"custom threshold 3", Settings{FailureThreshold: 3}, []step{
			{result: Failure, want: fleet.BreakerClosed},
			{result: Failure, want: fleet.BreakerClosed},
			{result: Failure, want: fleet.BreakerOpen},
		}},
		{"ignored results never count", Settings{}, []step{
			{result: Ignore, want: fleet.BreakerClosed},
			{result: Ignore, want: fleet.BreakerClosed},
			{result: Ignore, want: fleet.BreakerClosed},
		}},
		{"cool-down then probe success closes", Settings{}, []step{
			{result: Failure}, {result: Failure, want: fleet.BreakerOpen},
			{wait: open - time.Second, skip: true, want: fleet.BreakerOpen},
			{wait: time.Second, result: Success, want: fleet.BreakerClosed},
			{result: Success, want: fleet.BreakerClosed},
		}},
		{"probe failure reopens with a fresh cool-down", Settings{}, []step{
			{result: Failure}, {result: Failure, want: fleet.BreakerOpen},
			{wait: open, result: Failure, want: fleet.BreakerOpen},
			{wait: open - time.Second, skip: true, want: fleet.BreakerOpen},
			{wait: time.Second, result: Success, want: fleet.BreakerClosed},
		}},
		{"an ignored probe frees the slot for the next caller", Settings{}, []step{
			{result: Failure}, {result: Failure, want: fleet.BreakerOpen},
			{wait: open, result: Ignore, want: fleet.BreakerHalfOpen},
			{result: Success, want: fleet.BreakerClosed},
		}},
		{"custom open duration", Settings{OpenDuration: 5 * time.Second}, []step{
			{result: Failure}, {result: Failure, want: fleet.BreakerOpen},
			{wait: 4 * time.Second, skip: true, want: fleet.BreakerOpen},
			{wait: time.Second, result: Success, want: fleet.BreakerClosed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New("c", tt.s)
				for i, st := range tt.steps {
					time.Sleep(st.wait)
					tk, ok := b.Allow()
					if ok == st.skip {
						t.Fatalf("step %d: Allow() ok = %v; want %v", i, ok, !st.skip)
					}
					if ok {
						b.Done(tk, st.result, "test")
					}
					if st.want != "" {
						if got := b.Snapshot().State; got != st.want {
							t.Fatalf("step %d: state = %s; want %s", i, got, st.want)
						}
					}
				}
			})
		})
	}
}

func TestExactlyOneHalfOpenProbeAmongConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "boom")
		}
		time.Sleep(DefaultOpenDuration)

		const callers = 1000
		var admitted, probes atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range callers {
			wg.Go(func() {
				<-start
				if tk, ok := b.Allow(); ok {
					admitted.Add(1)
					if tk.probe {
						probes.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if admitted.Load() != 1 || probes.Load() != 1 {
			t.Fatalf("admitted %d callers (%d probes); want exactly 1 probe", admitted.Load(), probes.Load())
		}
		if s := b.Snapshot(); s.State != fleet.BreakerHalfOpen || !s.Probing {
			t.Fatalf("Snapshot() = %+v; want half_open with the probe in flight", s)
		}
	})
}

func TestExactlyOneProbeUnderRealConcurrency(t *testing.T) {
	// Same property without the bubble, so the race detector sees truly
	// parallel callers racing the open → half-open transition.
	now := time.Unix(0, 0)
	var clock sync.Mutex
	b := New("c", Settings{Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
	for range 2 {
		tk, _ := b.Allow()
		b.Done(tk, Failure, "boom")
	}
	clock.Lock()
	now = now.Add(DefaultOpenDuration)
	clock.Unlock()
	var probes atomic.Int32
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			if _, ok := b.Allow(); ok {
				probes.Add(1)
			}
		})
	}
	wg.Wait()
	if probes.Load() != 1 {
		t.Fatalf("%d callers admitted in half-open; want 1", probes.Load())
	}
}

func TestStaleGenerationIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		slow, _ := b.Allow() // a long call starts while closed
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "boom")
		}
		time.Sleep(DefaultOpenDuration)
		probe, ok := b.Allow()
		if !ok || !probe.probe {
			t.Fatal("want a half-open probe")
		}
		// The slow call from the closed period reports success: stale, so it
		// must neither close the breaker nor free the probe slot.
		b.Done(slow, Success, "late")
		if s := b.Snapshot(); s.State != fleet.BreakerHalfOpen || !s.Probing {
			t.Fatalf("after stale success Snapshot() = %+v; want half_open probing", s)
		}
		b.Done(probe, Failure, "probe failed")
		b.Done(slow, Failure, "late again")
		if s := b.Snapshot(); s.State != fleet.BreakerOpen || s.Remaining != DefaultOpenDuration {
			t.Fatalf("Snapshot() = %+v; want open with a full cool-down", s)
		}
	})
}

func TestTransitionsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []fleet.BreakerChange
		b := New("qwen", Settings{OnChange: func(c fleet.BreakerChange) { got = append(got, c) }})
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "timeout")
		}
		time.Sleep(DefaultOpenDuration)
		tk, _ := b.Allow()
		b.Done(tk, Success, "probe ok")
		want := []struct {
			from, to fleet.BreakerState
			cause    string
		}{
			{fleet.BreakerClosed, fleet.BreakerOpen, "timeout"},
			{fleet.BreakerOpen, fleet.BreakerHalfOpen, "cool-down over"},
			{fleet.BreakerHalfOpen, fleet.BreakerClosed, "probe ok"},
		}
		if len(got) != len(want) {
			t.Fatalf("got %d transitions %+v; want %d", len(got), got, len(want))
		}
		for i, w := range want {
			if got[i].Candidate != "qwen" || got[i].From != w.from || got[i].To != w.to || got[i].Cause != w.cause {
				t.Errorf("transition %d = %+v; want %s→%s (%s)", i, got[i], w.from, w.to, w.cause)
			}
		}
	})
}

func TestRemainingCountsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		if d := b.Snapshot().Remaining; d != 0 {
			t.Fatalf("closed Snapshot().Remaining = %v; want 0", d)
		}
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "x")
		}
		time.Sleep(10 * time.Second)
		if d := b.Snapshot().Remaining; d != 20*time.Second {
			t.Fatalf("Snapshot().Remaining = %v; want 20s", d)
		}
		time.Sleep(20 * time.Second)
		if d := b.Snapshot().Remaining; d != 0 {
			t.Fatalf("Snapshot().Remaining after cool-down = %v; want 0", d)
		}
	})
}

func TestFailuresAfterCommit(t *testing.T) {
	b := New("c", Settings{})
	for range 2 {
		tk, _ := b.Allow()
		b.Done(tk, Committed, "first token")
		b.Fail(tk, "broke after commit")
	}
	if s := b.Snapshot().State; s != fleet.BreakerOpen {
		t.Fatalf("two post-commit failures: state = %s; want open", s)
	}

	c := New("d", Settings{})
	tk, _ := c.Allow()
	c.Done(tk, Failure, "refused")
	tk, _ = c.Allow()
	c.Done(tk, Committed, "first token")
	c.Succeed(tk)
	tk, _ = c.Allow()
	c.Done(tk, Failure, "refused")
	if s := c.Snapshot(); s.State != fleet.BreakerClosed || s.Failures != 1 {
		t.Fatalf("a clean stream must reset the count: Snapshot() = %+v", s)
	}
}

func TestCommittedProbeCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "x")
		}
		time.Sleep(DefaultOpenDuration)
		tk, _ := b.Allow()
		b.Done(tk, Committed, "first token")
		if s := b.Snapshot().State; s != fleet.BreakerClosed {
			t.Fatalf("committed probe: state = %s; want closed", s)
		}
		// The probe's stream breaking after its first token is the
		// server's failure, as any stream's is (SPEC 2.5): one more and a
		// server that keeps dying mid-answer is open again.
		b.Fail(tk, "broke after commit")
		if s := b.Snapshot(); s.State != fleet.BreakerClosed || s.Failures != 1 {
			t.Fatalf("the probe broke after its first token: %+v; want closed with 1 failure", s)
		}
		next, _ := b.Allow()
		b.Done(next, Committed, "first token")
		b.Fail(next, "broke after commit")
		if s := b.Snapshot().State; s != fleet.BreakerOpen {
			t.Fatalf("two streams broke after their first tokens: state = %s; want open", s)
		}
		// A probe's stream that ends cleanly resets the count.
		time.Sleep(DefaultOpenDuration)
		tk, _ = b.Allow()
		b.Done(tk, Committed, "first token")
		b.Succeed(tk)
		if s := b.Snapshot(); s.State != fleet.BreakerClosed || s.Failures != 0 {
			t.Fatalf("a probe that ended cleanly: %+v; want closed, no failures", s)
		}
	})
}

func TestRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		b.Restore(fleet.BreakerChange{To: fleet.BreakerOpen, At: time.Now().Add(-10 * time.Second)})
		if s := b.Snapshot(); s.State != fleet.BreakerOpen || s.Remaining != 20*time.Second {
			t.Fatalf("restored Snapshot() = %+v; want open with 20s left", s)
		}
		time.Sleep(20 * time.Second)
		if tk, ok := b.Allow(); !ok || !tk.probe {
			t.Fatal("after the restored cool-down the next caller must be the probe")
		}

		c := New("d", Settings{})
		c.Restore(fleet.BreakerChange{To: fleet.BreakerClosed, At: time.Now()})
		if s := c.Snapshot().State; s != fleet.BreakerClosed {
			t.Fatalf("restored closed: state = %s", s)
		}
	})
}

func TestStaleStreamEndIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		long, _ := b.Allow()
		b.Done(long, Committed, "first token") // a long stream starts
		for range 2 {                          // meanwhile the candidate opens...
			tk, _ := b.Allow()
			b.Done(tk, Failure, "x")
		}
		time.Sleep(DefaultOpenDuration)
		probe, _ := b.Allow() // ...and a probe closes it again
		b.Done(probe, Success, "probe ok")
		tk, _ := b.Allow()
		b.Done(tk, Failure, "one new failure")
		b.Fail(long, "the old stream dies")
		b.Succeed(long)
		if s := b.Snapshot(); s.State != fleet.BreakerClosed || s.Failures != 1 {
			t.Fatalf("Snapshot() = %+v; want closed with only the new period's 1 failure", s)
		}
	})
}

// A reload that changes the breaker settings keeps the state: an open
// breaker's cool-down is the new length from when it opened, and failures
// counted so far count toward the new threshold.
func TestRetuneKeepsTheState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("c", Settings{})
		for range 2 {
			tk, _ := b.Allow()
			b.Done(tk, Failure, "x")
		}
		time.Sleep(10 * time.Second)
		b.Retune(3, time.Minute)
		if s := b.Snapshot(); s.State != fleet.BreakerOpen || s.Remaining != 50*time.Second {
			t.Fatalf("after Retune(3, 1m) 10s into the cool-down: %s, %v left; want open, 50s", s.State, s.Remaining)
		}
		b.Retune(0, 5*time.Second) // defaults and a cool-down already over
		if _, ok := b.Allow(); !ok || b.Snapshot().State != fleet.BreakerHalfOpen {
			t.Fatalf("after a shorter cool-down that has passed: %s; want the half-open probe", b.Snapshot().State)
		}

		c := New("d", Settings{FailureThreshold: 5})
		tk, _ := c.Allow()
		c.Done(tk, Failure, "x")
		c.Retune(2, 0)
		tk, _ = c.Allow()
		c.Done(tk, Failure, "x")
		if s := c.Snapshot(); s.State != fleet.BreakerOpen {
			t.Errorf("one failure before a threshold of 2 and one after: %s; want open", s.State)
		}

		var changes []fleet.BreakerChange
		d := New("e", Settings{FailureThreshold: 3, OnChange: func(ch fleet.BreakerChange) { changes = append(changes, ch) }})
		for range 2 {
			tk, _ := d.Allow()
			d.Done(tk, Failure, "x")
		}
		d.Retune(2, 0)
		if s := d.Snapshot(); s.State != fleet.BreakerOpen || s.Remaining != DefaultOpenDuration {
			t.Errorf("two failures counted, the threshold lowered to 2: %s, %v left; want open for the cool-down", s.State, s.Remaining)
		}
		if len(changes) != 1 || changes[0].To != fleet.BreakerOpen || changes[0].Cause != "2 failures in a row, the new failure_threshold" {
			t.Errorf("transitions reported: %+v; want one to open, saying why", changes)
		}
	})
}
