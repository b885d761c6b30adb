package router

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// Internal causes of an attempt context's cancellation.
var (
	errClosed      = errors.New("stream closed by the caller")
	errAttemptOver = errors.New("attempt over")
	errRetry       = errors.New("attempt failed before the answer was handed over")
)

// Meta is what a caller learns at commit time: enough for response
// headers.
type Meta struct {
	RequestID string
	Candidate fleet.Candidate // the one serving
	Fallback  bool            // served by another than the first choice
	// Thinking reports that the request was routed in thinking mode (it
	// asked for reasoning, or named the deep-thinking model).
	Thinking bool
	// Attempts are the attempts that failed or were skipped before the
	// serving one.
	Attempts []fleet.Attempt
	// Demoted are the candidates moved last for memory pressure whose turn never came.
	Demoted []fleet.Attempt
	// TTFT is the time from the request's start to its first token; zero
	// for an empty answer.
	TTFT time.Duration
}

// Stream routes a streaming request. It returns once an attempt committed
// (its first token arrived) with a Stream that replays what the attempt
// buffered and then passes the rest through; or an *Error when no
// candidate produced a first token. When every candidate that answered
// answered empty (a finish marker without content), the Stream replays
// that empty answer. The caller must Close the Stream.
func (r *Router) Stream(ctx context.Context, req *fleet.Request) (*Stream, error) {
	ru, err := r.begin(ctx, req, false)
	if err != nil {
		return nil, err
	}
	return ru.commitNext()
}

// run is the routing state of one request. It is used by one goroutine,
// except that a Stream's Close may race its Recv (see Stream).
type run struct {
	r         *Router
	st        *state
	ctx       context.Context
	id        string
	req       fleet.Request // the caller's request with thinking mode resolved
	rec       fleet.RequestRecord
	start     time.Time
	plan      plan
	next      int
	aggregate bool
	hedged    bool // a hedge was started: at most one per request
	// backTo is the first candidate whose live server was only busy when
	// the request moved on from it (fault queued, a liveness check said so
	// before the ceiling); wentBack: the request went back to it once every
	// later candidate had failed.
	backTo   *entry
	wentBack bool

	// suspect is the last attempt that failed in a way the request itself
	// may have caused; its breaker verdict waits for the next attempt
	// that reaches a server (docs/DESIGN.md, "Whose fault is it").
	suspect *suspect
	// empty is the first attempt that answered empty with a finish
	// marker: the answer when no candidate has a better one.
	empty *attempt
	// unparsed is set once a server said the model's output for this
	// request could not be parsed (fleet.ErrModelOutput).
	unparsed bool
	// committed is the commit event's attempt, lent to the observers
	// (fleet.Event): the events point into the run's own memory, so that
	// they cost no allocation.
	committed fleet.Attempt
}

func (r *Router) begin(ctx context.Context, req *fleet.Request, aggregate bool) (*run, error) {
	id := req.ID
	if id == "" {
		id = r.deps.NewID()
	}
	st := r.state.Load()
	now := time.Now()
	ru := &run{
		r: r, st: st, ctx: ctx, id: id, req: *req, start: now, aggregate: aggregate,
		rec: fleet.RequestRecord{
			ID: id, StartedAt: now, Protocol: req.Protocol, Stream: req.Stream,
			Thinking: req.Thinking, RequestedModel: req.Model,
		},
	}
	ru.req.ID = id
	r.observe(fleet.Event{Type: fleet.EventRequestStarted, At: now, RequestID: id})
	p, err := r.plan(st, req, now)
	if err != nil {
		failure := fleet.FailureNoCandidates
		switch {
		case errors.Is(err, fleet.ErrUnknownModel):
			failure = fleet.FailureUnknownModel
		case errors.Is(err, ErrUnsupported):
			failure = fleet.FailureUnsupported
		}
		return nil, ru.fail(failure, err)
	}
	ru.plan = p
	ru.req.Thinking = p.thinking
	ru.req.NoThinking = req.NoThinking && !p.thinking
	ru.rec.Thinking = p.thinking
	return ru, nil
}

