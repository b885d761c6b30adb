package gpu

import "testing"

// TestReadHost reads this machine's CPU and memory through gopsutil.
func TestReadHost(t *testing.T) {
	for range 2 { // the second call measures CPU since the first
		h, err := ReadHost(t.Context())
		if err != nil {
			t.Fatalf("ReadHost() = %v", err)
		}
		if h.MemTotal == 0 || h.MemUsed > h.MemTotal || h.MemUsedPct <= 0 || h.MemUsedPct > 100 || h.CPUPct < 0 || h.CPUPct > 100 {
			t.Errorf("ReadHost() = %+v; want plausible values", h)
		}
	}
}
