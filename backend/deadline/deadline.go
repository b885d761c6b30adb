// Package deadline learns each candidate's time to first token and turns
// it into first-token deadlines (docs/DESIGN.md, "First-token
// deadlines"): clamp(k × p99 of warm TTFTs,
// floor, ceiling) once enough samples are known, the ceiling before; plus
// the expected load time for a model that is not resident, so a cold model
// is not mistaken for a stalled one. It implements router.Deadlines and
// imports only fleet and the standard library.
package deadline

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Settings tune the learner. The zero value of each field means its default.
type Settings struct {
	// Multiplier is k in k × p99. Default 4.
	Multiplier float64
	// Floor is the shortest learned deadline. Default 2s.
	Floor time.Duration
	// MinSamples is how many warm TTFTs are needed before the deadline is
	// learned. Default 20.
	MinSamples int
	// Window is how many recent warm TTFTs are kept per candidate.
	// Default 200.
	Window int
	// Resident reports whether c's model is loaded, as seen at time at
	// (known=false when nobody can tell). A model that answered after at
	// is taken as loaded whatever it says. Nil means always unknown.
	Resident func(c fleet.Candidate) (resident, known bool, at time.Time)
	// LoadTime is the configured expected load time of c, zero when not
	// configured; a learned one (Ollama's load_duration) is used otherwise.
	LoadTime func(c fleet.Candidate) time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Defaults of Settings.
const (
	DefaultMultiplier = 4
	DefaultFloor      = 2 * time.Second
	DefaultMinSamples = 20
)

func (s Settings) withDefaults() Settings {
	if s.Multiplier <= 0 {
		s.Multiplier = DefaultMultiplier
	}
	if s.Floor <= 0 {
		s.Floor = DefaultFloor
	}
	if s.MinSamples <= 0 {
		s.MinSamples = DefaultMinSamples
	}
	if s.Window <= 0 {
		s.Window = DefaultWindow
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return s
}

// Learner keeps the samples. Safe for concurrent use; create it with New.
type Learner struct {
	s Settings
	// tuning is s's Multiplier, Floor and MinSamples as a config reload
	// last set them (Tune).
	tuning atomic.Pointer[tuning]
	mu     sync.Mutex
	by     map[string]*samples
}

// tuning is what a reload may change of a Learner's Settings.
type tuning struct {
	multiplier float64
	floor      time.Duration
	minSamples int
}

type samples struct {
	ring     []time.Duration // warm TTFTs, oldest overwritten first
	next     int
	answered time.Time       // when the model last produced a first token: loaded then
	load     time.Duration   // the longest recent load time seen, decayed on each new one
	sorted   []time.Duration // ring's samples in order, kept so as each one comes
	stats    Stats           // percentiles of sorted
}

// New returns a learner without samples.
func New(s Settings) *Learner {
	l := &Learner{s: s.withDefaults(), by: make(map[string]*samples)}
	l.tuning.Store(&tuning{l.s.Multiplier, l.s.Floor, l.s.MinSamples})
	return l
}

// Tune sets the multiplier, the floor and the samples needed, as a config
// reload changed them (a zero value: its default); the samples learned so
// far stay, and the next deadline is made from them by the new rule.
func (l *Learner) Tune(multiplier float64, floor time.Duration, minSamples int) {
	s := Settings{Multiplier: multiplier, Floor: floor, MinSamples: minSamples}.withDefaults()
	l.tuning.Store(&tuning{s.Multiplier, s.Floor, s.MinSamples})
}

// Seed adds warm TTFTs learned from history, newest first (as
// history.WarmTTFTs returns them).
func (l *Learner) Seed(candidate string, ttfts []time.Duration) {
	for i := len(ttfts) - 1; i >= 0; i-- {
		l.add(candidate, ttfts[i])
	}
}

func (l *Learner) add(id string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.get(id)
	if len(s.ring) < l.s.Window {
		s.ring = append(s.ring, d)
	} else {
		old := s.ring[s.next]
		s.ring[s.next] = d
		s.next = (s.next + 1) % l.s.Window
		i, _ := slices.BinarySearch(s.sorted, old)
		s.sorted = slices.Delete(s.sorted, i, i+1)
	}
	// The sample goes into its place in the order, and the percentiles
	// are read off it: a move of at most a window, where sorting the
	// window again on the next request's first token cost about 7 µs
	// (make bench's profile at concurrency 1).
	i, _ := slices.BinarySearch(s.sorted, d)
	s.sorted = slices.Insert(s.sorted, i, d)
	s.stats = Stats{N: len(s.sorted), P50: pct(s.sorted, 50), P95: pct(s.sorted, 95), P99: pct(s.sorted, 99)}
}

func (l *Learner) get(id string) *samples {
	s, ok := l.by[id]
	if !ok {
		s = &samples{}
		l.by[id] = s
	}
	return s
}

// Observe implements router.Deadlines. A committed attempt's TTFT is a
// warm sample unless the attempt was cold, waited in its server's queue,
// or the upstream reported loading the model for it. A real load (see
// fleet.TTFTSample.RealLoad) is remembered as the expected load time; a warm answer's
// load_duration of a millisecond is not a load and teaches nothing.
func (l *Learner) Observe(c fleet.Candidate, s fleet.TTFTSample) {
	if s.TTFT > 0 {
		l.mu.Lock()
		l.get(c.ID).answered = l.s.Now()
		l.mu.Unlock()
	}
	loaded := s.RealLoad()
	if loaded {
		load := s.Usage.LoadDuration
		l.mu.Lock()
		m := l.get(c.ID)
		if load > m.load {
			m.load = load
		} else {
			m.load = (m.load*3 + load) / 4
		}
		l.mu.Unlock()
	}
	if s.Warm() {
		l.add(c.ID, s.TTFT)
	}
}

// Stats are a candidate's learned TTFT percentiles.
type Stats struct {
	N             int
	P50, P95, P99 time.Duration
}

// Stats returns c's warm TTFT percentiles. They are computed once per new
// sample, not on every call: the router asks for every attempt.
func (l *Learner) Stats(id string) Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.by[id]
	if !ok {
		return Stats{}
	}
	return s.stats
}

// pct is the nearest-rank percentile of sorted.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)]
}

