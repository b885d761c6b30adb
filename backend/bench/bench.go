// Package bench measures Switchyard's costs on loopback against simulated
// upstreams, each as a ratio to a baseline measured in the same run, for
// streamed answers and for whole (non-stream) ones:
//
//   - overhead: TTFT and total latency through Switchyard (its history
//     on), a bare httputil.ReverseProxy and straight to the upstream,
//     interleaved request by request at several concurrencies;
//   - failover: the latency a failing primary adds before its fallback
//     serves, per fault, against the fallback serving as first choice;
//   - breaker: the TTFT a primary with an open breaker adds (none, ideally)
//     and the requests it still receives (one half-open probe per
//     cool-down);
//   - throughput: requests per second through Switchyard and the bare
//     proxy, in alternating rounds;
//   - memory: heap and stacks per open stream, with a thousand streams held
//     open mid-answer through each path;
//   - history: the rate the SQLite writer sustains, and the latency the
//     history adds to a request;
//   - band: two servers of one model at one priority, with balance
//     ordered against fastest, and the liveness checks they cost;
//   - history-scale: histories of 100k requests and more, filled through
//     the store, and what grows with them: start, the charts' stats,
//     filters, retention sweeps, disk;
//   - profile (when asked for): CPU and allocation profiles of the
//     Switchyard path at concurrency 1 and a summary of where they go.
//
// Everything runs in this process and talks only to 127.0.0.1; every loop
// is bounded in count and time.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// Sizes say how much to measure. Quick, Full and Tiny are the presets.
type Sizes struct {
	// Budget bounds the whole run; sections not finished by then are
	// left out of the report.
	Budget time.Duration
	// Concurrency are the levels the overhead is measured at.
	Concurrency []int
	// Overhead is the number of requests per path at each level.
	Overhead int
	// Failover is the number of request pairs per fault.
	Failover int
	// Hang is the number of requests to a primary that never sends a
	// first token, and HangDeadline Switchyard's first-token timeout then.
	Hang         int
	HangDeadline time.Duration
	// BreakerFor is how long the breaker section runs, and OpenDuration
	// the breaker's cool-down in it.
	BreakerFor, OpenDuration time.Duration
	// ThroughputConcurrency, ThroughputRounds and ThroughputRequests: the
	// throughput section alternates rounds of ThroughputRequests requests
	// per path at ThroughputConcurrency.
	ThroughputConcurrency, ThroughputRounds, ThroughputRequests int
	// Streams is the number of streams held open in the memory section.
	Streams int
	// HistoryRecords is the number of records written straight to the
	// history store by HistoryWriters goroutines; HistoryRequests the
	// number of requests per variant (history on, off) at each of
	// concurrency 1 and 8.
	HistoryRecords, HistoryWriters, HistoryRequests int
	// HistoryScale are the sizes, in requests, of the histories the
	// history-scale section fills and measures (ScaleRow).
	HistoryScale []int
	// Profile is the number of requests per mode through Switchyard
	// under the CPU profiler, and ProfileAllocs the number per mode and
	// path (Switchyard, direct) while allocations are profiled, in the
	// profile section (run only when Options.ProfileDir is set).
	Profile, ProfileAllocs int
}

// Quick is a short run: about a minute on 2 cores.
func Quick() Sizes {
	return Sizes{
		Budget:      3 * time.Minute,
		Concurrency: []int{1, 8, 64},
		Overhead:    400, Failover: 200,
		Hang: 24, HangDeadline: 100 * time.Millisecond,
		BreakerFor: 3 * time.Second, OpenDuration: time.Second,
		ThroughputConcurrency: 64, ThroughputRounds: 3, ThroughputRequests: 600,
		Streams:        1000,
		HistoryRecords: 5000, HistoryWriters: 32, HistoryRequests: 300,
		HistoryScale: []int{100_000},
		Profile:      600, ProfileAllocs: 150,
	}
}

