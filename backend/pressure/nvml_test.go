//go:build linux && cgo

package pressure

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/upstream/report"
)

// TestNVMLPressure drives a candidate on GPU 0 of go-nvml's mock DGX H100
// across each threshold and back, through the real NVML reader and
// Sampler.
func TestNVMLPressure(t *testing.T) {
	m := dgxh100.New()
	mem := make([]nvml.Memory_v2, len(m.Devices))
	setFree := func(i int, free float64) {
		total := uint64(80 * gib)
		f := gibf(free)
		mem[i] = nvml.Memory_v2{Total: total, Reserved: gib / 2, Free: f, Used: total - f}
	}
	for i, d := range m.Devices {
		setFree(i, 70)
		dev := d.(*server.Device)
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return mem[i], nvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	nv := gpu.OpenNVMLFrom(m)
	defer nv.Close()
	sampler := &gpu.Sampler{GPU: nv, Host: func(ctx context.Context) (gpu.Host, error) { return gpu.Host{}, nil }}
	reports := &fakeReports{}
	c := ollamaCand("qwen3-32b", "qwen3:32b", []int{0}, true)
	neighbour := ollamaCand("llama", "llama3.2:3b", []int{1}, true)
	everywhere := ollamaCand("any", "qwen3:8b", nil, true)
	mon := NewMonitor(Policy{}, Sources{GPU: sampler.Latest, Reports: reports, Size: func(fleet.Candidate) uint64 { return 20 * gib }})
	resident := []report.Resident{
		{Name: "qwen3:32b", Size: 20 * gib, SizeVRAM: 20 * gib},
		{Name: "llama3.2:3b", Size: 3 * gib, SizeVRAM: 3 * gib},
		{Name: "qwen3:8b", Size: 6 * gib, SizeVRAM: 6 * gib},
	}

	steps := []struct {
		name    string
		free    float64 // GiB free on GPU 0
		running []report.Resident
		want    string // reason for c; "" for none
		wantAny bool   // everywhere (all GPUs) is under pressure too
	}{
		{name: "healthy", free: 70, running: resident},
		{name: "free below 1 GiB", free: 0.6, running: resident, want: "GPU 0 had 0.6 GiB free (below 1 GiB)", wantAny: true},
		{name: "used ratio above 95%", free: 3.2, running: resident, want: "GPU 0 was 96% used (above 95%)", wantAny: true},
		{name: "not resident and too big", free: 12.1, running: resident[1:], want: "qwen3:32b not resident and needs 20.0 GiB, GPU 0 has 12.1 GiB free"},
		{name: "not resident but fits", free: 30, running: resident[1:]},
		{name: "recovered", free: 70, running: resident},
	}
	for _, st := range steps {
		setFree(0, st.free)
		reports.set(st.running...)
		sampler.Sample(t.Context())

		got := mon.Pressure(c)
		switch {
		case st.want == "" && got != nil:
			t.Errorf("%s: Pressure() = %+v; want nil", st.name, got)
		case st.want != "":
			total, free := uint64(80*gib), gibf(st.free)
			want := &fleet.GPUReading{GPU: 0, Source: "nvml", FreeBytes: free, UsedBytes: total - free, TotalBytes: total, Reason: st.want}
			if !sameReading(got, want) {
				t.Errorf("%s: Pressure() = %+v; want %+v", st.name, got, want)
			}
		}
		if got := mon.Pressure(neighbour); got != nil {
			t.Errorf("%s: Pressure(candidate on GPU 1) = %+v; want nil", st.name, got)
		}
		if got := mon.Pressure(everywhere); (got != nil) != st.wantAny {
			t.Errorf("%s: Pressure(candidate on every GPU) = %+v; want pressure %v", st.name, got, st.wantAny)
		}
	}
}
