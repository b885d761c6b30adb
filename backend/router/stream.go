package router

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

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
	if p := a.pulse.Load(); p != nil && p.Err == nil && !p.Idle {
		// Its server said it was busy while the attempt waited.
		a.queued = true
	}
	if a.buf[len(a.buf)-1].Whole {
		// A whole answer asked for unstreamed: its time is the answer's,
		// not a first token's, and no sample of the server's TTFT.
		a.queued = true
	}
	if !a.queued {
		// It may have waited behind a request that started with it or
		// after it, and may have ended since.
		a.queued = ru.r.othersFilled(a.e.target.Candidate, a)
	}
	now := time.Now()
	c := a.e.target.Candidate
	a.rec.TTFT = now.Sub(a.rec.StartedAt)
	a.e.br.Done(a.ticket, breaker.Committed, "first token")
	ru.serve(c)
	ru.rec.TTFT = now.Sub(ru.start)
	ru.committed = a.rec
	ru.committed.Outcome = fleet.OutcomeSuccess
	ru.r.observe(fleet.Event{Type: fleet.EventCommit, At: now, RequestID: ru.id, Attempt: &ru.committed})
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
	recvd fleet.Chunk                 // what Recv reads into
	// beforeEnd is the reader's BeforeWait function, which Recv also calls
	// before it records the end of the answer.
	beforeEnd func()
}

// Meta returns what is known at commit time, for the caller to read, not
// change. A pointer: a copy of it in a handler's frame was part of the
// stack an open stream holds.
func (s *Stream) Meta() *Meta { return &s.meta }

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
// is pushed back by it. Bytes read without content (keep-alive comments)
// do not push it back: the stall timeout counts content.
//
// Recv calls f too once the upstream's answer has ended, before it makes
// the record durable (a write to the history's journal, or a wait for a
// commit): what the reader holds is then sent while the record is
// written, not after. An answer whose events all came in one read used to
// reach the caller only after its record, so its first token waited for
// the history.
func (s *Stream) BeforeWait(f func()) bool {
	w, ok := s.a.stream.(fleet.Waiter)
	if !ok {
		return false
	}
	s.beforeEnd = f
	w.BeforeWait(func() {
		s.a.pause()
		start := time.Since(s.a.born)
		f()
		s.a.resume(start)
	})
	return true
}

// Recv returns the next chunk. It returns io.EOF after a complete answer,
// a *CommittedError when the upstream failed after the first token, and
// another error when the caller closed the stream or went away. Before it
// returns io.EOF the request's record is durable.
func (s *Stream) Recv() (fleet.Chunk, error) {
	// Into the stream's own chunk: one of Recv's would escape (RecvInto
	// hands it to the upstream's stream), an allocation a chunk.
	err := s.RecvInto(&s.recvd)
	c := s.recvd
	s.recvd = fleet.Chunk{}
	return c, err
}

// RecvInto is Recv with the chunk written to *c (fleet.IntoReceiver): the
// reader that keeps one chunk for the whole answer (httpapi's pump) has
// no chunk copied through the frames of the read.
func (s *Stream) RecvInto(c *fleet.Chunk) error {
	if s.pos < len(s.a.buf) {
		*c = s.a.buf[s.pos]
		s.a.buf[s.pos] = fleet.Chunk{}
		s.pos++
	} else {
		if s.ended.Load() {
			*c = fleet.Chunk{}
			return s.err
		}
		if s.empty {
			*c = fleet.Chunk{}
			return s.endRead(io.EOF)
		}
		s.a.wait(s.ru.st.fleet.Settings.StallTimeout)
		err := s.recvUpstream(c)
		s.a.pause()
		if err != nil {
			*c = fleet.Chunk{}
			return s.endRead(err)
		}
	}
	if c.Usage != nil {
		s.usage.Store(c.Usage)
	}
	return nil
}

// recvUpstream reads the upstream's next chunk into *c, without a copy
// where its stream can (fleet.IntoReceiver).
func (s *Stream) recvUpstream(c *fleet.Chunk) error {
	if into, ok := s.a.stream.(fleet.IntoReceiver); ok {
		return into.RecvInto(c)
	}
	return s.recvCopy(c)
}

// recvCopy is recvUpstream for a stream that returns its chunk: apart,
// so that the copy is in no frame of the other's read.
//
//go:noinline
func (s *Stream) recvCopy(c *fleet.Chunk) (err error) {
	*c, err = s.a.stream.Recv()
	return err
}

// Close ends the stream. Closing before Recv returned io.EOF is a client
// abort: the upstream connection is closed at once and the request is
// recorded as client_abort. Safe to call more than once.
func (s *Stream) Close() error {
	s.a.cancel(errClosed)
	s.end(errClosed)
	return nil
}

// endRead ends the stream on Recv's goroutine, where the reader's
// BeforeWait function may run: it does, first, so that what the reader
// holds goes out before the record is written.
func (s *Stream) endRead(err error) error {
	if s.beforeEnd != nil && !s.ended.Load() {
		s.beforeEnd()
	}
	return s.end(err)
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
	if usage := s.usage.Load(); usage != nil {
		ru.rec.PromptTokens = usage.PromptTokens
		ru.rec.CompletionTokens = usage.CompletionTokens
	}
	v := ru.conclude(a, err, true, errors.Is(err, errClosed), s)
	switch v.outcome {
	case fleet.OutcomeSuccess, "":
		ru.recordUntried()
		ru.rec.Status = fleet.StatusOK
		ru.record()
		return io.EOF
	case fleet.OutcomeClientAbort, fleet.OutcomeShutdown:
		ru.rec.Status, ru.rec.Failure, ru.rec.Error = fleet.StatusClientAbort, fleet.FailureClientGone, "caller went away"
		if v.outcome == fleet.OutcomeShutdown {
			ru.rec.Status, ru.rec.Failure, ru.rec.Error = fleet.StatusShutdown, fleet.FailureShutdown, a.rec.Error
		}
		ru.record()
		if ru.ctx.Err() != nil {
			return ru.ctx.Err()
		}
		return errClosed
	}
	if v.retry {
		// Nothing reached the caller yet: the request goes on with the
		// next candidate, unless it must stop.
		ru.rec.ServedCandidate, ru.rec.ServedModel, ru.rec.IsFallback, ru.rec.TTFT = "", "", false, 0
		if v.haltFailure != "" {
			return ru.fail(v.haltFailure, v.haltErr)
		}
		return errRetry
	}
	if ru.aggregate && v.haltFailure != "" {
		return ru.fail(v.haltFailure, v.haltErr)
	}
	ce := &CommittedError{Candidate: a.e.target.Candidate.ID, Err: v.err}
	ru.rec.Status = fleet.StatusUpstreamErrorAfterCommit
	ru.rec.Error = clip(ce.Error())
	ru.record()
	return ce
}
