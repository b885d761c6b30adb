package system

import (
	"runtime"
	"testing"
)

// Idle heap is given back once there is enough of it, not for every
// few pages the runtime keeps.
func TestShouldRelease(t *testing.T) {
	for _, tc := range []struct {
		idle, released uint64
		want           bool
	}{
		{idle: 400 << 20, released: 10 << 20, want: true},
		{idle: 400 << 20, released: 390 << 20, want: false},
		{idle: 8 << 20, released: 0, want: false},
		{idle: 0, released: 0, want: false},
	} {
		if got := shouldRelease(runtime.MemStats{HeapIdle: tc.idle, HeapReleased: tc.released}); got != tc.want {
			t.Errorf("shouldRelease(idle %d MiB, released %d MiB) = %v; want %v", tc.idle>>20, tc.released>>20, got, tc.want)
		}
	}
}

// After a spike, the heap it left idle is given back: what releaseMemory
// does once shouldRelease says so.
func TestFreeingGivesIdleHeapBack(t *testing.T) {
	spike := make([][]byte, 0, 256)
	for range 256 {
		spike = append(spike, make([]byte, 1<<20))
	}
	spike = nil
	_ = spike
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	if !shouldRelease(before) {
		t.Skipf("the runtime already gave the spike back (idle %d MiB, released %d MiB)", before.HeapIdle>>20, before.HeapReleased>>20)
	}
	freeIdle()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if shouldRelease(after) {
		t.Errorf("still %d MiB idle and not given back", (after.HeapIdle-after.HeapReleased)>>20)
	}
}
