// Package router routes one chat request across the fleet (docs/DESIGN.md, "The
// life of a request"): it
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
	"fmt"
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
	// no first token by its learned p95 (docs/DESIGN.md, "Hedged first token").
	// Default off.
	Hedge bool
	// Balance orders a band of candidates of equal priority:
	// BalanceFastest (the default) puts the one predicted to give the
	// first token soonest first; BalanceOrdered keeps the id order.
	Balance string
	// Breaker configures every candidate's breaker. The router sets its
	// OnChange; its Now is kept as given (time.Now when nil).
	Breaker breaker.Settings
}

// Values of Settings.Balance.
const (
	BalanceFastest = "fastest"
	BalanceOrdered = "ordered"
)

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
	if s.Balance == "" {
		s.Balance = BalanceFastest
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
// must not block. What an event points to is lent for the call: one kept
// past it is kept as its Clone.
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
	// Observe learns from one committed attempt.
	Observe(c fleet.Candidate, s fleet.TTFTSample)
	// Predict returns c's typical warm TTFT (zero while unknown) and the
	// time its model would take to load now (zero when it is resident or
	// nothing says otherwise), for ordering a band. It does no I/O.
	Predict(c fleet.Candidate) (warm, load time.Duration)
}

// Pressure reports whether a candidate's GPU is under memory pressure.
type Pressure interface {
	// Pressure returns the reading that demotes c, or nil when c is fine.
	Pressure(c fleet.Candidate) *fleet.GPUReading
}

// Capacity is what a candidate's server says about its own load, read from
// cached polls (it must not do I/O). It tells a queued wait and a loading
// model from a sick server (docs/DESIGN.md, "Busy is not dead").
type Capacity interface {
	// Slots is how many requests c's server runs at once; 0 when unknown.
	Slots(c fleet.Candidate) int
	// Waiting reports whether c's server says requests wait in its queue.
	Waiting(c fleet.Candidate) bool
	// Queue is the work c's server last reported, from every client:
	// requests running and waiting; known is false when it reports none.
	Queue(c fleet.Candidate) (running, waiting int, known bool)
	// Loading reports whether c's server said, at its last health check
	// (at), that it is still loading its model; known is false when it
	// has no such check.
	Loading(c fleet.Candidate) (loading bool, at time.Time, known bool)
}

// Deps are the router's collaborators. Nil fields mean: no history, no
// events, a fixed deadline (the ceiling), no demotion, and only the
// router's own view of each server's load.
type Deps struct {
	Recorder  Recorder
	Observer  Observer
	Deadlines Deadlines
	Pressure  Pressure
	Capacity  Capacity
	// Liveness asks a server whose first token is late whether it is alive
	// and working (docs/DESIGN.md, "Shared servers"). Nil: a passed
	// deadline is a failure, as when a server does not answer.
	Liveness Liveness
	// Evidence is what the other nodes of a team saw (evidence.go);
	// nil: no team.
	Evidence Evidence
	// NewID returns a request id. Default: a sortable random id.
	NewID func() string
}

// Router routes requests. It is safe for concurrent use; create it with New.
type Router struct {
	deps  Deps
	state atomic.Pointer[state]

	marksMu sync.Mutex
	marks   map[string]*marks // by candidate id; survives Update
}

// marks are what the router learned about a candidate from its answers,
// apart from its breaker: when it may be tried again after saying it is
// busy or loading, whether it serves its model, what it can't do, and how
// many of Switchyard's requests it is running now.
type marks struct {
	busyUntil    time.Time
	loadingUntil time.Time
	loadingSince time.Time // when a loading answer was last seen
	missing      string    // the 404 that says the model is not there; "" when it is
	missingSince time.Time
	// refused is the last 401 or 403 of its server, which refused
	// Switchyard's credentials, "" once an answer came after it.
	refused     string
	unsupported map[string]bool // capabilities the server said the model lacks
	inflight    atomic.Int64
	starts      atomic.Int64 // attempts ever started on the candidate
	// How long nothing sent to it has answered (attempt.stuckFor): waiting
	// counts the attempts on it that wait for their first token,
	// answering those that had it and still run (a stream it sends is an
	// answer); waitingSince is when the present stretch of waiting began
	// (zero while none waits), and unanswered the waiting of the earlier
	// stretches since its last answer. Time when nothing waits for it
	// proves nothing and is not counted. progress is what its server last
	// showed of its work (Pulse.Progress): a change is an answer to
	// someone.
	waiting, answering int
	waitingSince       time.Time
	unanswered         time.Duration
	progress           string
	// queuedAt and queuedWhy are when an attempt on it last waited behind
	// work its server was busy with, and the evidence.
	queuedAt  time.Time
	queuedWhy string
	// crash is the fingerprint of the request its runner last died on,
	// with no answer since; crashed says there is one.
	crash   uint64
	crashed bool
	// service is how long its answers take, first token to end, as a
	// moving average of the attempts on it that answered: what a request
	// ahead of a new one in its server's queue costs it (predict).
	service time.Duration
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
	r := &Router{deps: deps, marks: make(map[string]*marks)}
	r.Update(fl)
	return r
}

