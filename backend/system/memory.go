package system

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"
)

// After a burst (thousands of streams at once) the Go runtime keeps the
// heap it grew for minutes before its scavenger hands it back, so a
// desktop app's RSS stays at its peak long after the burst. releaseMemory
// gives it back within seconds once enough of it sits idle.

// idleToRelease is how much idle heap, not yet given back to the system,
// makes releaseMemory give it back at once.
const idleToRelease = 64 << 20

// releaseEvery is how often releaseMemory looks.
const releaseEvery = 5 * time.Second

// releaseMemory gives idle heap back to the system every releaseEvery
// while more than idleToRelease of it waits, until ctx is done.
func releaseMemory(ctx context.Context) {
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	var ms runtime.MemStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		if shouldRelease(ms) {
			freeIdle()
		}
	}
}

// shouldRelease reports whether the heap the runtime holds idle, and has
// not given back yet, is worth giving back now.
func shouldRelease(ms runtime.MemStats) bool {
	return ms.HeapIdle > ms.HeapReleased && ms.HeapIdle-ms.HeapReleased > idleToRelease
}

// freeIdle gives the idle heap back to the system now.
func freeIdle() { debug.FreeOSMemory() }
