package router

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// ending is what is known of an attempt when it ends: the facts its verdict
// is drawn from (docs/DESIGN.md, "Fault values"). Building it reads the
// router's state; judging it does not.
type ending struct {
	err        error // why it ended: io.EOF for a complete answer
	callerGone bool  // the caller's context is done
	shutdown   bool  // ... because Switchyard is shutting down
	closed     bool  // the caller closed a committed stream before its end
	committed  bool  // the attempt had its first token
	aggregate  bool  // a non-stream request: nothing reached the caller yet
	empty      bool  // the replay of an empty answer ended
	finish     string
	// queued: the server was full when the attempt started or ended, or
	// its liveness check said it is alive and busy: the wait for a first
	// token was a wait in its queue.
	queued bool
	// alive is what the liveness check found after a first-token deadline
	// passed; nil when none ran.
	alive *Pulse
	// ownWork: other requests of Switchyard's ran on the server during
	// the wait.
	ownWork bool
	// stuck: the server answered the liveness check, but nothing sent to
	// it has produced a first token for longer than the ceiling.
	stuck time.Duration
	// suspect is the signature of the request's pending suspect, "" when
	// none or on this attempt's server (fleet.SameServer); unparsed and
	// emptySeen say what earlier attempts of the request did.
	suspect   string
	unparsed  bool
	emptySeen bool
	// crash: the server said its runner died on this request; crashRepeat:
	// the last crash on that server, with no answer between, was another
	// request's, so the server keeps crashing.
	crash, crashRepeat bool
	// kind is the request's kind (fleet.KindChat, ...; "" is chat).
	kind        fleet.Kind
	waited      time.Duration // from the attempt's start to its end
	busyBackoff time.Duration // the default back-off of a busy answer
}

// verdict is how an attempt ended and what follows from it: its record,
// what its breaker is told, what the router remembers of its candidate, and
// whether the request stops.
type verdict struct {
	outcome fleet.Outcome
	fault   fleet.Fault
	// errText replaces the record's error when set.
	errText string
	// tell is what the attempt's breaker hears now; cause goes with
	// hearFailure.
	tell  hear
	cause string
	// hold: the attempt becomes the request's suspect; its breaker hears
	// nothing until the next server answer settles it.
	hold bool
	// settle is what becomes of the request's pending suspect.
	settle settlement
	// sample: the attempt's first token is shown to the deadline learner
	// (which takes no queued or cold wait for a warm sample).
	sample bool
	// mark is what the router remembers of the candidate, for wait;
	// lacks, with markUnsupported, what its model or server lacks, when
	// the answer's own word (StatusError.Unsupported) does not say.
	mark  mark
	wait  time.Duration
	lacks string
	// haltFailure ends the request without an answer; haltEmpty ends it
	// with the first empty answer; haltErr is the request's error.
	haltFailure fleet.Failure
	haltEmpty   bool
	haltErr     error
	// firstEmpty: the attempt's empty answer is kept as the answer of last
	// resort.
	firstEmpty bool
	// parsed: a model-output failure that makes the next one final.
	parsed bool
	// retry: a non-stream answer broke after its first token; the request
	// goes on with the next candidate.
	retry bool
	// crashed: remember the crash on the candidate's server.
	crashed bool
	// err is the attempt's error as judged (a stall says how long).
	err error
}

// hear is what a verdict tells the attempt's breaker.
type hear int

const (
	hearNothing hear = iota // not now: the attempt is the request's suspect
	hearIgnore              // nothing counts; a probe frees its slot
	hearFailure
	hearSuccess
)

// settlement is what a verdict makes of the request's pending suspect
// (docs/DESIGN.md, "The same failure on a second candidate").
type settlement int

const (
	settleNone    settlement = iota // it stays pending
	settleServer                    // another answer showed it was the server's: its breaker hears a failure
	settleRequest                   // the same failure again: the request's, its breaker hears nothing
)

// mark is what a verdict makes the router remember of a candidate.
type mark int

const (
	markNone        mark = iota
	markBusy             // backed off for wait
	markLoading          // skipped until its server is ready, or wait
	markMissing          // its model is not there: skipped until found
	markUnsupported      // its model lacks what the request asked
)

