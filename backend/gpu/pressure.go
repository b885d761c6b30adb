package gpu

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Sources of a fleet.GPUReading.
const (
	SourceNVML        = "nvml"         // a local GPU, read through NVML
	SourceOllamaPS    = "ollama_ps"    // an Ollama server's /api/ps
	SourceVLLMMetrics = "vllm_metrics" // a vLLM server's /metrics
	SourceLlamaCPP    = "llamacpp"     // a llama.cpp server's /metrics or /slots
	SourceSimulated   = "simulated"    // set by hand (demo mode), see Monitor.SetSimulated
)

// Policy says when a candidate is under pressure. The zero value of each
// field means its default.
type Policy struct {
	// FreeBelow: a GPU the candidate uses has less free memory than this
	// many bytes (config gpu.demote_free_below). Default 1 GiB.
	FreeBelow uint64
	// UsedRatio: a GPU the candidate uses has used/total above it
	// (config gpu.demote_used_ratio). Default 0.95.
	UsedRatio float64
	// KVCacheAbove: the candidate's vLLM server reports its KV cache
	// fuller than this (1 = full). Default 0.95.
	KVCacheAbove float64
}

func (p Policy) withDefaults() Policy {
	if p.FreeBelow == 0 {
		p.FreeBelow = 1 << 30
	}
	if p.UsedRatio <= 0 {
		p.UsedRatio = 0.95
	}
	if p.KVCacheAbove <= 0 {
		p.KVCacheAbove = 0.95
	}
	return p
}

// Sources are where a Monitor takes its readings from. A nil field means
// no such readings.
type Sources struct {
	// Sampler holds the latest reading of the local GPUs.
	Sampler *Sampler
	// Poller holds the servers' own reports and Ollama's resident models.
	Poller *Poller
	// Size returns the bytes c's model takes when loaded (the config's
	// size, or the size Ollama's /api/tags lists), 0 when unknown; the
	// size /api/ps showed when the model was last resident is used then.
	Size func(c fleet.Candidate) uint64
}

// Monitor decides which candidates are under GPU memory pressure, from the
// latest readings only: it does no I/O and takes no lock for longer than a
// map lookup, so the router calls it on the request path. It implements
// router.Pressure and is safe for concurrent use. Create it with
// NewMonitor (the zero value has no sources and the default policy); it
// owns nothing that needs closing.
type Monitor struct {
	src    Sources
	policy atomic.Pointer[Policy]

	simMu sync.RWMutex
	sim   map[string]fleet.GPUReading // by candidate id
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

// SetSimulated makes Pressure report r for the candidate with the given id,
// whatever the readings say, until it is called again with nil: demo mode's
// "VRAM pressure" on a machine without a GPU. r is copied; an empty Source
// becomes SourceSimulated, so history tells a staged reading from a real
// one. SimulatedReading makes a plausible r.
func (m *Monitor) SetSimulated(candidateID string, r *fleet.GPUReading) {
	m.simMu.Lock()
	defer m.simMu.Unlock()
	if m.sim == nil {
		m.sim = make(map[string]fleet.GPUReading)
	}
	if r == nil {
		delete(m.sim, candidateID)
		return
	}
	cp := *r
	if cp.Source == "" {
		cp.Source = SourceSimulated
	}
	m.sim[candidateID] = cp
}

// SimulatedReading is a staged reading for SetSimulated: GPU gpu of 24 GiB
// with 0.6 GiB free.
func SimulatedReading(gpu int) *fleet.GPUReading {
	total, free := uint64(24*gib), uint64(gib*6/10)
	return &fleet.GPUReading{
		GPU: gpu, Source: SourceSimulated, FreeBytes: free, UsedBytes: total - free, TotalBytes: total,
		Reason: fmt.Sprintf("GPU %d: free %s < 1 GiB (simulated)", gpu, gibs(free)),
	}
}

// Pressure implements router.Pressure: the reading that demotes c, or nil
// when c is fine. In order:
//
//   - a simulated reading set for c;
//   - a GPU c uses (c.GPUs when set, else every local GPU when c.Local,
//     else none) with free memory below FreeBelow, or used/total above
//     UsedRatio;
//   - c's model is not resident (its Ollama server's /api/ps does not list
//     it) and its size exceeds the free memory of c's GPUs together;
//   - c's server's own report (Poller.Pressure): Ollama model spilled to
//     CPU, vLLM KV cache above KVCacheAbove, llama.cpp queueing.
//
// Missing readings never demote: no GPU reading, no poll yet, unknown
// size. The returned reading is c's own copy.
func (m *Monitor) Pressure(c fleet.Candidate) *fleet.GPUReading {
	m.simMu.RLock()
	sim, ok := m.sim[c.ID]
	m.simMu.RUnlock()
	if ok {
		return &sim
	}
	pol := Policy{}.withDefaults()
	if p := m.policy.Load(); p != nil {
		pol = *p
	}
	if r := m.local(c, pol); r != nil {
		return r
	}
	if m.src.Poller != nil {
		return m.src.Poller.Pressure(c, pol)
	}
	return nil
}

// local checks c's local GPUs.
func (m *Monitor) local(c fleet.Candidate, pol Policy) *fleet.GPUReading {
	if m.src.Sampler == nil || (c.GPUs == nil && !c.Local) {
		return nil
	}
	smp, ok := m.src.Sampler.Latest()
	if !ok || !smp.GPU.Available {
		return nil
	}
	var devs []Device
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
	for _, d := range devs {
		if d.Free < pol.FreeBelow {
			return reading(d, fmt.Sprintf("GPU %d: free %s < %s", d.Index, gibs(d.Free), gibsLimit(pol.FreeBelow)))
		}
		if used := float64(d.Used) / float64(d.Total); used > pol.UsedRatio {
			return reading(d, fmt.Sprintf("GPU %d: %s used > %s", d.Index, pct(used), pct(pol.UsedRatio)))
		}
	}
	return m.tooBig(c, devs)
}

// tooBig reports c when its model is not resident and needs more memory
// than its GPUs have free together (Ollama spreads a model across GPUs).
func (m *Monitor) tooBig(c fleet.Candidate, devs []Device) *fleet.GPUReading {
	if m.src.Poller == nil {
		return nil
	}
	if resident, known, _ := m.src.Poller.Residency(c); !known || resident {
		return nil
	}
	var size uint64
	if m.src.Size != nil {
		size = m.src.Size(c)
	}
	if size == 0 {
		size = m.src.Poller.SeenSize(c)
	}
	var sum Device
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
	return reading(sum, fmt.Sprintf("%s not resident and needs %s, %s %s free", c.Model, gibs(size), gpus, gibs(sum.Free)))
}

func reading(d Device, reason string) *fleet.GPUReading {
	return &fleet.GPUReading{
		GPU: d.Index, Source: SourceNVML,
		FreeBytes: d.Free, UsedBytes: d.Used, TotalBytes: d.Total,
		Reason: reason,
	}
}
