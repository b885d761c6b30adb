package router

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// StatusClientClosed is the HTTP status recorded for a caller that went away
// (nginx's 499).
const StatusClientClosed = 499

// Meta is what a caller learns at commit time: enough for response
// headers.
type Meta struct {
	RequestID string
	Candidate fleet.Candidate // the one serving
	Fallback  bool            // served by another than the first choice
	// Attempts are the attempts that failed or were skipped before the
	// serving one.
	Attempts []fleet.Attempt
	// TTFT is the time from the request's start to its first token.
	TTFT time.Duration
}

// Stream routes a streaming request. It returns once an attempt committed
// (its first token arrived) with a Stream that replays what the attempt
// buffered and then passes the rest through; or an *Error when no
// candidate produced a first token. The caller must Close the Stream.
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
}

// Complete routes a non-streaming request (SPEC 2.3). Upstreams are still
// read as streams, so the first-token deadline catches stalls; and since
// nothing reaches the caller before the whole answer, an attempt that
// breaks after its first token falls back like any other failure.
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
			err = &Error{Status: StatusClientClosed, Err: err, Attempts: ru.rec.Attempts}
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
	req       *fleet.Request
	rec       fleet.RequestRecord
	start     time.Time
	plan      plan
	next      int
	aggregate bool
	hedged    bool // a hedge was started: at most one per request (SPEC 3)
}

func (r *Router) begin(ctx context.Context, req *fleet.Request, aggregate bool) (*run, error) {
	if req.ID == "" {
		req.ID = r.deps.NewID()
	}
	st := r.state.Load()
	now := time.Now()
	ru := &run{
		r: r, st: st, ctx: ctx, req: req, start: now, aggregate: aggregate,
		rec: fleet.RequestRecord{
			ID: req.ID, StartedAt: now, Protocol: req.Protocol, Stream: req.Stream,
			Thinking: req.Thinking, RequestedModel: req.Model,
		},
	}
	r.observe(fleet.Event{Type: fleet.EventRequestStarted, At: now, RequestID: req.ID})
	p, err := r.plan(st, req, now)
	ru.rec.Thinking = req.Thinking
	if err != nil {
		status := 503
		if errors.Is(err, fleet.ErrUnknownModel) {
			status = 404
		}
		return nil, ru.fail(status, err)
	}
	ru.plan = p
	return ru, nil
}

// commitNext tries the remaining candidates in order until one commits.
func (ru *run) commitNext() (*Stream, error) {
	for ru.next < len(ru.plan.entries) {
		if ru.ctx.Err() != nil {
			return nil, ru.fail(StatusClientClosed, ru.ctx.Err())
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
		if ru.st.fleet.Settings.Hedge && !ru.hedged && ru.next < len(ru.plan.entries) {
			w, h := ru.hedge(a)
			if h != nil {
				return nil, ru.fail(h.status, h.err)
			}
			if w == nil {
				continue
			}
			a = w
		} else if err := a.probe(ru.req); err != nil {
			if h := ru.failAttempt(a, err); h != nil {
				return nil, ru.fail(h.status, h.err)
			}
			continue
		}
		s, h := ru.commit(a)
		if h != nil {
			return nil, ru.fail(h.status, h.err)
		}
		if s != nil {
			return s, nil
		}
	}
	if ru.ctx.Err() != nil {
		return nil, ru.fail(StatusClientClosed, ru.ctx.Err())
	}
	if len(ru.rec.Attempts) == 0 {
		return nil, ru.fail(503, fleet.ErrNoCandidates)
	}
	return nil, ru.fail(503, ErrAllFailed)
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
	// beatDeadline is set once the first-token deadline was stopped
	// before it fired (see stopDeadline).
	deadlineStopped, beatDeadline bool
	stream                        fleet.Stream
	buf                           []fleet.Chunk
}

func (ru *run) startAttempt(e entry, t breaker.Ticket) *attempt {
	c := e.target.Candidate
	d, cold := ru.r.deps.Deadlines.FirstToken(c, ru.st.fleet.Settings.FirstTokenTimeout)
	a := &attempt{e: e, ticket: t}
	a.rec = fleet.Attempt{
		RequestID: ru.req.ID, Candidate: c.ID, StartedAt: time.Now(),
		Deadline: d, Cold: cold, Demoted: e.demoted, Reading: e.reading,
	}
	a.ctx, a.cancel = context.WithCancelCause(ru.ctx)
	a.timer = time.AfterFunc(d, a.expire)
	return a
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
	s, err := a.e.target.Backend.ChatStream(a.ctx, a.e.target.Candidate, req)
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
		a.buf = append(a.buf, ch)
		if ch.IsFirstToken() {
			return nil
		}
	}
}