// judge is the verdict table: how an attempt that ended with e ended, and
// what follows. It reads like docs/DESIGN.md's "Fault values" table.
func judge(e ending) verdict {
	if e.empty {
		// The replay of an empty answer ended: it is already judged.
		return verdict{tell: hearIgnore}
	}
	if e.committed && !e.aggregate {
		return judgeCommitted(e)
	}
	if e.committed && e.err == io.EOF {
		return verdict{outcome: fleet.OutcomeSuccess, tell: hearSuccess, sample: true}
	}
	switch {
	case e.shutdown:
		return verdict{outcome: fleet.OutcomeShutdown, fault: fleet.FaultNone, errText: "cut short: switchyard is shutting down",
			tell: hearIgnore, haltFailure: fleet.FailureShutdown, haltErr: fleet.ErrShutdown}
	case e.callerGone:
		// The suspect is settled when the request ends: the caller leaving
		// says nothing of the request.
		return verdict{outcome: fleet.OutcomeClientAbort, fault: fleet.FaultClient, errText: "caller went away",
			tell: hearIgnore, haltFailure: fleet.FailureClientGone}
	case errors.Is(e.err, fleet.ErrHedgeLost):
		return verdict{outcome: fleet.OutcomeHedgeLost, tell: hearIgnore}
	case errors.Is(e.err, fleet.ErrFirstTokenTimeout):
		return judgeTimeout(e)
	case errors.Is(e.err, fleet.ErrNoContent):
		return judgeEmpty(e)
	}
	se, _ := errors.AsType[*fleet.StatusError](e.err)
	switch {
	case se != nil && se.Busy, se != nil && se.StatusCode == 429:
		return verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultBusy, tell: hearIgnore,
			mark: markBusy, wait: retryAfter(se, e.busyBackoff)}
	case se != nil && se.Loading:
		return verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultLoading, tell: hearIgnore,
			errText: "the server is loading the model: " + clip(e.err.Error()),
			mark:    markLoading, wait: retryAfter(se, e.busyBackoff)}
	case se != nil && se.Unsupported != "":
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultCapability, tell: hearIgnore,
			mark: markUnsupported}
	case se != nil && (se.StatusCode == 401 || se.StatusCode == 403):
		return verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultConfig, tell: hearIgnore,
			haltFailure: fleet.FailureUpstreamAuth}
	case se != nil && se.StatusCode == 404 && e.kind != "" && e.kind != fleet.KindChat && !namesModel(se.Message):
		// A server with no such endpoint (no /v1/completions, no
		// /api/generate behind a proxy): it lacks this kind of request,
		// not its model, and chat still goes to it.
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultCapability, tell: hearIgnore,
			mark: markUnsupported, lacks: endpointOf(e.kind)}
	case se != nil && se.StatusCode == 404:
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultConfig, tell: hearIgnore,
			mark: markMissing}
	case se != nil && (se.Invalid || se.StatusCode >= 400 && se.StatusCode < 500 && se.StatusCode != 408 && se.StatusCode != 409 && se.StatusCode != 425):
		// The upstream says the request itself is wrong: it would fail
		// anywhere.
		return verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore,
			settle: settleServer, haltFailure: fleet.FailureRejected, haltErr: e.err}
	case errors.Is(e.err, fleet.ErrModelOutput):
		// The model's output for this request did not parse: not the
		// server's fault. Another model may do better, once.
		v := verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer,
			parsed: true, retry: e.committed}
		if e.unparsed {
			v.haltFailure, v.haltErr, v.retry = fleet.FailureRequest, e.err, false
		}
		return v
	case e.crash && !e.crashRepeat:
		// The runner died on this request and the server restarts it for
		// the next: one caller's bad options must not lock everyone out.
		// A server that crashes again on another request is sick.
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer,
			crashed: true, retry: e.committed}
	}
	sig := signature(e.err)
	switch {
	case e.committed:
		// A non-stream answer broke after its first token: nothing reached
		// the caller, so the request goes on.
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, cause: shortCause(e.err),
			settle: settleServer, retry: true, crashed: e.crash}
	case sig == "" || e.crash:
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, cause: shortCause(e.err),
			settle: settleServer, crashed: e.crash}
	case sig == e.suspect:
		// The same failure on a second server: the request's own.
		return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleRequest,
			haltFailure: fleet.FailureRequest}
	}
	// It may be the request's: counted once the next server shows it
	// was not.
	return verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, hold: true, cause: shortCause(e.err), settle: settleServer}
}

