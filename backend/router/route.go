package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
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

// Answer is a complete, non-streamed answer.
type Answer struct {
	Meta
	Message      fleet.Message // role "assistant", content, thinking, tool calls
	FinishReason string
	Usage        *fleet.Usage
	Model        string // the model name the upstream reported
	// Logprobs are the answer's token log probabilities, one JSON array
	// (see fleet.Chunk.Logprobs); nil when none came.
	Logprobs json.RawMessage
	// Embeddings are the vectors of an embedding request.
	Embeddings [][]float32
	// Fields are the top-level fields of the upstream's answer as it sent
	// them, from its first event and those that ended it (finish, usage),
	// later ones winning: what a caller of the upstream's dialect should
	// still see of them (system_fingerprint, timings, usage details,
	// Ollama's durations).
	Fields map[string]json.RawMessage
}

// Complete routes a non-streaming request (docs/DESIGN.md, "Non-streaming
// requests"). Upstreams are still read as streams, so the first-token
// deadline catches stalls; and since nothing reaches the caller before the
// whole answer, an attempt that breaks after its first token falls back
// like any other failure.
func (r *Router) Complete(ctx context.Context, req *fleet.Request) (*Answer, error) {
	ru, err := r.begin(ctx, req, true)
	if err != nil {
		return nil, err
	}
	for {
		s, err := ru.commitNext()
		if err != nil {
			return nil, err
		}
		ans, err := s.collect()
		if errors.Is(err, errRetry) {
			continue
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			// The caller left while the answer was being collected; it
			// is already recorded as a client abort.
			err = &Error{Failure: fleet.FailureClientGone, Err: err, Attempts: ru.rec.Attempts, RequestID: ru.id}
		}
		return ans, err
	}
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
}

// suspect is a failure that may be the request's own.
type suspect struct {
	a     *attempt
	idx   int    // its record in rec.Attempts
	sig   string // how it failed (see signature)
	cause string // its breaker cause, should it count
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
		if errors.Is(err, fleet.ErrUnknownModel) {
			failure = fleet.FailureUnknownModel
		}
		return nil, ru.fail(failure, err)
	}
	ru.plan = p
	ru.req.Thinking = p.thinking
	ru.req.NoThinking = req.NoThinking && !p.thinking
	ru.rec.Thinking = p.thinking
	return ru, nil
}