// release ends the attempt's upstream call: it stops the timer, cancels
// the context (closing the connection) and closes the stream. It returns
// the context's cause as it was before, nil if it was not cancelled.
func (a *attempt) release() error {
	a.timer.Stop()
	var cause error
	if a.ctx.Err() != nil {
		cause = context.Cause(a.ctx)
	}
	a.cancel(errAttemptOver)
	if a.stream != nil {
		a.stream.Close()
	}
	a.rec.Duration = time.Since(a.rec.StartedAt)
	return cause
}

// halt says that routing must stop, and with what.
type halt struct {
	status int
	err    error
}

// failAttempt records a failed probe and reports it to the breaker. It
// returns a halt when routing must stop (client abort, not-retryable); the
// caller ends the request with it once every attempt is recorded.
func (ru *run) failAttempt(a *attempt, err error) *halt {
	cause := a.release()
	c := a.e.target.Candidate
	if errors.Is(cause, fleet.ErrFirstTokenTimeout) || errors.Is(cause, fleet.ErrHedgeLost) {
		err = cause
	}
	a.rec.Error = err.Error()
	var se *fleet.StatusError
	if errors.As(err, &se) {
		a.rec.HTTPStatus = se.StatusCode
	}
	switch {
	case ru.ctx.Err() != nil:
		a.rec.Outcome = fleet.OutcomeClientAbort
		a.rec.Error = "caller went away"
		a.e.br.Done(a.ticket, breaker.Ignore, "")
		ru.addAttempt(a.rec)
		return &halt{StatusClientClosed, ru.ctx.Err()}
	case errors.Is(err, fleet.ErrHedgeLost):
		a.rec.Outcome = fleet.OutcomeHedgeLost
		a.e.br.Done(a.ticket, breaker.Ignore, "")
	case errors.Is(err, fleet.ErrFirstTokenTimeout):
		a.rec.Outcome = fleet.OutcomeTimeout
		a.rec.Error = fmt.Sprintf("no first token in %v", roundDuration(a.rec.Duration))
		a.e.br.Done(a.ticket, breaker.Failure, a.rec.Error)
	case errors.Is(err, fleet.ErrNoContent):
		a.rec.Outcome = fleet.OutcomeNoContent
		a.e.br.Done(a.ticket, breaker.Failure, "empty answer")
	default:
		switch fleet.Classify(ru.ctx, err) {
		case fleet.ClassBusy:
			a.rec.Outcome = fleet.OutcomeBusy
			a.e.br.Done(a.ticket, breaker.Ignore, "")
			wait := ru.st.fleet.Settings.BusyBackoff
			if se != nil && se.RetryAfter > 0 {
				wait = se.RetryAfter
			}
			ru.r.backOff(c.ID, time.Now().Add(wait))
		case fleet.ClassNotRetryable:
			a.rec.Outcome = fleet.OutcomeNotRetryable
			a.e.br.Done(a.ticket, breaker.Ignore, "")
			ru.addAttempt(a.rec)
			return &halt{se.StatusCode, err}
		case fleet.ClassAuth:
			a.rec.Outcome = fleet.OutcomeNotRetryable
			a.e.br.Done(a.ticket, breaker.Ignore, "")
			ru.addAttempt(a.rec)
			return &halt{502, fmt.Errorf("upstream %s refused Switchyard's credentials (check its api_key_env): %w", c.ID, err)}
		default:
			a.rec.Outcome = fleet.OutcomeError
			a.e.br.Done(a.ticket, breaker.Failure, shortCause(err))
		}
	}
	ru.addAttempt(a.rec)
	return nil
}