// namesModel reports whether a 404's message is about a model (Ollama's
// "model 'x' not found", vLLM's "The model `x` does not exist."), not a
// path the server does not have ("Not Found", "File Not Found").
func namesModel(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "model")
}

// endpointOf names, as lacking does, the endpoint a server without one
// for requests of kind lacks.
func endpointOf(kind fleet.Kind) string {
	if kind == fleet.KindEmbed {
		return "embedding"
	}
	return "endpoint:" + string(kind)
}

// judgeTimeout judges an attempt that got no first token by its deadline
// (docs/DESIGN.md, "Shared servers").
func judgeTimeout(e ending) verdict {
	text := fmt.Sprintf("no first token in %v", roundDuration(e.waited))
	queued := verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultQueued, tell: hearIgnore}
	failing := verdict{outcome: fleet.OutcomeTimeout, fault: fleet.FaultServer, errText: text,
		tell: hearFailure, cause: "no first token", settle: settleServer}
	working := e.alive != nil && e.alive.Err == nil && !e.alive.Idle
	switch {
	case working && e.stuck > 0:
		// Alive, but nothing sent to it answers: failing after all.
		failing.errText += " (alive, but nothing sent to it produced a first token for " + roundDuration(e.stuck).String() + ")"
		return failing
	case working:
		// The server answered and is working: the wait was a wait behind
		// work Switchyard may not see.
		queued.errText = text + " (queued: " + e.alive.Evidence
		if !e.ownWork {
			queued.errText += "; busy with work Switchyard did not send"
		}
		queued.errText += ")"
		return queued
	case e.alive != nil:
		failing.errText += " (" + e.alive.verdictText() + ")"
		return failing
	case e.queued && e.stuck == 0:
		queued.errText = text + " (queued: the server was busy with other requests)"
		return queued
	}
	return failing
}

// judgeEmpty judges an answer that ended without a first token.
func judgeEmpty(e ending) verdict {
	if e.finish == "" {
		return verdict{outcome: fleet.OutcomeNoContent, fault: fleet.FaultServer, errText: "empty answer",
			tell: hearFailure, cause: "empty answer", settle: settleServer}
	}
	// A legitimately empty answer (a stop sequence that matched at once):
	// another candidate may say more, but no server is to blame; two in a
	// row are the answer.
	return verdict{outcome: fleet.OutcomeNoContent, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer,
		errText: "empty answer (finish_reason " + e.finish + ")", haltEmpty: e.emptySeen, firstEmpty: !e.emptySeen}
}

// judgeCommitted judges the end of a stream the caller is reading.
func judgeCommitted(e ending) verdict {
	switch {
	case e.err == io.EOF:
		return verdict{outcome: fleet.OutcomeSuccess, tell: hearSuccess, sample: true}
	case e.shutdown:
		return verdict{outcome: fleet.OutcomeShutdown, errText: "cut short: switchyard is shutting down", tell: hearIgnore,
			sample: true}
	case e.closed || e.callerGone:
		return verdict{outcome: fleet.OutcomeClientAbort, fault: fleet.FaultClient, errText: "caller went away",
			tell: hearIgnore, sample: true}
	case errors.Is(e.err, fleet.ErrModelOutput):
		// The model's output did not parse: the request's failure, not the
		// server's.
		return verdict{outcome: fleet.OutcomeFailedAfterCommit, fault: fleet.FaultRequest, tell: hearIgnore}
	}
	return verdict{outcome: fleet.OutcomeFailedAfterCommit, fault: fleet.FaultServer, tell: hearFailure, cause: shortCause(e.err)}
}

func retryAfter(se *fleet.StatusError, def time.Duration) time.Duration {
	if se != nil && se.RetryAfter > 0 {
		return se.RetryAfter
	}
	return def
}

// signature says how an attempt failed when the failure may be the
// request's own rather than the server's: an upstream 5xx, an error event,
// output that does not parse. Two attempts with the same signature failed
// the same way. It is "" for failures only a server causes (refused
// connections, timeouts, cut streams).
func signature(err error) string {
	var se *fleet.StatusError
	if errors.As(err, &se) && se.StatusCode >= 500 {
		return fmt.Sprintf("HTTP %d: %s", se.StatusCode, gist(se.Message))
	}
	var ee *fleet.EventError
	if errors.As(err, &ee) {
		return "error event: " + gist(ee.Message)
	}
	var me *fleet.MalformedError
	if errors.As(err, &me) {
		return "malformed output"
	}
	return ""
}

