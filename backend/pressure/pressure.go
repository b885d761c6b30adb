// Package pressure is where Switchyard decides, from what the machine and
// the model servers say, which candidates are under GPU memory pressure
// (demoted: tried last) and how full each server is (a first-token wait
// there is a queue, not a failure). Every such decision is made here, from
// the latest readings only — the machine's GPUs (backend/gpu) and the
// servers' own reports (backend/upstream/report) — without I/O, so the
// router asks on the request path (docs/DESIGN.md, "GPU and server load").
package pressure

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/upstream/report"
)

// Sources of a fleet.GPUReading.
const (
	SourceNVML        = "nvml"         // a local GPU, read through NVML
	SourceSimulated   = "simulated"    // a simulated GPU of the demo fleet
	SourceOllamaPS    = "ollama_ps"    // an Ollama server's /api/ps
	SourceVLLMMetrics = "vllm_metrics" // a vLLM server's /metrics
)

// Policy says when a candidate is under pressure. The zero value of each
// field means its default.
type Policy struct {
	// FreeBelow: a GPU the candidate uses has less free memory than this
	// many bytes (config gpu.demote_free_below). Default
	// DefaultDemoteFreeBelow.
	FreeBelow uint64
	// UsedRatio: a GPU the candidate uses has used/total above it
	// (config gpu.demote_used_ratio). Default DefaultDemoteUsedRatio.
	UsedRatio float64
	// KVCacheAbove: the candidate's vLLM server reports its KV cache
	// fuller than this (1 = full). Default DefaultKVCacheAbove.
	KVCacheAbove float64
}

// Defaults of Policy.
const (
	DefaultDemoteFreeBelow = 1 << 30
	DefaultDemoteUsedRatio = 0.95
	DefaultKVCacheAbove    = 0.95
)

func (p Policy) withDefaults() Policy {
	if p.FreeBelow == 0 {
		p.FreeBelow = DefaultDemoteFreeBelow
	}
	if p.UsedRatio <= 0 {
		p.UsedRatio = DefaultDemoteUsedRatio
	}
	if p.KVCacheAbove <= 0 {
		p.KVCacheAbove = DefaultKVCacheAbove
	}
	return p
}

// OllamaSlots is how many requests an Ollama server is taken to run at
// once per model: OLLAMA_NUM_PARALLEL's default. A candidate's parallel
// setting overrides it.
const OllamaSlots = 1

// Reports are what the servers say about themselves, as
// report.Poller keeps it. Calls do no I/O.
type Reports interface {
	// Residency reports whether c's model is loaded, as seen at time at.
	Residency(c fleet.Candidate) (resident, known bool, at time.Time)
	// SeenSize is the size c's model had when it was last seen loaded.
	SeenSize(c fleet.Candidate) uint64
	// Spill is the /api/ps entry of c's model when it is loaded.
	Spill(c fleet.Candidate) (report.Resident, bool)
	// VLLM is what c's vLLM server said of c's model.
	VLLM(c fleet.Candidate) (report.VLLM, bool)
	// LlamaCPP is what c's llama.cpp server said.
	LlamaCPP(c fleet.Candidate) (report.LlamaCPP, bool)
	// Loading reports whether c's server said it loads its model.
	Loading(c fleet.Candidate) (loading bool, at time.Time, known bool)
}

// Sources are where a Monitor takes its readings from. A nil field means
// no such readings.
type Sources struct {
	// GPU returns the latest reading of the machine's GPUs (gpu.Sampler's
	// Latest); ok is false before the first.
	GPU func() (gpu.Sample, bool)
	// Reports are the servers' own reports.
	Reports Reports
	// Size returns the bytes c's model takes when loaded (the config's
	// size), 0 when unknown; the size /api/ps showed when the model was
	// last resident is used then.
	Size func(c fleet.Candidate) uint64
}

// Monitor makes the decisions: it implements router.Pressure and
// router.Capacity from the latest readings, without I/O, and is safe for
// concurrent use. Create it with NewMonitor; it owns nothing that needs
// closing.
type Monitor struct {
	src    Sources
	policy atomic.Pointer[Policy]
}

