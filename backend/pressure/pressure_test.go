package pressure

import (
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream/report"
)

// The router takes a Monitor as its Pressure and its Capacity; the poller
// gives it the servers' reports.
var (
	_ router.Pressure = (*Monitor)(nil)
	_ router.Capacity = (*Monitor)(nil)
	_ Reports         = (*report.Poller)(nil)
)

// gibf is g GiB in bytes.
func gibf(g float64) uint64 { return uint64(g * gib) }

// dev is a GPU of total GiB with free GiB free.
func dev(index int, total, free float64) gpu.Device {
	t, f := gibf(total), gibf(free)
	return gpu.Device{Index: index, Name: "NVIDIA RTX 4090", Total: t, Free: f, Used: t - f, Processes: []gpu.Process{}}
}

// fakeReports is what the servers report, as the test sets it: Ollama's
// /api/ps (running, nil when never polled), and every model it has shown.
type fakeReports struct {
	mu      sync.Mutex
	running []report.Resident
	seen    map[string]uint64
	at      time.Time
	vllm    *report.VLLM
	llama   *report.LlamaCPP
}

func (f *fakeReports) set(running ...report.Resident) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running, f.at = append([]report.Resident{}, running...), time.Now()
	if f.seen == nil {
		f.seen = map[string]uint64{}
	}
	for _, r := range running {
		f.seen[r.Name] = uint64(r.Size)
	}
}

func (f *fakeReports) find(c fleet.Candidate) (report.Resident, bool) {
	for _, r := range f.running {
		if fleet.SameModel(r.Name, c.Model) {
			return r, true
		}
	}
	return report.Resident{}, false
}

func (f *fakeReports) Residency(c fleet.Candidate) (bool, bool, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		return false, false, time.Time{}
	}
	_, ok := f.find(c)
	return ok, true, f.at
}

func (f *fakeReports) SeenSize(c fleet.Candidate) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, size := range f.seen {
		if fleet.SameModel(name, c.Model) {
			return size
		}
	}
	return 0
}

func (f *fakeReports) Spill(c fleet.Candidate) (report.Resident, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.find(c)
}

func (f *fakeReports) VLLM(fleet.Candidate) (report.VLLM, bool) {
	if f.vllm == nil {
		return report.VLLM{}, false
	}
	return *f.vllm, true
}

func (f *fakeReports) LlamaCPP(fleet.Candidate) (report.LlamaCPP, bool) {
	if f.llama == nil {
		return report.LlamaCPP{}, false
	}
	return *f.llama, true
}

func (f *fakeReports) Loading(fleet.Candidate) (bool, time.Time, bool) {
	return false, time.Time{}, false
}

// monitorRig is a Monitor over a GPU reading and server reports the test
// sets.
type monitorRig struct {
	mu      sync.Mutex
	sample  gpu.Sample
	sampled bool
	reports *fakeReports
	mon     *Monitor
	sizes   map[string]uint64
}

func newMonitorRig(t *testing.T, p Policy, cands ...fleet.Candidate) *monitorRig {
	t.Helper()
	r := &monitorRig{reports: &fakeReports{}, sizes: map[string]uint64{}}
	r.mon = NewMonitor(p, Sources{GPU: r.gpu, Reports: r.reports, Size: func(c fleet.Candidate) uint64 { return r.sizes[c.ID] }})
	return r
}

func (r *monitorRig) gpu() (gpu.Sample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sample, r.sampled
}

// setGPUs is the next GPU reading: devs, available.
func (r *monitorRig) setGPUs(devs ...gpu.Device) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sample, r.sampled = gpu.Sample{At: time.Now(), GPU: gpu.Snapshot{Available: true, Devices: devs}}, true
}

