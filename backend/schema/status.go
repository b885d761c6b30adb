package schema

import (
	"time"

	"github.com/switchyard/switchyard/backend/deadline"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/team"
)

// Status is GET /switchyard/v1/status, and the status event.
type Status struct {
	Version string `json:"version"`
	Demo    bool   `json:"demo"`
	Listen  string `json:"listen"`
	// ListenTaken is the address the API was to listen on and found taken
	// (the desktop app then listens on a free port); "" otherwise.
	ListenTaken       string `json:"listen_taken"`
	DefaultModel      string `json:"default_model"`
	DeepThinkingModel string `json:"deep_thinking_model"`
	Hedge             bool   `json:"hedge"`
	// MinSamples is how many warm TTFT samples a candidate needs before
	// its deadline is learned (selection.min_samples).
	MinSamples int         `json:"min_samples"`
	Candidates []Candidate `json:"candidates"`
	GPU        GPU         `json:"gpu"`
	Host       Host        `json:"host"`
	Config     ConfigState `json:"config"`
	History    History     `json:"history"`
	// Team is this node's link to its team, null without a team.
	Team *TeamLink `json:"team"`
}

// Candidate is one candidate with its breaker, load and learned TTFT.
type Candidate struct {
	ID               string         `json:"id"`
	Provider         fleet.Provider `json:"provider"`
	URL              string         `json:"url"`
	Model            string         `json:"model"`
	Priority         int            `json:"priority"`
	Enabled          bool           `json:"enabled"`
	SupportsThinking bool           `json:"supports_thinking"`
	// Embeds: the model makes embeddings; EmbedOnly: nothing else (chats
	// skip it).
	Embeds    bool    `json:"embeds"`
	EmbedOnly bool    `json:"embed_only"`
	Breaker   Breaker `json:"breaker"`
	BusyMS    int64   `json:"busy_ms"`
	// Loading: its server was last seen loading the model.
	Loading bool `json:"loading"`
	// ConfigError says its server does not serve its model, "" when it
	// does.
	ConfigError string `json:"config_error"`
	// AuthError says its server refused Switchyard's credentials (401,
	// 403: its api_key_env) at the last request, "" when it has not or
	// answered since.
	AuthError string `json:"auth_error"`
	// Unreachable says why its server does not answer Switchyard's polls
	// ("connection refused"), "" while it answers; UnreachableSince is
	// since when.
	Unreachable      string     `json:"unreachable"`
	UnreachableSince *time.Time `json:"unreachable_since"`
	// GPUs are the local GPUs its model runs on, as configured; AllGPUs:
	// none configured and its server is on this machine, so every local
	// GPU (SPEC 4).
	GPUs     []int `json:"gpus"`
	AllGPUs  bool  `json:"all_gpus"`
	InFlight int   `json:"in_flight"`
	Slots    int   `json:"slots"`
	// ServerQueue is the work its server last reported from every
	// client (llama.cpp, vLLM), nil for a server that reports none.
	ServerQueue *ServerQueue `json:"server_queue"`
	// BusyWithOthers is the evidence of its last wait behind work its
	// server was busy with (within the last minute), "" when none: busy,
	// not sick, and distinct from an open breaker.
	BusyWithOthers string     `json:"busy_with_others"`
	BusySince      *time.Time `json:"busy_since"`
	DeadlineMS     int64      `json:"deadline_ms"`
	Cold           bool       `json:"cold"`
	TTFT           TTFT       `json:"ttft"`
	// Demoted: tried last, for its GPU's memory (Pressure) or because
	// another node of the team reports its server failing (Pressure's
	// source "team").
	Demoted  bool     `json:"demoted"`
	Pressure *Reading `json:"pressure"`
	// KeptOut: two nodes of the team or more report its server failing,
	// so it is skipped as an open breaker is, until then; nil when not.
	KeptOut *KeptOut `json:"kept_out"`
}

// KeptOut is why a candidate is kept out by its team's reports, and until
// when.
type KeptOut struct {
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
}

// ServerQueue is what a server reports of its work, from every client.
type ServerQueue struct {
	Running int `json:"running"`
	Waiting int `json:"waiting"`
}