// Full is the default run: four to five minutes on 2 cores (a minute of
// it filling a history of 1M requests), longer on a machine busy with
// other work.
func Full() Sizes {
	return Sizes{
		Budget:      12 * time.Minute,
		Concurrency: []int{1, 8, 64},
		Overhead:    2000, Failover: 600,
		Hang: 64, HangDeadline: 100 * time.Millisecond,
		BreakerFor: 6 * time.Second, OpenDuration: time.Second,
		ThroughputConcurrency: 64, ThroughputRounds: 6, ThroughputRequests: 1200,
		Streams:        1000,
		HistoryRecords: 20000, HistoryWriters: 32, HistoryRequests: 1000,
		HistoryScale: []int{100_000, 1_000_000},
		Profile:      2500, ProfileAllocs: 500,
	}
}

// Tiny is a few requests per section, to prove the program works.
func Tiny() Sizes {
	return Sizes{
		Budget:      time.Minute,
		Concurrency: []int{1, 4},
		Overhead:    10, Failover: 5,
		Hang: 3, HangDeadline: 50 * time.Millisecond,
		BreakerFor: 300 * time.Millisecond, OpenDuration: 100 * time.Millisecond,
		ThroughputConcurrency: 4, ThroughputRounds: 1, ThroughputRequests: 20,
		Streams:        10,
		HistoryRecords: 100, HistoryWriters: 4, HistoryRequests: 10,
		HistoryScale: []int{2000},
		Profile:      10, ProfileAllocs: 5,
	}
}

// Options configure Run.
type Options struct {
	Sizes Sizes
	// Command is how this run was started, for the report.
	Command string
	// TempDir holds the configs and databases, removed afterwards.
	// Default os.TempDir().
	TempDir string
	// Logf reports progress, one line per step. Nil: silent.
	Logf func(format string, args ...any)
	// Only, when set, names the sections to run (see Sections); the
	// others are left out of the report. Empty runs them all.
	Only []string
	// ProfileDir, when set, adds the profile section: its profiles and
	// their summary (summary.txt) are written there, made if missing.
	ProfileDir string
	// Executable is a program that plays a bench child when ChildEnv is
	// set (RunChild): the processes section starts the upstream, the bare
	// proxy and Switchyard from it. Empty leaves that section out.
	Executable string
	// Peers, when set, adds the peers section: a directory with the
	// binaries of Olla and llama-swap and Olla's config/profiles (see
	// peers.go).
	Peers string
}

// Report is a run's results. Durations and latencies are in microseconds,
// sizes in bytes, unless a name says otherwise.
type Report struct {
	Machine    Machine         `json:"machine"`
	Command    string          `json:"command"`
	Started    time.Time       `json:"started"`
	ElapsedS   float64         `json:"elapsed_s"`
	Incomplete string          `json:"incomplete,omitempty"` // why sections are missing
	Overhead   []OverheadRow   `json:"overhead"`
	Split      []SplitRow      `json:"ttft_split,omitempty"` // concurrency 1, streams
	Processes  []ProcessRow    `json:"processes,omitempty"`
	Peers      []PeerRow       `json:"peers,omitempty"`
	Failover   []FailoverRow   `json:"failover"` // the hang rows too
	Breaker    *BreakerResult  `json:"breaker,omitempty"`
	Throughput []ThroughputRow `json:"throughput,omitempty"`
	Memory     *MemoryResult   `json:"memory,omitempty"`
	History    *HistoryResult  `json:"history,omitempty"`
	Band       []BandRow       `json:"band,omitempty"`
	Scale      []ScaleRow      `json:"history_scale,omitempty"`
	Profile    *ProfileResult  `json:"profile,omitempty"`
	Figures    []Figure        `json:"figures"`
	Notes      []string        `json:"notes,omitempty"`
}

// Machine is what the numbers were measured on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// section is one part of a run.
type section struct {
	name string
	run  func(*bencher, context.Context) error
}

