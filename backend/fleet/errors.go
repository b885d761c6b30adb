package fleet

import (
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
	// ErrModelOutput matches a failure that says the server could not make
	// an answer of what the model produced for this request: llama.cpp's
	// "The model produced output that does not match the expected ...
	// format", or an Ollama answer that ends without done:true and without
	// an error, which is how Ollama hides the same failure. It is the
	// request's failure, not the server's (docs/DESIGN.md, "Whose fault is
	// it"). Adapters set it; see StatusError.Output and EventError.Output.
	ErrModelOutput = errors.New("the server could not parse the model's output for this request")
	// ErrShutdown is the cause of a request context that ended because
	// Switchyard is shutting down: the caller did not go away.
	ErrShutdown = errors.New("switchyard is shutting down")
)

// StatusError is an HTTP error status answered by an upstream before any
// stream began.
type StatusError struct {
	StatusCode int
	Message    string // the upstream's error message, or the start of its body
	// Type and Code are the upstream's error type and code in OpenAI's
	// dialect ({"error":{"type":"exceed_context_size_error","code":400}}),
	// "" when it gave none: a caller of that dialect gets them back.
	Type, Code string
	// Busy is set by the adapter when the answer means "overloaded, try
	// elsewhere": 429, or 503 with Retry-After or Ollama's "server busy".
	Busy bool
	// RetryAfter is the upstream's Retry-After, zero when absent.
	RetryAfter time.Duration
	// Loading is set by the adapter when the server is still loading the
	// model (llama.cpp's 503 "Loading model"): not a failure, and over as
	// soon as the server says it is healthy (docs/DESIGN.md, "Busy is not
	// dead").
	Loading bool
	// Unsupported names what the request asked for that the model can't
	// do, when the server said so ("thinking": Ollama's 400 "does not
	// support thinking"). The router should have known; it moves on.
	Unsupported string
	// Output is set by the adapter when the server says the model's output
	// could not be parsed: the error then matches ErrModelOutput.
	Output bool
	// Crash is set by the adapter when the server says the process that
	// ran the model died on this request (Ollama's 500 "llama-server
	// process has terminated"); the server starts it again for the next
	// one (docs/DESIGN.md, "A request that crashes the runner").
	Crash bool
	// Invalid is set by the adapter when the server says the request
	// itself is wrong, whatever the status: Ollama answers a bad format or
	// an option of the wrong type with 500 when the request streams (and
	// with 400 when it does not). It fails anywhere, as a 4xx does.
	Invalid bool
}

// Is makes a StatusError with Output match ErrModelOutput.
func (e *StatusError) Is(target error) bool { return e.Output && target == ErrModelOutput }

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
	// Output is set by the adapter when the server says the model's output
	// could not be parsed: the error then matches ErrModelOutput.
	Output bool
}

func (e *EventError) Error() string { return "upstream error event: " + e.Message }

// Is makes an EventError with Output match ErrModelOutput.
func (e *EventError) Is(target error) bool { return e.Output && target == ErrModelOutput }

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
