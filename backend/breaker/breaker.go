// Package breaker is a three-state circuit breaker (docs/DESIGN.md, "Circuit
// breaker"), one per
// candidate. It is two-step like gobreaker's TwoStepCircuitBreaker: Allow
// hands out a Ticket before the call and Done reports the call's result
// with it, so a streaming attempt can report at its commit point. Results
// carrying a Ticket of an earlier state period (a stale generation) are
// ignored. State moves lazily on calls; there are no timer goroutines.
package breaker

import (
	"fmt"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Settings configure a Breaker. The zero value of each field means its
// default.
type Settings struct {
	// FailureThreshold is the number of consecutive failures that opens a
	// closed breaker. Default 2.
	FailureThreshold int
	// OpenDuration is how long an open breaker refuses calls before the next
	// caller becomes the half-open probe. Default 30s.
	OpenDuration time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnChange, when set, is called after every transition, outside the
	// breaker's lock, in the order the transitions happened for this
	// breaker's callers.
	OnChange func(fleet.BreakerChange)
}

// Defaults of Settings.
const (
	DefaultFailureThreshold = 2
	DefaultOpenDuration     = 30 * time.Second
)

func (s Settings) withDefaults() Settings {
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	if s.OpenDuration <= 0 {
		s.OpenDuration = DefaultOpenDuration
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return s
}

// Result is what a call reports through Done.
type Result int

const (
	// Success resets the failure count; a successful probe closes the breaker.
	Success Result = iota
	// Failure counts toward opening; a failed probe reopens the breaker.
	Failure
	// Committed is a stream's first token: it closes a half-open breaker
	// like Success, but in the closed state it leaves the failure count
	// alone until the stream ends, reported by Succeed or Fail, so a model
	// that keeps dying mid-stream still opens its breaker.
	Committed
	// Ignore counts nothing (client abort, busy, a request error that would
	// fail anywhere). A probe that ends with Ignore frees the probe slot so
	// the next caller probes instead.
	Ignore
)

// Ticket is the permission Allow handed out. Report it exactly once with
// Done. The zero Ticket is not valid.
type Ticket struct {
	gen   uint64
	probe bool
}

// Breaker guards one candidate. It is safe for concurrent use; create it
// with New.
type Breaker struct {
	name string
	s    Settings

	mu         sync.Mutex
	state      fleet.BreakerState
	failures   int       // consecutive, in the closed state
	openUntil  time.Time // end of the cool-down, in the open state
	gen        uint64    // advances on every transition
	probing    bool      // the half-open probe is in flight
	lastChange time.Time
	// probeGen is the generation of the probe whose first token closed
	// the breaker, while the breaker is in the generation that close
	// began: that stream's end still counts (afterCommit).
	probeGen uint64
}

// New returns a closed breaker for the candidate named name.
func New(name string, s Settings) *Breaker {
	s = s.withDefaults()
	return &Breaker{name: name, s: s, state: fleet.BreakerClosed, gen: 1, lastChange: s.Now()}
}

// Allow asks to make a call. It returns ok=false when the breaker is open,
// or half-open with its probe already in flight. When an open breaker's
// cool-down has passed, the caller that asks first becomes the half-open
// probe (Ticket.Probe).
func (b *Breaker) Allow() (Ticket, bool) {
	b.mu.Lock()
	ch := b.advance(b.s.Now())
	var t Ticket
	ok := false
	switch b.state {
	case fleet.BreakerClosed:
		t, ok = Ticket{gen: b.gen}, true
	case fleet.BreakerHalfOpen:
		if !b.probing {
			b.probing = true
			t, ok = Ticket{gen: b.gen, probe: true}, true
		}
	}
	b.mu.Unlock()
	b.notify(ch)
	return t, ok
}

// Ready reports whether Allow would succeed now, without taking a ticket.
// The router uses it when it orders candidates, then asks Allow again right
// before the call.
func (b *Breaker) Ready() bool {
	b.mu.Lock()
	ch := b.advance(b.s.Now())
	ready := b.state == fleet.BreakerClosed || (b.state == fleet.BreakerHalfOpen && !b.probing)
	b.mu.Unlock()
	b.notify(ch)
	return ready
}

// Done reports the result of the call t was issued for. A ticket from an
// earlier generation (the state moved on since Allow) is ignored. cause is
// recorded on any transition it causes.
func (b *Breaker) Done(t Ticket, r Result, cause string) {
	b.mu.Lock()
	var ch *fleet.BreakerChange
	if t.gen == b.gen {
		ch = b.apply(t.probe, r, cause)
	}
	b.mu.Unlock()
	b.notify(ch)
}

// Succeed reports that the stream t was issued for, which reported
// Committed, ended cleanly: in the closed state it resets the failure
// count. Like Done, it is ignored when the state moved on since t was
// issued (a long stream outlived an open/half-open period).
func (b *Breaker) Succeed(t Ticket) { b.afterCommit(t, Success, "") }

// Fail reports that the stream t was issued for, which reported Committed,
// broke afterwards: in the closed state it counts like any failure. It is
// ignored when the state moved on since t was issued, and in any state but
// closed; the half-open probe whose first token closed the breaker still
// counts (SPEC 2.5: a failure after commit is the candidate's), so a
// server that keeps dying mid-answer opens again.
func (b *Breaker) Fail(t Ticket, cause string) { b.afterCommit(t, Failure, cause) }

func (b *Breaker) afterCommit(t Ticket, r Result, cause string) {
	b.mu.Lock()
	var ch *fleet.BreakerChange
	closedByIt := t.probe && t.gen == b.probeGen && b.gen == b.probeGen+1
	if b.state == fleet.BreakerClosed && (t.gen == b.gen || closedByIt) {
		ch = b.apply(false, r, cause)
	}
	b.mu.Unlock()
	b.notify(ch)
}

// apply records r under b.mu and returns the transition it caused, if any.
func (b *Breaker) apply(probe bool, r Result, cause string) *fleet.BreakerChange {
	switch b.state {
	case fleet.BreakerClosed:
		switch r {
		case Success:
			b.failures = 0
		case Failure:
			b.failures++
			if b.failures >= b.s.FailureThreshold {
				return b.transition(fleet.BreakerOpen, b.s.Now(), cause)
			}
		}
	case fleet.BreakerHalfOpen:
		if !probe {
			return nil
		}
		switch r {
		case Success:
			return b.transition(fleet.BreakerClosed, b.s.Now(), cause)
		case Committed:
			b.probeGen = b.gen
			return b.transition(fleet.BreakerClosed, b.s.Now(), cause)
		case Failure:
			return b.transition(fleet.BreakerOpen, b.s.Now(), cause)
		case Ignore:
			b.probing = false
		}
	}
	return nil
}

// advance moves an open breaker whose cool-down has passed to half-open.
func (b *Breaker) advance(now time.Time) *fleet.BreakerChange {
	if b.state == fleet.BreakerOpen && !now.Before(b.openUntil) {
		return b.transition(fleet.BreakerHalfOpen, now, "cool-down over")
	}
	return nil
}

func (b *Breaker) transition(to fleet.BreakerState, now time.Time, cause string) *fleet.BreakerChange {
	ch := &fleet.BreakerChange{Candidate: b.name, From: b.state, To: to, At: now, Cause: cause}
	b.state = to
	b.gen++
	b.failures = 0
	b.probing = false
	b.lastChange = now
	if to == fleet.BreakerOpen {
		b.openUntil = now.Add(b.s.OpenDuration)
	}
	return ch
}

func (b *Breaker) notify(ch *fleet.BreakerChange) {
	if ch != nil && b.s.OnChange != nil {
		b.s.OnChange(*ch)
	}
}

// Snapshot is a breaker's state for display.
type Snapshot struct {
	State fleet.BreakerState
	// Failures is the consecutive failure count in the closed state.
	Failures int
	// Remaining is the cool-down left while open, zero otherwise.
	Remaining time.Duration
	// Probing is true while the half-open probe is in flight.
	Probing bool
	Since   time.Time
}

// Snapshot returns the current state, moving an expired open breaker to
// half-open first.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	now := b.s.Now()
	ch := b.advance(now)
	s := Snapshot{State: b.state, Failures: b.failures, Probing: b.probing, Since: b.lastChange}
	if b.state == fleet.BreakerOpen {
		s.Remaining = b.openUntil.Sub(now)
	}
	b.mu.Unlock()
	b.notify(ch)
	return s
}

// Retune sets the failure threshold and the cool-down (zero: the
// default), as a config reload changed them, keeping the breaker's state:
// an open breaker's cool-down is the new length from when it opened, and
// the failures counted so far count toward the new threshold, so a closed
// breaker that has already counted as many opens now.
func (b *Breaker) Retune(failureThreshold int, openDuration time.Duration) {
	s := Settings{FailureThreshold: failureThreshold, OpenDuration: openDuration}.withDefaults()
	b.mu.Lock()
	b.s.FailureThreshold, b.s.OpenDuration = s.FailureThreshold, s.OpenDuration
	var ch *fleet.BreakerChange
	switch {
	case b.state == fleet.BreakerOpen:
		b.openUntil = b.lastChange.Add(s.OpenDuration)
	case b.state == fleet.BreakerClosed && b.failures >= s.FailureThreshold:
		cause := fmt.Sprintf("%d failures in a row, the new failure_threshold", b.failures)
		ch = b.transition(fleet.BreakerOpen, b.s.Now(), cause)
	}
	b.mu.Unlock()
	b.notify(ch)
}

// Restore puts the breaker into the state a previous run left it in. A
// candidate whose breaker was open or half-open is open again until the end
// of the cool-down that started at last.At; if that has already passed, the
// next caller becomes the half-open probe, so a candidate that was failing
// when the process died is probed once before it gets traffic again. Any
// other state leaves the breaker closed. It reports no transition.
func (b *Breaker) Restore(last fleet.BreakerChange) {
	if last.To != fleet.BreakerOpen && last.To != fleet.BreakerHalfOpen {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state = fleet.BreakerOpen
	b.openUntil = last.At.Add(b.s.OpenDuration)
	b.lastChange = last.At
	b.failures = 0
	b.probing = false
	b.gen++
}