// Update replaces the fleet. Breakers of candidates that exist before and
// after with the same definition keep their state, under the breaker
// settings of fl (Breaker.Retune); others start closed.
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
			if j, ok := old.byID[id]; ok && sameCandidate(old.targets[j].Candidate, t.Candidate) {
				br := old.breakers[id]
				br.Retune(fl.Settings.Breaker.FailureThreshold, fl.Settings.Breaker.OpenDuration)
				st.breakers[id] = br
				continue
			}
		}
		bs := fl.Settings.Breaker
		bs.OnChange = r.breakerChanged
		st.breakers[id] = breaker.New(id, bs)
		// A changed definition may fix what made the candidate unusable.
		r.forget(id)
	}
	r.state.Store(st)
}

// forget drops what was learned about candidate id's model (missing,
// unsupported capabilities), keeping its in-flight count.
func (r *Router) forget(id string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.missing, m.missingSince, m.unsupported, m.refused = "", time.Time{}, nil, ""
}

// mark returns the marks of candidate id, creating them on first use.
func (r *Router) mark(id string) *marks {
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m, ok := r.marks[id]
	if !ok {
		m = &marks{}
		r.marks[id] = m
	}
	return m
}

func sameCandidate(a, b fleet.Candidate) bool {
	return a.ID == b.ID && a.Provider == b.Provider && a.URL == b.URL && a.Model == b.Model && a.APIKey == b.APIKey
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
	// Loading reports that the server was last seen loading its model.
	Loading bool
	// Missing is the answer that says the server does not serve the
	// candidate's model (a configuration fault), "" when none.
	Missing string
	// Refused is the last answer of its server that refused Switchyard's
	// credentials (401, 403: its api_key_env), "" when none came or an
	// answer came since.
	Refused string
	// InFlight is how many of Switchyard's requests it runs now; Slots
	// how many its server runs at once (0 when unknown).
	InFlight, Slots int
	// Running and Waiting are the requests its server last reported, from
	// every client; QueueKnown is false when it reports none.
	Running, Waiting int
	QueueKnown       bool
	// BusyWithOthers is the evidence of the last wait behind work its
	// server was busy with, within the last BusyShown; "" when none.
	BusyWithOthers string
	BusySince      time.Time
	// RemoteInFlight is how many the other nodes of a team run on it, as
	// they report (routing counts them with InFlight).
	RemoteInFlight int
	// Deadline is the first-token deadline its next attempt would get.
	Deadline time.Duration
	Cold     bool
	// Pressure is the reading that demotes it, nil when none.
	Pressure *fleet.GPUReading
	// Team is what the other nodes of a team report of its server now:
	// suspect (demoted) or kept out; zero without a team.
	Team Remote
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
		v := r.view(c, now)
		cs.BusyFor, cs.Loading, cs.Missing = v.busyFor, v.loading, v.missing
		cs.InFlight, cs.Slots, cs.RemoteInFlight = v.inflight-v.remote, v.slots, v.remote
		if r.deps.Capacity != nil {
			cs.Running, cs.Waiting, cs.QueueKnown = r.deps.Capacity.Queue(c)
		}
		{
			m := r.mark(c.ID)
			r.marksMu.Lock()
			if now.Sub(m.queuedAt) < BusyShown {
				cs.BusyWithOthers, cs.BusySince = m.queuedWhy, m.queuedAt
			}
			cs.Refused = m.refused
			r.marksMu.Unlock()
		}
		if r.deps.Pressure != nil {
			cs.Pressure = r.deps.Pressure.Pressure(c)
		}
		cs.Team = r.remote(c, now)
		out = append(out, cs)
	}
	return out
}

