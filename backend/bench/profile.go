package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/switchyard/switchyard/backend/experiment"
)

// ProfileResult is where the Switchyard path's CPU and allocations go at
// concurrency 1, one entry per mode. The profiles are in Dir.
type ProfileResult struct {
	Dir   string        `json:"dir"`
	Modes []ProfileMode `json:"modes"`
}

// ProfileMode is where Switchyard's CPU and allocations go for one mode.
//
// CPU is that of Switchyard's own goroutines over Requests requests: they
// carry the pprof label path=switchyard, which goroutines inherit from the
// one that starts them (background garbage collection belongs to the
// process and is not counted).
//
// Allocations carry no labels. They are sampled finely (every 4 KiB) over
// AllocRequests requests through Switchyard and as many straight to the
// upstream, apart from the CPU profile (whose figures the finer sampling
// would distort): Switchyard's are those of the first window less those of
// the second, leaving out stacks with a frame of the client or the
// simulated upstream.
type ProfileMode struct {
	Stream        bool `json:"stream"`
	Requests      int  `json:"requests"`
	AllocRequests int  `json:"alloc_requests"`
	// CPU is Switchyard's CPU time per request (µs), CPUShare its part of
	// the process's CPU samples while the requests went through it, and
	// ProcessCPU the process's CPU per request then (the client, the
	// simulated upstream and background collection too).
	CPU        float64 `json:"cpu_per_request_us"`
	CPUShare   float64 `json:"cpu_share"`
	ProcessCPU float64 `json:"process_cpu_per_request_us"`
	// AllocBytes and AllocObjects are what Switchyard allocated per
	// request.
	AllocBytes   float64 `json:"alloc_bytes_per_request"`
	AllocObjects float64 `json:"alloc_objects_per_request"`
	// CPUFlat are the functions with the most CPU by flat time, CPUCum
	// Switchyard's own functions (this module's) with the most by
	// cumulative time, µs per request; Allocs the functions that
	// allocated the most, bytes per request.
	CPUFlat []FuncCost `json:"cpu_flat"`
	CPUCum  []FuncCost `json:"cpu_cum"`
	Allocs  []FuncCost `json:"allocs"`
	// Areas are parts of Switchyard with their shares of its CPU and
	// allocated bytes.
	Areas []AreaCost `json:"areas"`
	// Files are the profiles written, in the profile directory.
	Files []string `json:"files"`
}

// FuncCost is one function's part of a profile, per request, and its
// shares of the whole.
type FuncCost struct {
	Func      string  `json:"func"`
	Flat      float64 `json:"flat"`
	FlatShare float64 `json:"flat_share"`
	Cum       float64 `json:"cum"`
	CumShare  float64 `json:"cum_share"`
}

// AreaCost is the share of Switchyard's CPU and allocated bytes spent with
// a function of the area on the stack.
type AreaCost struct {
	Area       string  `json:"area"`
	CPUShare   float64 `json:"cpu_share"`
	AllocShare float64 `json:"alloc_share"`
}

// module is this module's import path and a slash, which function names in
// the summary are shortened by.
var module = strings.TrimSuffix(reflect.TypeFor[Report]().PkgPath(), "backend/bench")

// areas are the parts of Switchyard the summary adds up, by the prefixes
// of their functions' names. A sample counts in every area on its stack,
// so areas overlap (the history's JSON is in both).
var areas = []struct {
	name     string
	prefixes []string
}{
	{historyArea, []string{module + "backend/history.", "modernc.org/"}},
	{"router (backend/router)", []string{module + "backend/router."}},
	{"upstream adapters (backend/upstream)", []string{module + "backend/upstream"}},
	{"API edge (backend/httpapi)", []string{module + "backend/httpapi."}},
	{"encoding/json", []string{"encoding/json."}},
	{"system calls", []string{"syscall.", "internal/runtime/syscall/", "internal/poll."}},
}

// historyArea is the area of the history, which the report quotes.
const historyArea = "history (backend/history, SQLite)"

// profileLabel is the pprof label key set on Switchyard's goroutines.
const profileLabel = "path"

// profileMemRate is runtime.MemProfileRate while allocations are
// profiled: an allocation sampled every 4 KiB, so that the difference of
// two windows rests on many samples.
const profileMemRate = 4 << 10

// harness are the packages of the client and the simulated upstream,
// whose allocations are not Switchyard's.
var harness = []string{module + "backend/simfleet.", module + "backend/experiment.", module + "backend/bench."}

// topFuncs is the number of functions each summary table lists.
const topFuncs = 8

