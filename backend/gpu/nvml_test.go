//go:build linux && cgo

package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockGPUs is a DGX H100 from go-nvml's mock whose devices' memory,
// utilisation and processes the test sets through the mock's func fields.
type mockGPUs struct {
	*server.Server
	mem []nvml.Memory_v2
}

func newMockGPUs(t *testing.T) *mockGPUs {
	t.Helper()
	m := &mockGPUs{Server: dgxh100.New()}
	m.mem = make([]nvml.Memory_v2, len(m.Devices))
	for i, d := range m.Devices {
		dev := d.(*server.Device)
		m.setFree(i, 70)
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return m.mem[i], nvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 10 * gib}}, nvml.SUCCESS
		}
	}
	return m
}

// setFree gives device i free GiB of its 80 GiB.
func (m *mockGPUs) setFree(i int, free float64) {
	total := uint64(80 * gib)
	f := gibf(free)
	m.mem[i] = nvml.Memory_v2{Total: total, Reserved: gib / 2, Free: f, Used: total - f}
}

func (m *mockGPUs) device(i int) *server.Device { return m.Devices[i].(*server.Device) }

func procNames(pid uint32) string {
	if pid == 1003 {
		return "" // gone before /proc was read
	}
	return "ollama"
}

func TestNVMLReadsDevices(t *testing.T) {
	m := newMockGPUs(t)
	r := openNVML(m, procNames)
	snap, err := r.Read(t.Context())
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if !snap.Available || snap.Message != "" || len(snap.Devices) != 8 {
		t.Fatalf("Read() = available %v, %q, %d devices; want available, no message, 8 devices", snap.Available, snap.Message, len(snap.Devices))
	}
	for i, d := range snap.Devices {
		if d.Index != i || d.Name != "NVIDIA H100 80GB HBM3" || !strings.HasPrefix(d.UUID, "GPU-") ||
			d.Total != 80*gib || d.Free != 70*gib || d.Used != 10*gib || d.UtilizationPct != float64(10*i) {
			t.Errorf("device %d = %+v", i, d)
		}
		wantName := "ollama"
		if i == 3 {
			wantName = ""
		}
		if len(d.Processes) != 1 || d.Processes[0] != (Process{PID: uint32(1000 + i), Name: wantName, UsedBytes: 10 * gib}) {
			t.Errorf("device %d processes = %+v", i, d.Processes)
		}
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if n := len(m.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown calls = %d; want 1", n)
	}
	snap, err = r.Read(t.Context())
	if err != nil || snap.Available || !strings.HasPrefix(snap.Message, MessageNoGPU) {
		t.Errorf("Read() after Close = %+v, %v; want unavailable", snap, err)
	}
	if n := len(m.InitCalls()); n != 1 {
		t.Errorf("Init calls = %d; want 1", n)
	}
}

// TestNVMLDeviceErrors: the fallbacks and tolerated errors of one device,
// and devices NVML reports as lost missing from the sample.
func TestNVMLDeviceErrors(t *testing.T) {
	m := newMockGPUs(t)
	// 0: no _v2 memory call on this device: GetMemoryInfo instead.
	m.device(0).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND }
	m.device(0).MemoryInfo = nvml.Memory{Total: 80 * gib, Free: 30 * gib, Used: 50 * gib}
	// 1: processes may not be listed; utilisation not supported.
	m.device(1).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	m.device(1).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	// 2: lost.
	m.device(2).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
	// 3: an unknown error.
	m.device(3).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_UNKNOWN }
	// 4: a process whose memory NVML cannot tell.
	m.device(4).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
	}
	// 5: memory not supported at all (an integrated GPU).
	m.device(5).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
	m.device(5).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	// 6: its handle is lost.
	m.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 6 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return m.Devices[i], nvml.SUCCESS
	}

	snap, err := openNVML(m, procNames).Read(t.Context())
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	var idx []int
	for _, d := range snap.Devices {
		idx = append(idx, d.Index)
	}
	if want := []int{0, 1, 4, 5, 7}; !equalInts(idx, want) {
		t.Fatalf("devices read = %v; want %v (2, 3 and 6 lost)", idx, want)
	}
	d0, _ := snap.Device(0)
	if d0.Total != 80*gib || d0.Free != 30*gib || d0.Used != 50*gib {
		t.Errorf("device 0 memory = %d/%d/%d; want GetMemoryInfo's 80/30/50 GiB", d0.Total, d0.Free, d0.Used)
	}
	d1, _ := snap.Device(1)
	if d1.Processes == nil || len(d1.Processes) != 0 || d1.UtilizationPct != 0 || d1.Free != 70*gib {
		t.Errorf("device 1 = %+v; want no processes (non-nil), 0%% utilisation, memory read", d1)
	}
	d4, _ := snap.Device(4)
	if len(d4.Processes) != 1 || d4.Processes[0].UsedBytes != 0 {
		t.Errorf("device 4 processes = %+v; want one with 0 bytes", d4.Processes)
	}
	d5, _ := snap.Device(5)
	if d5.Total != 0 || d5.Name == "" {
		t.Errorf("device 5 = %+v; want listed without memory", d5)
	}
}