// commitNext tries the remaining candidates in order until one commits.
func (ru *run) commitNext() (*Stream, error) {
	for ru.next < len(ru.plan.entries) {
		if ru.ctx.Err() != nil {
			return nil, ru.fail(fleet.FailureClientGone, ru.ctx.Err())
		}
		e := ru.plan.entries[ru.next]
		ru.next++
		if e.skip != nil {
			ru.addAttempt(*e.skip)
			continue
		}
		t, ok := e.br.Allow() // the re-check right before the call
		if !ok {
			ru.addAttempt(fleet.Attempt{
				Candidate: e.target.Candidate.ID, Outcome: fleet.OutcomeSkippedOpen, StartedAt: time.Now(),
				Error: "breaker opened by another request", Demoted: e.demoted, Reading: e.reading,
			})
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
		return nil, ru.fail(fleet.FailureClientGone, ru.ctx.Err())
	}
	if ru.empty != nil {
		return ru.commitEmpty(), nil
	}
	if len(ru.rec.Attempts) == 0 {
		return nil, ru.fail(fleet.FailureNoCandidates, fleet.ErrNoCandidates)
	}
	if err := unsupported(ru.rec.Attempts); err != nil {
		return nil, ru.fail(fleet.FailureUnsupported, err)
	}
	return nil, ru.fail(fleet.FailureUnavailable, ErrAllFailed)
}

// unsupported says why no candidate could serve the request when every
// one of them lacked what it asks for; nil when any failed otherwise.
func unsupported(attempts []fleet.Attempt) error {
	why := make([]string, 0, len(attempts))
	for _, a := range attempts {
		if a.Fault != fleet.FaultCapability {
			return nil
		}
		why = append(why, a.Candidate+": "+strings.TrimPrefix(a.Error, "skipped: "))
	}
	return fmt.Errorf("%w: %s", ErrUnsupported, strings.Join(why, "; "))
}

// stop ends routing with h: the empty answer, or an error.
func (ru *run) stop(h *halt) (*Stream, error) {
	if h.empty {
		return ru.commitEmpty(), nil
	}
	return nil, ru.fail(h.failure, h.err)
}

// attempt is one try of one candidate.
type attempt struct {
	e         entry
	ticket    breaker.Ticket
	rec       fleet.Attempt
	ctx       context.Context
	cancel    context.CancelCauseFunc
	timer     *time.Timer // first-token deadline, then the stall timeout
	committed atomic.Bool
	released  atomic.Bool
	inflight  *atomic.Int64 // the candidate's count of running attempts
	// startSeq is the candidate's count of started attempts with this one,
	// othersAtStart how many others ran when it started (othersFilled).
	startSeq      int64
	othersAtStart int
	// queued: the candidate's server was full when the attempt started,
	// so its wait for a first token is partly a wait in the queue.
	queued bool
	// beatDeadline is set once the first-token deadline was stopped
	// before it fired (see stopDeadline).
	deadlineStopped, beatDeadline bool
	stream                        fleet.Stream
	buf                           []fleet.Chunk
}

func (ru *run) startAttempt(e entry, t breaker.Ticket) *attempt {
	c := e.target.Candidate
	ceiling := ru.st.fleet.Settings.FirstTokenTimeout
	d, cold := ru.r.deps.Deadlines.FirstToken(c, ceiling)
	m := ru.r.mark(c.ID)
	a := &attempt{e: e, ticket: t, inflight: &m.inflight}
	a.queued = ru.r.view(c, time.Now()).saturated
	a.othersAtStart = int(a.inflight.Add(1)) - 1
	a.startSeq = m.starts.Add(1)
	if a.queued && !ru.moreToTry() {
		// The last candidate left is full: wait in its queue rather than
		// give up on a deadline learned from unqueued answers (a cold
		// model's deadline may be longer still).
		d = max(d, ceiling)
	}
	a.rec = fleet.Attempt{
		RequestID: ru.id, Order: len(ru.rec.Attempts), Candidate: c.ID, StartedAt: time.Now(),
		Deadline: d, Cold: cold, Demoted: e.demoted, Reading: e.reading,
	}
	a.ctx, a.cancel = context.WithCancelCause(ru.ctx)
	a.timer = time.AfterFunc(d, a.expire)
	started := a.rec
	ru.r.observe(fleet.Event{Type: fleet.EventAttemptStarted, At: started.StartedAt, RequestID: ru.id, Attempt: &started})
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

// expire runs when the attempt's timer fires: before commit it is the
// first-token deadline, after commit the stall timeout.
func (a *attempt) expire() {
	if a.committed.Load() {
		a.cancel(fleet.ErrStalled)
	} else {
		a.cancel(fleet.ErrFirstTokenTimeout)
	}
}

// stopDeadline stops the first-token deadline at the first token and
// reports whether the token beat it. It may be called more than once (a
// hedge's winner is stopped as soon as it wins, then committed); the first
// call decides.
func (a *attempt) stopDeadline() bool {
	if !a.deadlineStopped {
		a.deadlineStopped = true
		a.beatDeadline = a.timer.Stop()
	}
	return a.beatDeadline
}

// probe opens the upstream stream and buffers its events until the first
// token. It returns nil when the last buffered chunk is a first token.
func (a *attempt) probe(req *fleet.Request) error {
	s, err := a.e.target.Backend.Open(a.ctx, a.e.target.Candidate, req)
	if err != nil {
		return err
	}
	a.stream = s
	for {
		ch, err := s.Recv()
		if err != nil {
			if err == io.EOF {
				return fleet.ErrNoContent
			}
			return err
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
	a.rec.Duration = time.Since(a.rec.StartedAt)
	return cause
}

// halt says that routing must stop, and with what: a failure, or the
// empty answer.
type halt struct {
	failure fleet.Failure
	err     error
	empty   bool
}

// failAttempt records a failed probe, says whose fault it was and reports
// it to the breaker when it was the server's. It returns a halt when
// routing must stop (client abort, the request's own fault); the caller
// ends the request with it once every attempt is recorded.
func (ru *run) failAttempt(a *attempt, err error) *halt {
	cause := a.release()
	c := a.e.target.Candidate
	if errors.Is(cause, fleet.ErrFirstTokenTimeout) || errors.Is(cause, fleet.ErrHedgeLost) {
		err = cause
	}
	a.rec.Error = clip(err.Error())
	var se *fleet.StatusError
	if errors.As(err, &se) {
		a.rec.HTTPStatus = se.StatusCode
	}
	now := time.Now()
	done := func(o fleet.Outcome, f fleet.Fault, r breaker.Result, why string) {
		a.rec.Outcome, a.rec.Fault = o, f
		a.e.br.Done(a.ticket, r, why)
		ru.addAttempt(a.rec)
	}
	switch {
	case ru.ctx.Err() != nil:
		a.rec.Error = "caller went away"
		done(fleet.OutcomeClientAbort, fleet.FaultClient, breaker.Ignore, "")
		return &halt{failure: fleet.FailureClientGone, err: ru.ctx.Err()}
	case errors.Is(err, fleet.ErrHedgeLost):
		done(fleet.OutcomeHedgeLost, fleet.FaultNone, breaker.Ignore, "")
	case errors.Is(err, fleet.ErrFirstTokenTimeout):
		a.rec.Error = fmt.Sprintf("no first token in %v", roundDuration(a.rec.Duration))
		if a.queued || ru.r.view(c, now).saturated {
			// Queueing behind other requests is not a sickness.
			a.rec.Error += " (queued: the server was busy with other requests)"
			done(fleet.OutcomeBusy, fleet.FaultQueued, breaker.Ignore, "")
			break
		}
		ru.settle(breaker.Failure)
		done(fleet.OutcomeTimeout, fleet.FaultServer, breaker.Failure, a.rec.Error)
	case errors.Is(err, fleet.ErrNoContent):
		ru.settle(breaker.Failure)
		if reason := a.finished(); reason != "" {
			// A legitimately empty answer (a stop sequence that matched at
			// once): another candidate may say more, but no server is to
			// blame; two in a row are the answer.
			a.rec.Error = "empty answer (finish_reason " + reason + ")"
			done(fleet.OutcomeNoContent, fleet.FaultRequest, breaker.Ignore, "")
			if ru.empty != nil {
				return &halt{empty: true}
			}
			ru.empty = a
			break
		}
		a.rec.Error = "empty answer"
		done(fleet.OutcomeNoContent, fleet.FaultServer, breaker.Failure, "empty answer")
	default:
		return ru.failClassified(a, err, se, now, done)
	}
	return nil
}

// failClassified handles a failure by its class (fleet.Classify).
func (ru *run) failClassified(a *attempt, err error, se *fleet.StatusError, now time.Time,
	done func(fleet.Outcome, fleet.Fault, breaker.Result, string)) *halt {
	c := a.e.target.Candidate
	switch fleet.Classify(ru.ctx, err) {
	case fleet.ClassBusy:
		wait := ru.st.fleet.Settings.BusyBackoff
		if se != nil && se.RetryAfter > 0 {
			wait = se.RetryAfter
		}
		ru.r.backOff(c.ID, now.Add(wait))
		done(fleet.OutcomeBusy, fleet.FaultBusy, breaker.Ignore, "")
	case fleet.ClassLoading:
		wait := ru.st.fleet.Settings.BusyBackoff
		if se.RetryAfter > 0 {
			wait = se.RetryAfter
		}
		ru.r.markLoading(c.ID, now, wait)
		a.rec.Error = "the server is loading the model: " + a.rec.Error
		done(fleet.OutcomeBusy, fleet.FaultLoading, breaker.Ignore, "")
	case fleet.ClassNotRetryable:
		ru.settle(breaker.Failure)
		done(fleet.OutcomeNotRetryable, fleet.FaultRequest, breaker.Ignore, "")
		return &halt{failure: fleet.FailureRejected, err: err}
	case fleet.ClassAuth:
		done(fleet.OutcomeNotRetryable, fleet.FaultConfig, breaker.Ignore, "")
		return &halt{failure: fleet.FailureUpstreamAuth,
			err: fmt.Errorf("upstream %s refused Switchyard's credentials (check its api_key_env): %w", c.ID, err)}
	case fleet.ClassConfig:
		why := fmt.Sprintf("%s does not serve model %q (%v): check the candidate's url and model", c.URL, c.Model, err)
		ru.r.markMissing(c.ID, now, clip(why))
		a.rec.Error = clip(why)
		done(fleet.OutcomeError, fleet.FaultConfig, breaker.Ignore, "")
	case fleet.ClassUnsupported:
		ru.r.markUnsupported(c.ID, se.Unsupported)
		done(fleet.OutcomeError, fleet.FaultCapability, breaker.Ignore, "")
	default:
		if errors.Is(err, fleet.ErrModelOutput) {
			// The server says the model's output for this request did not
			// parse: not the server's fault. Another model may do better,
			// once; twice is the request's answer.
			ru.settle(breaker.Failure)
			done(fleet.OutcomeError, fleet.FaultRequest, breaker.Ignore, "")
			if ru.unparsed {
				return &halt{failure: fleet.FailureRequest, err: err}
			}
			ru.unparsed = true
			break
		}
		sig := signature(err)
		if sig == "" {
			ru.settle(breaker.Failure)
			done(fleet.OutcomeError, fleet.FaultServer, breaker.Failure, shortCause(err))
			break
		}
		if s := ru.suspect; s != nil && s.sig == sig {
			// The same failure on a second server: the request's own.
			ru.settle(breaker.Ignore)
			done(fleet.OutcomeError, fleet.FaultRequest, breaker.Ignore, "")
			return &halt{failure: fleet.FailureRequest,
				err: fmt.Errorf("the request failed the same way on %s and %s: %w", s.a.e.target.Candidate.ID, c.ID, err)}
		}
		ru.settle(breaker.Failure)
		// Counted once the next server shows it was not the request.
		a.rec.Outcome, a.rec.Fault = fleet.OutcomeError, fleet.FaultServer
		ru.addAttempt(a.rec)
		ru.suspect = &suspect{a: a, idx: len(ru.rec.Attempts) - 1, sig: sig, cause: shortCause(err)}
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
	}, strings.ToLower(strings.TrimSpace(clip(msg))))
}

// maxErrorText bounds an error text kept in a record or an event.
const maxErrorText = 1024

// clip cuts an error text to maxErrorText bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	n := maxErrorText
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
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
			ru.addAttempt(fleet.Attempt{
				Candidate: e.target.Candidate.ID, Outcome: fleet.OutcomeDemoted, StartedAt: ru.start,
				Error: e.reading.Reason, Demoted: true, Reading: e.reading,
			})
		}
	}
}

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
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// commit hands the attempt to the caller. It returns a nil Stream when the
// attempt lost a race with its own deadline, after recording that as a
// timeout.
func (ru *run) commit(a *attempt) (*Stream, *halt) {
	if !a.stopDeadline() {
		// The deadline fired as the first token arrived; its cancellation
		// is already closing the stream.
		return nil, ru.failAttempt(a, fleet.ErrFirstTokenTimeout)
	}
	// Another server answered: an earlier suspect was the server's fault.
	ru.settle(breaker.Failure)
	if !a.queued {
		// It may have waited behind a request that started with it or
		// after it, and may have ended since.
		a.queued = ru.r.othersFilled(a.e.target.Candidate, a)
	}
	a.committed.Store(true)
	now := time.Now()
	c := a.e.target.Candidate
	a.rec.TTFT = now.Sub(a.rec.StartedAt)
	a.e.br.Done(a.ticket, breaker.Committed, "first token")
	ru.serve(c)
	ru.rec.TTFT = now.Sub(ru.start)
	ev := a.rec
	ev.Outcome = fleet.OutcomeSuccess
	ru.r.observe(fleet.Event{Type: fleet.EventCommit, At: now, RequestID: ru.id, Attempt: &ev})
	return &Stream{ru: ru, a: a, meta: ru.meta(c)}, nil
}

