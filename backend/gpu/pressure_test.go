package gpu

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
)

// The router takes a Monitor as its Pressure.
var _ router.Pressure = (*Monitor)(nil)

// TestMain fails the package when a goroutine outlives the tests: the
// Sampler and Poller must stop cleanly, and no poll may leave a
// connection behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeReader is a Reader whose snapshot the test sets.
type fakeReader struct {
	mu    sync.Mutex
	snap  Snapshot
	err   error
	reads int
}

func (f *fakeReader) Read(ctx context.Context) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.snap, f.err
}

func (f *fakeReader) set(devs ...Device) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = Snapshot{Available: true, Devices: devs}
}

func (f *fakeReader) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func noHost(context.Context) (Host, error) {
	return Host{CPUPct: 12, MemTotal: 64 * gib, MemUsed: 16 * gib, MemUsedPct: 25}, nil
}

// gibf is g GiB in bytes.
func gibf(g float64) uint64 { return uint64(g * gib) }

// dev is a GPU of total GiB with free GiB free.
func dev(index int, total, free float64) Device {
	t, f := gibf(total), gibf(free)
	return Device{Index: index, Name: "NVIDIA RTX 4090", Total: t, Free: f, Used: t - f, Processes: []Process{}}
}

// fakePS is an Ollama /api/ps answer the test sets, installed into a
// Poller so that no socket is needed.
type fakePS struct {
	mu      sync.Mutex
	running []ollama.Running
	err     error
	calls   int
}

func (f *fakePS) list(ctx context.Context, baseURL string) ([]ollama.Running, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return append([]ollama.Running(nil), f.running...), f.err
}

func (f *fakePS) set(err error, running ...ollama.Running) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running, f.err = running, err
}

// monitorRig is a Monitor over a fake GPU reader and a fake /api/ps.
type monitorRig struct {
	gpus    *fakeReader
	ps      *fakePS
	sampler *Sampler
	poller  *Poller
	mon     *Monitor
	sizes   map[string]uint64
}

func newMonitorRig(t *testing.T, p Policy, cands ...fleet.Candidate) *monitorRig {
	t.Helper()
	r := &monitorRig{gpus: &fakeReader{}, ps: &fakePS{}, sizes: map[string]uint64{}}
	r.sampler = &Sampler{GPU: r.gpus, Host: noHost}
	r.poller = NewPoller(nil, PollerSettings{})
	r.poller.ps = r.ps.list
	r.poller.Update(cands)
	r.mon = NewMonitor(p, Sources{Sampler: r.sampler, Poller: r.poller, Size: func(c fleet.Candidate) uint64 { return r.sizes[c.ID] }})
	return r
}

// refresh takes a GPU sample and polls /api/ps.
func (r *monitorRig) refresh(t *testing.T) {
	t.Helper()
	r.sampler.Sample(t.Context())
	r.poller.s.Now = nextTick(r.poller.s.Now) // every endpoint is due again
	r.poller.Poll(t.Context())
}

// nextTick returns a clock stopped an hour after now's, so every poll is
// due.
func nextTick(now func() time.Time) func() time.Time {
	t := now().Add(time.Hour)
	return func() time.Time { return t }
}

func ollamaCand(id, model string, gpus []int, local bool) fleet.Candidate {
	return fleet.Candidate{ID: id, Provider: fleet.ProviderOllama, URL: "http://10.0.0.5:11434", Model: model, Enabled: true, GPUs: gpus, Local: local}
}