// NewMonitor returns a Monitor that applies p to the readings of src.
func NewMonitor(p Policy, src Sources) *Monitor {
	m := &Monitor{src: src}
	m.SetPolicy(p)
	return m
}

// SetPolicy replaces the policy (on a config reload).
func (m *Monitor) SetPolicy(p Policy) {
	p = p.withDefaults()
	m.policy.Store(&p)
}

// Pressure implements router.Pressure: the reading that demotes c, or nil
// when c is fine. In order:
//
//   - a GPU c uses (c.GPUs when set, else every local GPU when c.Local,
//     else none) with free memory below FreeBelow, or used/total above
//     UsedRatio;
//   - c's model is not resident (its Ollama server's /api/ps does not list
//     it) and its size exceeds the free memory of c's GPUs together;
//   - c's server's own report: an Ollama model that spilled from the GPU
//     into host memory (0 < size_vram < size; a model on the CPU by design,
//     size_vram 0, is not under memory pressure), or a vLLM KV cache fuller
//     than KVCacheAbove.
//
// Missing readings never demote: no GPU reading, no poll yet, unknown
// size. The returned reading is c's own copy.
func (m *Monitor) Pressure(c fleet.Candidate) *fleet.GPUReading {
	pol := *m.policy.Load()
	if r := m.local(c, pol); r != nil {
		return r
	}
	return m.server(c, pol)
}

// local checks c's local GPUs.
func (m *Monitor) local(c fleet.Candidate, pol Policy) *fleet.GPUReading {
	if m.src.GPU == nil || (c.GPUs == nil && !c.Local) {
		return nil
	}
	smp, ok := m.src.GPU()
	if !ok || !smp.GPU.Available {
		return nil
	}
	var devs []gpu.Device
	if c.GPUs != nil {
		for _, i := range c.GPUs {
			if d, ok := smp.GPU.Device(i); ok && d.Total > 0 {
				devs = append(devs, d)
			}
		}
	} else {
		for _, d := range smp.GPU.Devices {
			if d.Total > 0 {
				devs = append(devs, d)
			}
		}
	}
	if len(devs) == 0 {
		return nil
	}
	source, suffix := SourceNVML, ""
	if smp.GPU.Simulated {
		source, suffix = SourceSimulated, " (simulated)"
	}
	for _, d := range devs {
		if d.Free < pol.FreeBelow {
			return reading(d, source, fmt.Sprintf("GPU %d had %s free (below %s)%s", d.Index, gibs(d.Free), gibsLimit(pol.FreeBelow), suffix))
		}
		if used := float64(d.Used) / float64(d.Total); used > pol.UsedRatio {
			return reading(d, source, fmt.Sprintf("GPU %d was %s used (above %s)%s", d.Index, pct(used), pct(pol.UsedRatio), suffix))
		}
	}
	return m.tooBig(c, devs, source)
}

// tooBig reports c when its model is not resident and needs more memory
// than its GPUs have free together (Ollama spreads a model across GPUs).
func (m *Monitor) tooBig(c fleet.Candidate, devs []gpu.Device, source string) *fleet.GPUReading {
	if m.src.Reports == nil {
		return nil
	}
	if resident, known, _ := m.src.Reports.Residency(c); !known || resident {
		return nil
	}
	var size uint64
	if m.src.Size != nil {
		size = m.src.Size(c)
	}
	if size == 0 {
		size = m.src.Reports.SeenSize(c)
	}
	var sum gpu.Device
	idx := make([]string, 0, len(devs))
	for _, d := range devs {
		sum.Free += d.Free
		sum.Used += d.Used
		sum.Total += d.Total
		idx = append(idx, strconv.Itoa(d.Index))
	}
	if size == 0 || size <= sum.Free {
		return nil
	}
	sum.Index = devs[0].Index
	gpus := "GPU " + idx[0] + " has"
	if len(idx) > 1 {
		gpus = "GPUs " + strings.Join(idx, ",") + " have"
	}
	return reading(sum, source, fmt.Sprintf("%s not resident and needs %s, %s %s free", c.Model, gibs(size), gpus, gibs(sum.Free)))
}

