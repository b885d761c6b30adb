// Package router routes one chat request across the fleet (SPEC 2): it
// orders the candidates, gates each through its circuit breaker, probes a
// streaming attempt until its first token and commits it, or switches
// silently to the next candidate when the attempt fails before that. It
// reports every attempt, commit and breaker change through the small
// interfaces declared here, so history, metrics and the UI plug in from
// outside. It knows no HTTP, SQL or GPU library: upstreams are
// fleet.Backends.
package router

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// Settings tune routing. The zero value of each field means its default.
type Settings struct {
	// FirstTokenTimeout is the ceiling of every first-token deadline.
	// Default 60s.
	FirstTokenTimeout time.Duration
	// StallTimeout ends a committed stream that sends nothing for this
	// long. Default 60s.
	StallTimeout time.Duration
	// BusyBackoff is how long a busy candidate is skipped when it gave no
	// Retry-After. Default 1s.
	BusyBackoff time.Duration
	// Hedge starts the next candidate in parallel when the current one has
	// no first token by its learned p95 (SPEC 3). Default off.
	Hedge bool
	// Breaker configures every candidate's breaker (its Now and OnChange are
	// set by the router).
	Breaker breaker.Settings
}

// Defaults of Settings.
const (
	DefaultFirstTokenTimeout = 60 * time.Second
	DefaultStallTimeout      = 60 * time.Second
	DefaultBusyBackoff       = time.Second
)

func (s Settings) withDefaults() Settings {
	if s.FirstTokenTimeout <= 0 {
		s.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	if s.StallTimeout <= 0 {
		s.StallTimeout = DefaultStallTimeout
	}
	if s.BusyBackoff <= 0 {
		s.BusyBackoff = DefaultBusyBackoff
	}
	return s
}

// Target is a candidate and the backend that speaks its protocol.
type Target struct {
	Candidate fleet.Candidate
	Backend   fleet.Backend
}

// Fleet is what the router routes over. Update swaps it whole.
type Fleet struct {
	Targets []Target
	// DefaultModel is the candidate id tried first for "auto".
	DefaultModel string
	// DeepThinkingModel is the candidate id tried first in thinking mode.
	// Naming it as the model turns thinking mode on.
	DeepThinkingModel string
	Settings          Settings
}

// Recorder stores a finished request with its attempts. Record returns
// once the record is durable; the router calls it before it hands the
// caller the end of the response, so no answered request is missing from
// history.
type Recorder interface {
	Record(ctx context.Context, rec fleet.RequestRecord) error
}

// Observer receives live events. It is called on the request path and
// must not block.
type Observer interface {
	Observe(e fleet.Event)
}

// Deadlines supplies first-token deadlines and learns from outcomes.
type Deadlines interface {
	// FirstToken returns the deadline for c's next attempt, at most
	// ceiling, and whether it includes an allowance for loading a cold
	// model.
	FirstToken(c fleet.Candidate, ceiling time.Duration) (d time.Duration, cold bool)
	// HedgeAfter returns when a hedge should start while c has no first
	// token (its learned p95); ok is false while too little is known.
	HedgeAfter(c fleet.Candidate) (d time.Duration, ok bool)
	// Observe learns one successful first token.
	Observe(c fleet.Candidate, ttft time.Duration, cold bool, usage *fleet.Usage)
}

// Pressure reports whether a candidate's GPU is under memory pressure.
type Pressure interface {
	// Pressure returns the reading that demotes c, or nil when c is fine.
	Pressure(c fleet.Candidate) *fleet.GPUReading
}

// Deps are the router's collaborators. Nil fields mean: no history, no
// events, a fixed deadline (the ceiling), no demotion.
type Deps struct {
	Recorder  Recorder
	Observer  Observer
	Deadlines Deadlines
	Pressure  Pressure
	// NewID returns a request id. Default: a sortable random id.
	NewID func() string
}

// Router routes requests. It is safe for concurrent use; create it with New.
type Router struct {
	deps  Deps
	state atomic.Pointer[state]

	busyMu    sync.Mutex
	busyUntil map[string]time.Time
}

// state is an immutable snapshot of the fleet; Update replaces it.
type state struct {
	fleet    Fleet
	targets  []Target // enabled and disabled, sorted by priority then id
	byID     map[string]int
	breakers map[string]*breaker.Breaker
}

// New returns a router over fl.
func New(fl Fleet, deps Deps) *Router {
	if deps.NewID == nil {
		deps.NewID = NewID
	}
	if deps.Deadlines == nil {
		deps.Deadlines = fixedDeadlines{}
	}
	r := &Router{deps: deps, busyUntil: make(map[string]time.Time)}
	r.Update(fl)
	return r
}

// Update replaces the fleet. Breakers of candidates that exist before and
// after with the same definition and breaker settings keep their state;
// others start closed.
func (r *Router) Update(fl Fleet) {
	fl.Settings = fl.Settings.withDefaults()
	old := r.state.Load()
	st := &state{
		fleet:    fl,
		targets:  slices.Clone(fl.Targets),
		byID:     make(map[string]int, len(fl.Targets)),
		breakers: make(map[string]*breaker.Breaker, len(fl.Targets)),
	}
	slices.SortStableFunc(st.targets, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Candidate.Priority, b.Candidate.Priority), cmp.Compare(a.Candidate.ID, b.Candidate.ID))
	})
	for i, t := range st.targets {
		id := t.Candidate.ID
		st.byID[id] = i
		if old != nil {
			if j, ok := old.byID[id]; ok && sameCandidate(old.targets[j].Candidate, t.Candidate) && sameBreaker(old.fleet.Settings.Breaker, fl.Settings.Breaker) {
				st.breakers[id] = old.breakers[id]
				continue
			}
		}
		bs := fl.Settings.Breaker
		bs.OnChange = r.breakerChanged
		st.breakers[id] = breaker.New(id, bs)
	}
	r.state.Store(st)
}