// recordUntried records the excluded and demoted candidates whose turn never
// came because another served first (SPEC 2.1: every exclusion and demotion
// is recorded), after the attempts that ran.
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
	a.committed.Store(true)
	now := time.Now()
	c := a.e.target.Candidate
	a.rec.TTFT = now.Sub(a.rec.StartedAt)
	a.e.br.Done(a.ticket, breaker.Committed, "first token")
	ru.rec.ServedCandidate = c.ID
	ru.rec.ServedModel = c.Model
	ru.rec.IsFallback = c.ID != ru.plan.preferred
	ru.rec.TTFT = now.Sub(ru.start)
	ev := a.rec
	ev.Outcome = fleet.OutcomeSuccess
	ru.r.observe(fleet.Event{Type: fleet.EventCommit, At: now, RequestID: ru.req.ID, Attempt: &ev})
	return &Stream{ru: ru, a: a, meta: Meta{
		RequestID: ru.req.ID, Candidate: c, Fallback: ru.rec.IsFallback,
		Attempts: ru.rec.Attempts[:len(ru.rec.Attempts):len(ru.rec.Attempts)], TTFT: ru.rec.TTFT,
	}}, nil
}

func (ru *run) addAttempt(a fleet.Attempt) {
	a.RequestID = ru.req.ID
	a.Order = len(ru.rec.Attempts)
	ru.rec.Attempts = append(ru.rec.Attempts, a)
	ru.r.observe(fleet.Event{Type: fleet.EventAttempt, At: a.StartedAt.Add(a.Duration), RequestID: ru.req.ID, Attempt: &a})
}

// fail ends the request without an answer and records it.
func (ru *run) fail(status int, err error) *Error {
	e := &Error{Status: status, Err: err, Attempts: ru.rec.Attempts}
	ru.rec.Status = fleet.StatusFailed
	if status == StatusClientClosed {
		ru.rec.Status = fleet.StatusClientAbort
	}
	ru.rec.HTTPStatus = status
	ru.rec.Error = e.Error()
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
	ru   *run
	a    *attempt
	meta Meta
	pos  int

	once  sync.Once
	err   error // the terminal error Recv returns once the stream ended
	ended atomic.Bool
	usage atomic.Pointer[fleet.Usage] // the last usage seen; read by a concurrent Close
}

// Meta returns what is known at commit time.
func (s *Stream) Meta() Meta { return s.meta }

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
		a.rec.Outcome = fleet.OutcomeSuccess
		a.e.br.Succeed(a.ticket)
		ru.r.deps.Deadlines.Observe(c, a.rec.TTFT, a.rec.Cold, usage)
		ru.addAttempt(a.rec)
		ru.recordUntried()
		ru.rec.Status = fleet.StatusOK
		ru.rec.HTTPStatus = 200
		ru.record()
		return io.EOF
	case errors.Is(cause, errClosed) || errors.Is(err, errClosed) || ru.ctx.Err() != nil:
		a.rec.Outcome = fleet.OutcomeClientAbort
		a.rec.Error = "caller went away"
		ru.r.deps.Deadlines.Observe(c, a.rec.TTFT, a.rec.Cold, nil)
		ru.addAttempt(a.rec)
		ru.rec.Status = fleet.StatusClientAbort
		ru.rec.HTTPStatus = StatusClientClosed
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
	a.e.br.Fail(a.ticket, shortCause(err))
	a.rec.Error = err.Error()
	if ru.aggregate {
		// Nothing reached the caller yet: this is an ordinary failure and
		// the request goes on with the next candidate.
		a.rec.Outcome = fleet.OutcomeError
		ru.addAttempt(a.rec)
		ru.rec.ServedCandidate, ru.rec.ServedModel, ru.rec.IsFallback, ru.rec.TTFT = "", "", false, 0
		return errRetry
	}
	a.rec.Outcome = fleet.OutcomeFailedAfterCommit
	ru.addAttempt(a.rec)
	ce := &CommittedError{Candidate: c.ID, Err: err}
	ru.rec.Status = fleet.StatusUpstreamErrorAfterCommit
	ru.rec.HTTPStatus = 200
	ru.rec.Error = ce.Error()
	ru.record()
	return ce
}

// collect reads the whole stream into one Answer and closes it.
func (s *Stream) collect() (*Answer, error) {
	defer s.Close()
	ans := &Answer{Meta: s.meta, Model: s.meta.Candidate.Model}
	ans.Message.Role = "assistant"
	var content, thinking strings.Builder
	for {
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
	}
	ans.Message.Content = content.String()
	ans.Message.Thinking = thinking.String()
	return ans, nil
}