// server checks what c's server says of itself.
func (m *Monitor) server(c fleet.Candidate, pol Policy) *fleet.GPUReading {
	if m.src.Reports == nil {
		return nil
	}
	if r, ok := m.src.Reports.Spill(c); ok && r.SizeVRAM > 0 && r.SizeVRAM < r.Size {
		return &fleet.GPUReading{
			GPU: -1, Source: SourceOllamaPS, UsedBytes: uint64(r.SizeVRAM), TotalBytes: uint64(r.Size),
			Reason: fmt.Sprintf("%s spilled to CPU: %.1f of %s in VRAM", c.Model, float64(r.SizeVRAM)/gib, gibs(uint64(r.Size))),
		}
	}
	if v, ok := m.src.Reports.VLLM(c); ok && v.KVCacheKnown && v.KVCache > pol.KVCacheAbove {
		reason := "vLLM KV cache " + pct(v.KVCache) + " full"
		if v.Waiting > 0 {
			reason += ", " + strconv.FormatFloat(v.Waiting, 'f', -1, 64) + " waiting"
		}
		return &fleet.GPUReading{GPU: -1, Source: SourceVLLMMetrics, Reason: reason}
	}
	return nil
}

// Slots implements router.Capacity: how many requests c's server runs at
// once, as far as its reports tell: llama.cpp's number of slots,
// OllamaSlots for Ollama; 0 when unknown.
func (m *Monitor) Slots(c fleet.Candidate) int {
	if c.Provider == fleet.ProviderOllama {
		return OllamaSlots
	}
	if m.src.Reports == nil {
		return 0
	}
	l, _ := m.src.Reports.LlamaCPP(c)
	return l.Slots
}

// Waiting implements router.Capacity: c's server says requests wait for
// it (llama.cpp requests deferred, vLLM requests waiting). Busy slots are
// not waiting requests: they are mostly Switchyard's own, which the router
// counts itself, and a poll seconds old would take a finished one for a
// queue.
func (m *Monitor) Waiting(c fleet.Candidate) bool {
	if m.src.Reports == nil {
		return false
	}
	if l, ok := m.src.Reports.LlamaCPP(c); ok && l.Deferred > 0 {
		return true
	}
	v, ok := m.src.Reports.VLLM(c)
	return ok && v.Waiting > 0
}

// Queue implements router.Capacity: the requests c's server last reported
// running and waiting, from every client (llama.cpp's busy slots and
// deferred requests, vLLM's running and waiting requests); known is false
// for a server that reports none (Ollama).
func (m *Monitor) Queue(c fleet.Candidate) (running, waiting int, known bool) {
	if m.src.Reports == nil {
		return 0, 0, false
	}
	if l, ok := m.src.Reports.LlamaCPP(c); ok {
		return l.Busy, int(l.Deferred), true
	}
	if v, ok := m.src.Reports.VLLM(c); ok {
		return int(v.Running), int(v.Waiting), true
	}
	return 0, 0, false
}

// Loading implements router.Capacity: c's server said at its last poll
// that it is loading its model.
func (m *Monitor) Loading(c fleet.Candidate) (loading bool, at time.Time, known bool) {
	if m.src.Reports == nil {
		return false, time.Time{}, false
	}
	return m.src.Reports.Loading(c)
}

func reading(d gpu.Device, source, reason string) *fleet.GPUReading {
	return &fleet.GPUReading{
		GPU: d.Index, Source: source,
		FreeBytes: d.Free, UsedBytes: d.Used, TotalBytes: d.Total,
		Reason: reason,
	}
}

const gib = 1 << 30

// gibs formats a measured size: "12.1 GiB".
func gibs(b uint64) string {
	return fmt.Sprintf("%.1f GiB", float64(b)/gib)
}

// gibsLimit formats a configured size without a needless decimal: "1 GiB",
// "0.5 GiB".
func gibsLimit(b uint64) string {
	return strconv.FormatFloat(math.Round(float64(b)/gib*10)/10, 'f', -1, 64) + " GiB"
}

// pct formats a ratio as a percent with at most one decimal: 0.96 → "96%",
// 0.955 → "95.5%".
func pct(ratio float64) string {
	return strconv.FormatFloat(math.Round(ratio*1000)/10, 'f', -1, 64) + "%"
}
