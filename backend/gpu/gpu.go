// Package gpu reads the machine: its NVIDIA GPUs (through NVML) and its CPU
// and memory (through gopsutil). It decides nothing: backend/pressure does,
// from these readings and the servers' own reports (docs/DESIGN.md, "GPU
// and server load").
//
// The pieces, and who runs them:
//
//   - NVML (OpenNVML) is the Reader of local GPUs. The real one is built
//     only on Linux with cgo; every other build gets a stub that reports
//     "no NVIDIA GPU found". Without the driver the real one reports the
//     same and never crashes.
//   - Sampler reads the GPUs and the host about once a second on its own
//     goroutine (Run) and keeps the latest Sample.
//
// Nothing here reads the environment or keeps package-level state; the
// composition root (backend/system) builds and wires every piece.
package gpu

import (
	"context"
	"time"
)

// Messages a Snapshot carries when no GPU can be read.
const (
	// MessageNoGPU is the start of Snapshot.Message whenever NVML cannot be
	// used: the driver or library is missing, or it found no device.
	MessageNoGPU = "no NVIDIA GPU found"
	// MessageNoNVML is the Message of a build without NVML (not Linux, or
	// cgo disabled).
	MessageNoNVML = MessageNoGPU + " (this build has no NVML support)"
)

// Reader reads the local GPUs. Implementations are safe for concurrent use.
type Reader interface {
	// Read takes one reading. A machine without GPUs (or without the
	// driver) is not an error: the Snapshot says so. An error means this
	// reading failed as a whole (ctx ended, the driver stopped answering).
	Read(ctx context.Context) (Snapshot, error)
}

// Snapshot is one reading of the local GPUs. Its slices are never modified
// after it is returned; readers must not modify them either.
type Snapshot struct {
	// Available is true when NVML answered; Devices may still be empty.
	Available bool
	// Message says why GPUs are not available (it starts with
	// MessageNoGPU), or why the last reading failed; "" when all is well.
	Message string
	// Devices are the GPUs read, in index order. A device NVML reported as
	// lost (or failing with an unknown error) is missing from this
	// snapshot. Never nil in a snapshot a Reader returned.
	Devices []Device
	// At is when the reading was taken.
	At time.Time
	// Simulated: the devices are not real (the demo fleet's).
	Simulated bool
}

// Device returns the device with the given NVML index.
func (s Snapshot) Device(index int) (Device, bool) {
	for _, d := range s.Devices {
		if d.Index == index {
			return d, true
		}
	}
	return Device{}, false
}

// Device is one GPU. The JSON names are those of the status document's
// devices (docs/API.md).
type Device struct {
	Index int    // NVML index, as candidates' gpus name it
	Name  string // e.g. "NVIDIA H100 80GB HBM3"; "" when NVML would not say
	UUID  string
	// Total, Used and Free are memory in bytes. Used includes memory the
	// driver reserves when NVML can tell (GetMemoryInfo_v2). All three are
	// zero when the device does not report memory (an integrated GPU
	// sharing host memory); such a device never causes pressure.
	Total uint64
	Used  uint64
	Free  uint64
	// UtilizationPct is the percent of time a kernel ran over the last
	// sample period; 0 when not supported.
	UtilizationPct float64
	// Processes are the compute processes using the GPU; empty (not nil)
	// when there are none or NVML may not list them (no permission).
	Processes []Process
}

// Process is one compute process on a GPU.
type Process struct {
	PID       uint32 // host PID (differs from the PID inside a container)
	Name      string // /proc/PID/comm; "" when unreadable
	UsedBytes uint64 // 0 when NVML cannot tell (Windows WDDM, some containers)
}

// Host is the machine's CPU and memory use. The JSON names are those of
// the status document's host.
type Host struct {
	CPUPct     float64 // all CPUs, 0-100, since the previous reading
	MemTotal   uint64
	MemUsed    uint64
	MemUsedPct float64
}