func TestMonitorPressure(t *testing.T) {
	const big = "qwen3:32b"
	tests := []struct {
		name    string
		policy  Policy
		devs    []Device
		cand    fleet.Candidate
		running []ollama.Running // /api/ps; nil: the model is resident
		size    uint64
		want    *fleet.GPUReading // nil: no pressure
	}{{
		name: "plenty free",
		devs: []Device{dev(0, 24, 12)},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name: "free below 1 GiB",
		devs: []Device{dev(0, 24, 0.6)},
		cand: ollamaCand("a", big, []int{0}, true),
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: gibf(0.6), UsedBytes: 24*gib - gibf(0.6), TotalBytes: 24 * gib,
			Reason: "GPU 0: free 0.6 GiB < 1 GiB"},
	}, {
		name:   "free below a configured 2.5 GiB",
		policy: Policy{FreeBelow: 5 * gib / 2},
		devs:   []Device{dev(0, 80, 2)},
		cand:   ollamaCand("a", big, []int{0}, true),
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: 2 * gib, UsedBytes: 78 * gib, TotalBytes: 80 * gib,
			Reason: "GPU 0: free 2.0 GiB < 2.5 GiB"},
	}, {
		name: "used ratio above 95%",
		devs: []Device{dev(0, 80, 80), dev(1, 100, 4)},
		cand: ollamaCand("a", big, []int{0, 1}, true),
		want: &fleet.GPUReading{GPU: 1, Source: "nvml", FreeBytes: 4 * gib, UsedBytes: 96 * gib, TotalBytes: 100 * gib,
			Reason: "GPU 1: 96% used > 95%"},
	}, {
		name:   "used ratio under a looser policy",
		policy: Policy{UsedRatio: 0.97},
		devs:   []Device{dev(0, 100, 4)},
		cand:   ollamaCand("a", big, []int{0}, true),
	}, {
		name:    "not resident and too big",
		devs:    []Device{dev(0, 80, 12.1)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []ollama.Running{{Name: "llama3.2:3b", Size: 3 * gib, SizeVRAM: 3 * gib}},
		size:    20 * gib,
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: gibf(12.1), UsedBytes: 80*gib - gibf(12.1), TotalBytes: 80 * gib,
			Reason: "qwen3:32b not resident and needs 20.0 GiB, GPU 0 has 12.1 GiB free"},
	}, {
		name:    "not resident, too big for two GPUs together",
		devs:    []Device{dev(0, 24, 8), dev(1, 24, 10)},
		cand:    ollamaCand("a", big, []int{0, 1}, true),
		running: []ollama.Running{},
		size:    20 * gib,
		want: &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: 18 * gib, UsedBytes: 30 * gib, TotalBytes: 48 * gib,
			Reason: "qwen3:32b not resident and needs 20.0 GiB, GPUs 0,1 have 18.0 GiB free"},
	}, {
		name:    "not resident but fits",
		devs:    []Device{dev(0, 80, 30)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []ollama.Running{},
		size:    20 * gib,
	}, {
		name:    "not resident, size unknown",
		devs:    []Device{dev(0, 80, 12)},
		cand:    ollamaCand("a", big, []int{0}, true),
		running: []ollama.Running{},
	}, {
		name: "resident: its size is already in use",
		devs: []Device{dev(0, 80, 12)},
		cand: ollamaCand("a", big, []int{0}, true),
		size: 20 * gib,
	}, {
		name: "local without gpus uses every GPU",
		devs: []Device{dev(0, 24, 20), dev(1, 24, 0.5)},
		cand: ollamaCand("a", big, nil, true),
		want: &fleet.GPUReading{GPU: 1, Source: "nvml", FreeBytes: gib / 2, UsedBytes: 24*gib - gib/2, TotalBytes: 24 * gib,
			Reason: "GPU 1: free 0.5 GiB < 1 GiB"},
	}, {
		name: "gpus names only its own GPU",
		devs: []Device{dev(0, 24, 20), dev(1, 24, 0.5)},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name: "gpus: [] means none",
		devs: []Device{dev(0, 24, 0.5)},
		cand: ollamaCand("a", big, []int{}, true),
	}, {
		name: "remote endpoint ignores local GPUs",
		devs: []Device{dev(0, 24, 0.5)},
		cand: ollamaCand("a", big, nil, false),
	}, {
		name: "a GPU missing from the sample is no reading",
		devs: []Device{dev(0, 24, 20)},
		cand: ollamaCand("a", big, []int{3}, true),
	}, {
		name: "a GPU without memory info never demotes",
		devs: []Device{{Index: 0, Name: "NVIDIA Jetson"}},
		cand: ollamaCand("a", big, []int{0}, true),
	}, {
		name:    "spilled to CPU on its Ollama server",
		devs:    []Device{dev(0, 80, 40)},
		cand:    ollamaCand("a", big, nil, false),
		running: []ollama.Running{{Name: big, Size: 20 * gib, SizeVRAM: 12 * gib}},
		want: &fleet.GPUReading{GPU: -1, Source: "ollama_ps", UsedBytes: 12 * gib, TotalBytes: 20 * gib,
			Reason: "qwen3:32b spilled to CPU: 12.0 of 20.0 GiB in VRAM"},
	}, {
		// A server without a GPU reports size_vram 0: the model runs on
		// the CPU by design, and CPU-only fleets keep their order.
		name:    "wholly on CPU",
		cand:    ollamaCand("a", "qwen3", nil, false),
		running: []ollama.Running{{Name: "qwen3:latest", Size: 5 * gib}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newMonitorRig(t, tt.policy, tt.cand)
			r.gpus.set(tt.devs...)
			running := tt.running
			if running == nil {
				running = []ollama.Running{{Name: tt.cand.Model, Size: int64(tt.size), SizeVRAM: int64(tt.size)}}
			}
			r.ps.set(nil, running...)
			r.sizes[tt.cand.ID] = tt.size
			r.refresh(t)
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
	r.gpus.snap = Snapshot{Message: MessageNoGPU}
	r.refresh(t)
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() without NVML = %+v; want nil", got)
	}
	// A failed reading fails open.
	r.gpus.set(dev(0, 24, 0.2))
	r.gpus.err = errors.New("nvml device count: ERROR_GPU_IS_LOST")
	r.refresh(t)
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() after a failed reading = %+v; want nil", got)
	}
}