// gist is the part of an upstream's error message that says what went
// wrong, without what differs between two servers failing the same way:
// the text up to the first colon, lower-cased, without digits.
func gist(msg string) string {
	if i := strings.IndexByte(msg, ':'); i >= 0 {
		msg = msg[:i]
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(fleet.Clip(msg))))
}

// clip cuts an error text to the size kept in a record or an event.
func clip(s string) string { return fleet.Clip(s) }

// shortCause is a breaker transition's cause: the error without the
// upstream's possibly long message.
func shortCause(err error) string {
	var se *fleet.StatusError
	if errors.As(err, &se) {
		return fmt.Sprintf("HTTP %d", se.StatusCode)
	}
	var ee *fleet.EventError
	if errors.As(err, &ee) {
		return "error event"
	}
	return fleet.ClipTo(err.Error(), 80)
}

// halt says that routing must stop, and with what: a failure, or the
// empty answer.
type halt struct {
	failure fleet.Failure
	err     error
	empty   bool
}

// suspect is a failure that may be the request's own.
type suspect struct {
	a     *attempt
	idx   int    // its record in rec.Attempts
	sig   string // how it failed (see signature)
	cause string // its breaker cause, should it count
}

// conclude ends attempt a, which ended with err, judges it and applies the
// verdict: the one place where an attempt's end becomes its record, its
// breaker's verdict, the suspect's fate and what the router remembers of
// its candidate. It returns the verdict; a committed stream's caller acts
// on its outcome, an uncommitted one's on failAttempt's halt.
func (ru *run) conclude(a *attempt, err error, committed, closed bool, s *Stream) verdict {
	cause := a.release()
	c := a.e.target.Candidate
	now := time.Now()
	switch {
	case errors.Is(cause, fleet.ErrFirstTokenTimeout), errors.Is(cause, fleet.ErrHedgeLost):
		err = cause
	case errors.Is(cause, fleet.ErrStalled):
		err = fmt.Errorf("%w (no content for %v)", fleet.ErrStalled, ru.st.fleet.Settings.StallTimeout)
	case errors.Is(cause, errClosed):
		closed = true
	}
	se, _ := errors.AsType[*fleet.StatusError](err)
	e := ending{
		err: err, committed: committed, aggregate: ru.aggregate, closed: closed, empty: s != nil && s.empty,
		callerGone: ru.ctx.Err() != nil, shutdown: ru.shutdown(),
		finish: a.finished(), waited: a.rec.Duration,
		queued: a.queued || (!committed && ru.r.view(c, now).saturated),
		alive:  a.pulse.Load(), stuck: a.endStuck,
		ownWork:  a.othersAtStart > 0 || ru.r.mark(c.ID).starts.Load() > a.startSeq,
		unparsed: ru.unparsed, emptySeen: ru.empty != nil,
		crash: se != nil && se.Crash, busyBackoff: ru.st.fleet.Settings.BusyBackoff,
		kind: ru.req.KindOf(),
	}
	if ru.suspect != nil && !fleet.SameServer(ru.suspect.a.e.target.Candidate, c) {
		// Another model of the suspect's server failing alike says the
		// server is sick, not the request (u3 review, item 3).
		e.suspect = ru.suspect.sig
	}
	if e.crash {
		e.crashRepeat = ru.r.crashedBefore(c.ID, ru.fingerprint())
	}
	var usage *fleet.Usage
	if s != nil {
		usage = s.usage.Load()
	}
	return ru.apply(a, e, judge(e), se, usage)
}

