package gpu

import (
	"context"
	"fmt"

	// gopsutil v4, not v3: v3 is frozen at v3.24.5 and gets no fixes; v4
	// (CalVer v4.YY.MM) is maintained, pure Go (no cgo) on every platform.
	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
)

// ReadHost reads the host's CPU and memory use. CPUPct covers the time since
// the previous call: gopsutil keeps the previous CPU times itself (from its
// package initialisation on, so the first call covers the time since the
// process started), which is why only one caller in the process — the
// Sampler — should use it.
func ReadHost(ctx context.Context) (Host, error) {
	var h Host
	cpus, err := cpu.PercentWithContext(ctx, 0, false)
	if err != nil {
		return Host{}, fmt.Errorf("read cpu use: %w", err)
	}
	if len(cpus) > 0 {
		h.CPUPct = cpus[0]
	}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return Host{}, fmt.Errorf("read memory use: %w", err)
	}
	h.MemTotal, h.MemUsed, h.MemUsedPct = vm.Total, vm.Used, vm.UsedPercent
	return h, nil
}
