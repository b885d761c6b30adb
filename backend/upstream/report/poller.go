// Package report polls model servers, off the request path, for what they
// report about themselves: Ollama's resident models (/api/ps), vLLM's KV
// cache and queue (/metrics), llama.cpp's slots and deferred requests
// (/slots, /metrics) and its loading state. It states facts; what they mean
// for routing is decided by backend/pressure (docs/DESIGN.md, "GPU and
// server load").
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
)

// PollerSettings tune a Poller. The zero value of each field means its
// default.
type PollerSettings struct {
	// Interval is the time between two polls of a healthy endpoint.
	// Default 5s.
	Interval time.Duration
	// MaxInterval caps the back-off: after a failed poll the interval
	// doubles up to it, and the next success resets it. Default 60s.
	MaxInterval time.Duration
	// Timeout bounds one poll of one endpoint. Default 3s.
	Timeout time.Duration
	// Now is the clock that schedules polls. Default time.Now.
	Now func() time.Time
}

func (s PollerSettings) withDefaults() PollerSettings {
	if s.Interval <= 0 {
		s.Interval = 5 * time.Second
	}
	if s.MaxInterval < s.Interval {
		s.MaxInterval = max(60*time.Second, s.Interval)
	}
	if s.Timeout <= 0 {
		s.Timeout = 3 * time.Second
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return s
}

// LoadingInterval is how often a server that is loading its model is
// polled, so that it is back in routing soon after it has loaded.
const LoadingInterval = 500 * time.Millisecond

// Poller polls the server behind each candidate for what it reports about
// itself, never on the request path: Ollama's resident models (/api/ps),
// vLLM's KV-cache use and queue (/metrics), llama.cpp's queue (/metrics,
// when the server runs with --metrics) or its slots (/slots). Candidates on
// one server share its polls.
//
// Create it with NewPoller, tell it the candidates with Update (again after
// each config reload), and call Run once on a goroutine of its own.
// Residency and the pressure readings are safe to call from any goroutine
// at any time; they do no I/O.
type Poller struct {
	s       PollerSettings
	ps      func(ctx context.Context, baseURL string) ([]ollama.Running, error)
	client  func(baseURL string) *http.Client
	ownPool *upstream.Pool // nil when the caller's pool is used
	wake    chan struct{}  // Update asks Run to poll new endpoints now

	pollMu sync.Mutex // serialises Poll; guards endpoint.next and .interval

	mu      sync.RWMutex
	targets map[endpointKey]*endpoint
}

// NewPoller returns a Poller with no endpoints that reaches servers through
// pool (Ollama's /api/ps through upstream/ollama). A nil pool means one of
// its own, whose idle connections Run closes when it returns; a given pool
// stays its owner's to close.
func NewPoller(pool *upstream.Pool, s PollerSettings) *Poller {
	p := &Poller{s: s.withDefaults(), wake: make(chan struct{}, 1), targets: make(map[endpointKey]*endpoint)}
	if pool == nil {
		pool = upstream.NewPool(upstream.Settings{})
		p.ownPool = pool
	}
	p.ps = ollama.New(pool).Running
	p.client = pool.Client
	return p
}

// endpointKey names one server: candidates with the same provider and base
// URL share it.
type endpointKey struct {
	provider fleet.Provider
	url      string
}

func keyOf(c fleet.Candidate) endpointKey {
	return endpointKey{c.Provider, strings.TrimRight(c.URL, "/")}
}

// endpoint is one polled server.
type endpoint struct {
	key    endpointKey
	apiKey string // the candidate's key, sent with /metrics and /slots (llama.cpp wants it when set)

	next     time.Time     // when to poll next; zero: at once
	interval time.Duration // the current interval, grown by failures

	report atomic.Pointer[report]            // latest poll; nil before the first
	sizes  atomic.Pointer[map[string]uint64] // model sizes ever seen in /api/ps
}

// report is what one poll of an endpoint found. It is never modified once
// stored.
type report struct {
	at  time.Time
	err error // the poll failed: nothing below is known
	// failingSince is when the polls began failing in a row; zero when
	// this one answered.
	failingSince time.Time

	loading bool // the server answered 503 "Loading model" (llama.cpp)

	ollama  bool // /api/ps answered: running lists every resident model
	running []ollama.Running

	vllm map[string]vllmGauges // by model_name; nil when no vLLM metrics

	llama *llamaReport // nil when no llama.cpp metrics or slots
}

type vllmGauges struct {
	kv, kvOld         float64 // KV-cache use, 1 = full; kvOld from the deprecated name
	kvKnown, oldKnown bool
	waiting, running  float64
}

type llamaReport struct {
	deferred    float64 // llamacpp:requests_deferred; 0 when unknown
	slots, busy int     // from /slots; slots 0 when unknown
}

// Update sets the candidates whose servers are polled: the enabled ones.
// A server already polled keeps its readings and schedule; a new one is
// polled at once by Run.
func (p *Poller) Update(cands []fleet.Candidate) {
	p.mu.Lock()
	next := make(map[endpointKey]*endpoint, len(cands))
	for _, c := range cands {
		if !c.Enabled || (c.Provider != fleet.ProviderOllama && c.Provider != fleet.ProviderOpenAI) {
			continue
		}
		k := keyOf(c)
		if _, ok := next[k]; ok {
			continue
		}
		if ep, ok := p.targets[k]; ok && ep.apiKey == c.APIKey {
			next[k] = ep
			continue
		}
		next[k] = &endpoint{key: k, apiKey: c.APIKey}
	}
	p.targets = next
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run polls every endpoint when it is due until ctx is done, then returns
// nil. Each round's polls run in parallel, each bounded by Timeout; Run
// returns once they have all ended.
func (p *Poller) Run(ctx context.Context) error {
	if p.ownPool != nil {
		defer p.ownPool.CloseIdle()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-p.wake:
		}
		p.Poll(ctx)
		timer.Reset(p.untilNext())
	}
}

// Poll polls, in parallel, every endpoint that is due now, and returns when
// all are done. Run calls it; tests drive it directly with a fake Now.
func (p *Poller) Poll(ctx context.Context) {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	now := p.s.Now()
	p.mu.RLock()
	var due []*endpoint
	for _, ep := range p.targets {
		if !ep.next.After(now) {
			due = append(due, ep)
		}
	}
	p.mu.RUnlock()
	var wg sync.WaitGroup
	for _, ep := range due {
		wg.Go(func() { p.pollOne(ctx, ep) })
	}
	wg.Wait()
}

// untilNext is the wait until the next endpoint is due.
func (p *Poller) untilNext() time.Duration {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	now := p.s.Now()
	wait := p.s.MaxInterval
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, ep := range p.targets {
		wait = min(wait, ep.next.Sub(now))
	}
	return max(wait, 0)
}

// pollOne polls ep and schedules its next poll; called with p.pollMu held
// (by Poll, which waits for it).
func (p *Poller) pollOne(ctx context.Context, ep *endpoint) {
	pctx, cancel := context.WithTimeout(ctx, p.s.Timeout)
	defer cancel()
	rep := p.fetch(pctx, ep)
	if ctx.Err() != nil {
		return // shutting down: this is no verdict on the server
	}
	rep.at = p.s.Now()
	if rep.err != nil {
		rep.failingSince = rep.at
		if prev := ep.report.Load(); prev != nil && prev.err != nil {
			rep.failingSince = prev.failingSince
		}
	}
	ep.report.Store(rep)
	switch {
	case rep.loading:
		// Back in routing as soon as it has loaded: look often.
		ep.interval = min(p.s.Interval, LoadingInterval)
	case rep.err != nil:
		ep.interval = min(max(ep.interval, p.s.Interval)*2, p.s.MaxInterval)
	default:
		ep.interval = p.s.Interval
	}
	ep.next = rep.at.Add(ep.interval)
}

// fetch polls ep once.
func (p *Poller) fetch(ctx context.Context, ep *endpoint) *report {
	if ep.key.provider == fleet.ProviderOllama {
		running, err := p.ps(ctx, ep.key.url)
		if err != nil {
			return &report{err: err}
		}
		ep.rememberSizes(running)
		return &report{ollama: true, running: running}
	}
	rep := &report{}
	root, err := serverRoot(ep.key.url)
	if err != nil {
		return &report{err: err}
	}
	found, err := p.get(ctx, ep, root+"/metrics", func(body io.Reader) error {
		return scrapeProm(body, wantMetric, rep.add)
	})
	if loading(err) {
		return &report{loading: true}
	}
	if err != nil {
		return &report{err: err}
	}
	if found && (rep.vllm != nil || rep.llama != nil) {
		return rep
	}
	// No /metrics, or none we know: llama.cpp serves /slots by default.
	_, err = p.get(ctx, ep, root+"/slots", func(body io.Reader) error {
		var slots []struct {
			IsProcessing *bool `json:"is_processing"`
			State        *int  `json:"state"` // before is_processing: 0 idle
		}
		if json.NewDecoder(body).Decode(&slots) != nil || len(slots) == 0 {
			return nil // not llama.cpp's answer: nothing known
		}
		llama := &llamaReport{slots: len(slots)}
		for _, s := range slots {
			if s.IsProcessing != nil && *s.IsProcessing || s.State != nil && *s.State != 0 {
				llama.busy++
			}
		}
		rep.llama = llama
		return nil
	})
	if loading(err) {
		return &report{loading: true}
	}
	if err != nil {
		return &report{err: err}
	}
	return rep
}

// loading reports whether a poll failed because the server is still
// loading its model.
func loading(err error) bool {
	var se *fleet.StatusError
	return errors.As(err, &se) && se.Loading
}

// wantMetric accepts the series the poller reads.
func wantMetric(name string) bool {
	switch name {
	case "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
		"vllm:num_requests_waiting", "vllm:num_requests_running",
		"llamacpp:requests_deferred":
		return true
	}
	return false
}

// add folds one sample into rep: vLLM series per model_name (with
// data-parallel engines: the fullest KV cache, the queues summed),
// llama.cpp's deferred requests.
func (rep *report) add(s promSample) {
	if s.name == "llamacpp:requests_deferred" {
		if rep.llama == nil {
			rep.llama = &llamaReport{}
		}
		rep.llama.deferred += s.value
		return
	}
	if rep.vllm == nil {
		rep.vllm = make(map[string]vllmGauges)
	}
	model := s.label("model_name")
	g := rep.vllm[model]
	switch s.name {
	case "vllm:kv_cache_usage_perc":
		g.kv, g.kvKnown = max(g.kv, s.value), true
	case "vllm:gpu_cache_usage_perc": // deprecated since vLLM 0.9: used only without the new name
		g.kvOld, g.oldKnown = max(g.kvOld, s.value), true
	case "vllm:num_requests_waiting":
		g.waiting += s.value
	case "vllm:num_requests_running":
		g.running += s.value
	}
	rep.vllm[model] = g
}

// gauges returns the vLLM gauges for model: its own series, else every
// series folded together (a server whose model_name differs from the name
// clients send). ok is false without vLLM metrics.
func (rep *report) gauges(model string) (vllmGauges, bool) {
	if rep.vllm == nil {
		return vllmGauges{}, false
	}
	if g, ok := rep.vllm[model]; ok {
		return g.resolved(), true
	}
	var all vllmGauges
	for _, g := range rep.vllm {
		g = g.resolved()
		if g.kvKnown {
			all.kv, all.kvKnown = max(all.kv, g.kv), true
		}
		all.waiting += g.waiting
		all.running += g.running
	}
	return all, true
}

// resolved takes the KV-cache use from the deprecated name when the
// current one is absent.
func (g vllmGauges) resolved() vllmGauges {
	if !g.kvKnown && g.oldKnown {
		g.kv, g.kvKnown = g.kvOld, true
	}
	return g
}

// get GETs u and hands a 2xx body to read. A 404 (and 405, 501: llama.cpp
// answers 501 to /slots under --no-slots) means the endpoint is off:
// found=false and no error. Any other status is an error.
func (p *Poller) get(ctx context.Context, ep *endpoint, u string, read func(io.Reader) error) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("poll %s: %w", u, err)
	}
	if ep.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.apiKey)
	}
	resp, err := p.client(ep.key.url).Do(req)
	if err != nil {
		return false, fmt.Errorf("poll %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed,
		resp.StatusCode == http.StatusNotImplemented:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection reusable
		return false, nil
	case resp.StatusCode >= 300:
		return false, fmt.Errorf("poll %s: %w", u, upstream.StatusError(resp, nil))
	}
	if err := read(io.LimitReader(resp.Body, maxPollBody)); err != nil {
		return true, fmt.Errorf("poll %s: %w", u, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return true, nil
}

// maxPollBody bounds what one poll reads: vLLM's /metrics with every
// histogram is some hundreds of kilobytes.
const maxPollBody = 8 << 20

// serverRoot turns an OpenAI base URL ("http://host:8000/v1", or
// "http://host/vllm/v1" behind a proxy) into the root that serves /metrics
// and /slots ("http://host:8000", "http://host/vllm").
func serverRoot(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("endpoint url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("endpoint url %q: scheme must be http or https", base)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

func (ep *endpoint) rememberSizes(running []ollama.Running) {
	old := ep.sizes.Load()
	var changed bool
	for _, r := range running {
		if r.Size > 0 && (old == nil || (*old)[r.Name] != uint64(r.Size)) {
			changed = true
		}
	}
	if !changed {
		return
	}
	sizes := make(map[string]uint64)
	if old != nil {
		for k, v := range *old {
			sizes[k] = v
		}
	}
	for _, r := range running {
		if r.Size > 0 {
			sizes[r.Name] = uint64(r.Size)
		}
	}
	ep.sizes.Store(&sizes)
}

// lookup returns c's endpoint and its latest report; nil report before the
// first poll.
func (p *Poller) lookup(c fleet.Candidate) (*endpoint, *report) {
	p.mu.RLock()
	ep := p.targets[keyOf(c)]
	p.mu.RUnlock()
	if ep == nil {
		return nil, nil
	}
	return ep, ep.report.Load()
}

// Residency reports whether c's model is loaded, from its Ollama server's
// latest /api/ps, taken at at: known is false for other providers, before
// the first poll, and while polls fail. It does no I/O;
// deadline.Settings.Resident takes it as is.
func (p *Poller) Residency(c fleet.Candidate) (resident, known bool, at time.Time) {
	_, rep := p.lookup(c)
	if rep == nil || !rep.ollama {
		return false, false, time.Time{}
	}
	for _, r := range rep.running {
		if fleet.SameModel(r.Name, c.Model) {
			return true, true, rep.at
		}
	}
	return false, true, rep.at
}

// SeenSize returns the size c's model had when its Ollama server last
// listed it as resident; 0 when never seen.
func (p *Poller) SeenSize(c fleet.Candidate) uint64 {
	ep, _ := p.lookup(c)
	if ep == nil {
		return 0
	}
	sizes := ep.sizes.Load()
	if sizes == nil {
		return 0
	}
	for name, size := range *sizes {
		if fleet.SameModel(name, c.Model) {
			return size
		}
	}
	return 0
}

// Resident is a model an Ollama server has loaded, as its /api/ps says.
type Resident struct {
	Name     string
	Size     int64 // bytes the loaded model takes
	SizeVRAM int64 // of Size, bytes in GPU memory; less than Size means partly on CPU
}

// Spill returns the /api/ps entry of c's model when its Ollama server has
// it loaded; ok is false otherwise (not loaded, not Ollama, no poll yet, or
// the last poll failed). It does no I/O.
func (p *Poller) Spill(c fleet.Candidate) (r Resident, ok bool) {
	_, rep := p.lookup(c)
	if rep == nil || rep.err != nil || !rep.ollama {
		return Resident{}, false
	}
	for _, r := range rep.running {
		if fleet.SameModel(r.Name, c.Model) {
			return Resident{Name: r.Name, Size: r.Size, SizeVRAM: r.SizeVRAM}, true
		}
	}
	return Resident{}, false
}

// VLLM is what a vLLM server's /metrics says of one model.
type VLLM struct {
	// KVCache is the KV cache's use, 1 = full; KVCacheKnown is false when
	// the server exports neither its current nor its deprecated name.
	KVCache      float64
	KVCacheKnown bool
	// Waiting and Running are the requests queued and running.
	Waiting, Running float64
}

// VLLM returns what c's vLLM server last said of c's model (of all its
// models together when none is named like it); ok is false for other
// servers and before the first good poll. It does no I/O.
func (p *Poller) VLLM(c fleet.Candidate) (v VLLM, ok bool) {
	_, rep := p.lookup(c)
	if rep == nil || rep.err != nil {
		return VLLM{}, false
	}
	g, ok := rep.gauges(c.Model)
	if !ok {
		return VLLM{}, false
	}
	return VLLM{KVCache: g.kv, KVCacheKnown: g.kvKnown, Waiting: g.waiting, Running: g.running}, true
}

// LlamaCPP is what a llama.cpp server's /metrics and /slots say.
type LlamaCPP struct {
	// Deferred is llamacpp:requests_deferred (its /metrics, with
	// --metrics): requests waiting for a slot.
	Deferred float64
	// Slots is how many requests it runs at once (its /slots); Busy how
	// many of them are processing. Slots is 0 when /slots is off.
	Slots, Busy int
}

// LlamaCPP returns what c's llama.cpp server last said; ok is false for
// other servers and before the first good poll. It does no I/O.
func (p *Poller) LlamaCPP(c fleet.Candidate) (l LlamaCPP, ok bool) {
	_, rep := p.lookup(c)
	if rep == nil || rep.err != nil || rep.llama == nil {
		return LlamaCPP{}, false
	}
	return LlamaCPP{Deferred: rep.llama.deferred, Slots: rep.llama.slots, Busy: rep.llama.busy}, true
}

// Loading reports whether c's server said at its last poll (at) that it is
// loading its model; known is false before the first poll, for servers
// that never say (Ollama), and while polls fail. It does no I/O.
func (p *Poller) Loading(c fleet.Candidate) (loading bool, at time.Time, known bool) {
	_, rep := p.lookup(c)
	if rep == nil || rep.err != nil || rep.ollama {
		return false, time.Time{}, false
	}
	return rep.loading, rep.at, rep.loading || rep.llama != nil
}

// Unreachable returns why c's server did not answer its polls and since
// when they have failed in a row; a nil error when its last poll answered
// or before the first. It does no I/O.
func (p *Poller) Unreachable(c fleet.Candidate) (err error, since time.Time) {
	_, rep := p.lookup(c)
	if rep == nil || rep.err == nil {
		return nil, time.Time{}
	}
	return rep.err, rep.failingSince
}