// Breaker is a candidate's breaker state.
type Breaker struct {
	State       fleet.BreakerState `json:"state"`
	Failures    int                `json:"failures"`
	RemainingMS int64              `json:"remaining_ms"`
	Probing     bool               `json:"probing"`
	Since       time.Time          `json:"since"`
}

// TTFT is a candidate's learned warm time to first token.
type TTFT struct {
	N     int   `json:"n"`
	P50MS int64 `json:"p50_ms"`
	P95MS int64 `json:"p95_ms"`
	P99MS int64 `json:"p99_ms"`
}

// GPU is this machine's GPUs.
type GPU struct {
	Available bool       `json:"available"`
	Message   string     `json:"message"`
	Devices   []Device   `json:"devices"`
	SampledAt *time.Time `json:"sampled_at"`
	// Simulated: the devices are the demo fleet's, not real.
	Simulated bool `json:"simulated"`
}

// Device is one GPU.
type Device struct {
	Index          int       `json:"index"`
	Name           string    `json:"name"`
	UUID           string    `json:"uuid"`
	MemoryTotal    uint64    `json:"memory_total_bytes"`
	MemoryUsed     uint64    `json:"memory_used_bytes"`
	MemoryFree     uint64    `json:"memory_free_bytes"`
	UtilizationPct float64   `json:"utilization_pct"`
	Processes      []Process `json:"processes"`
}

// Process is one process using a GPU.
type Process struct {
	PID       uint32 `json:"pid"`
	Name      string `json:"name"`
	UsedBytes uint64 `json:"used_bytes"`
}

// Host is this machine's CPU and memory.
type Host struct {
	CPUPct        float64 `json:"cpu_pct"`
	MemoryTotal   uint64  `json:"memory_total_bytes"`
	MemoryUsed    uint64  `json:"memory_used_bytes"`
	MemoryUsedPct float64 `json:"memory_used_pct"`
}

// ConfigState says which config is in force and why the last edit was
// rejected, if it was.
type ConfigState struct {
	Path string `json:"path"`
	// Source is "file", "discovered" (the embedded default found local
	// servers) or "demo".
	Source  string     `json:"source"`
	Error   string     `json:"error"`
	ErrorAt *time.Time `json:"error_at"`
}

// History says whether the history file can be written.
type History struct {
	OK          bool       `json:"ok"`
	Error       string     `json:"error"`
	Since       *time.Time `json:"since"`
	Pending     int        `json:"pending"`
	Lost        int64      `json:"lost"`
	WriteErrors int64      `json:"write_errors"`
}

// Config is GET /switchyard/v1/config: the config in force.
type Config struct {
	ConfigState
	// YAML is the config in force as its file says it, or as it was
	// generated (embedded default, demo).
	YAML string `json:"yaml"`
}

// ConfigWritten is POST /switchyard/v1/config/write: where the config was
// written.
type ConfigWritten struct {
	Path string `json:"path"`
}

// StatusInput is what a status document is made of.
type StatusInput struct {
	Version, Listen, ListenTaken    string
	Demo                            bool
	DefaultModel, DeepThinkingModel string
	Hedge                           bool
	MinSamples                      int
	Candidates                      []router.CandidateState
	// TTFT returns a candidate's learned TTFT.
	TTFT func(id string) deadline.Stats
	// Unreachable says why a candidate's server does not answer, and
	// since when; "" while it does. Nil: every server answers.
	Unreachable func(c fleet.Candidate) (why string, since time.Time)
	// Sample is the latest GPU and host reading; nil before the first.
	Sample  *gpu.Sample
	Config  ConfigState
	History history.Health
	// Team is the team's state, nil without a team.
	Team *team.Status
}

