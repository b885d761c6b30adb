package system

import (
	"fmt"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/httpapi"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// StatusDoc is GET /switchyard/v1/status (docs/API.md).
type StatusDoc struct {
	Version           string          `json:"version"`
	Demo              bool            `json:"demo"`
	Listen            string          `json:"listen"`
	DefaultModel      string          `json:"default_model"`
	DeepThinkingModel string          `json:"deep_thinking_model"`
	Hedge             bool            `json:"hedge"`
	Candidates        []CandidateDoc  `json:"candidates"`
	GPU               GPUDoc          `json:"gpu"`
	Host              HostDoc         `json:"host"`
	Config            ConfigStatusDoc `json:"config"`
	History           HistoryDoc      `json:"history"`
}

// HistoryDoc says whether the history can be written.
type HistoryDoc struct {
	OK          bool       `json:"ok"`
	Error       string     `json:"error"`
	Since       *time.Time `json:"since"`
	Pending     int        `json:"pending"`
	Lost        int64      `json:"lost"`
	WriteErrors int64      `json:"write_errors"`
}

// CandidateDoc is one candidate in the status.
type CandidateDoc struct {
	ID               string            `json:"id"`
	Provider         fleet.Provider    `json:"provider"`
	URL              string            `json:"url"`
	Model            string            `json:"model"`
	Priority         int               `json:"priority"`
	Enabled          bool              `json:"enabled"`
	SupportsThinking bool              `json:"supports_thinking"`
	Breaker          BreakerDoc        `json:"breaker"`
	BusyMS           int64             `json:"busy_ms"`
	Loading          bool              `json:"loading"`
	ConfigError      string            `json:"config_error"`
	InFlight         int               `json:"in_flight"`
	Slots            int               `json:"slots"`
	DeadlineMS       int64             `json:"deadline_ms"`
	Cold             bool              `json:"cold"`
	TTFT             TTFTDoc           `json:"ttft"`
	Demoted          bool              `json:"demoted"`
	Pressure         *fleet.GPUReading `json:"pressure"`
}

// BreakerDoc is a breaker's state in the status.
type BreakerDoc struct {
	State       fleet.BreakerState `json:"state"`
	Failures    int                `json:"failures"`
	RemainingMS int64              `json:"remaining_ms"`
	Probing     bool               `json:"probing"`
	Since       time.Time          `json:"since"`
}

// TTFTDoc is a candidate's learned TTFT.
type TTFTDoc struct {
	N     int   `json:"n"`
	P50MS int64 `json:"p50_ms"`
	P95MS int64 `json:"p95_ms"`
	P99MS int64 `json:"p99_ms"`
}

// GPUDoc is the GPU part of the status.
type GPUDoc struct {
	Available bool        `json:"available"`
	Message   string      `json:"message"`
	Devices   []DeviceDoc `json:"devices"`
	SampledAt *time.Time  `json:"sampled_at"`
}

// DeviceDoc is one GPU.
type DeviceDoc struct {
	Index          int          `json:"index"`
	Name           string       `json:"name"`
	UUID           string       `json:"uuid"`
	MemoryTotal    uint64       `json:"memory_total_bytes"`
	MemoryUsed     uint64       `json:"memory_used_bytes"`
	MemoryFree     uint64       `json:"memory_free_bytes"`
	UtilizationPct float64      `json:"utilization_pct"`
	Processes      []ProcessDoc `json:"processes"`
}

// ProcessDoc is one process using a GPU.
type ProcessDoc struct {
	PID       uint32 `json:"pid"`
	Name      string `json:"name"`
	UsedBytes uint64 `json:"used_bytes"`
}

// HostDoc is the host's CPU and memory.
type HostDoc struct {
	CPUPct        float64 `json:"cpu_pct"`
	MemoryTotal   uint64  `json:"memory_total_bytes"`
	MemoryUsed    uint64  `json:"memory_used_bytes"`
	MemoryUsedPct float64 `json:"memory_used_pct"`
}

// ConfigStatusDoc says which config is in force.
type ConfigStatusDoc struct {
	Path    string     `json:"path"`
	Source  Source     `json:"source"`
	Error   string     `json:"error"`
	ErrorAt *time.Time `json:"error_at"`
}

// Status returns the status document.
func (s *System) Status() any {
	s.mu.Lock()
	cfg, cs := s.cfg, s.configStatus()
	s.mu.Unlock()
	doc := StatusDoc{
		Version: Version, Demo: s.demo != nil, Listen: s.Addr(),
		DefaultModel: cfg.Chat.DefaultModel, DeepThinkingModel: cfg.Chat.DeepThinkingModel, Hedge: cfg.Selection.Hedge,
		Candidates: []CandidateDoc{},
		GPU:        GPUDoc{Message: "no NVIDIA GPU found", Devices: []DeviceDoc{}},
		Config:     cs,
	}
	if smp, ok := s.Sampler.Latest(); ok {
		doc.GPU = GPUDoc{Available: smp.GPU.Available, Message: smp.GPU.Message, Devices: []DeviceDoc{}}
		if !smp.GPU.At.IsZero() {
			at := smp.GPU.At
			doc.GPU.SampledAt = &at
		}
		for _, d := range smp.GPU.Devices {
			dd := DeviceDoc{Index: d.Index, Name: d.Name, UUID: d.UUID, MemoryTotal: d.Total, MemoryUsed: d.Used,
				MemoryFree: d.Free, UtilizationPct: d.UtilizationPct, Processes: []ProcessDoc{}}
			for _, p := range d.Processes {
				dd.Processes = append(dd.Processes, ProcessDoc{PID: p.PID, Name: p.Name, UsedBytes: p.UsedBytes})
			}
			doc.GPU.Devices = append(doc.GPU.Devices, dd)
		}
		h := smp.Host
		doc.Host = HostDoc{CPUPct: h.CPUPct, MemoryTotal: h.MemTotal, MemoryUsed: h.MemUsed, MemoryUsedPct: h.MemUsedPct}
	}
	h := s.Store.Health()
	doc.History = HistoryDoc{OK: h.Err == nil, Pending: h.Pending, Lost: h.Lost, WriteErrors: h.WriteErrors}
	if h.Err != nil {
		since := h.Since
		doc.History.Error, doc.History.Since = h.Err.Error(), &since
	}
	for _, st := range s.Router.States() {
		c := st.Candidate
		t := s.Learner.Stats(c.ID)
		doc.Candidates = append(doc.Candidates, CandidateDoc{
			ID: c.ID, Provider: c.Provider, URL: c.URL, Model: c.Model, Priority: c.Priority, Enabled: c.Enabled,
			SupportsThinking: c.SupportsThinking,
			Breaker: BreakerDoc{State: st.Breaker.State, Failures: st.Breaker.Failures, RemainingMS: st.Breaker.Remaining.Milliseconds(),
				Probing: st.Breaker.Probing, Since: st.Breaker.Since},
			BusyMS: st.BusyFor.Milliseconds(), Loading: st.Loading, ConfigError: st.Missing, InFlight: st.InFlight, Slots: st.Slots,
			DeadlineMS: st.Deadline.Milliseconds(), Cold: st.Cold,
			TTFT:    TTFTDoc{N: t.N, P50MS: t.P50.Milliseconds(), P95MS: t.P95.Milliseconds(), P99MS: t.P99.Milliseconds()},
			Demoted: st.Pressure != nil, Pressure: st.Pressure,
		})
	}
	return doc
}

// configStatus is called with s.mu held.
func (s *System) configStatus() ConfigStatusDoc {
	cs := ConfigStatusDoc{Path: s.cfgPath, Source: s.source}
	if s.rejected != nil {
		at := s.rejectedAt
		cs.Error, cs.ErrorAt = s.rejected.Error(), &at
	}
	return cs
}

// ConfigDoc returns GET /switchyard/v1/config.
func (s *System) ConfigDoc() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.configStatus()
	return map[string]any{"path": cs.Path, "source": cs.Source, "yaml": s.cfgText, "error": cs.Error, "error_at": cs.ErrorAt}
}