// sections are Run's sections, in the order they run; the profile follows
// them when asked for.
var sections = []section{
	{"overhead", (*bencher).overhead},
	{"processes", (*bencher).processes},
	{"peers", (*bencher).peers},
	{"failover", (*bencher).failover},
	{"hang", (*bencher).hang},
	{"breaker", (*bencher).breaker},
	{"throughput", (*bencher).throughput},
	{"memory", (*bencher).memory},
	{"history", (*bencher).history},
	{"band", (*bencher).band},
	{"history-scale", (*bencher).historyScale},
}

// Sections returns the names of Run's sections, in the order they run.
func Sections() []string {
	names := make([]string, len(sections))
	for i, s := range sections {
		names[i] = s.name
	}
	return names
}

// Run measures every section in turn and returns the report. Sections that
// the budget or ctx cut short are left out and Incomplete says so; an
// error means a section could not run at all.
func Run(ctx context.Context, o Options) (*Report, error) {
	for _, name := range o.Only {
		if !slices.Contains(Sections(), name) {
			return nil, fmt.Errorf("no section %q; sections are %s", name, strings.Join(Sections(), ", "))
		}
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	sz := o.Sizes
	ctx, cancel := context.WithTimeout(ctx, sz.Budget)
	defer cancel()
	rep := &Report{Machine: machine(), Command: o.Command, Started: time.Now().UTC()}
	start := time.Now()
	b := &bencher{o: o, sz: sz, rep: rep}
	steps := sections
	if o.ProfileDir != "" {
		steps = append(slices.Clip(steps), section{"profile", (*bencher).profile})
	}
	var err error
	for _, s := range steps {
		if ctx.Err() != nil {
			break
		}
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.name) && s.name != "profile" {
			continue
		}
		t := time.Now()
		o.Logf("%s...", s.name)
		if err = s.run(b, ctx); err != nil {
			err = fmt.Errorf("%s: %w", s.name, err)
			break
		}
		o.Logf("%s done in %v", s.name, time.Since(t).Round(10*time.Millisecond))
	}
	rep.ElapsedS = time.Since(start).Seconds()
	if ctx.Err() != nil {
		rep.Incomplete = fmt.Sprintf("stopped after %.0fs (%v); later sections are missing", rep.ElapsedS, context.Cause(ctx))
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	rep.Figures = rep.figures()
	return rep, err
}

// bencher runs the sections of one Run.
type bencher struct {
	o   Options
	sz  Sizes
	rep *Report
}

// Upstream pacing: a fast server, as simfleet.StartFast's.
const (
	upTokens = 8
	upID     = "up"  // the healthy upstream, and the fallback
	badID    = "bad" // the primary that has the faults
)

// fastFleet starts the healthy upstream and the faulty primary, both
// speaking the OpenAI API as vLLM does, with a FastTTFT first token and no
// gap between tokens.
func fastFleet() (*simfleet.Fleet, error) {
	member := func(id string, prio int) simfleet.Member {
		return simfleet.Member{ID: id, Priority: prio, Config: simfleet.Config{
			Provider: fleet.ProviderOpenAI,
			Models:   []simfleet.Model{{Name: id}},
			TTFT:     simfleet.FastTTFT, Tokens: upTokens,
		}}
	}
	return simfleet.StartFleet([]simfleet.Member{member(badID, 1), member(upID, 2)})
}

// switchyard starts a Switchyard in front of f whose first choice is bad
// and whose fallback is up.
func (b *bencher) switchyard(ctx context.Context, f *simfleet.Fleet, selection map[string]string) (*experiment.Switchyard, error) {
	return experiment.StartSwitchyard(ctx, experiment.Setup{
		Selection: selection, DefaultModel: badID, Candidates: f.Candidates(), TempDir: b.o.TempDir,
	})
}

// neverOpen is a breaker threshold no section reaches, so that every
// request tries the failing primary.
const neverOpen = "1000000000"
