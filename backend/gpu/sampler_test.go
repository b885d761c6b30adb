package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSamplerInterval runs the sampler in a synctest bubble: it samples at
// once, then every Interval, publishes each sample, and stops with ctx,
// leaving no goroutine behind.
func TestSamplerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gpus := &fakeReader{}
		gpus.set(dev(0, 24, 20))
		var mu sync.Mutex
		var seen []Sample
		s := &Sampler{GPU: gpus, Host: noHost, Interval: 2 * time.Second, OnSample: func(smp Sample) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, smp)
		}}
		if _, ok := s.Latest(); ok {
			t.Fatal("Latest() before Run = true; want false")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		start := time.Now()
		go func() { done <- s.Run(ctx) }()

		synctest.Wait()
		if n := gpus.count(); n != 1 {
			t.Fatalf("reads at start = %d; want 1", n)
		}
		time.Sleep(7 * time.Second)
		synctest.Wait()
		if n := gpus.count(); n != 4 { // at 0, 2, 4, 6 s
			t.Fatalf("reads after 7s = %d; want 4", n)
		}
		latest, ok := s.Latest()
		if !ok || latest.At != start.Add(6*time.Second) || !latest.GPU.Available || latest.GPU.Devices[0].Free != 20*gib || latest.Host.CPUPct != 12 {
			t.Errorf("Latest() = %+v, %v; want the sample of 6s", latest, ok)
		}
		mu.Lock()
		if len(seen) != 4 || seen[3].At != latest.At {
			t.Errorf("OnSample saw %d samples; want 4, the last one Latest", len(seen))
		}
		mu.Unlock()

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := gpus.count(); n != 4 {
			t.Errorf("reads after Run returned = %d; want 4", n)
		}
	})
}

// TestSamplerTick drives the sampler by hand through Tick; closing Tick
// ends Run.
func TestSamplerTick(t *testing.T) {
	tick := make(chan time.Time)
	samples := make(chan Sample, 10)
	s := &Sampler{Host: noHost, Tick: tick, OnSample: func(smp Sample) { samples <- smp }}
	done := make(chan error)
	go func() { done <- s.Run(t.Context()) }()
	first := <-samples
	if first.GPU.Available || first.GPU.Message != MessageNoGPU || first.GPU.Devices == nil {
		t.Errorf("sample without a GPU reader = %+v; want unavailable, %q, empty devices", first.GPU, MessageNoGPU)
	}
	tick <- time.Now()
	<-samples
	tick <- time.Now()
	<-samples
	close(tick)
	if err := <-done; err != nil {
		t.Errorf("Run() = %v; want nil", err)
	}
	if len(samples) != 0 {
		t.Errorf("%d samples after 2 ticks and the first; want none more", len(samples))
	}
}

// TestSamplerFailures: a failed GPU or host reading still yields a sample
// (failing open), and each change of error is logged once.
func TestSamplerFailures(t *testing.T) {
	gpus := &fakeReader{err: errors.New("nvml device count: ERROR_UNKNOWN")}
	hostErr := errors.New("read memory use: no /proc")
	var logs []string
	s := &Sampler{
		GPU:  gpus,
		Host: func(context.Context) (Host, error) { return Host{}, hostErr },
		Logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) },
	}
	smp := s.Sample(t.Context())
	s.Sample(t.Context())
	if smp.GPU.Available || smp.GPU.Message != "GPU reading failed: nvml device count: ERROR_UNKNOWN" || smp.GPU.Devices == nil {
		t.Errorf("failed sample GPU = %+v; want unavailable with the error", smp.GPU)
	}
	if smp.Host != (Host{}) {
		t.Errorf("failed sample Host = %+v; want zero", smp.Host)
	}
	gpus.err, hostErr = nil, nil
	gpus.set(dev(0, 24, 20))
	s.Host = noHost
	s.Sample(t.Context())
	want := []string{
		"gpu reading failed: nvml device count: ERROR_UNKNOWN",
		"host reading failed: read memory use: no /proc",
		"gpu readings recovered",
		"host readings recovered",
	}
	if !slices.Equal(logs, want) {
		t.Errorf("logs = %q; want %q", logs, want)
	}
}