// TestNVMLWithoutMemoryV2Symbol: an old driver without
// nvmlDeviceGetMemoryInfo_v2 is read with GetMemoryInfo only; calling the
// missing symbol would kill the process (the mock panics instead).
func TestNVMLWithoutMemoryV2Symbol(t *testing.T) {
	m := newMockGPUs(t)
	m.LookupSymbolFunc = func(symbol string) error {
		if symbol == "nvmlDeviceGetMemoryInfo_v2" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	for i := range m.Devices {
		m.device(i).GetMemoryInfo_v2Func = nil // panics if called
		m.device(i).MemoryInfo = nvml.Memory{Total: 80 * gib, Free: 60 * gib, Used: 20 * gib}
	}
	snap, err := openNVML(m, procNames).Read(t.Context())
	if err != nil || len(snap.Devices) != 8 || snap.Devices[7].Free != 60*gib {
		t.Errorf("Read() = %d devices, %v; want 8 read through GetMemoryInfo", len(snap.Devices), err)
	}
}

// TestNVMLInitFailure: when Init fails NVML is never called again: every
// other func field of the mock is unset, so any call would panic.
func TestNVMLInitFailure(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION} {
		t.Run(nvml.ErrorString(ret), func(t *testing.T) {
			m := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
			r := openNVML(m, procNames)
			for range 2 {
				snap, err := r.Read(t.Context())
				if err != nil {
					t.Fatalf("Read() = %v; want no error", err)
				}
				want := "no NVIDIA GPU found (NVML: " + nvml.ErrorString(ret) + ")"
				if snap.Available || snap.Message != want || snap.Devices == nil || len(snap.Devices) != 0 {
					t.Errorf("Read() = %+v; want unavailable, %q", snap, want)
				}
			}
			if err := r.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			if n := len(m.InitCalls()); n != 1 {
				t.Errorf("Init calls = %d; want 1", n)
			}
		})
	}
	var zero NVML
	if snap, err := zero.Read(t.Context()); err != nil || snap.Available || snap.Message != MessageNoGPU {
		t.Errorf("zero NVML Read() = %+v, %v; want unavailable", snap, err)
	}
}

// TestNVMLCountFailure: a driver that stops answering fails the reading as
// a whole, and the Sampler turns that into an unavailable snapshot.
func TestNVMLCountFailure(t *testing.T) {
	m := newMockGPUs(t)
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	r := openNVML(m, procNames)
	if _, err := r.Read(t.Context()); !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("Read() = %v; want ERROR_GPU_IS_LOST", err)
	}
	smp := (&Sampler{GPU: r, Host: noHost}).Sample(t.Context())
	if smp.GPU.Available || !strings.Contains(smp.GPU.Message, "ERROR_GPU_IS_LOST") {
		t.Errorf("sample GPU = %+v; want unavailable naming the error", smp.GPU)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gibs formats a size for a test's log: "12.1 GiB".
func gibs(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/gib) }
