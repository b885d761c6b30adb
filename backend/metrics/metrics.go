// Package metrics exports Switchyard's Prometheus series (docs/DESIGN.md,
// "Metrics and live events"), named
// switchyard_* in base units. It is a router.Observer: it learns
// everything from live events, and holds its own registry (no globals).
package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Metrics holds the series. Safe for concurrent use; create it with New.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	attempts  *prometheus.CounterVec
	ttft      *prometheus.HistogramVec
	duration  *prometheus.HistogramVec
	breaker   *prometheus.GaugeVec
	gpuUsed   *prometheus.GaugeVec
	gpuTotal  *prometheus.GaugeVec
	mu        sync.RWMutex
	knownName map[string]string // request model names kept as label values, by fleet.ModelKey
	cands     map[string]bool   // the candidates with a breaker series
}

// ttftBuckets follow OpenTelemetry's gen_ai.server.time_to_first_token,
// extended to the 60s first-token ceiling.
var ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}

// New returns the metrics, registered with Go and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_total", Help: "Requests by requested model, served candidate, fallback and status.",
		}, []string{"requested_model", "served_candidate", "fallback", "status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_attempts_total", Help: "Attempts by candidate and outcome.",
		}, []string{"candidate", "outcome"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_ttft_seconds", Help: "Time to first token of committed attempts, per candidate.", Buckets: ttftBuckets,
		}, []string{"candidate"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_request_duration_seconds", Help: "Request duration from arrival to the end of the answer.",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84},
		}, []string{"status"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_breaker_state", Help: "Circuit breaker state per candidate: 0 closed, 1 half-open, 2 open.",
		}, []string{"candidate"}),
		gpuUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_gpu_memory_used_bytes", Help: "GPU memory in use.",
		}, []string{"gpu"}),
		gpuTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_gpu_memory_total_bytes", Help: "GPU memory in all.",
		}, []string{"gpu"}),
		knownName: map[string]string{},
	}
	m.reg.MustRegister(m.requests, m.attempts, m.ttft, m.duration, m.breaker, m.gpuUsed, m.gpuTotal,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// HistoryHealth is what the history says of its writes.
type HistoryHealth struct {
	Writable    bool  // the last write worked
	Pending     int   // records waiting in memory to be written
	WriteErrors int64 // failed write transactions
	Lost        int64 // records lost for good
}

// WatchHistory exports the history's health, read from f at each scrape:
// switchyard_history_writable, _pending_records, _write_errors_total and
// _lost_records_total. Call it once.
func (m *Metrics) WatchHistory(f func() HistoryHealth) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_history_writable", Help: "1 when the history file can be written, 0 while writes fail.",
		}, func() float64 {
			if f().Writable {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_history_pending_records", Help: "Request records kept in memory until the history file can be written.",
		}, func() float64 { return float64(f().Pending) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_history_write_errors_total", Help: "History write transactions that failed.",
		}, func() float64 { return float64(f().WriteErrors) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_history_lost_records_total", Help: "Request records that could not be kept until the history file could be written.",
		}, func() float64 { return float64(f().Lost) }),
	)
}

// TeamHealth is what a team's node says of its link.
type TeamHealth struct {
	Online  bool  // both of its connections to the team database work
	Shipped int64 // records shipped since the start
}

// WatchTeam exports a team node's link, read from f at each scrape:
// switchyard_team_link_online and switchyard_team_shipped_records_total.
// Call it once, on a node of a team.
func (m *Metrics) WatchTeam(f func() TeamHealth) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_team_link_online", Help: "1 while this node's link to the team database works, 0 while it is offline.",
		}, func() float64 {
			if f().Online {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_team_shipped_records_total", Help: "Request records this node shipped to the team database since it started.",
		}, func() float64 { return float64(f().Shipped) }),
	)
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the metrics' registry, for extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetCandidates names the model values kept as requested_model labels
// (candidate ids and aliases); anything else a caller sends is counted as
// "other", so callers cannot blow up the series count. It publishes the
// breaker state of every candidate in breakers not seen yet (a breaker
// restored open at start is open), and drops the breaker series of
// candidates no longer configured (their counters stay: what they counted
// happened). Later changes come as breaker events.
func (m *Metrics) SetCandidates(names []string, breakers map[string]fleet.BreakerState) {
	known := make(map[string]string, len(names))
	for _, n := range names {
		known[fleet.ModelKey(n)] = n
	}
	now := make(map[string]bool, len(breakers))
	for c := range breakers {
		now[c] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.knownName = known
	for c := range m.cands {
		if !now[c] {
			// A state that no longer exists: an alert on an open
			// breaker must not fire for ever for a removed candidate.
			m.breaker.DeleteLabelValues(c)
		}
	}
	for c, st := range breakers {
		if !m.cands[c] {
			m.breaker.WithLabelValues(c).Set(breakerValue(st))
		}
	}
	m.cands = now
}

func (m *Metrics) modelLabel(model string) string {
	if model == "" {
		return "auto"
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	// The name as configured, however the caller wrote it ("C-OK",
	// "c-ok:latest" from Ollama's tags, as the router resolves them).
	if name, ok := m.knownName[fleet.ModelKey(model)]; ok {
		return name
	}
	return "other"
}

// Observe implements router.Observer.
func (m *Metrics) Observe(e fleet.Event) {
	switch e.Type {
	case fleet.EventAttempt:
		m.attempts.WithLabelValues(e.Attempt.Candidate, string(e.Attempt.Outcome)).Inc()
	case fleet.EventCommit:
		m.ttft.WithLabelValues(e.Attempt.Candidate).Observe(e.Attempt.TTFT.Seconds())
	case fleet.EventRequestDone:
		r := e.Request
		m.requests.WithLabelValues(m.modelLabel(r.RequestedModel), r.ServedCandidate, strconv.FormatBool(r.IsFallback), string(r.Status)).Inc()
		m.duration.WithLabelValues(string(r.Status)).Observe(r.Latency.Seconds())
	case fleet.EventBreaker:
		// A candidate a reload removed may still see its last attempt
		// end: its state is gone with it.
		m.mu.RLock()
		defer m.mu.RUnlock()
		if m.cands[e.Breaker.Candidate] {
			m.breaker.WithLabelValues(e.Breaker.Candidate).Set(breakerValue(e.Breaker.To))
		}
	}
}

func breakerValue(s fleet.BreakerState) float64 {
	switch s {
	case fleet.BreakerHalfOpen:
		return 1
	case fleet.BreakerOpen:
		return 2
	}
	return 0
}

// SetGPU publishes one GPU's memory reading.
func (m *Metrics) SetGPU(index int, used, total uint64) {
	g := strconv.Itoa(index)
	m.gpuUsed.WithLabelValues(g).Set(float64(used))
	m.gpuTotal.WithLabelValues(g).Set(float64(total))
}
