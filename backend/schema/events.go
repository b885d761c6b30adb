package schema

import (
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
)

// EventType names a live event of GET /switchyard/v1/events (the SSE
// "event:" field). Each type has one payload type (the "data:" JSON).
type EventType string

const (
	// EventStatus: Status, at connect (and after a reconnect).
	EventStatus EventType = "status"
	// EventStatusDelta: StatusDelta, every second when the status changed:
	// what changed since the last status or status_delta.
	EventStatusDelta EventType = "status_delta"
	// EventRequestStarted: RequestStarted.
	EventRequestStarted EventType = "request_started"
	// EventAttemptStarted: AttemptStarted, a candidate is being waited for.
	EventAttemptStarted EventType = "attempt_started"
	// EventAttempt: AttemptEvent, an attempt ended.
	EventAttempt EventType = "attempt"
	// EventCommit: AttemptEvent, a stream committed to a candidate.
	EventCommit EventType = "commit"
	// EventRequestDone: RequestDone.
	EventRequestDone EventType = "request_done"
	// EventBreaker: BreakerEvent.
	EventBreaker EventType = "breaker"
	// EventGPU: GPUEvent, a GPU and host reading.
	EventGPU EventType = "gpu"
	// EventConfig: ConfigEvent, a config edit applied or rejected.
	EventConfig EventType = "config"
)

// EventTypes are every EventType, for the API's description.
var EventTypes = []EventType{EventStatus, EventStatusDelta, EventRequestStarted, EventAttemptStarted, EventAttempt, EventCommit,
	EventRequestDone, EventBreaker, EventGPU, EventConfig}

// StatusDelta is what changed in the status since the last status or
// status_delta event, so that a fleet of hundreds of candidates is not
// sent whole every second.
type StatusDelta struct {
	// Rest is the status without its candidates, when any of its other
	// fields changed (its candidates are null); null when none did.
	Rest *Status `json:"rest"`
	// Candidates are the candidates that changed or are new, whole.
	Candidates []Candidate `json:"candidates"`
	// Removed are the ids of candidates no longer in the status.
	Removed []string `json:"removed"`
	// Order is every candidate's id in routing order when the order or
	// the set changed; empty when it did not.
	Order []string `json:"order"`
}

// RequestStarted says a request arrived.
type RequestStarted struct {
	RequestID string `json:"request_id"`
}

// AttemptStarted says which candidate a request waits for now, and until
// when at most: the UI counts the deadline down.
type AttemptStarted struct {
	RequestID  string    `json:"request_id"`
	Candidate  string    `json:"candidate"`
	Order      int       `json:"order"`
	StartedAt  time.Time `json:"started_at"`
	DeadlineMS int64     `json:"deadline_ms"`
	Cold       bool      `json:"cold"`
}

// AttemptEvent carries an attempt that ended, or the one that committed.
type AttemptEvent struct {
	RequestID string  `json:"request_id"`
	Attempt   Attempt `json:"attempt"`
}

// RequestDone carries a finished request's record.
type RequestDone struct {
	RequestID string  `json:"request_id"`
	Request   Request `json:"request"`
}

// BreakerEvent carries a breaker transition.
type BreakerEvent struct {
	Breaker BreakerChange `json:"breaker"`
}

// GPUEvent carries a GPU and host reading.
type GPUEvent struct {
	At   time.Time `json:"at"`
	GPU  GPU       `json:"gpu"`
	Host Host      `json:"host"`
}

// ConfigEvent says whether a config edit was applied, and why not.
type ConfigEvent struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// NewAttemptStarted is the attempt_started event of a router event.
func NewAttemptStarted(e fleet.Event) AttemptStarted {
	a := e.Attempt
	return AttemptStarted{RequestID: e.RequestID, Candidate: a.Candidate, Order: a.Order, StartedAt: a.StartedAt,
		DeadlineMS: a.Deadline.Milliseconds(), Cold: a.Cold}
}

// NewAttemptEvent is the attempt or commit event of a router event.
func NewAttemptEvent(e fleet.Event) AttemptEvent {
	return AttemptEvent{RequestID: e.RequestID, Attempt: NewAttempt(*e.Attempt)}
}

// NewRequestDone is the request_done event of a router event.
func NewRequestDone(e fleet.Event) RequestDone {
	return RequestDone{RequestID: e.RequestID, Request: NewRequest(*e.Request)}
}

// NewGPUEvent is the gpu event of a reading.
func NewGPUEvent(s gpu.Sample) GPUEvent {
	return GPUEvent{At: s.At, GPU: NewGPU(s.GPU), Host: NewHost(s.Host)}
}

// Demo is GET /switchyard/v1/demo: the simulated servers and the faults
// they can be given.
type Demo struct {
	Servers []DemoServer `json:"servers"`
	Faults  []DemoFault  `json:"faults"`
}

// DemoServer is one simulated server and the fault it has now.
type DemoServer struct {
	Candidate string `json:"candidate"`
	Provider  string `json:"provider"`
	URL       string `json:"url"`
	Fault     string `json:"fault"`
}

// DemoFault is one fault a simulated server can be given.
type DemoFault struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	// Arg says what follows the name after a colon ("N tokens"), "" for
	// none.
	Arg string `json:"arg"`
}

// SetFault is the body of POST /switchyard/v1/demo/fault.
type SetFault struct {
	Candidate string `json:"candidate"`
	Fault     string `json:"fault"`
}
