package gpu

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is one reading of the GPUs and the host. It is published by value
// and never modified; its slices are shared, so readers must not modify
// them.
type Sample struct {
	At   time.Time
	GPU  Snapshot
	Host Host
}

// Sampler reads the GPUs and the host about once a second, off the request
// path, and keeps the latest Sample. Set its fields, then call Run once on
// a goroutine of its own; Latest may be called at any time from any
// goroutine. The zero value samples no GPU and the host every second.
type Sampler struct {
	// GPU reads the local GPUs, normally OpenNVML(). Nil: no GPU
	// (MessageNoGPU). The Sampler never closes it: its opener does.
	GPU Reader
	// Host reads CPU and memory. Nil: ReadHost.
	Host func(ctx context.Context) (Host, error)
	// Interval is the time between samples. Default 1s. Ignored when
	// Tick is set.
	Interval time.Duration
	// Tick, when set, triggers each sample after the first instead of a
	// ticker (tests). Run also stops when Tick is closed.
	Tick <-chan time.Time
	// OnSample is called with each sample, on Run's goroutine, one at a
	// time; the next sample waits for it, so it must not block for long.
	// Nil: nothing is called.
	OnSample func(Sample)
	// Logf reports a reading that starts failing, or fails differently,
	// once rather than every second. Nil: discard.
	Logf func(format string, args ...any)

	latest atomic.Pointer[Sample]

	mu                      sync.Mutex // serialises Sample; guards the last errors
	lastGPUErr, lastHostErr string
}

// Run samples at once, then every Interval (or on every Tick) until ctx is
// done, and returns nil; it starts no goroutine. A sample is bounded by
// Interval so a stuck reading cannot pile up behind the next.
func (s *Sampler) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = time.Second
	}
	tick := s.Tick
	if tick == nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, interval)
		s.Sample(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-tick:
			if !ok {
				return nil
			}
		}
	}
}

// Sample takes one sample now, keeps it as the latest and calls OnSample
// with it. Run calls it; tests and a first status page may too. Calls are
// serialised.
func (s *Sampler) Sample(ctx context.Context) Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	smp := Sample{At: time.Now()}
	if s.GPU == nil {
		smp.GPU = Snapshot{Message: MessageNoGPU, Devices: []Device{}, At: smp.At}
	} else {
		snap, err := s.GPU.Read(ctx)
		if err != nil {
			// Fail open: without a reading nothing is demoted for memory.
			snap = Snapshot{Message: "GPU reading failed: " + err.Error(), Devices: []Device{}, At: smp.At}
		}
		smp.GPU = snap
		s.logChange(&s.lastGPUErr, "gpu", err)
	}
	readHost := s.Host
	if readHost == nil {
		readHost = ReadHost
	}
	h, err := readHost(ctx)
	s.logChange(&s.lastHostErr, "host", err)
	smp.Host = h
	s.latest.Store(&smp)
	if s.OnSample != nil {
		s.OnSample(smp)
	}
	return smp
}

// logChange logs err when it differs from the last one of its kind; called
// with s.mu held.
func (s *Sampler) logChange(last *string, what string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == *last {
		return
	}
	*last = msg
	if s.Logf == nil {
		return
	}
	if msg == "" {
		s.Logf("%s readings recovered", what)
	} else {
		s.Logf("%s reading failed: %s", what, msg)
	}
}

// Latest returns the latest sample; false before the first. It takes no
// lock: the request path may call it.
func (s *Sampler) Latest() (Sample, bool) {
	p := s.latest.Load()
	if p == nil {
		return Sample{}, false
	}
	return *p, true
}