// FirstToken implements router.Deadlines.
func (l *Learner) FirstToken(c fleet.Candidate, ceiling time.Duration) (time.Duration, bool) {
	st := l.Stats(c.ID)
	d := ceiling
	if t := l.tuning.Load(); st.N >= t.minSamples {
		d = time.Duration(t.multiplier * float64(st.P99))
		d = min(max(d, t.floor), ceiling)
	}
	if l.s.Resident != nil {
		if resident, known, at := l.s.Resident(c); known && !resident && !l.answeredSince(c.ID, at) {
			return d + l.loadTime(c), true
		}
	}
	return d, false
}

// answeredSince reports whether candidate id's model produced a first
// token after t: it was loaded then, whatever an older poll said.
func (l *Learner) answeredSince(id string, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.by[id]
	return ok && s.answered.After(t)
}

// loadTime is c's expected load time: configured, else learned, else a
// generous default for a model nobody has timed yet.
func (l *Learner) loadTime(c fleet.Candidate) time.Duration {
	if l.s.LoadTime != nil {
		if d := l.s.LoadTime(c); d > 0 {
			return d
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.by[c.ID]; ok && s.load > 0 {
		return s.load + s.load/2
	}
	return DefaultLoadTime
}

// DefaultWindow is how many recent warm TTFTs a candidate keeps by
// default: the samples seeded from the history at start too.
const DefaultWindow = 200

// DefaultLoadTime is the load allowance of a cold model whose load time is
// neither configured nor learned.
const DefaultLoadTime = 60 * time.Second

// Predict implements router.Deadlines: c's warm TTFT p50 (zero before its
// first sample) and, when its model is known not to be resident, its
// expected load time.
func (l *Learner) Predict(c fleet.Candidate) (warm, load time.Duration) {
	warm = l.Stats(c.ID).P50
	if l.s.Resident != nil {
		if resident, known, at := l.s.Resident(c); known && !resident && !l.answeredSince(c.ID, at) {
			load = l.loadTime(c)
		}
	}
	return warm, load
}

// HedgeAfter implements router.Deadlines: the learned p95, once known.
func (l *Learner) HedgeAfter(c fleet.Candidate) (time.Duration, bool) {
	st := l.Stats(c.ID)
	if st.N < l.tuning.Load().minSamples {
		return 0, false
	}
	return st.P95, true
}
