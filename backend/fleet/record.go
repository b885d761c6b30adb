package fleet

import "time"

// Outcome is how one attempt ended (docs/DESIGN.md, "Tables":
// attempts.outcome).
type Outcome string

const (
	OutcomeSuccess           Outcome = "success"
	OutcomeError             Outcome = "error"
	OutcomeTimeout           Outcome = "timeout"
	OutcomeNoContent         Outcome = "no_content"
	OutcomeBusy              Outcome = "busy"
	OutcomeSkippedOpen       Outcome = "skipped_open"
	OutcomeClientAbort       Outcome = "client_abort"
	OutcomeNotRetryable      Outcome = "not_retryable"
	OutcomeFailedAfterCommit Outcome = "failed_after_commit"
	OutcomeHedgeLost         Outcome = "hedge_lost"
	// OutcomeDemoted: the candidate was moved to the end of the order for
	// GPU memory pressure and another served before its turn came. Its
	// attempt row carries the reading (every demotion is
	// recorded with its reason).
	OutcomeDemoted Outcome = "demoted"
	// OutcomeShutdown: Switchyard itself cut the attempt short while
	// shutting down; nobody's fault.
	OutcomeShutdown Outcome = "shutdown"
)

// Fault says whose fault an attempt's failure was (docs/DESIGN.md, "Whose
// fault is it"). Only FaultServer counts against the candidate's breaker.
type Fault string

const (
	// FaultNone: the attempt did not fail (success, demoted, skipped, lost
	// a hedge).
	FaultNone Fault = ""
	// FaultServer: the candidate failed; counted on its breaker.
	FaultServer Fault = "server"
	// FaultBusy: the server said it is overloaded (429, 503 busy).
	FaultBusy Fault = "busy"
	// FaultQueued: no first token in time while the server was busy with
	// other requests: the attempt waited in its queue.
	FaultQueued Fault = "queued"
	// FaultLoading: the server was loading the model.
	FaultLoading Fault = "loading"
	// FaultRequest: the request's own fault: the upstream said so (4xx),
	// it failed the same way on a second candidate, or the answer was
	// legitimately empty.
	FaultRequest Fault = "request"
	// FaultConfig: Switchyard's configuration is wrong for the candidate:
	// its model is not found (404) or its credentials are refused.
	FaultConfig Fault = "config"
	// FaultCapability: the model can't do what the request asks (thinking
	// on a model without it): a routing mistake.
	FaultCapability Fault = "capability"
	// FaultClient: the caller went away.
	FaultClient Fault = "client"
)

// Failure says why a request got no answer; the edge turns it into the
// caller's protocol (an HTTP status and an error body).
type Failure string

const (
	// FailureNone: the request was answered (or failed after commit).
	FailureNone Failure = ""
	// FailureUnknownModel: the caller named a model that is neither a
	// candidate nor an alias.
	FailureUnknownModel Failure = "unknown_model"
	// FailureNoCandidates: no enabled candidate can serve the request.
	FailureNoCandidates Failure = "no_candidates"
	// FailureUnavailable: every candidate failed, was busy or was skipped.
	FailureUnavailable Failure = "unavailable"
	// FailureRejected: an upstream refused the request as wrong (its 4xx,
	// kept in the record's attempts).
	FailureRejected Failure = "rejected"
	// FailureRequest: the request failed the same way on two candidates:
	// it is the request's fault, not the servers'.
	FailureRequest Failure = "request"
	// FailureUnsupported: no candidate can do what the request asks (a
	// capability its model lacks, a field its dialect can't carry).
	FailureUnsupported Failure = "unsupported"
	// FailureUpstreamAuth: an upstream refused Switchyard's credentials.
	FailureUpstreamAuth Failure = "upstream_auth"
	// FailureClientGone: the caller went away before the answer.
	FailureClientGone Failure = "client_gone"
	// FailureShutdown: Switchyard cut the request short while shutting
	// down.
	FailureShutdown Failure = "shutdown"
)

// Status is how a whole request ended (docs/DESIGN.md, "Tables":
// requests.status).
type Status string

const (
	StatusOK                       Status = "ok"
	StatusFailed                   Status = "error"
	StatusClientAbort              Status = "client_abort"
	StatusUpstreamErrorAfterCommit Status = "upstream_error_after_commit"
	// StatusShutdown: Switchyard cut the request short while shutting
	// down (the caller was still there).
	StatusShutdown Status = "shutdown"
)