// profile profiles the Switchyard path at concurrency 1 in both modes and
// writes the profiles and their summary to Options.ProfileDir.
func (b *bencher) profile(ctx context.Context) error {
	dir := b.o.ProfileDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := fastFleet()
	if err != nil {
		return err
	}
	defer f.Close()
	var sy *experiment.Switchyard
	pprof.Do(ctx, pprof.Labels(profileLabel, "switchyard"), func(ctx context.Context) {
		sy, err = b.switchyard(ctx, f, nil)
	})
	if err != nil {
		return err
	}
	defer sy.Close()
	direct := experiment.NewClient(f.Server(upID).URL(), 1)
	defer direct.CloseIdle()
	through := experiment.NewClient(sy.URL()+"/v1", 1)
	defer through.CloseIdle()

	res := &ProfileResult{Dir: dir}
	for _, stream := range modes {
		m, err := b.profileMode(ctx, newPath("direct", direct, upID, stream), newPath("switchyard", through, upID, stream))
		if err != nil {
			return fmt.Errorf("%s: %w", modeName(stream), err)
		}
		res.Modes = append(res.Modes, m)
		b.o.Logf("  %s: %.0fµs CPU and %s allocated per request", modeName(stream), m.CPU, fmtBytes(m.AllocBytes))
	}
	b.rep.Profile = res
	var sum bytes.Buffer
	if err := writeText(&sum, res.tables(), nil); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.txt"), append([]byte(res.intro()+"\n"), sum.Bytes()...), 0o644)
}

// profileMode profiles one mode: the allocations of requests straight to
// the upstream and through Switchyard, in two windows of their own, then
// Switchyard's CPU. Requests go one at a time.
func (b *bencher) profileMode(ctx context.Context, direct, sy path) (ProfileMode, error) {
	dir, mode := b.o.ProfileDir, modeName(sy.stream)
	m := ProfileMode{Stream: sy.stream, Requests: b.sz.Profile, AllocRequests: b.sz.ProfileAllocs}
	warm(ctx, []path{direct, sy}, 1)
	run := func(p path, n int) error {
		for range n {
			if a := p.send(ctx); a.Err != nil {
				return fmt.Errorf("%s: %w", p.name, a.Err)
			}
		}
		return ctx.Err()
	}

	rate := runtime.MemProfileRate
	runtime.MemProfileRate = profileMemRate
	before, err := allocSnapshot()
	if err == nil {
		err = run(direct, m.AllocRequests)
	}
	var between, after *profile.Profile
	if err == nil {
		between, err = allocSnapshot()
	}
	if err == nil {
		err = run(sy, m.AllocRequests)
	}
	if err == nil {
		after, err = allocSnapshot()
	}
	runtime.MemProfileRate = rate
	if err != nil {
		return m, err
	}
	directAllocs, err := window(before, between)
	if err != nil {
		return m, err
	}
	syAllocs, err := window(between, after)
	if err != nil {
		return m, err
	}
	allocFile, directAllocFile := "allocs-"+mode+".pprof", "allocs-"+mode+"-direct.pprof"
	for name, p := range map[string]*profile.Profile{allocFile: syAllocs, directAllocFile: directAllocs} {
		if err := writeProfile(filepath.Join(dir, name), p); err != nil {
			return m, err
		}
	}

	cpuFile := "cpu-" + mode + ".pprof"
	out, err := os.Create(filepath.Join(dir, cpuFile))
	if err != nil {
		return m, err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return m, err
	}
	err = run(sy, m.Requests)
	pprof.StopCPUProfile()
	if err != nil {
		return m, err
	}
	if err := out.Close(); err != nil {
		return m, err
	}
	m.Files = []string{cpuFile, allocFile, directAllocFile}

	cpuProfile, err := readProfile(filepath.Join(dir, cpuFile))
	if err != nil {
		return m, err
	}
	cpu, err := sumCosts(cpuProfile, "cpu", isSwitchyard)
	if err != nil {
		return m, err
	}
	process, err := sumCosts(cpuProfile, "cpu", nil)
	if err != nil {
		return m, err
	}
	allocs, err := windowCosts(syAllocs, directAllocs, "alloc_space")
	if err != nil {
		return m, err
	}
	objects, err := windowCosts(syAllocs, directAllocs, "alloc_objects")
	if err != nil {
		return m, err
	}
	summarize(&m, cpu, process.total, allocs, objects.total)
	return m, nil
}

// summarize fills in m's figures from Switchyard's CPU costs (in
// nanoseconds over m.Requests requests), the process's CPU in the same
// window, and Switchyard's allocation costs (in bytes and objects over
// m.AllocRequests requests).
func summarize(m *ProfileMode, cpu costs, processCPU float64, allocs costs, objects float64) {
	n, na := float64(m.Requests), float64(m.AllocRequests)
	m.CPU = cpu.total / 1e3 / n
	m.CPUShare = share(cpu.total, processCPU)
	m.ProcessCPU = processCPU / 1e3 / n
	m.AllocBytes, m.AllocObjects = allocs.total/na, objects/na
	m.CPUFlat = cpu.top(topFuncs, false, 1e3*n, nil)
	m.CPUCum = cpu.top(topFuncs, true, 1e3*n, isOwn)
	m.Allocs = allocs.top(topFuncs, false, na, nil)
	m.Areas = nil
	for _, a := range areas {
		m.Areas = append(m.Areas, AreaCost{Area: a.name, CPUShare: share(cpu.areas[a.name], cpu.total), AllocShare: share(allocs.areas[a.name], allocs.total)})
	}
}