// commitEmpty hands the caller the first empty answer: every candidate
// that answered had nothing to say.
func (ru *run) commitEmpty() *Stream {
	ru.settle(breaker.Failure)
	a := ru.empty
	c := a.e.target.Candidate
	ru.serve(c)
	return &Stream{ru: ru, a: a, meta: ru.meta(c), empty: true}
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
		Attempts: ru.rec.Attempts[:n:n], TTFT: ru.rec.TTFT,
	}
}

func (ru *run) addAttempt(a fleet.Attempt) {
	a.RequestID = ru.id
	a.Order = len(ru.rec.Attempts)
	ru.rec.Attempts = append(ru.rec.Attempts, a)
	ru.r.observe(fleet.Event{Type: fleet.EventAttempt, At: a.StartedAt.Add(a.Duration), RequestID: ru.id, Attempt: &a})
}

// fail ends the request without an answer and records it.
func (ru *run) fail(failure fleet.Failure, err error) *Error {
	ru.settle(breaker.Failure)
	e := &Error{Failure: failure, Err: err, Attempts: ru.rec.Attempts, RequestID: ru.id}
	ru.rec.Status = fleet.StatusFailed
	if failure == fleet.FailureClientGone {
		ru.rec.Status = fleet.StatusClientAbort
	}
	ru.rec.Failure = failure
	ru.rec.Error = clip(e.Error())
	ru.record()
	return e
}

