package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// attempt is one try of one candidate: started, probed until its first
// token, expired or released.
type attempt struct {
	e        entry
	ticket   breaker.Ticket
	rec      fleet.Attempt
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer // first-token deadline, then the stall timeout
	ceiling  time.Duration
	released atomic.Bool
	inflight *atomic.Int64 // the candidate's count of running attempts
	liveness Liveness      // asks the server whether it is alive; nil: never
	r        *Router       // for what the candidate's server has left unanswered
	// phase orders the first token against the deadline and its liveness
	// check (see stopDeadline and expire).
	phase atomic.Int32
	// pulse is what the liveness check found, once it ran.
	pulse atomic.Pointer[Pulse]
	// last: no other candidate could be tried after this one when it
	// started, so a live server is waited for up to the ceiling.
	last bool
	// startSeq is the candidate's count of started attempts with this one,
	// othersAtStart how many others ran when it started (othersFilled).
	startSeq      int64
	othersAtStart int
	// queued: the candidate's server was full when the attempt started,
	// so its wait for a first token is partly a wait in the queue.
	queued bool
	// tokened: its first token came (Router.firstToken was told);
	// extendedTo: its live server was waited for longer than its
	// deadline, up to this one (a time.Duration; 0 when not); endStuck is
	// stuckFor as it ended.
	tokened    atomic.Bool
	extendedTo atomic.Int64
	endStuck   time.Duration
	// The stall watchdog of a committed stream, kept lazily (Stream.Recv,
	// docs/DESIGN.md, "Stall watchdog"): Recv moves stallAt and says
	// whether it waits for the upstream, and the timer, armed when a wait
	// finds it idle, looks at them when it fires and re-arms for what is
	// left, rather than being reset and stopped around every chunk.
	stallAt atomic.Int64 // when the wait stalls, in nanoseconds from born
	waiting atomic.Bool  // Recv waits for the upstream
	armed   atomic.Bool  // the timer runs for the stall watchdog
	born    time.Time
	stream  fleet.Stream
	buf     []fleet.Chunk
}

// Phases of an attempt before its first token.
const (
	phaseWaiting   int32 = iota // for its first token, the deadline running
	phaseChecking               // the deadline passed: its server is being asked whether it is alive
	phaseCut                    // the deadline ended it
	phaseCommitted              // its first token beat the deadline
)

// LivenessBound bounds one liveness check: a server that does not answer
// within it is not alive.
const LivenessBound = time.Second

func (ru *run) startAttempt(e *entry, t breaker.Ticket) *attempt {
	c := e.target.Candidate
	ceiling := ru.st.fleet.Settings.FirstTokenTimeout
	d, cold := ru.r.deps.Deadlines.FirstToken(c, ceiling)
	m := ru.r.mark(c.ID)
	a := &attempt{e: *e, ticket: t, inflight: &m.inflight, ceiling: ceiling, liveness: ru.r.deps.Liveness, r: ru.r, last: !ru.moreToTry()}
	// An attempt gone back to a server that was busy waits in its queue.
	a.queued = ru.wentBack || ru.r.view(c, time.Now()).saturated
	a.othersAtStart = int(a.inflight.Add(1)) - 1
	a.startSeq = m.starts.Add(1)
	if a.queued && a.last && a.liveness == nil {
		// The last candidate left is full and there is no asking whether
		// its server is alive: wait in its queue rather than give up on a
		// deadline learned from unqueued answers (a cold model's deadline
		// may be longer still). With a liveness check, expire waits so
		// for a server that is alive, and cuts a frozen one at d.
		d = max(d, ceiling)
	}
	a.rec = fleet.Attempt{
		RequestID: ru.id, Order: len(ru.rec.Attempts), Candidate: c.ID, StartedAt: time.Now(),
		Deadline: d, Cold: cold, Demoted: e.demoted, Reading: e.reading,
	}
	a.born = a.rec.StartedAt
	ru.r.waitBegan(c.ID, a.born)
	a.ctx, a.cancel = context.WithCancelCause(ru.ctx)
	a.timer = time.AfterFunc(d, a.expire)
	ru.r.observe(fleet.Event{Type: fleet.EventAttemptStarted, At: a.rec.StartedAt, RequestID: ru.id, Attempt: &a.rec})
	return a
}

// moreToTry reports whether an entry after the current one may still be
// tried.
func (ru *run) moreToTry() bool {
	for _, e := range ru.plan.entries[ru.next:] {
		if e.skip == nil {
			return true
		}
	}
	return false
}