func sameCandidate(a, b fleet.Candidate) bool {
	return a.ID == b.ID && a.Provider == b.Provider && a.URL == b.URL && a.Model == b.Model && a.APIKey == b.APIKey
}

func sameBreaker(a, b breaker.Settings) bool {
	return a.FailureThreshold == b.FailureThreshold && a.OpenDuration == b.OpenDuration
}

func (r *Router) breakerChanged(c fleet.BreakerChange) {
	r.observe(fleet.Event{Type: fleet.EventBreaker, At: c.At, Breaker: &c})
}

func (r *Router) observe(e fleet.Event) {
	if r.deps.Observer != nil {
		r.deps.Observer.Observe(e)
	}
}

// Breaker returns the breaker of the candidate with the given id, or nil.
func (r *Router) Breaker(id string) *breaker.Breaker {
	return r.state.Load().breakers[id]
}

// Fleet returns the fleet in force.
func (r *Router) Fleet() Fleet { return r.state.Load().fleet }

// CandidateState is one candidate as the status API shows it.
type CandidateState struct {
	Candidate fleet.Candidate
	Breaker   breaker.Snapshot
	// BusyFor is the busy back-off left, zero when none.
	BusyFor time.Duration
	// Deadline is the first-token deadline its next attempt would get.
	Deadline time.Duration
	Cold     bool
	// Pressure is the reading that demotes it, nil when none.
	Pressure *fleet.GPUReading
}

// States returns every configured candidate in routing order (priority,
// then id).
func (r *Router) States() []CandidateState {
	st := r.state.Load()
	now := time.Now()
	out := make([]CandidateState, 0, len(st.targets))
	for _, t := range st.targets {
		c := t.Candidate
		cs := CandidateState{Candidate: c, Breaker: st.breakers[c.ID].Snapshot()}
		cs.Deadline, cs.Cold = r.deps.Deadlines.FirstToken(c, st.fleet.Settings.FirstTokenTimeout)
		if until, ok := r.busy(c.ID, now); ok {
			cs.BusyFor = until.Sub(now)
		}
		if r.deps.Pressure != nil {
			cs.Pressure = r.deps.Pressure.Pressure(c)
		}
		out = append(out, cs)
	}
	return out
}

// busy reports whether id is in its busy back-off at now.
func (r *Router) busy(id string, now time.Time) (time.Time, bool) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	until, ok := r.busyUntil[id]
	if ok && !now.Before(until) {
		delete(r.busyUntil, id)
		return time.Time{}, false
	}
	return until, ok
}

func (r *Router) backOff(id string, until time.Time) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	if until.After(r.busyUntil[id]) {
		r.busyUntil[id] = until
	}
}

// fixedDeadlines gives every attempt the ceiling.
type fixedDeadlines struct{}

func (fixedDeadlines) FirstToken(_ fleet.Candidate, ceiling time.Duration) (time.Duration, bool) {
	return ceiling, false
}
func (fixedDeadlines) HedgeAfter(fleet.Candidate) (time.Duration, bool)           { return 0, false }
func (fixedDeadlines) Observe(fleet.Candidate, time.Duration, bool, *fleet.Usage) {}
