//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads the local NVIDIA GPUs through the driver's NVML library. It is
// safe for concurrent use (readings are serialised). Create it with
// OpenNVML; the zero value reports no GPU. Whoever opens it closes it.
//
// NVML's one trap: when Init fails (no driver, no libnvidia-ml.so.1), any
// other NVML call ends the process with an unrecoverable symbol lookup
// error. So Init is called once, in OpenNVML, and after a failed Init this
// reader makes no other NVML call, ever; it only reports MessageNoGPU.
type NVML struct {
	lib      nvml.Interface
	procName func(pid uint32) string
	memV2    bool // nvmlDeviceGetMemoryInfo_v2 exists in the loaded library

	mu      sync.Mutex // serialises Read and Close
	ok      bool       // Init succeeded and Close was not called
	message string     // why !ok
}

var _ Reader = (*NVML)(nil)

// WhyNoNVML says why this build reads no GPU; "" in a build with NVML,
// as this one is.
func WhyNoNVML() string { return "" }

// OpenNVML loads and initialises NVML (libnvidia-ml.so.1). It never fails:
// on a machine without the NVIDIA driver the reader reports Available=false
// with a Message that starts with MessageNoGPU and names NVML's error.
func OpenNVML() *NVML {
	return openNVML(nvml.New(), procComm)
}

// OpenNVMLFrom is OpenNVML on any nvml.Interface: go-nvml's mock of a
// machine, in tests of what its readings lead to.
func OpenNVMLFrom(lib nvml.Interface) *NVML { return openNVML(lib, procComm) }

// openNVML is OpenNVML on any nvml.Interface, with the process names taken
// from procName.
func openNVML(lib nvml.Interface, procName func(uint32) string) *NVML {
	r := &NVML{lib: lib, procName: procName}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		// nvml.ErrorString is safe without the library: go-nvml falls back
		// to its own table until the library is loaded.
		r.message = fmt.Sprintf("%s (NVML: %s)", MessageNoGPU, nvml.ErrorString(ret))
		return r
	}
	r.ok = true
	// A driver older than NVML's _v2 memory call lacks the symbol, and
	// calling a missing symbol kills the process like above: look first.
	r.memV2 = lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	return r
}

// Read implements Reader. Per device it reads name, UUID, memory,
// utilisation and compute processes; a device NVML reports as lost (or
// failing with ERROR_UNKNOWN) is left out of this snapshot. Only a failure
// to count the devices fails the reading.
func (r *NVML) Read(ctx context.Context) (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.ok {
		msg := r.message
		if msg == "" {
			msg = MessageNoGPU
		}
		return Snapshot{Message: msg, Devices: []Device{}, At: now}, nil
	}
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Snapshot{}, fmt.Errorf("nvml device count: %w", ret)
	}
	snap := Snapshot{Available: true, Devices: make([]Device, 0, n), At: now}
	if n == 0 {
		snap.Message = MessageNoGPU
	}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return Snapshot{}, fmt.Errorf("read gpus: %w", err)
		}
		if d, ok := r.device(i); ok {
			snap.Devices = append(snap.Devices, d)
		}
	}
	return snap, nil
}

// device reads GPU i; false when it is lost or its handle unavailable.
func (r *NVML) device(i int) (Device, bool) {
	h, ret := r.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return Device{}, false
	}
	d := Device{Index: i, Processes: []Process{}}
	var name, uuid string
	if name, ret = h.GetName(); lost(ret) {
		return Device{}, false
	} else if ret == nvml.SUCCESS {
		d.Name = name
	}
	if uuid, ret = h.GetUUID(); lost(ret) {
		return Device{}, false
	} else if ret == nvml.SUCCESS {
		d.UUID = uuid
	}
	if !r.memory(h, &d) {
		return Device{}, false
	}
	u, ret := h.GetUtilizationRates()
	if lost(ret) {
		return Device{}, false
	} else if ret == nvml.SUCCESS {
		d.UtilizationPct = float64(u.Gpu)
	}
	procs, ret := h.GetComputeRunningProcesses()
	switch {
	case lost(ret):
		return Device{}, false
	case ret == nvml.SUCCESS:
		for _, p := range procs {
			used := p.UsedGpuMemory
			if used == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE
				used = 0
			}
			d.Processes = append(d.Processes, Process{PID: p.Pid, Name: r.procName(p.Pid), UsedBytes: used})
		}
	default:
		// NO_PERMISSION, NOT_SUPPORTED and the like: no list, not an error.
	}
	return d, true
}

// memory fills d's memory from GetMemoryInfo_v2, falling back to
// GetMemoryInfo where v2 is missing or unsupported. It reports false when
// the device is lost.
func (r *NVML) memory(h nvml.Device, d *Device) bool {
	if r.memV2 {
		m, ret := h.GetMemoryInfo_v2()
		switch {
		case ret == nvml.SUCCESS:
			d.Total, d.Used, d.Free = m.Total, m.Used, m.Free
			return true
		case lost(ret):
			return false
		case ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_FUNCTION_NOT_FOUND:
			return true // memory unknown: zeros
		}
	}
	m, ret := h.GetMemoryInfo()
	switch {
	case ret == nvml.SUCCESS:
		d.Total, d.Used, d.Free = m.Total, m.Used, m.Free
	case lost(ret):
		return false
	}
	return true
}

// lost reports whether ret means the device cannot be read this time.
func lost(ret nvml.Return) bool {
	return ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_UNKNOWN
}

// Close shuts NVML down if Init succeeded; later readings report no GPU.
// It is safe to call more than once.
func (r *NVML) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ok {
		return nil
	}
	r.ok = false
	r.message = MessageNoGPU + " (NVML closed)"
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %w", ret)
	}
	return nil
}

// procComm returns a process's command name from /proc, "" when it cannot
// be read (the process ended, or lives in another PID namespace).
func procComm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