// expire runs when the attempt's timer fires. After commit it is the stall
// timeout. Before, it is the first-token deadline: a learned deadline
// proves nothing by itself on a server other clients share, so the server
// is asked whether it is alive and working (docs/DESIGN.md, "Shared
// servers"). A server that is not is cut at once; a live one is waited for
// up to the ceiling when it is the last candidate, else the request moves
// on without blaming it.
func (a *attempt) expire() {
	if a.phase.Load() == phaseCommitted {
		a.checkStall()
		return
	}
	if !a.phase.CompareAndSwap(phaseWaiting, phaseChecking) {
		return
	}
	waited := time.Since(a.rec.StartedAt)
	// A cold deadline may pass the ceiling: its server is still asked
	// once, as it may be loading the model.
	if a.liveness != nil && (waited < a.ceiling || a.rec.Cold && a.extendedTo.Load() == 0) {
		p := a.check()
		if p.Err == nil {
			a.r.progressed(a.e.target.Candidate.ID, time.Now(), p.Progress)
		}
		a.pulse.Store(&p)
		// The last candidate's server is alive: wait as a direct request
		// would. A server loading the request's model is waited for
		// whatever comes next (SPEC 3: giving up aborts the load, and a
		// deadline too short for it would keep the model cold for ever),
		// once, up to the ceiling or twice the deadline the load passed.
		loadingIt := p.Loading && a.extendedTo.Load() == 0
		until := a.ceiling
		if loadingIt {
			until = max(a.ceiling, 2*a.rec.Deadline)
		}
		if p.Err == nil && !p.Idle && (a.last || loadingIt) && a.stuckFor(time.Now()) == 0 && waited < until {
			if a.phase.CompareAndSwap(phaseChecking, phaseWaiting) {
				a.extendedTo.Store(int64(until))
				a.timer.Reset(max(until-time.Since(a.rec.StartedAt), 0))
			}
			return
		}
	}
	if a.phase.CompareAndSwap(phaseChecking, phaseCut) {
		a.cancel(fleet.ErrFirstTokenTimeout)
	}
}

// check asks the attempt's server whether it is alive, within
// LivenessBound. The last candidate's server that did not answer in time
// is asked once more: a healthy server on a machine whose cores are all
// busy may take that long, and cutting the last candidate answers the
// caller 503 where the server alone would have answered; a hung one costs
// a second bound more.
func (a *attempt) check() Pulse {
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(a.ctx, LivenessBound)
		p := a.liveness.Check(ctx, a.e.target.Candidate)
		late := p.Err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if !late || !a.last || try == 1 || a.ctx.Err() != nil {
			return p
		}
	}
}

// stuckFor is how long nothing sent to the attempt's server has produced a
// first token, when that is longer than the ceiling; else zero. A server
// that stays alive but answers nobody is failing after all.
func (a *attempt) stuckFor(now time.Time) time.Duration {
	if d := a.r.unansweredFor(a.e.target.Candidate.ID, now); d >= a.ceiling {
		return d
	}
	return 0
}

// wait starts a wait for the upstream of a committed stream that stalls
// after d, arming the timer when it is idle.
func (a *attempt) wait(d time.Duration) {
	a.stallAt.Store(int64(time.Since(a.born) + d))
	a.waiting.Store(true)
	if a.armed.CompareAndSwap(false, true) {
		a.timer.Reset(d)
	}
}

// pause ends a wait for the upstream, for a while (then wait or resume)
// or for good.
func (a *attempt) pause() { a.waiting.Store(false) }

// resume goes on with a wait paused at pausedAt (nanoseconds from born),
// its deadline pushed back by the pause.
func (a *attempt) resume(pausedAt time.Duration) {
	a.stallAt.Add(int64(time.Since(a.born) - pausedAt))
	a.waiting.Store(true)
	if a.armed.CompareAndSwap(false, true) {
		a.timer.Reset(max(time.Duration(a.stallAt.Load())-time.Since(a.born), 0))
	}
}

// checkStall is the stall timer's: it ends a wait that has run past its
// deadline with fleet.ErrStalled, re-arms for what is left of a wait in
// progress, and otherwise goes idle until the next wait arms it.
func (a *attempt) checkStall() {
	a.armed.Store(false)
	if !a.waiting.Load() || a.released.Load() {
		return // a wait that starts now finds the timer idle and arms it
	}
	left := time.Duration(a.stallAt.Load()) - time.Since(a.born)
	if left <= 0 {
		a.cancel(fleet.ErrStalled)
		return
	}
	if a.armed.CompareAndSwap(false, true) {
		a.timer.Reset(left)
	}
}