// record writes the request's record and reports it; it returns once the
// record is durable.
func (ru *run) record() {
	ru.rec.Latency = time.Since(ru.start)
	rec := ru.rec
	rec.Attempts = append([]fleet.Attempt(nil), ru.rec.Attempts...)
	ru.r.observe(fleet.Event{Type: fleet.EventRequestDone, At: time.Now(), RequestID: rec.ID, Request: &rec})
	if ru.r.deps.Recorder != nil {
		// The record is written even when the caller is gone; a failure to
		// write is the recorder's to report, not the caller's problem.
		_ = ru.r.deps.Recorder.Record(context.WithoutCancel(ru.ctx), rec)
	}
}

// Stream is a committed answer. Recv replays the events buffered during the
// probe, in order, then passes the upstream's events through. It is read
// by one goroutine; Close may be called from another at any time, and
// unblocks a pending Recv.
type Stream struct {
	ru    *run
	a     *attempt
	meta  Meta
	pos   int
	empty bool // the replay of an empty answer: nothing follows the buffer

	once  sync.Once
	err   error // the terminal error Recv returns once the stream ended
	ended atomic.Bool
	usage atomic.Pointer[fleet.Usage] // the last usage seen; read by a concurrent Close
}

// Meta returns what is known at commit time.
func (s *Stream) Meta() Meta { return s.meta }