func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return part / whole
}

// isSwitchyard says whether a CPU sample was taken on one of Switchyard's
// goroutines.
func isSwitchyard(s *profile.Sample) bool {
	return slices.Contains(s.Label[profileLabel], "switchyard")
}

// allocSnapshot collects garbage (the allocation profile is as of the last
// collection) and reads the allocation profile.
func allocSnapshot() (*profile.Profile, error) {
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		return nil, err
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return nil, err
	}
	// The average size of a stack's allocations is a label that changes
	// as they accumulate; without it one stack is one sample in both
	// snapshots, and their difference cancels where nothing changed.
	p.RemoveNumLabel("bytes")
	return p, nil
}

// window is the allocations between two snapshots of the cumulative
// allocation profile.
func window(from, to *profile.Profile) (*profile.Profile, error) {
	neg := from.Copy()
	neg.Scale(-1)
	return profile.Merge([]*profile.Profile{to, neg})
}

// windowCosts is the allocations of one window less another's, of the
// value type ("alloc_space", "alloc_objects"), leaving out the harness.
func windowCosts(window, base *profile.Profile, valueType string) (costs, error) {
	c, err := sumCosts(window, valueType, notHarness)
	if err != nil {
		return c, err
	}
	b, err := sumCosts(base, valueType, notHarness)
	if err != nil {
		return c, err
	}
	return c.minus(b), nil
}

// notHarness says whether a sample's stack has no frame of the client or
// the simulated upstream.
func notHarness(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && hasAnyPrefix(line.Function.Name, harness) {
				return false
			}
		}
	}
	return true
}

// isOwn says whether a (shortened) function name is this module's.
func isOwn(fn string) bool { return strings.HasPrefix(fn, "backend/") }

func readProfile(name string) (*profile.Profile, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return p, nil
}

func writeProfile(name string, p *profile.Profile) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// costs is one value of a profile summed: in all, by function (flat: the
// innermost function of each sample's stack; cum: every function on it,
// once) and by area.
type costs struct {
	total     float64
	flat, cum map[string]float64
	areas     map[string]float64
}

// sumCosts sums the samples of p that keep accepts (nil: all of them),
// reading the value of type valueType ("cpu", "alloc_space").
func sumCosts(p *profile.Profile, valueType string, keep func(*profile.Sample) bool) (costs, error) {
	c := costs{flat: map[string]float64{}, cum: map[string]float64{}, areas: map[string]float64{}}
	vi, err := p.SampleIndexByName(valueType)
	if err != nil {
		return c, err
	}
	for _, s := range p.Sample {
		if keep != nil && !keep(s) {
			continue
		}
		v := float64(s.Value[vi])
		c.total += v
		var stack []string // innermost first, inlined calls included
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function != nil {
					stack = append(stack, line.Function.Name)
				}
			}
		}
		if len(stack) > 0 {
			c.flat[shortName(stack[0])] += v
		}
		for _, a := range areas {
			if slices.ContainsFunc(stack, func(fn string) bool { return hasAnyPrefix(fn, a.prefixes) }) {
				c.areas[a.name] += v
			}
		}
		slices.Sort(stack)
		for _, fn := range slices.Compact(stack) {
			c.cum[shortName(fn)] += v
		}
	}
	return c, nil
}

// shortName is a function's name without this module's path.
func shortName(fn string) string { return strings.TrimPrefix(fn, module) }

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// minus is c less o, function by function.
func (c costs) minus(o costs) costs {
	return costs{total: c.total - o.total, flat: subtract(c.flat, o.flat), cum: subtract(c.cum, o.cum), areas: subtract(c.areas, o.areas)}
}

// subtract is a − b, key by key.
func subtract(a, b map[string]float64) map[string]float64 {
	d := maps.Clone(a)
	for k, v := range b {
		d[k] -= v
	}
	return d
}

// top is the n functions with the most flat (or cumulative) cost, of
// those only accepts (nil: all), each divided by per, with their shares of
// the total.
func (c costs) top(n int, byCum bool, per float64, only func(fn string) bool) []FuncCost {
	by := c.flat
	if byCum {
		by = c.cum
	}
	names := make([]string, 0, len(by))
	for fn, v := range by {
		if v > 0 && (only == nil || only(fn)) {
			names = append(names, fn)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) })
	var out []FuncCost
	for _, fn := range names[:min(n, len(names))] {
		out = append(out, FuncCost{Func: fn, Flat: c.flat[fn] / per, FlatShare: share(c.flat[fn], c.total),
			Cum: c.cum[fn] / per, CumShare: share(c.cum[fn], c.total)})
	}
	return out
}
