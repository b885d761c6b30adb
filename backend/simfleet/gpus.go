package simfleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/gpu"
)

// GPUs are the simulated GPUs of a demo machine, one per server of a demo
// fleet, read like real ones (they are a gpu.Reader): each holds its
// server's model, and SetPressure fills one almost to the brim, as another
// program grabbing VRAM would. With them the GPU panel, its gauges and
// demotion under memory pressure can be seen without an NVIDIA card. Safe
// for concurrent use; create them with NewGPUs.
type GPUs struct {
	mu      sync.Mutex
	devices []gpu.Device
	full    map[int]bool
	now     func() time.Time
}

// Simulated GPU sizes.
const (
	simTotal    = 24 << 30 // a 24 GiB card
	simModel    = 9 << 30  // the model on it
	simFreeFull = 600 << 20
)

// NewGPUs returns n simulated 24 GiB GPUs, indexed from 0.
func NewGPUs(n int) *GPUs {
	g := &GPUs{full: make(map[int]bool), now: time.Now}
	for i := range n {
		g.devices = append(g.devices, gpu.Device{
			Index: i, Name: fmt.Sprintf("Simulated GPU %d (24 GiB)", i), UUID: fmt.Sprintf("GPU-simulated-%d", i),
			Total: simTotal, Processes: []gpu.Process{{PID: uint32(4000 + i), Name: "simulated model server", UsedBytes: simModel}},
		})
	}
	return g
}

// SetPressure fills GPU index almost to the brim (free 0.6 GiB) or empties
// it back to its model alone. An unknown index is ignored.
func (g *GPUs) SetPressure(index int, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.full[index] = on
}

// Read implements gpu.Reader.
func (g *GPUs) Read(context.Context) (gpu.Snapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	snap := gpu.Snapshot{Available: true, Simulated: true, At: g.now(), Devices: make([]gpu.Device, len(g.devices))}
	for i, d := range g.devices {
		d.Used = simModel
		d.UtilizationPct = 0
		if g.full[d.Index] {
			d.Used = simTotal - simFreeFull
			d.UtilizationPct = 97
		}
		d.Free = d.Total - d.Used
		snap.Devices[i] = d
	}
	return snap, nil
}