func ollamaCand(id, model string, gpus []int, local bool) fleet.Candidate {
	return fleet.Candidate{ID: id, Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:11434", Model: model, Enabled: true, GPUs: gpus, Local: local}
}

func TestMonitorPressure(t *testing.T) {
	const big = "qwen3:32b"
	tests := []struct {
		name    string
		policy  Policy
		devs    []gpu.Device
		cand    fleet.Candidate
		running []report.Resident // /api/ps; nil: the model is resident
		size    uint64
		want    *fleet.GPUReading // nil: no pressure
	}{{
		name: "plenty free",
		devs: []gpu.Device{dev(0, 24, 12)},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name: "free below 1 GiB",
		devs: []gpu.Device{dev(0, 24, 0.6)},
		cand: ollamaCand("a", big, []int{0}, true),
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: gibf(0.6), UsedBytes: 24*gib - gibf(0.6), TotalBytes: 24 * gib,
			Reason: "GPU 0 had 0.6 GiB free (below 1 GiB)"},
	}, {
		name:   "free below a configured 2.5 GiB",
		policy: Policy{FreeBelow: 5 * gib / 2},
		devs:   []gpu.Device{dev(0, 80, 2)},
		cand:   ollamaCand("a", big, []int{0}, true),
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: 2 * gib, UsedBytes: 78 * gib, TotalBytes: 80 * gib,
			Reason: "GPU 0 had 2.0 GiB free (below 2.5 GiB)"},
	}, {
		name: "used ratio above 95%",
		devs: []gpu.Device{dev(0, 80, 80), dev(1, 100, 4)},
		cand: ollamaCand("a", big, []int{0, 1}, true),
		want: &fleet.GPUReading{GPU: 1, Source: "nvml", FreeBytes: 4 * gib, UsedBytes: 96 * gib, TotalBytes: 100 * gib,
			Reason: "GPU 1 was 96% used (above 95%)"},
	}, {
		name:   "used ratio under a looser policy",
		policy: Policy{UsedRatio: 0.97},
		devs:   []gpu.Device{dev(0, 100, 4)},
		cand:   ollamaCand("a", big, []int{0}, true),
	}, {
		name:    "not resident and too big",
		devs:    []gpu.Device{dev(0, 80, 12.1)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []report.Resident{{Name: "llama3.2:3b", Size: 3 * gib, SizeVRAM: 3 * gib}},
		size:    20 * gib,
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: gibf(12.1), UsedBytes: 80*gib - gibf(12.1), TotalBytes: 80 * gib,
			Reason: "qwen3:32b not resident and needs 20.0 GiB, GPU 0 has 12.1 GiB free"},
	}, {
		name:    "not resident, too big for two GPUs together",
		devs:    []gpu.Device{dev(0, 24, 8), dev(1, 24, 10)},
		cand:    ollamaCand("a", big, []int{0, 1}, true),
		running: []report.Resident{},
		size:    20 * gib,
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: 18 * gib, UsedBytes: 30 * gib, TotalBytes: 48 * gib,
			Reason: "qwen3:32b not resident and needs 20.0 GiB, GPUs 0,1 have 18.0 GiB free"},
	}, {
		name:    "not resident but fits",
		devs:    []gpu.Device{dev(0, 80, 30)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []report.Resident{},
		size:    20 * gib,
	}, {
		name:    "not resident, size unknown",
		devs:    []gpu.Device{dev(0, 80, 12)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []report.Resident{},
	}, {
		name: "resident: its size is already in use",
		devs: []gpu.Device{dev(0, 80, 12)},
		cand: ollamaCand("a", big, []int{0}, true),
		size: 20 * gib,
	}, {
		name: "local without gpus uses every GPU",
		devs: []gpu.Device{dev(0, 24, 20), dev(1, 24, 0.5)},
		cand: ollamaCand("a", big, nil, true),
		want: &fleet.GPUReading{GPU: 1, Source: "nvml", FreeBytes: gib / 2, UsedBytes: 24*gib - gib/2, TotalBytes: 24 * gib,
			Reason: "GPU 1 had 0.5 GiB free (below 1 GiB)"},
	}, {
		name: "gpus names only its own GPU",
		devs: []gpu.Device{dev(0, 24, 20), dev(1, 24, 0.5)},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name: "gpus: [] means none",
		devs: []gpu.Device{dev(0, 24, 0.5)},
		cand: ollamaCand("a", big, []int{}, true),
	}, {
		name: "remote endpoint ignores local GPUs",
		devs: []gpu.Device{dev(0, 24, 0.5)},
		cand: ollamaCand("a", big, nil, false),
	}, {
		name: "a GPU missing from the sample is no reading",
		devs: []gpu.Device{dev(0, 24, 20)},
		cand: ollamaCand("a", big, []int{3}, true),
	}, {
		name: "a GPU without memory info never demotes",
		devs: []gpu.Device{{Index: 0, Name: "NVIDIA Jetson"}},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name:    "spilled to CPU on its Ollama server",
		devs:    []gpu.Device{dev(0, 80, 40)},
		cand:    ollamaCand("a", big, nil, false),
		running: []report.Resident{{Name: big, Size: 20 * gib, SizeVRAM: 12 * gib}},
		want: &fleet.GPUReading{GPU: -1, Source: "ollama_ps", UsedBytes: 12 * gib, TotalBytes: 20 * gib,
			Reason: "qwen3:32b spilled to CPU: 12.0 of 20.0 GiB in VRAM"},
	}, {
		// A server without a GPU reports size_vram 0: the model runs on
		// the CPU by design, and CPU-only fleets keep their order.
		name:    "wholly on CPU",
		cand:    ollamaCand("a", "qwen3", nil, false),
		running: []report.Resident{{Name: "qwen3:latest", Size: 5 * gib}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newMonitorRig(t, tt.policy, tt.cand)
			r.setGPUs(tt.devs...)
			running := tt.running
			if running == nil {
				running = []report.Resident{{Name: tt.cand.Model, Size: int64(tt.size), SizeVRAM: int64(tt.size)}}
			}
			r.reports.set(running...)
			r.sizes[tt.cand.ID] = tt.size
			got := r.mon.Pressure(tt.cand)
			if !sameReading(got, tt.want) {
				t.Errorf("Pressure() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func sameReading(a, b *fleet.GPUReading) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestMonitorWithoutReadings(t *testing.T) {
	c := ollamaCand("a", "qwen3:8b", []int{0}, true)
	if got := NewMonitor(Policy{}, Sources{}).Pressure(c); got != nil {
		t.Errorf("Pressure() without sources = %+v; want nil", got)
	}
	r := newMonitorRig(t, Policy{}, c)
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() before the first sample = %+v; want nil", got)
	}
	// NVML unavailable: the snapshot has no devices and demotes nothing.
	r.mu.Lock()
	r.sample, r.sampled = gpu.Sample{GPU: gpu.Snapshot{Message: gpu.MessageNoGPU}}, true
	r.mu.Unlock()
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() without NVML = %+v; want nil", got)
	}
}

func TestMonitorRecovers(t *testing.T) {
	c := ollamaCand("a", "qwen3:8b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.reports.set(report.Resident{Name: "qwen3:8b", Size: 5 * gib, SizeVRAM: 5 * gib})
	r.setGPUs(dev(0, 24, 0.5))
	if got := r.mon.Pressure(c); got == nil {
		t.Fatal("Pressure() = nil under pressure")
	}
	r.setGPUs(dev(0, 24, 10))
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() after recovery = %+v; want nil", got)
	}
}

func TestMonitorSetPolicy(t *testing.T) {
	c := ollamaCand("a", "qwen3:8b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.setGPUs(dev(0, 24, 2))
	if got := r.mon.Pressure(c); got != nil {
		t.Fatalf("Pressure() = %+v; want nil", got)
	}
	r.mon.SetPolicy(Policy{FreeBelow: 4 * gib})
	got := r.mon.Pressure(c)
	if got == nil || got.Reason != "GPU 0 had 2.0 GiB free (below 4 GiB)" {
		t.Errorf("Pressure() after SetPolicy = %+v; want 2.0 GiB free (below 4 GiB)", got)
	}
}

func TestMonitorSeenSize(t *testing.T) {
	// Without a configured size, the size /api/ps showed while the model
	// was resident decides.
	c := ollamaCand("a", "qwen3:32b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.setGPUs(dev(0, 80, 12))
	r.reports.set(report.Resident{Name: "qwen3:32b", Size: 20 * gib, SizeVRAM: 20 * gib})
	if got := r.mon.Pressure(c); got != nil {
		t.Fatalf("Pressure() while resident = %+v; want nil", got)
	}
	r.reports.set()
	got := r.mon.Pressure(c)
	if got == nil || got.Reason != "qwen3:32b not resident and needs 20.0 GiB, GPU 0 has 12.0 GiB free" {
		t.Errorf("Pressure() after unload = %+v; want not resident and needs 20.0 GiB", got)
	}
}

// The demo fleet's simulated GPUs demote like real ones, and say so.
func TestMonitorSimulatedGPU(t *testing.T) {
	c := ollamaCand("qwen3-8b", "qwen3:8b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.mu.Lock()
	r.sample, r.sampled = gpu.Sample{GPU: gpu.Snapshot{Available: true, Simulated: true, Devices: []gpu.Device{dev(0, 24, 0.6)}}}, true
	r.mu.Unlock()
	want := &fleet.GPUReading{GPU: 0, Source: "simulated", FreeBytes: gibf(0.6), UsedBytes: 24*gib - gibf(0.6), TotalBytes: 24 * gib,
		Reason: "GPU 0 had 0.6 GiB free (below 1 GiB) (simulated)"}
	if got := r.mon.Pressure(c); !sameReading(got, want) {
		t.Errorf("Pressure() = %+v; want %+v", got, want)
	}
}

// What a server says of its own load: vLLM's KV cache demotes; its
// waiting requests and llama.cpp's deferred ones say it queues; llama.cpp's
// slots and Ollama's default say how many it runs at once.
func TestMonitorServerLoad(t *testing.T) {
	vllm := fleet.Candidate{ID: "v", Provider: fleet.ProviderOpenAI, Model: "Qwen/Qwen3-32B", Enabled: true}
	r := newMonitorRig(t, Policy{}, vllm)
	r.reports.vllm = &report.VLLM{KVCache: 0.97, KVCacheKnown: true, Waiting: 3}
	want := &fleet.GPUReading{GPU: -1, Source: "vllm_metrics", Reason: "vLLM KV cache 97% full, 3 waiting"}
	if got := r.mon.Pressure(vllm); !sameReading(got, want) {
		t.Errorf("Pressure(vllm) = %+v; want %+v", got, want)
	}
	if !r.mon.Waiting(vllm) {
		t.Error("Waiting(vllm) = false with 3 waiting")
	}
	r.reports.vllm = &report.VLLM{KVCache: 0.5, KVCacheKnown: true}
	if got := r.mon.Pressure(vllm); got != nil || r.mon.Waiting(vllm) {
		t.Errorf("Pressure(vllm) = %+v, waiting %v; want none", got, r.mon.Waiting(vllm))
	}
	llama := fleet.Candidate{ID: "l", Provider: fleet.ProviderOpenAI, Model: "tiny", Enabled: true}
	r = newMonitorRig(t, Policy{}, llama)
	r.reports.llama = &report.LlamaCPP{Slots: 4, Busy: 4}
	if r.mon.Slots(llama) != 4 || r.mon.Waiting(llama) || r.mon.Pressure(llama) != nil {
		t.Errorf("llama.cpp with every slot busy: slots %d waiting %v pressure %v; want 4 slots, no queue said, no pressure",
			r.mon.Slots(llama), r.mon.Waiting(llama), r.mon.Pressure(llama))
	}
	r.reports.llama = &report.LlamaCPP{Slots: 1, Deferred: 2}
	if !r.mon.Waiting(llama) {
		t.Error("Waiting(llama) = false with requests deferred")
	}
	if got := r.mon.Slots(ollamaCand("o", "qwen3", nil, false)); got != OllamaSlots {
		t.Errorf("Slots(ollama) = %d; want OLLAMA_NUM_PARALLEL's default %d", got, OllamaSlots)
	}
}

func TestFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{gibs(gib * 6 / 10), "0.6 GiB"},
		{gibs(20 * gib), "20.0 GiB"},
		{gibsLimit(gib), "1 GiB"},
		{gibsLimit(gib / 2), "0.5 GiB"},
		{pct(0.96), "96%"},
		{pct(0.955), "95.5%"},
		{pct(0.95), "95%"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q; want %q", tt.got, tt.want)
		}
	}
}