// stopDeadline stops the first-token deadline at the first token and
// reports whether the token beat it (a liveness check in flight does not
// count against it). It may be called more than once (a hedge's winner is
// stopped as soon as it wins, then committed); the first call decides.
func (a *attempt) stopDeadline() bool {
	a.timer.Stop()
	won := a.phase.CompareAndSwap(phaseWaiting, phaseCommitted) ||
		a.phase.CompareAndSwap(phaseChecking, phaseCommitted) ||
		a.phase.Load() == phaseCommitted
	if won && a.tokened.CompareAndSwap(false, true) {
		a.r.firstToken(a.e.target.Candidate.ID, time.Now())
	}
	return won
}

// What an attempt may hold before its first token: the events the commit
// replays to the caller. A server's preface (a role, usage, llama.cpp's
// prompt progress) is a few events; one that sends events and no token
// beyond these is not making an answer, and would otherwise fill memory
// until the deadline ended it (gigabytes in seconds over loopback).
const (
	prefaceEvents = 4096
	prefaceBytes  = 4 << 20
)

// errPreface ends an attempt whose server sent more than the preface
// allows before a first token: a server fault, like a malformed stream.
var errPreface = fmt.Errorf("upstream sent more than %d events or %d MiB before a first token", prefaceEvents, prefaceBytes>>20)

// probe opens the upstream stream and buffers its events until the first
// token. It returns nil when the last buffered chunk is a first token.
func (a *attempt) probe(req *fleet.Request) error {
	s, err := a.e.target.Backend.Open(a.ctx, a.e.target.Candidate, req)
	if err != nil {
		return err
	}
	a.stream = s
	held := 0
	for {
		ch, err := s.Recv()
		if err != nil {
			if err == io.EOF {
				return fleet.ErrNoContent
			}
			return err
		}
		if held += len(ch.Raw); held > prefaceBytes || len(a.buf) == prefaceEvents {
			return errPreface
		}
		// A chunk's Raw is the stream's buffer until the next Recv.
		ch.Raw = bytes.Clone(ch.Raw)
		a.buf = append(a.buf, ch)
		if ch.IsFirstToken() {
			return nil
		}
	}
}

// finished reports whether the attempt's buffered answer carries a finish
// marker: it ended normally, however empty.
func (a *attempt) finished() string {
	for _, ch := range a.buf {
		if ch.FinishReason != "" {
			return ch.FinishReason
		}
	}
	return ""
}

// release ends the attempt's upstream call: it stops the timer, cancels
// the context (closing the connection) and closes the stream. It returns
// the context's cause as it was before, nil if it was not cancelled. Only
// the first call releases.
func (a *attempt) release() error {
	a.timer.Stop()
	var cause error
	if a.ctx.Err() != nil {
		cause = context.Cause(a.ctx)
	}
	a.cancel(errAttemptOver)
	if a.released.Swap(true) {
		return cause
	}
	if a.stream != nil {
		a.stream.Close()
	}
	a.inflight.Add(-1)
	now := time.Now()
	a.endStuck = a.stuckFor(now) // with this attempt still among those waiting
	a.r.waitEnded(a.e.target.Candidate.ID, now, a.tokened.Load(), now.Sub(a.rec.StartedAt))
	a.rec.Duration = now.Sub(a.rec.StartedAt)
	if to := a.extendedTo.Load(); to != 0 {
		a.rec.Deadline = time.Duration(to)
	}
	return cause
}

// Liveness asks a candidate's server, off the request's own connection,
// whether it is alive and working (docs/DESIGN.md, "Shared servers"). Check
// returns within ctx's deadline.
type Liveness interface {
	Check(ctx context.Context, c fleet.Candidate) Pulse
}

// Pulse is a server's answer to a liveness check.
type Pulse struct {
	// Err is set when the server did not answer, or answered an error: it
	// is not alive.
	Err error
	// Idle: it answered and shows itself idle with free slots, so it is
	// not working on the request that waits for it.
	Idle bool
	// Loading: it is loading the request's model (Ollama lists it once
	// loaded), so the wait is a load, and giving up would abort it.
	Loading bool
	// Evidence says what it answered, in plain words: "alive: /slots
	// answered in 3 ms; 1 of 1 slots busy with work Switchyard did not
	// send".
	Evidence string
	// Progress changes when the server gets on with its work, whoever sent
	// it ("" when it shows nothing of the kind): a change since the last
	// check is an answer to someone (Router.progressed).
	Progress string
}

// verdictText says what a liveness check found, for the record of an
// attempt that is failing.
func (p *Pulse) verdictText() string {
	if p.Err != nil {
		return "not alive: " + clip(p.Err.Error())
	}
	return "alive but idle, not working on the request: " + p.Evidence
}