// Each list holds every value of its type, for the API's description.
var (
	Outcomes = []Outcome{OutcomeSuccess, OutcomeError, OutcomeTimeout, OutcomeNoContent, OutcomeBusy, OutcomeSkippedOpen,
		OutcomeClientAbort, OutcomeNotRetryable, OutcomeFailedAfterCommit, OutcomeHedgeLost, OutcomeDemoted, OutcomeShutdown}
	Faults = []Fault{FaultNone, FaultServer, FaultBusy, FaultQueued, FaultLoading, FaultRequest, FaultConfig,
		FaultCapability, FaultClient}
	Failures = []Failure{FailureNone, FailureUnknownModel, FailureNoCandidates, FailureUnavailable, FailureRejected,
		FailureRequest, FailureUnsupported, FailureUpstreamAuth, FailureClientGone, FailureShutdown}
	Statuses      = []Status{StatusOK, StatusFailed, StatusClientAbort, StatusUpstreamErrorAfterCommit, StatusShutdown}
	BreakerStates = []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen}
)

// GPUReading is the memory reading that demoted a candidate, kept on the
// attempt so history shows why.
type GPUReading struct {
	GPU        int    // index, -1 for a remote endpoint's own report
	Source     string // "nvml", "ollama_ps", "vllm_metrics", ...
	FreeBytes  uint64
	UsedBytes  uint64
	TotalBytes uint64
	Reason     string // e.g. "free 0.6 GiB < 1 GiB"
}

// Attempt is the record of one try of one candidate for one request.
type Attempt struct {
	RequestID  string
	Order      int // 0-based position in the request's attempt list
	Candidate  string
	Outcome    Outcome
	Error      string
	HTTPStatus int
	StartedAt  time.Time
	Deadline   time.Duration // first-token deadline it ran under, 0 if never started
	TTFT       time.Duration // 0 when no first token
	Duration   time.Duration
	// Fault says whose fault a failure was; FaultNone for an attempt
	// that did not fail.
	Fault Fault
	// Cold is true when the deadline included an expected load time.
	Cold    bool
	Demoted bool
	Reading *GPUReading
	// Warm: its TTFT was a warm sample of the server's speed
	// (TTFTSample.Warm), which the learner took, and a restart seeds
	// from the history.
	Warm bool
}

// RequestRecord is the history record of one request, written when it ends.
type RequestRecord struct {
	ID              string
	StartedAt       time.Time
	Protocol        Protocol
	Stream          bool
	Thinking        bool
	RequestedModel  string
	ServedCandidate string
	ServedModel     string
	IsFallback      bool
	Status          Status
	HTTPStatus      int
	Error           string
	// Failure says why the request got no answer, FailureNone when it got
	// one.
	Failure          Failure
	TTFT             time.Duration // as the caller saw it, 0 when none
	Latency          time.Duration
	PromptTokens     int
	CompletionTokens int
	Attempts         []Attempt
}

// BreakerState is the state of one candidate's circuit breaker.
type BreakerState string

const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// BreakerChange is one breaker transition.
type BreakerChange struct {
	Candidate string
	From      BreakerState
	To        BreakerState
	At        time.Time
	Cause     string
}

// EventType names a live event.
type EventType string

const (
	EventRequestStarted EventType = "request_started"
	EventAttemptStarted EventType = "attempt_started" // a candidate is tried (Attempt set: candidate, start, deadline)
	EventAttempt        EventType = "attempt"         // an attempt ended (Attempt set)
	EventCommit         EventType = "commit"          // a stream committed (Attempt set, Outcome success)
	EventRequestDone    EventType = "request_done"    // Request set
	EventBreaker        EventType = "breaker"         // Breaker set
)

// Event is one live event of routing, for history, metrics and the UI.
// Exactly the fields its Type names are set. What Attempt, Request and
// Breaker point to is lent for the call that hands the event over: the
// router goes on changing it afterwards, so whoever keeps an event past
// that call keeps its Clone.
type Event struct {
	Type      EventType
	At        time.Time
	RequestID string
	Attempt   *Attempt
	Request   *RequestRecord
	Breaker   *BreakerChange
}

// Clone returns e with copies of what it points to, its own to keep (the
// GPU reading of an attempt, which nobody changes, is shared).
func (e Event) Clone() Event {
	if e.Attempt != nil {
		a := *e.Attempt
		e.Attempt = &a
	}
	if e.Request != nil {
		r := *e.Request
		r.Attempts = append([]Attempt(nil), r.Attempts...)
		e.Request = &r
	}
	if e.Breaker != nil {
		b := *e.Breaker
		e.Breaker = &b
	}
	return e
}