// render writes a config as the YAML a user would write, for a config
// that came from discovery or the demo rather than a file.
func render(cfg config.Config) string {
	type cand struct {
		ID               string `yaml:"id"`
		Provider         string `yaml:"provider"`
		URL              string `yaml:"url"`
		Model            string `yaml:"model"`
		Priority         int    `yaml:"priority"`
		Enabled          bool   `yaml:"enabled"`
		SupportsThinking bool   `yaml:"supports_thinking"`
	}
	var cands []cand
	for _, c := range cfg.Chat.Candidates {
		cands = append(cands, cand{c.ID, string(c.Provider), c.URL, c.Model, c.Priority, c.Enabled, c.SupportsThinking})
	}
	doc := map[string]any{
		"listen": cfg.Listen,
		"selection": map[string]any{
			"failure_threshold": cfg.Selection.FailureThreshold, "open_duration": cfg.Selection.OpenDuration.String(),
			"first_token_timeout": cfg.Selection.FirstTokenTimeout.String(), "stall_timeout": cfg.Selection.StallTimeout.String(),
			"hedge": cfg.Selection.Hedge,
		},
		"gpu":  map[string]any{"demote_free_below": fmt.Sprintf("%dMiB", cfg.GPU.DemoteFreeBelow>>20), "demote_used_ratio": cfg.GPU.DemoteUsedRatio},
		"chat": map[string]any{"default_model": cfg.Chat.DefaultModel, "deep_thinking_model": cfg.Chat.DeepThinkingModel, "candidates": cands},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return ""
	}
	return "# generated: no config file was found\n" + string(b)
}