// skipReopened records e skipped: its breaker opened since the plan.
// Apart from commitNext, whose frame is under every attempt's stack.
//
//go:noinline
func (ru *run) skipReopened(e *entry) {
	ru.addAttempt(fleet.Attempt{
		Candidate: e.target.Candidate.ID, Outcome: fleet.OutcomeSkippedOpen, StartedAt: time.Now(),
		Error: "breaker opened by another request", Demoted: e.demoted, Reading: e.reading,
	})
}

// commitNext tries the remaining candidates in order until one commits.
func (ru *run) commitNext() (*Stream, error) {
	for ru.next < len(ru.plan.entries) {
		if ru.ctx.Err() != nil {
			return nil, ru.fail(ru.gone(), ru.ctx.Err())
		}
		e := &ru.plan.entries[ru.next]
		ru.next++
		if e.skip != nil {
			ru.addAttempt(*e.skip)
			continue
		}
		t, ok := e.br.Allow() // the re-check right before the call
		if !ok {
			ru.skipReopened(e)
			continue
		}
		a := ru.startAttempt(e, t)
		var h *halt
		if ru.st.fleet.Settings.Hedge && !ru.hedged && ru.next < len(ru.plan.entries) {
			a, h = ru.hedge(a)
		} else if err := a.probe(&ru.req); err != nil {
			h = ru.failAttempt(a, err)
			a = nil
		}
		if h != nil {
			return ru.stop(h)
		}
		if a == nil {
			continue
		}
		s, h := ru.commit(a)
		if h != nil {
			return ru.stop(h)
		}
		if s != nil {
			return s, nil
		}
	}
	if ru.ctx.Err() != nil {
		return nil, ru.fail(ru.gone(), ru.ctx.Err())
	}
	if ru.empty != nil {
		return ru.commitEmpty(), nil
	}
	if ru.backTo != nil && !ru.wentBack {
		// Every candidate after a live server that was only busy failed:
		// go back to it, the last one now, and wait in its queue as a
		// request straight to it would (SPEC 2.4), rather than answer 503
		// where the server alone would answer.
		ru.wentBack = true
		ru.plan.entries = append(ru.plan.entries, *ru.backTo)
		return ru.commitNext()
	}
	if len(ru.rec.Attempts) == 0 {
		return nil, ru.fail(fleet.FailureNoCandidates, fleet.ErrNoCandidates)
	}
	if err := unsupported(ru.rec.Attempts); err != nil {
		return nil, ru.fail(fleet.FailureUnsupported, err)
	}
	return nil, ru.fail(fleet.FailureUnavailable, ErrAllFailed)
}

// unsupported is ErrUnsupported when every candidate lacked what the
// request asks for (the Error names each one's reason); nil when any
// failed otherwise.
func unsupported(attempts []fleet.Attempt) error {
	for _, a := range attempts {
		if a.Fault != fleet.FaultCapability {
			return nil
		}
	}
	return ErrUnsupported
}

// stop ends routing with h: the empty answer, or an error.
func (ru *run) stop(h *halt) (*Stream, error) {
	if h.empty {
		return ru.commitEmpty(), nil
	}
	return nil, ru.fail(h.failure, h.err)
}

// recordUntried records the excluded and demoted candidates whose turn never
// came because another served first (every exclusion and demotion is
// recorded), after the attempts that ran.
func (ru *run) recordUntried() {
	for _, e := range ru.plan.entries[ru.next:] {
		switch {
		case e.skip != nil:
			ru.addAttempt(*e.skip)
		case e.demoted:
			ru.addAttempt(ru.untriedDemoted(e))
		}
	}
}

// untriedDemoted is the record of a candidate demoted for GPU pressure
// whose turn never came.
func (ru *run) untriedDemoted(e entry) fleet.Attempt {
	return fleet.Attempt{
		Candidate: e.target.Candidate.ID, Outcome: fleet.OutcomeDemoted, StartedAt: ru.start,
		Error: e.reading.Reason, Demoted: true, Reading: e.reading,
	}
}

// serve notes in the record that c serves the request.
func (ru *run) serve(c fleet.Candidate) {
	ru.rec.ServedCandidate = c.ID
	ru.rec.ServedModel = c.Model
	ru.rec.IsFallback = c.ID != ru.plan.preferred
}