// Passthrough tells the upstream stream that its reader forwards Raw and
// needs no text from now on (fleet.Passthrougher): the chunks after the
// ones buffered by the probe carry Raw, and the finish, usage and errors,
// but no Content. A stream that can't does nothing.
func (s *Stream) Passthrough() {
	if p, ok := s.a.stream.(fleet.Passthrougher); ok {
		p.Passthrough()
	}
}

// BeforeWait makes Recv call f before it waits for the upstream
// (fleet.Waiter), on Recv's goroutine, and reports whether the upstream's
// stream can. The time f takes is not the upstream's: the stall deadline
// stops while it runs.
func (s *Stream) BeforeWait(f func()) bool {
	w, ok := s.a.stream.(fleet.Waiter)
	if !ok {
		return false
	}
	w.BeforeWait(func() {
		s.a.timer.Stop()
		f()
		s.a.timer.Reset(s.ru.st.fleet.Settings.StallTimeout)
	})
	return true
}

// Recv returns the next chunk. It returns io.EOF after a complete answer,
// a *CommittedError when the upstream failed after the first token, and
// another error when the caller closed the stream or went away. Before it
// returns io.EOF the request's record is durable.
func (s *Stream) Recv() (fleet.Chunk, error) {
	if s.pos < len(s.a.buf) {
		ch := s.a.buf[s.pos]
		s.a.buf[s.pos] = fleet.Chunk{}
		s.pos++
		if ch.Usage != nil {
			s.usage.Store(ch.Usage)
		}
		return ch, nil
	}
	if s.ended.Load() {
		return fleet.Chunk{}, s.err
	}
	if s.empty {
		return fleet.Chunk{}, s.end(io.EOF)
	}
	s.a.timer.Reset(s.ru.st.fleet.Settings.StallTimeout)
	ch, err := s.a.stream.Recv()
	s.a.timer.Stop()
	if err != nil {
		return fleet.Chunk{}, s.end(err)
	}
	if ch.Usage != nil {
		s.usage.Store(ch.Usage)
	}
	return ch, nil
}

