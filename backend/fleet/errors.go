package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrTruncated: the stream ended (EOF) without the end marker of its wire
	// format. Never a success, whatever the transport said.
	ErrTruncated = errors.New("upstream stream ended without a finish marker")
	// ErrNoContent: the stream ended cleanly without a first token.
	ErrNoContent = errors.New("upstream stream ended without content")
	// ErrFirstTokenTimeout: no first token within the attempt's deadline.
	ErrFirstTokenTimeout = errors.New("no first token before the deadline")
	// ErrStalled: no chunk for the stall timeout after commit.
	ErrStalled = errors.New("upstream stalled after the first token")
	// ErrHedgeLost: the attempt was cancelled because a hedged attempt
	// produced its first token earlier.
	ErrHedgeLost = errors.New("lost the first-token race to a hedged attempt")
	// ErrUnknownModel: the caller named a model that is neither a candidate
	// nor an alias.
	ErrUnknownModel = errors.New("unknown model")
	// ErrNoCandidates: no enabled candidate can serve the request.
	ErrNoCandidates = errors.New("no candidate can serve this request")
)

// StatusError is an HTTP error status answered by an upstream before any
// stream began.
type StatusError struct {
	StatusCode int
	Message    string // the upstream's error message, or the start of its body
	// Busy is set by the adapter when the answer means "overloaded, try
	// elsewhere": 429, or 503 with Retry-After or Ollama's "server busy".
	Busy bool
	// RetryAfter is the upstream's Retry-After, zero when absent.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("upstream HTTP %d", e.StatusCode)
	}
	return fmt.Sprintf("upstream HTTP %d: %s", e.StatusCode, e.Message)
}

// EventError is an error the upstream reported inside an already started
// stream: an OpenAI/vLLM data: {"error":...} event, a legacy llama.cpp
// error: line, or an Ollama {"error":"..."} line.
type EventError struct {
	Message string
	Code    string // as the upstream sent it (string or number), may be empty
}

func (e *EventError) Error() string { return "upstream error event: " + e.Message }

// MalformedError is upstream output that does not parse as its wire format.
type MalformedError struct {
	Detail string
	Err    error
}

func (e *MalformedError) Error() string {
	if e.Err != nil {
		return "malformed upstream output: " + e.Detail + ": " + e.Err.Error()
	}
	return "malformed upstream output: " + e.Detail
}

func (e *MalformedError) Unwrap() error { return e.Err }

// Class says what an attempt's error means for routing.
type Class int

const (
	// ClassTransient: the candidate failed; count it on the breaker and try
	// the next one (before commit).
	ClassTransient Class = iota
	// ClassBusy: the candidate is overloaded; skip it and back it off
	// without counting a breaker failure.
	ClassBusy
	// ClassNotRetryable: the request itself is wrong (400, 413, 422) and
	// would fail anywhere; return it to the caller at once.
	ClassNotRetryable
	// ClassAuth: 401/403, a configuration problem; return at once, shown
	// loudly, never counted.
	ClassAuth
	// ClassAbort: the caller went away.
	ClassAbort
)

func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassBusy:
		return "busy"
	case ClassNotRetryable:
		return "not_retryable"
	case ClassAuth:
		return "auth"
	case ClassAbort:
		return "client_abort"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Classify maps an attempt's error to its routing class. It looks only at
// types and sentinels (SPEC 2.2), never at message text. A context error is
// a client abort only when the caller's own context is done: pass callerCtx
// so a deadline of the router's own is not mistaken for one.
func Classify(callerCtx context.Context, err error) Class {
	if callerCtx != nil && callerCtx.Err() != nil {
		return ClassAbort
	}
	var se *StatusError
	if errors.As(err, &se) {
		return classifyStatus(se)
	}
	return ClassTransient
}

func classifyStatus(se *StatusError) Class {
	if se.Busy {
		return ClassBusy
	}
	switch se.StatusCode {
	case 400, 413, 422:
		return ClassNotRetryable
	case 401, 403:
		return ClassAuth
	case 429:
		return ClassBusy
	}
	return ClassTransient
}