func (ru *run) meta(c fleet.Candidate) Meta {
	n := len(ru.rec.Attempts)
	return Meta{
		RequestID: ru.id, Candidate: c, Fallback: ru.rec.IsFallback, Thinking: ru.plan.thinking,
		Attempts: ru.rec.Attempts[:n:n], TTFT: ru.rec.TTFT, Demoted: ru.demoted(),
	}
}

func (ru *run) addAttempt(a fleet.Attempt) {
	a.RequestID = ru.id
	a.Order = len(ru.rec.Attempts)
	ru.rec.Attempts = append(ru.rec.Attempts, a)
	ru.r.observe(fleet.Event{Type: fleet.EventAttempt, At: a.StartedAt.Add(a.Duration), RequestID: ru.id, Attempt: &ru.rec.Attempts[a.Order]})
}

// fail ends the request without an answer and records it.
func (ru *run) fail(failure fleet.Failure, err error) *Error {
	ru.settle(breaker.Failure)
	e := &Error{Failure: failure, Err: err, Attempts: ru.rec.Attempts, RequestID: ru.id, RetryAfter: ru.retryAfter()}
	ru.rec.Status = fleet.StatusFailed
	switch failure {
	case fleet.FailureClientGone:
		ru.rec.Status = fleet.StatusClientAbort
	case fleet.FailureShutdown:
		ru.rec.Status = fleet.StatusShutdown
	}
	ru.rec.Failure = failure
	ru.rec.Error = clip(e.Error())
	ru.record()
	return e
}

// retryAfter is how long until one of the candidates this request could
// go to may be tried again: the shortest breaker cool-down, busy back-off
// or loading wait among them; zero when one may be tried now or nothing
// is known.
func (ru *run) retryAfter() time.Duration {
	now := time.Now()
	var best time.Duration
	for _, e := range ru.plan.entries {
		c := e.target.Candidate
		wait := ru.st.breakers[c.ID].Snapshot().Remaining
		if rm := ru.r.remote(c, now); rm.Out {
			wait = max(wait, rm.Until.Sub(now))
		}
		v := ru.r.view(c, now)
		wait = max(wait, v.busyFor)
		if wait == 0 && !v.loading && v.missing == "" && e.skip == nil {
			return 0
		}
		if wait > 0 && (best == 0 || wait < best) {
			best = wait
		}
	}
	return best
}

// shutdown reports whether the request's context ended because
// Switchyard is shutting down (its cause is fleet.ErrShutdown).
func (ru *run) shutdown() bool {
	return ru.ctx.Err() != nil && errors.Is(context.Cause(ru.ctx), fleet.ErrShutdown)
}

// gone is the failure of a request whose context ended: the caller left,
// or Switchyard is shutting down.
func (ru *run) gone() fleet.Failure {
	if ru.shutdown() {
		return fleet.FailureShutdown
	}
	return fleet.FailureClientGone
}

// fingerprint names the request's options and input, so that a crash a
// second request causes can be told from the same request sent again.
func (ru *run) fingerprint() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%+v\x00%d\x00%q\x00%q", ru.req.KindOf(), ru.req.Model, ru.req.Options, len(ru.req.Messages), ru.req.Prompt, ru.req.Input)
	if n := len(ru.req.Messages); n > 0 {
		io.WriteString(h, ru.req.Messages[n-1].Content)
	}
	return h.Sum64()
}

// record writes the request's record and reports it; it returns once the
// record is durable.
func (ru *run) record() {
	ru.rec.Latency = time.Since(ru.start)
	ru.r.observe(fleet.Event{Type: fleet.EventRequestDone, At: time.Now(), RequestID: ru.id, Request: &ru.rec})
	rec := ru.rec
	rec.Attempts = append([]fleet.Attempt(nil), ru.rec.Attempts...)
	if ru.r.deps.Recorder != nil {
		// The record is written even when the caller is gone; a failure to
		// write is the recorder's to report, not the caller's problem.
		_ = ru.r.deps.Recorder.Record(context.WithoutCancel(ru.ctx), rec)
	}
}