// Close ends the stream. Closing before Recv returned io.EOF is a client
// abort: the upstream connection is closed at once and the request is
// recorded as client_abort. Safe to call more than once.
func (s *Stream) Close() error {
	s.a.cancel(errClosed)
	s.end(errClosed)
	return nil
}

// end finishes the stream once, records it and returns the error Recv
// reports from now on.
func (s *Stream) end(err error) error {
	s.once.Do(func() {
		s.err = s.ru.finish(s, err)
		s.ended.Store(true)
	})
	return s.err
}

func (ru *run) finish(s *Stream, err error) error {
	a := s.a
	cause := a.release()
	c := a.e.target.Candidate
	usage := s.usage.Load()
	if usage != nil {
		ru.rec.PromptTokens = usage.PromptTokens
		ru.rec.CompletionTokens = usage.CompletionTokens
	}
	switch {
	case err == io.EOF:
		if !s.empty {
			a.rec.Outcome = fleet.OutcomeSuccess
			a.e.br.Succeed(a.ticket)
			ru.r.deps.Deadlines.Observe(c, fleet.TTFTSample{TTFT: a.rec.TTFT, Cold: a.rec.Cold, Queued: a.queued, Usage: usage})
			ru.addAttempt(a.rec)
		}
		ru.recordUntried()
		ru.rec.Status = fleet.StatusOK
		ru.record()
		return io.EOF
	case errors.Is(cause, errClosed) || errors.Is(err, errClosed) || ru.ctx.Err() != nil:
		if !s.empty {
			a.rec.Outcome, a.rec.Fault = fleet.OutcomeClientAbort, fleet.FaultClient
			a.rec.Error = "caller went away"
			ru.r.deps.Deadlines.Observe(c, fleet.TTFTSample{TTFT: a.rec.TTFT, Cold: a.rec.Cold, Queued: a.queued})
			ru.addAttempt(a.rec)
		}
		ru.rec.Status = fleet.StatusClientAbort
		ru.rec.Failure = fleet.FailureClientGone
		ru.rec.Error = "caller went away"
		ru.record()
		if ru.ctx.Err() != nil {
			return ru.ctx.Err()
		}
		return errClosed
	}
	if errors.Is(cause, fleet.ErrStalled) {
		err = fmt.Errorf("%w (no data for %v)", fleet.ErrStalled, ru.st.fleet.Settings.StallTimeout)
	}
	a.rec.Error = clip(err.Error())
	if errors.Is(err, fleet.ErrModelOutput) {
		// The model's output did not parse: the request's failure, not
		// the server's; its breaker hears nothing.
		a.rec.Fault = fleet.FaultRequest
	} else {
		a.e.br.Fail(a.ticket, shortCause(err))
		a.rec.Fault = fleet.FaultServer
	}
	if ru.aggregate {
		// Nothing reached the caller yet: this is an ordinary failure and
		// the request goes on with the next candidate, unless the model's
		// output failed to parse twice.
		a.rec.Outcome = fleet.OutcomeError
		ru.addAttempt(a.rec)
		ru.rec.ServedCandidate, ru.rec.ServedModel, ru.rec.IsFallback, ru.rec.TTFT = "", "", false, 0
		if a.rec.Fault == fleet.FaultRequest {
			if ru.unparsed {
				return ru.fail(fleet.FailureRequest, err)
			}
			ru.unparsed = true
		}
		return errRetry
	}
	a.rec.Outcome = fleet.OutcomeFailedAfterCommit
	ru.addAttempt(a.rec)
	ce := &CommittedError{Candidate: c.ID, Err: err}
	ru.rec.Status = fleet.StatusUpstreamErrorAfterCommit
	ru.rec.Error = clip(ce.Error())
	ru.record()
	return ce
}