// NewStatus builds the status document.
func NewStatus(in StatusInput) Status {
	doc := Status{
		Version: in.Version, Demo: in.Demo, Listen: in.Listen, ListenTaken: in.ListenTaken,
		DefaultModel: in.DefaultModel, DeepThinkingModel: in.DeepThinkingModel, Hedge: in.Hedge, MinSamples: in.MinSamples,
		Candidates: make([]Candidate, 0, len(in.Candidates)),
		GPU:        GPU{Message: gpu.MessageNoGPU, Devices: []Device{}},
		Config:     in.Config,
		History:    NewHistory(in.History),
	}
	if in.Team != nil {
		link := NewTeamLink(*in.Team)
		doc.Team = &link
	}
	if in.Sample != nil {
		doc.GPU, doc.Host = NewGPU(in.Sample.GPU), NewHost(in.Sample.Host)
	}
	for _, st := range in.Candidates {
		c := st.Candidate
		var t deadline.Stats
		if in.TTFT != nil {
			t = in.TTFT(c.ID)
		}
		var why string
		var since *time.Time
		if in.Unreachable != nil {
			if w, at := in.Unreachable(c); w != "" {
				why, since = w, &at
			}
		}
		doc.Candidates = append(doc.Candidates, Candidate{
			Unreachable: why, UnreachableSince: since,
			GPUs: append([]int{}, c.GPUs...), AllGPUs: c.GPUs == nil && c.Local,
			ID: c.ID, Provider: c.Provider, URL: c.URL, Model: c.Model, Priority: c.Priority, Enabled: c.Enabled,
			SupportsThinking: c.SupportsThinking,
			Embeds:           c.Embeds,
			EmbedOnly:        c.EmbedOnly,
			Breaker: Breaker{State: st.Breaker.State, Failures: st.Breaker.Failures, RemainingMS: st.Breaker.Remaining.Milliseconds(),
				Probing: st.Breaker.Probing, Since: st.Breaker.Since},
			BusyMS: st.BusyFor.Milliseconds(), Loading: st.Loading, ConfigError: st.Missing, AuthError: st.Refused, InFlight: st.InFlight, Slots: st.Slots,
			BusyWithOthers: st.BusyWithOthers,
			DeadlineMS:     st.Deadline.Milliseconds(), Cold: st.Cold,
			TTFT:    TTFT{N: t.N, P50MS: t.P50.Milliseconds(), P95MS: t.P95.Milliseconds(), P99MS: t.P99.Milliseconds()},
			Demoted: st.Pressure != nil, Pressure: NewReading(st.Pressure),
		})
	}
	for i, st := range in.Candidates {
		switch c := &doc.Candidates[i]; {
		case st.Team.Out:
			c.KeptOut = &KeptOut{Reason: st.Team.Reason, Until: st.Team.Until}
		case st.Team.Suspect && st.Pressure == nil:
			c.Demoted, c.Pressure = true, &Reading{GPU: -1, Source: router.TeamSource, Reason: "another node of the team reports " + st.Team.Reason}
		}
		if st.QueueKnown {
			doc.Candidates[i].ServerQueue = &ServerQueue{Running: st.Running, Waiting: st.Waiting}
		}
		if !st.BusySince.IsZero() {
			since := st.BusySince
			doc.Candidates[i].BusySince = &since
		}
	}
	return doc
}

// NewGPU is a GPU reading as the API shows it.
func NewGPU(s gpu.Snapshot) GPU {
	out := GPU{Available: s.Available, Message: s.Message, Simulated: s.Simulated, Devices: make([]Device, 0, len(s.Devices))}
	if !s.At.IsZero() {
		at := s.At
		out.SampledAt = &at
	}
	for _, d := range s.Devices {
		dd := Device{Index: d.Index, Name: d.Name, UUID: d.UUID, MemoryTotal: d.Total, MemoryUsed: d.Used,
			MemoryFree: d.Free, UtilizationPct: d.UtilizationPct, Processes: make([]Process, 0, len(d.Processes))}
		for _, p := range d.Processes {
			dd.Processes = append(dd.Processes, Process{PID: p.PID, Name: p.Name, UsedBytes: p.UsedBytes})
		}
		out.Devices = append(out.Devices, dd)
	}
	return out
}

// NewHost is a host reading as the API shows it.
func NewHost(h gpu.Host) Host {
	return Host{CPUPct: h.CPUPct, MemoryTotal: h.MemTotal, MemoryUsed: h.MemUsed, MemoryUsedPct: h.MemUsedPct}
}

// NewHistory is the history's health as the API shows it.
func NewHistory(h history.Health) History {
	out := History{OK: h.Err == nil, Pending: h.Pending, Lost: h.Lost, WriteErrors: h.WriteErrors}
	if h.Err != nil {
		since := h.Since
		out.Error, out.Since = h.Err.Error(), &since
	}
	return out
}