// demoControl exposes the demo fleet's fault injection to the API.
func (s *System) demoControl() httpapi.Demo {
	if s.demo == nil {
		return nil
	}
	return &demoControl{f: s.demo, monitor: s.Monitor, pressured: map[string]bool{}}
}

// FaultVRAMPressure is the demo fault that simulates a GPU near
// out-of-memory under a candidate: it is demoted, not broken.
const FaultVRAMPressure = "vram_pressure"

type demoControl struct {
	f         *simfleet.Fleet
	monitor   *gpu.Monitor
	mu        sync.Mutex
	pressured map[string]bool
}

func (d *demoControl) Servers() []httpapi.DemoServer {
	var out []httpapi.DemoServer
	for _, c := range d.f.Candidates() {
		out = append(out, d.server(c.ID))
	}
	return out
}

func (d *demoControl) server(id string) httpapi.DemoServer {
	srv := d.f.Server(id)
	c := srv.Candidate(id, 0)
	fault := srv.Fault().String()
	d.mu.Lock()
	if d.pressured[id] {
		fault = FaultVRAMPressure
	}
	d.mu.Unlock()
	return httpapi.DemoServer{Candidate: id, Provider: string(c.Provider), URL: c.URL, Fault: fault}
}

func (d *demoControl) Faults() []string {
	return []string{"healthy", "refuse", "status:503", "busy", "hang_headers", "hang_first_token", "role_then_stall",
		"close_before_first", "empty", "error_event", "die_after:3", "truncated", "malformed", "slow", FaultVRAMPressure}
}

func (d *demoControl) SetFault(candidate, fault string) (httpapi.DemoServer, error) {
	if d.f.Server(candidate) == nil {
		return httpapi.DemoServer{}, fmt.Errorf("no demo server %q", candidate)
	}
	pressure := fault == FaultVRAMPressure
	if pressure {
		fault = "healthy"
	}
	f, err := simfleet.ParseFault(fault)
	if err != nil {
		return httpapi.DemoServer{}, err
	}
	if err := d.f.SetFault(candidate, f); err != nil {
		return httpapi.DemoServer{}, err
	}
	var reading *fleet.GPUReading
	if pressure {
		reading = gpu.SimulatedReading(0)
	}
	d.monitor.SetSimulated(candidate, reading)
	d.mu.Lock()
	d.pressured[candidate] = pressure
	d.mu.Unlock()
	return d.server(candidate), nil
}