func TestMonitorRecovers(t *testing.T) {
	c := ollamaCand("a", "qwen3:8b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.ps.set(nil, ollama.Running{Name: "qwen3:8b", Size: 5 * gib, SizeVRAM: 5 * gib})
	r.gpus.set(dev(0, 24, 0.5))
	r.refresh(t)
	if got := r.mon.Pressure(c); got == nil {
		t.Fatal("Pressure() = nil under pressure")
	}
	r.gpus.set(dev(0, 24, 10))
	r.refresh(t)
	if got := r.mon.Pressure(c); got != nil {
		t.Errorf("Pressure() after recovery = %+v; want nil", got)
	}
}

func TestMonitorSetPolicy(t *testing.T) {
	c := ollamaCand("a", "qwen3:8b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.gpus.set(dev(0, 24, 2))
	r.refresh(t)
	if got := r.mon.Pressure(c); got != nil {
		t.Fatalf("Pressure() = %+v; want nil", got)
	}
	r.mon.SetPolicy(Policy{FreeBelow: 4 * gib})
	got := r.mon.Pressure(c)
	if got == nil || got.Reason != "GPU 0: free 2.0 GiB < 4 GiB" {
		t.Errorf("Pressure() after SetPolicy = %+v; want free 2.0 GiB < 4 GiB", got)
	}
}

func TestMonitorSeenSize(t *testing.T) {
	// Without a configured size, the size /api/ps showed while the model
	// was resident decides.
	c := ollamaCand("a", "qwen3:32b", []int{0}, true)
	r := newMonitorRig(t, Policy{}, c)
	r.gpus.set(dev(0, 80, 12))
	r.ps.set(nil, ollama.Running{Name: "qwen3:32b", Size: 20 * gib, SizeVRAM: 20 * gib})
	r.refresh(t)
	if got := r.mon.Pressure(c); got != nil {
		t.Fatalf("Pressure() while resident = %+v; want nil", got)
	}
	r.ps.set(nil)
	r.refresh(t)
	got := r.mon.Pressure(c)
	if got == nil || got.Reason != "qwen3:32b not resident and needs 20.0 GiB, GPU 0 has 12.0 GiB free" {
		t.Errorf("Pressure() after unload = %+v; want not resident and needs 20.0 GiB", got)
	}
}

func TestMonitorSimulated(t *testing.T) {
	c := ollamaCand("qwen3-8b", "qwen3:8b", nil, true)
	other := ollamaCand("llama", "llama3.2:3b", nil, true)
	var m Monitor // the zero value works: no sources, the default policy
	m.SetSimulated(c.ID, SimulatedReading(0))
	got := m.Pressure(c)
	want := &fleet.GPUReading{GPU: 0, Source: "simulated", FreeBytes: gib * 6 / 10, UsedBytes: 24*gib - gib*6/10, TotalBytes: 24 * gib,
		Reason: "GPU 0: free 0.6 GiB < 1 GiB (simulated)"}
	if !sameReading(got, want) {
		t.Errorf("Pressure() = %+v; want %+v", got, want)
	}
	got.Reason = "changed by the caller"
	if again := m.Pressure(c); again.Reason != want.Reason {
		t.Errorf("a caller's change leaked into the next Pressure(): %q", again.Reason)
	}
	if got := m.Pressure(other); got != nil {
		t.Errorf("Pressure(other) = %+v; want nil", got)
	}
	m.SetSimulated(other.ID, &fleet.GPUReading{GPU: 1, Reason: "staged"})
	if got := m.Pressure(other); got == nil || got.Source != SourceSimulated {
		t.Errorf("Pressure(other) = %+v; want source simulated", got)
	}
	m.SetSimulated(c.ID, nil)
	if got := m.Pressure(c); got != nil {
		t.Errorf("Pressure() after clearing = %+v; want nil", got)
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