// collect reads the whole stream into one Answer and closes it.
func (s *Stream) collect() (*Answer, error) {
	defer s.Close()
	ans := &Answer{Meta: s.meta, Model: s.meta.Candidate.Model}
	ans.Message.Role = "assistant"
	var content, thinking strings.Builder
	var logprobs []byte
	for first := true; ; first = false {
		ch, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		content.WriteString(ch.Content)
		thinking.WriteString(ch.Reasoning)
		for _, tc := range ch.ToolCalls {
			ans.Message.ToolCalls = fleet.MergeToolCall(ans.Message.ToolCalls, tc)
		}
		if ch.FinishReason != "" {
			ans.FinishReason = ch.FinishReason
		}
		if ch.Usage != nil {
			ans.Usage = ch.Usage
		}
		if ch.Model != "" {
			ans.Model = ch.Model
		}
		if len(ch.Embeddings) > 0 {
			ans.Embeddings = ch.Embeddings
		}
		logprobs = appendArray(logprobs, ch.Logprobs)
		if first || ch.FinishReason != "" || ch.Usage != nil {
			ans.Fields = mergeFields(ans.Fields, ch.Raw)
		}
	}
	if logprobs != nil {
		ans.Logprobs = append(logprobs, ']')
	}
	ans.Message.Content = content.String()
	ans.Message.Thinking = thinking.String()
	return ans, nil
}

// appendArray appends the elements of the JSON array arr to the open array
// dst ("[a,b"), starting it when dst is nil.
func appendArray(dst []byte, arr json.RawMessage) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return dst
	}
	inner := bytes.TrimSpace(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		if dst == nil {
			dst = []byte{'['}
		}
		return dst
	}
	if dst == nil {
		dst = []byte{'['}
	} else if len(dst) > 1 {
		dst = append(dst, ',')
	}
	return append(dst, inner...)
}

// mergeFields puts the top-level fields of the JSON object raw over
// fields; raw that is not an object changes nothing.
func mergeFields(fields map[string]json.RawMessage, raw []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return fields
	}
	if fields == nil {
		return m
	}
	maps.Copy(fields, m)
	return fields
}
