package gpu

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: the
// Sampler must stop cleanly.
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

const gib = 1 << 30