// apply carries out v for attempt a, and returns it with the request's
// error, should it halt, filled in.
func (ru *run) apply(a *attempt, e ending, v verdict, se *fleet.StatusError, usage *fleet.Usage) verdict {
	c := a.e.target.Candidate
	now := time.Now()
	if e.err != nil && e.err != io.EOF {
		a.rec.Error = clip(e.err.Error())
	}
	if se != nil {
		a.rec.HTTPStatus = se.StatusCode
	}
	if v.errText != "" {
		a.rec.Error = v.errText
	}
	a.rec.Outcome, a.rec.Fault = v.outcome, v.fault
	v.err = e.err
	prev := ru.suspect
	switch v.settle {
	case settleServer:
		ru.settle(breaker.Failure)
	case settleRequest:
		ru.settle(breaker.Ignore)
	}
	switch {
	case e.committed && v.tell == hearSuccess:
		a.e.br.Succeed(a.ticket)
	case e.committed && v.tell == hearFailure:
		a.e.br.Fail(a.ticket, v.cause)
	case e.committed:
		// The first token already told the breaker Committed.
	case v.tell == hearFailure:
		a.e.br.Done(a.ticket, breaker.Failure, v.cause)
	case v.tell == hearIgnore:
		a.e.br.Done(a.ticket, breaker.Ignore, "")
	}
	switch v.mark {
	case markBusy:
		ru.r.backOff(c.ID, now.Add(v.wait))
	case markLoading:
		ru.r.markLoading(c.ID, now, v.wait)
	case markMissing:
		a.rec.Error = clip(fmt.Sprintf("%s does not serve model %q (%v): check the candidate's url and model", c.URL, c.Model, e.err))
		ru.r.markMissing(c.ID, now, a.rec.Error)
	case markUnsupported:
		ru.r.markUnsupported(c.ID, cmp.Or(v.lacks, se.Unsupported))
	}
	if a.rec.Fault == fleet.FaultQueued {
		ru.r.queued(c.ID, now, a.rec.Error)
		if p := a.pulse.Load(); ru.backTo == nil && p != nil && p.Err == nil && a.rec.Duration < a.ceiling {
			ru.backTo = &a.e
		}
	}
	if v.crashed {
		ru.r.crashed(c.ID, ru.fingerprint())
	}
	if v.sample {
		smp := fleet.TTFTSample{TTFT: a.rec.TTFT, Cold: a.rec.Cold, Queued: e.queued, Usage: usage}
		ru.r.deps.Deadlines.Observe(c, smp)
		a.rec.Warm = smp.Warm()
	}
	if v.parsed {
		ru.unparsed = true
	}
	if v.firstEmpty {
		ru.empty = a
	}
	if v.outcome == "" {
		return v // an empty answer's replay: its attempt is already recorded
	}
	ru.addAttempt(a.rec)
	if v.hold {
		ru.suspect = &suspect{a: a, idx: len(ru.rec.Attempts) - 1, sig: signature(e.err), cause: v.cause}
	}
	switch v.haltFailure {
	case fleet.FailureUpstreamAuth:
		v.haltErr = fmt.Errorf("upstream %s refused Switchyard's credentials (check its api_key_env): %w", c.ID, e.err)
		ru.r.refusedKey(c.ID, clip(fmt.Sprintf("%s refused Switchyard's credentials (%v): check its api_key_env", c.URL, e.err)))
	case fleet.FailureRequest:
		if v.haltErr == nil && prev != nil {
			v.haltErr = fmt.Errorf("the request failed the same way on %s and %s: %w", prev.a.e.target.Candidate.ID, c.ID, e.err)
		}
	}
	return v
}

// failAttempt ends an attempt that failed before its first token. It
// returns a halt when routing must stop; the caller ends the request with
// it once every attempt is recorded.
func (ru *run) failAttempt(a *attempt, err error) *halt {
	v := ru.conclude(a, err, false, false, nil)
	switch {
	case v.haltEmpty:
		return &halt{empty: true}
	case v.haltFailure != "":
		if v.haltErr == nil {
			v.haltErr = err
		}
		return &halt{failure: v.haltFailure, err: v.haltErr}
	}
	return nil
}

// settle gives the suspect, if any, its breaker verdict: Failure when
// another server answered the request differently, Ignore when one failed
// it the same way (then the suspect's record says the request's fault).
func (ru *run) settle(r breaker.Result) {
	s := ru.suspect
	if s == nil {
		return
	}
	ru.suspect = nil
	cause := ""
	if r == breaker.Failure {
		cause = s.cause
	} else {
		ru.rec.Attempts[s.idx].Fault = fleet.FaultRequest
	}
	s.a.e.br.Done(s.a.ticket, r, cause)
}