// view is a candidate's availability at one moment, from its marks and its
// server's own reports.
type view struct {
	busyFor  time.Duration
	loading  bool
	missing  string
	inflight int // this node's requests and, in a team, the others' (remote)
	remote   int
	slots    int
	// running and waiting are what its server last reported of its queue,
	// from every client (Capacity.Queue); reported says it did.
	running, waiting int
	reported         bool
	saturated        bool            // its slots are taken by Switchyard's requests, or its server says requests wait
	lacks            map[string]bool // what its server said the model can't do; read only
}

func (r *Router) view(c fleet.Candidate, now time.Time) view {
	m := r.mark(c.ID)
	var v view
	r.marksMu.Lock()
	if now.Before(m.busyUntil) {
		v.busyFor = m.busyUntil.Sub(now)
	}
	loadingMark := now.Before(m.loadingUntil)
	since := m.loadingSince
	v.missing = m.missing
	v.lacks = m.unsupported
	r.marksMu.Unlock()
	v.remote = r.remote(c, now).InFlight
	v.inflight = int(m.inflight.Load()) + v.remote
	v.slots = r.slots(c)
	if cp := r.deps.Capacity; cp != nil {
		loading, at, known := cp.Loading(c)
		switch {
		case known && loading:
			loadingMark = true
		case known && at.After(since):
			loadingMark = false // healthy since the loading answer: back at once
		}
		v.saturated = cp.Waiting(c)
		v.running, v.waiting, v.reported = cp.Queue(c)
	}
	v.loading = loadingMark
	if v.slots > 0 && v.inflight >= v.slots {
		v.saturated = true
	}
	return v
}

// othersFilled reports whether other requests may have filled c's server
// during a's wait for its first token: as many as its slots ran beside a,
// counting those running when a started and those started since (requests
// that arrive together reach a server in no set order, and one that went
// ahead of a may have ended before a's first token came), or the server
// says requests wait.
func (r *Router) othersFilled(c fleet.Candidate, a *attempt) bool {
	if slots := r.slots(c); slots > 0 {
		m := r.mark(c.ID)
		if others := a.othersAtStart + int(m.starts.Load()-a.startSeq); others >= slots {
			return true
		}
	}
	return r.deps.Capacity != nil && r.deps.Capacity.Waiting(c)
}

// slots is how many requests c's server runs at once: configured, else as
// its server reports, else 0 (unknown).
func (r *Router) slots(c fleet.Candidate) int {
	if c.Slots > 0 {
		return c.Slots
	}
	if r.deps.Capacity != nil {
		return r.deps.Capacity.Slots(c)
	}
	return 0
}

func (r *Router) backOff(id string, until time.Time) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if until.After(m.busyUntil) {
		m.busyUntil = until
	}
}

// markLoading takes candidate id out of routing until wait has passed or
// its server says it is ready, whichever comes first.
func (r *Router) markLoading(id string, now time.Time, wait time.Duration) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.loadingSince = now
	if until := now.Add(wait); until.After(m.loadingUntil) {
		m.loadingUntil = until
	}
}

// Missing takes candidate id out of routing: its server said it does not
// serve the model (a configuration fault, why says which). A config change
// that touches the candidate, or Found, puts it back; so does
// MissingRecheck passing, when one request tries it again.
func (r *Router) Missing(id, why string) { r.markMissing(id, time.Now(), why) }

func (r *Router) markMissing(id string, now time.Time, why string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.missing, m.missingSince = why, now
}

// Found puts candidate id back into routing after its server was seen
// serving its model again (discovery).
func (r *Router) Found(id string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.missing, m.missingSince = "", time.Time{}
}

// waitBegan notes that an attempt on candidate id began at start to wait
// for its first token.
func (r *Router) waitBegan(id string, start time.Time) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if m.waiting == 0 {
		m.waitingSince = start
	}
	m.waiting++
}

// refusedKey notes that candidate id's server refused Switchyard's
// credentials, in the words why.
func (r *Router) refusedKey(id, why string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.refused = why
}

// firstToken notes that an attempt on candidate id had its first token at
// now: its server answers, and did not crash on it (nor refuse its key).
func (r *Router) firstToken(id string, now time.Time) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.refused = ""
	m.waiting--
	m.answering++
	m.crashed = false
	m.answeredAt(now)
}

// waitEnded notes that an attempt on candidate id ended at now, after its
// first token (answered: the end of an answer is an answer too) or
// without one.
func (r *Router) waitEnded(id string, now time.Time, answered bool, took time.Duration) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if answered {
		m.answering--
		m.answeredAt(now)
		if m.service == 0 {
			m.service = took
		} else {
			m.service += (took - m.service) / 4
		}
		return
	}
	m.waiting--
	if m.waiting == 0 {
		m.unanswered += now.Sub(m.waitingSince)
		m.waitingSince = time.Time{}
	}
}

