//go:build linux && cgo

package gpu

import (
	"strings"
	"testing"
)

// TestRealNVML opens the machine's real NVML. Without the NVIDIA driver
// (this project's CI machines) Init fails, and the reader must say "no
// NVIDIA GPU found" without making the NVML call that would kill the test
// process. With the driver it must read every device with its memory.
func TestRealNVML(t *testing.T) {
	r := OpenNVML()
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	for range 2 {
		snap, err := r.Read(t.Context())
		if err != nil {
			t.Fatalf("Read() = %v", err)
		}
		if !snap.Available {
			if !strings.HasPrefix(snap.Message, MessageNoGPU+" (NVML: ") || snap.Devices == nil || len(snap.Devices) != 0 {
				t.Errorf("Read() without a driver = %+v; want %q and NVML's error", snap, MessageNoGPU)
			}
			t.Logf("no driver: %s", snap.Message)
			continue
		}
		if len(snap.Devices) == 0 {
			t.Errorf("Read() = available with no devices (%q)", snap.Message)
		}
		for _, d := range snap.Devices {
			t.Logf("GPU %d %s %s: %s free of %s, %.0f%%, %d processes", d.Index, d.Name, d.UUID, gibs(d.Free), gibs(d.Total), d.UtilizationPct, len(d.Processes))
			if d.Total == 0 || d.Used+d.Free > d.Total+gib || d.Processes == nil {
				t.Errorf("GPU %d = %+v; want memory totals that add up and a process list", d.Index, d)
			}
		}
	}
}
