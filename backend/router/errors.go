package router

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Error is returned when a request got no answer: the model is unknown, no
// candidate could serve, an upstream refused the request, the request
// failed the same way on two candidates, every candidate failed, or the
// caller went away. It names each attempt. The edge turns Failure into the
// caller's protocol.
type Error struct {
	Failure  fleet.Failure
	Err      error // the cause: fleet.ErrUnknownModel, a *fleet.StatusError, ErrAllFailed, context.Canceled...
	Attempts []fleet.Attempt
	// RequestID is the id the request is recorded under.
	RequestID string
	// RetryAfter is how long until a candidate that could serve this
	// request may be tried again (the shortest breaker cool-down, busy
	// back-off or loading wait among them); zero when one may be tried
	// now or nothing is known.
	RetryAfter time.Duration
}

// ErrAllFailed is the cause of an Error when every candidate failed.
var ErrAllFailed = errors.New("all candidates failed")

// ErrUnsupported is the cause of an Error when no candidate can do what
// the request asks.
var ErrUnsupported = errors.New("no candidate can do what this request asks")

func (e *Error) Error() string {
	if e.Failure == fleet.FailureRejected && len(e.Attempts) > 0 {
		// Err is the refusal of the last attempt: said once, by whom.
		return Describe(e.Attempts[len(e.Attempts)-1])
	}
	var b strings.Builder
	b.WriteString(e.Err.Error())
	sep := ": "
	for i, a := range e.Attempts {
		if e.namedByErr(i, a) {
			continue
		}
		b.WriteString(sep)
		b.WriteString(Describe(a))
		sep = "; "
	}
	return b.String()
}

// namedByErr reports whether Err already says how attempt i ended: the
// attempt refused Switchyard's credentials, or failed the request's own
// way (which names both candidates), so its words are not said twice.
func (e *Error) namedByErr(i int, a fleet.Attempt) bool {
	switch e.Failure {
	case fleet.FailureUpstreamAuth:
		return i == len(e.Attempts)-1
	case fleet.FailureRequest:
		return a.Outcome == fleet.OutcomeError && a.Fault == fleet.FaultRequest
	}
	return false
}

func (e *Error) Unwrap() error { return e.Err }

// Describe says in a few words why an attempt ended, for error messages and
// the UI: "qwen3-8b: no first token in 2.1s".
func Describe(a fleet.Attempt) string {
	switch a.Outcome {
	case fleet.OutcomeTimeout:
		return fmt.Sprintf("%s: no first token in %v", a.Candidate, roundDuration(a.Duration))
	case fleet.OutcomeNoContent:
		return a.Candidate + ": empty answer"
	case fleet.OutcomeSuccess:
		return a.Candidate + ": ok"
	}
	if a.Fault == fleet.FaultCapability {
		return a.Candidate + ": " + strings.TrimPrefix(a.Error, "skipped: ")
	}
	if a.Error != "" {
		return fmt.Sprintf("%s: %s", a.Candidate, a.Error)
	}
	return fmt.Sprintf("%s: %s", a.Candidate, a.Outcome)
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// CommittedError is an upstream failure after the stream was committed:
// the caller already has part of the answer, so nothing is retried. It
// reaches the caller as an in-stream error in its protocol.
type CommittedError struct {
	Candidate string
	Err       error
}

func (e *CommittedError) Error() string {
	return fmt.Sprintf("%s failed after its first token: %v", e.Candidate, e.Err)
}

func (e *CommittedError) Unwrap() error { return e.Err }