// progressed notes what candidate id's server showed of its work at now
// (Pulse.Progress): a change since the last check is an answer, to a
// client Switchyard may not see.
func (r *Router) progressed(id string, now time.Time, progress string) {
	if progress == "" {
		return
	}
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if m.progress != "" && m.progress != progress {
		m.answeredAt(now)
	}
	m.progress = progress
}

// answeredAt starts the count of what is unanswered over at now. Under
// marksMu.
func (m *marks) answeredAt(now time.Time) {
	m.unanswered = 0
	if m.waiting > 0 {
		m.waitingSince = now
	} else {
		m.waitingSince = time.Time{}
	}
}

// unansweredFor is how long, at now, attempts on candidate id have waited
// since its server last answered, the time when none waited left out:
// zero while it sends an answer.
func (r *Router) unansweredFor(id string, now time.Time) time.Duration {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if m.answering > 0 {
		return 0
	}
	d := m.unanswered
	if m.waiting > 0 {
		d += now.Sub(m.waitingSince)
	}
	return d
}

// BusyShown is how long the status shows a wait behind a server's other
// work.
const BusyShown = time.Minute

// queued notes that an attempt on candidate id waited behind work its
// server was busy with, and why Switchyard thinks so.
func (r *Router) queued(id string, now time.Time, why string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.queuedAt, m.queuedWhy = now, why
}

// crashedBefore reports whether candidate id's runner last died on another
// request than the one fingerprint names, with no answer since: a server
// that keeps crashing.
func (r *Router) crashedBefore(id string, fingerprint uint64) bool {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	return m.crashed && m.crash != fingerprint
}

// crashed remembers that candidate id's runner died on the request
// fingerprint names.
func (r *Router) crashed(id string, fingerprint uint64) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	m.crash, m.crashed = fingerprint, true
}

// markUnsupported remembers that candidate id's model can't do what.
func (r *Router) markUnsupported(id, what string) {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	// A new map each time: views hold the old one without the lock.
	next := make(map[string]bool, len(m.unsupported)+1)
	for k := range m.unsupported {
		next[k] = true
	}
	next[what] = true
	m.unsupported = next
}

// MissingRecheck is how long a candidate whose server said it does not
// serve the model stays out of routing when nothing else says it is back.
const MissingRecheck = 5 * time.Minute

// fixedDeadlines gives every attempt the ceiling.
type fixedDeadlines struct{}

func (fixedDeadlines) FirstToken(_ fleet.Candidate, ceiling time.Duration) (time.Duration, bool) {
	return ceiling, false
}
func (fixedDeadlines) HedgeAfter(fleet.Candidate) (time.Duration, bool)       { return 0, false }
func (fixedDeadlines) Observe(fleet.Candidate, fleet.TTFTSample)              {}
func (fixedDeadlines) Predict(fleet.Candidate) (time.Duration, time.Duration) { return 0, 0 }

// Resolve returns the candidate a request naming model would try first
// (an alias, an id, or a model name a candidate serves), in thinking mode
// or not.
func (r *Router) Resolve(model string, thinking bool) (fleet.Candidate, error) {
	st := r.state.Load()
	id, _, err := st.resolve(model, thinking)
	if err != nil {
		return fleet.Candidate{}, err
	}
	i, ok := st.byID[id]
	if !ok {
		return fleet.Candidate{}, fmt.Errorf("%w: the first choice %q is not configured", fleet.ErrNoCandidates, id)
	}
	return st.targets[i].Candidate, nil
}

// Available returns, in the order a chat naming model would try them, the
// enabled candidates that may be sent a request now: breaker not open (nor
// kept out by a team's other nodes), model not missing, not loading or
// backing off. It is for requests
// passed to a server without routing (docs/API.md, "Pass-through").
func (r *Router) Available(model string) ([]fleet.Candidate, error) {
	st := r.state.Load()
	ordered, _, err := st.order(&fleet.Request{Model: model})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []fleet.Candidate
	for _, t := range ordered {
		c := t.Candidate
		v := r.view(c, now)
		if !c.Enabled || !st.breakers[c.ID].Ready() || r.remote(c, now).Out || v.missing != "" || v.loading || v.busyFor > 0 {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}
