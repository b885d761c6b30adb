package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func TestWithinRatio(t *testing.T) {
	for _, c := range []struct {
		v, base, limit float64
		want           bool
	}{
		{124, 100, 1.25, true},
		{125, 100, 1.25, true},
		{126, 100, 1.25, false},
		{199, 100, 2, true},
		{-5, 100, 1.5, true},  // Switchyard added nothing measurable
		{0, -20, 1.5, true},   // neither did the proxy
		{-30, -20, 1.5, true}, // nor Switchyard, less than the proxy
		{5, -20, 1.5, false},  // the proxy added nothing, Switchyard something
		{5, 0, 1.5, false},
	} {
		if got := withinRatio(c.v, c.base, c.limit); got != c.want {
			t.Errorf("withinRatio(%v, %v, %v) = %v; want %v", c.v, c.base, c.limit, got, c.want)
		}
	}
}

// timingOf is a Timing of 100 answers with the given percentiles (µs); a
// whole answer has no TTFT.
func timingOf(stream bool, ttft50, ttft99, total50, total99 float64) Timing {
	tm := Timing{Total: Dist{N: 100, P50: total50, P99: total99, Mean: total50}}
	if stream {
		tm.TTFT = Dist{N: 100, P50: ttft50, P99: ttft99, Mean: ttft50}
	}
	return tm
}

// sampleReport is a report with every section, its figures derived, whose
// Switchyard meets some goals and misses others:
//   - concurrency 1, stream: TTFT p50 1.2× (met), p99 2× (missed); total
//     p50 1.4× (met), p99 2.5× (missed);
//   - concurrency 1, non-stream: total p50 1.6× (missed), p99 1.5× (met);
//   - concurrency 8: far over every ratio, and no goal;
//   - failover: every fault met but error_event's stream (p99 +2.5 ms);
//   - throughput 0.95× for streams (met), 0.85× non-stream (missed);
//   - memory 0.6× the proxy's (missed);
//   - history +40 µs (met) for streams, +60 µs (missed) non-stream.
func sampleReport() *Report {
	r := &Report{Machine: Machine{CPUs: 2, CPUModel: "test", GoVersion: "go", OS: "linux/amd64"}, Command: "test"}
	direct := timingOf(true, 1000, 1500, 1200, 1700)
	r.Overhead = []OverheadRow{
		overheadRow(1, true, direct, timingOf(true, 1100, 1800, 1300, 1900), timingOf(true, 1120, 2100, 1340, 2200)),
		overheadRow(1, false, timingOf(false, 0, 0, 1100, 1600), timingOf(false, 0, 0, 1200, 1800), timingOf(false, 0, 0, 1260, 1900)),
		overheadRow(8, true, direct, timingOf(true, 1100, 1800, 1300, 1900), timingOf(true, 5000, 9000, 6000, 9900)),
		overheadRow(8, false, timingOf(false, 0, 0, 1100, 1600), timingOf(false, 0, 0, 1200, 1800), timingOf(false, 0, 0, 5000, 9000)),
	}
	splitOf := func(path string, in, out float64) SplitRow {
		return SplitRow{Path: path, In: Dist{N: 100, P50: in, P99: 2 * in}, Out: Dist{N: 100, P50: out, P99: 2 * out}}
	}
	r.Split = []SplitRow{splitOf("direct", 50, 30), splitOf("bare proxy", 110, 60), splitOf("switchyard", 180, 130)}
	fo := func(fault string, stream bool, cost99, deadlineMS float64) FailoverRow {
		return FailoverRow{Fault: fault, Stream: stream, DeadlineMS: deadlineMS,
			Failover: timingOf(stream, 1500, 2000+cost99, 1700, 2200+cost99), Direct: timingOf(stream, 1000, 2000, 1200, 2200),
			Cost: Added{P50: 500, P99: cost99}}
	}
	r.Failover = []FailoverRow{
		fo("refuse", true, 300, 0), fo("refuse", false, 300, 0),
		fo("error_event", true, 2500, 0), fo("error_event", false, 1500, 0),
		fo(afterFirstFault, false, 1800, 0),
		fo("hang_first_token", true, 900, 100), fo("hang_first_token", false, 800, 100),
	}
	r.Breaker = &BreakerResult{OpenDurationMS: 1000, RanS: 6, Skipped: timingOf(true, 1000, 2000, 1200, 2200), Probed: 5,
		Direct: timingOf(true, 990, 2100, 1200, 2200), Extra: Added{P50: 10, P99: -100}, PrimaryRequests: 5, CoolDowns: 6}
	r95, r85 := 0.95, 0.85
	r.Throughput = []ThroughputRow{
		{Concurrency: 64, Stream: true, Rounds: 2, Direct: 10000, Proxy: 6000, Switchyard: 5700, RoundRatios: []float64{0.9, 1}, Ratio: &r95},
		{Concurrency: 64, Stream: false, Rounds: 2, Direct: 12000, Proxy: 7000, Switchyard: 5950, RoundRatios: []float64{0.8, 0.9}, Ratio: &r85},
	}
	r.Memory = &MemoryResult{Streams: 1000, FDLimit: 20000,
		Direct:              MemSample{IdleGoroutines: 80, OpenGoroutines: 4080},
		Proxy:               MemSample{IdleGoroutines: 80, OpenGoroutines: 8080},
		Switchyard:          MemSample{IdleGoroutines: 80, OpenGoroutines: 8030},
		SwitchyardPerStream: 60 << 10, ProxyPerStream: 100 << 10}
	hist := func(stream bool, add float64) HistoryLatency {
		return HistoryLatency{Concurrency: 1, Stream: stream, On: timingOf(stream, 0, 0, 1300+add, 2000), Off: timingOf(stream, 0, 0, 1300, 1900),
			Added: Added{P50: add, P99: 100}, Record: Dist{N: 100, P50: 30, P99: 90}, RecordShare: 0.02}
	}
	r.History = &HistoryResult{Writers: 4, Records: 100, RecordsPerSec: 1000, RowsPerSec: 3000, Commits: 10,
		Latency: []HistoryLatency{hist(true, 40), hist(false, 60)}}
	r.Figures = r.figures()
	return r
}

func TestFigures(t *testing.T) {
	r := sampleReport()
	byName := map[string]Figure{}
	for _, f := range r.Figures {
		if _, dup := byName[f.Name]; dup {
			t.Errorf("figure %q twice", f.Name)
		}
		byName[f.Name] = f
		if strings.Contains(f.Name, "concurrency 8") {
			t.Errorf("figure %q: concurrency 8 has no goal", f.Name)
		}
	}
	for _, c := range []struct {
		name, ratio, goal string
		met               bool
	}{
		{"TTFT p50 added, concurrency 1, stream", "1.20× proxy's", "≤ 1.25× proxy's", true},
		{"TTFT p99 added, concurrency 1, stream", "2.00× proxy's", "≤ 1.5× proxy's", false},
		{"total p50 added, concurrency 1, stream (history on)", "1.40× proxy's", "≤ 1.5× proxy's", true},
		{"total p99 added, concurrency 1, stream (history on)", "2.50× proxy's", "≤ 2× proxy's", false},
		{"total p50 added, concurrency 1, non-stream (history on)", "1.60× proxy's", "≤ 1.5× proxy's", false},
		{"total p99 added, concurrency 1, non-stream (history on)", "1.50× proxy's", "≤ 2× proxy's", true},
		{"TTFT cost of a failing primary, stream: refuse", "1.15× fallback first (p99)", "p99 ≤ 2.00 ms", true},
		{"total cost of a failing primary, non-stream: refuse", "1.14× fallback first (p99)", "p99 ≤ 2.00 ms", true},
		{"TTFT cost of a failing primary, stream: error_event", "2.25× fallback first (p99)", "p99 ≤ 2.00 ms", false},
		{"total cost of a failing primary, non-stream: error_event", "1.68× fallback first (p99)", "p99 ≤ 2.00 ms", true},
		{"total cost of a failing primary, non-stream: " + afterFirstFault, "1.82× fallback first (p99)", "p99 ≤ 2.00 ms", true},
		{"TTFT beyond the 100 ms deadline, stream: hang_first_token", "0.03× deadline + fallback first (p99)", "p99 ≤ deadline + 2.00 ms", true},
		{"total beyond the 100 ms deadline, non-stream: hang_first_token", "0.03× deadline + fallback first (p99)", "p99 ≤ deadline + 2.00 ms", true},
		{"TTFT added while the breaker is open", "1.01× fallback first (p50)", "≈ 0: p50 ≤ 100 µs, p99 ≤ 1.00 ms", true},
		{"requests the open primary received", "0.83× per cool-down", "one half-open probe per cool-down", true},
		{"requests/s at concurrency 64, stream", "0.95× proxy's (median of rounds)", "≥ 0.9× proxy's", true},
		{"requests/s at concurrency 64, non-stream", "0.85× proxy's (median of rounds)", "≥ 0.9× proxy's", false},
		{"heap+stack per open stream, 1000 streams", "0.60× proxy's", "≤ 0.5× proxy's", false},
		{"total latency the history adds, concurrency 1, stream", "1.03× history off (p50)", "p50 ≤ 50 µs (docs/DESIGN.md, \"Durability\")", true},
		{"total latency the history adds, concurrency 1, non-stream", "1.05× history off (p50)", "p50 ≤ 50 µs (docs/DESIGN.md, \"Durability\")", false},
	} {
		f, ok := byName[c.name]
		if !ok {
			t.Errorf("no figure %q", c.name)
			continue
		}
		if f.Ratio != c.ratio || f.Goal != c.goal || f.Met == nil || *f.Met != c.met {
			met := "nil"
			if f.Met != nil {
				met = map[bool]string{true: "met", false: "not met"}[*f.Met]
			}
			t.Errorf("%s: ratio %q, goal %q, %s; want %q, %q, met %v", c.name, f.Ratio, f.Goal, met, c.ratio, c.goal, c.met)
		}
	}
	// The history's writer rate is information: no goal.
	if f := byName["SQLite writer, 4 goroutines calling Record"]; f.Met != nil || f.Goal != "" {
		t.Errorf("writer rate figure %+v; want no goal", f)
	}
	// Every goal of the list is there, and nothing else has one.
	goals := 0
	for _, f := range r.Figures {
		if f.Met != nil {
			goals++
		}
	}
	if goals != 20 {
		t.Errorf("%d figures with a goal; want 20", goals)
	}
}

// A proxy that added nothing measurable leaves no ratio: Switchyard meets
// the goal only by adding nothing either.
func TestFiguresProxyAddedNothing(t *testing.T) {
	direct := timingOf(true, 1000, 1500, 1200, 1700)
	for _, c := range []struct {
		sy   Timing
		want bool
	}{
		{timingOf(true, 1010, 1500, 1200, 1700), false},
		{timingOf(true, 995, 1500, 1200, 1700), true},
	} {
		r := &Report{Overhead: []OverheadRow{overheadRow(1, true, direct, timingOf(true, 990, 1500, 1200, 1700), c.sy)}}
		f := r.figures()[0]
		if f.Ratio != "n/a" || *f.Met != c.want {
			t.Errorf("Switchyard TTFT p50 %v against the proxy's %v: ratio %q, met %v; want n/a, %v", c.sy.TTFT.P50, 990.0, f.Ratio, *f.Met, c.want)
		}
	}
}

func TestTablesHaveNonStreamRows(t *testing.T) {
	r := sampleReport()
	want := map[string]int{ // table title prefix → non-stream rows
		"Overhead":   2 * 3,
		"Failover":   4,
		"Throughput": 1,
		"History":    1,
	}
	for _, tb := range r.tables() {
		prefix, _, _ := strings.Cut(tb.title, ":")
		n := 0
		for _, row := range tb.rows {
			if !strings.Contains(strings.Join(row, "|"), "non-stream") {
				continue
			}
			n++
			for _, cell := range row {
				if strings.Contains(cell, "NaN") {
					t.Errorf("%s: row %q", prefix, row)
				}
			}
			if prefix == "Overhead" && (row[4] != "—" || row[5] != "—") {
				t.Errorf("Overhead: non-stream row %q has a TTFT", row)
			}
		}
		if n != want[prefix] {
			t.Errorf("%s: %d non-stream rows; want %d", prefix, n, want[prefix])
		}
		delete(want, prefix)
		for _, row := range tb.rows {
			if len(row) != len(tb.head) {
				t.Errorf("%s: row %q has %d cells; want %d", prefix, row, len(row), len(tb.head))
			}
		}
	}
	for prefix := range want {
		t.Errorf("no %s table", prefix)
	}
	// Beside Switchyard's added latency, its ratio to the proxy's.
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 8 | stream | switchyard (history on) | 100 | 5.00 ms | 9.00 ms | 6.00 ms | 9.90 ms | +4.00 ms (40.00×) |") {
		t.Errorf("markdown lacks the concurrency 8 Switchyard row with its ratios:\n%s", md.String())
	}
	// The first token split: what each path adds to direct's way in and
	// way out, and Switchyard's ratios to the proxy's.
	for _, want := range []string{
		"| direct | 100 | 50 µs | 100 µs | 30 µs | 60 µs |  |  |",
		"| bare proxy | 100 | 110 µs | 220 µs | 60 µs | 120 µs | +60 µs | +30 µs |",
		"| switchyard (history on) | 100 | 180 µs | 360 µs | 130 µs | 260 µs | +130 µs (2.17×) | +100 µs (3.33×) |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks the split row %q:\n%s", want, md.String())
		}
	}
}

func TestWhyMissed(t *testing.T) {
	r := sampleReport()
	got := strings.Join(r.whyMissed(), "\n")
	for _, want := range []string{
		"Latency at concurrency 1 (TTFT p99 added, stream: 2.00× proxy's; total p99 added, stream (history on): 2.50× proxy's; total p50 added, non-stream (history on): 1.60× proxy's): ",
		"Rerun with `--profile DIR`",
		"Beyond the first token the total also pays the history",
		"Failover, `error_event` (stream): cost p99 +2.50 ms. The error arrives where the primary's first token would",
		"Throughput (non-stream 0.85× the bare proxy's)",
		"Switchyard held 4.0 goroutines per stream more than the direct path, the bare proxy 4.0",
		"The history (p50 +60 µs at concurrency 1, non-stream)",
		"In this run streaming alone cost the upstream +100 µs at p50 (straight to it, 1.20 ms for a stream's total against 1.10 ms for one body), 1.00× what the bare proxy added in all (+100 µs); Switchyard's whole answers took 1.26 ms at p50, 0.97× the bare proxy's streamed total (1.30 ms).",
		"straight to the upstream, 10000 streams/s against 12000 bodies/s at concurrency 64",
		"Split at the upstream (the First token rows), Switchyard added +130 µs (2.17×) on the way in and +100 µs (3.33×) on the way out at p50, the bare proxy +60 µs and +30 µs.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("whyMissed lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"breaker", "`refuse`", "`hang_first_token`"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("whyMissed mentions %q, whose goals were met:\n%s", unwanted, got)
		}
	}

	r.Profile = &ProfileResult{Dir: "prof", Modes: []ProfileMode{
		{Stream: true, Requests: 10, CPU: 150, Areas: []AreaCost{{Area: historyArea, CPUShare: 0.2}, {Area: "encoding/json", CPUShare: 0.3}, {Area: "system calls", CPUShare: 0.1}, {Area: "router", CPUShare: 0.05}}},
		{Stream: false, Requests: 10, CPU: 120},
	}}
	got = strings.Join(r.whyMissed(), "\n")
	for _, want := range []string{
		"The profile puts Switchyard's own CPU at 150 µs per streamed request and 120 µs per non-stream request; for a stream the largest areas are encoding/json 30%, " + historyArea + " 20%, system calls 10%",
		"(150 µs per streamed request at concurrency 1, the profile)",
		"The history and SQLite take 20% of Switchyard's CPU",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("whyMissed with a profile lacks %q:\n%s", want, got)
		}
	}

	r.Failover[5].Cost.P99 = 2500 // the streamed hang
	r.Figures = r.figures()
	if got := strings.Join(r.whyMissed(), "\n"); !strings.Contains(got, "Failover, `hang_first_token` (stream): cost p99 +2.50 ms beyond the 100 ms deadline. The fallback's attempt starts when the deadline fires, at concurrency 8, where the fallback-first p99 is itself 2.00 ms") {
		t.Errorf("whyMissed lacks the hang:\n%s", got)
	}

	// A run whose TTFT goals were met says nothing of the split.
	r.Overhead[0] = overheadRow(1, true, timingOf(true, 1000, 1500, 1200, 1700), timingOf(true, 1100, 1800, 1300, 1900), timingOf(true, 1120, 1800, 1340, 2200))
	r.Figures = r.figures()
	if got := strings.Join(r.whyMissed(), "\n"); strings.Contains(got, "Split at the upstream") {
		t.Errorf("whyMissed splits a first token whose goals were met:\n%s", got)
	}

	met := &Report{Figures: []Figure{{Section: "overhead", Name: "x", Met: met(true)}}}
	if got := met.whyMissed(); len(got) != 1 || got[0] != "This run met every goal." {
		t.Errorf("whyMissed() with every goal met = %q", got)
	}
}

// testProfile is a CPU profile of three samples: two on Switchyard's
// goroutines, one not.
func testProfile() *profile.Profile {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	serve := fn(1, "net/http.(*conn).serve")
	route := fn(2, module+"backend/router.(*Router).Stream")
	record := fn(3, module+"backend/history.(*Store).Record")
	marshal := fn(4, "encoding/json.Marshal")
	client := fn(5, module+"backend/experiment.(*Client).Chat")
	loc := func(id uint64, fns ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fns {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lServe, lRoute, lRecordMarshal, lClient := loc(1, serve), loc(2, route), loc(3, marshal, record), loc(4, client)
	sy := map[string][]string{profileLabel: {"switchyard"}}
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10e6,
		Sample: []*profile.Sample{
			// route called from serve; record (with marshal inlined in it)
			// called from route, called from serve; the client.
			{Location: []*profile.Location{lRoute, lServe}, Value: []int64{1, 30e6}, Label: sy},
			{Location: []*profile.Location{lRecordMarshal, lRoute, lServe}, Value: []int64{1, 10e6}, Label: sy},
			{Location: []*profile.Location{lClient, lServe}, Value: []int64{1, 60e6}},
		},
		Location: []*profile.Location{lServe, lRoute, lRecordMarshal, lClient},
		Function: []*profile.Function{serve, route, record, marshal, client},
	}
}

func TestSumCosts(t *testing.T) {
	p := testProfile()
	sy, err := sumCosts(p, "cpu", isSwitchyard)
	if err != nil {
		t.Fatal(err)
	}
	all, err := sumCosts(p, "cpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sy.total != 40e6 || all.total != 100e6 {
		t.Errorf("totals %v, %v; want 40e6, 100e6", sy.total, all.total)
	}
	route, record := "backend/router.(*Router).Stream", "backend/history.(*Store).Record"
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"flat route", sy.flat[route], 30e6},
		{"flat marshal (innermost, inlined)", sy.flat["encoding/json.Marshal"], 10e6},
		{"flat record", sy.flat[record], 0},
		{"cum serve", sy.cum["net/http.(*conn).serve"], 40e6},
		{"cum route", sy.cum[route], 40e6},
		{"cum record", sy.cum[record], 10e6},
		{"client left out", sy.cum["backend/experiment.(*Client).Chat"], 0},
		{"history area", sy.areas[historyArea], 10e6},
		{"json area", sy.areas["encoding/json"], 10e6},
		{"router area", sy.areas["router (backend/router)"], 40e6},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	top := sy.top(2, true, 1e3*10, nil) // µs per request, 10 requests
	if len(top) != 2 || top[0].Func != route || top[1].Func != "net/http.(*conn).serve" {
		t.Fatalf("top 2 by cum = %+v; want the router, then serve (equal, by name)", top)
	}
	if top[0].Cum != 4000 || top[0].Flat != 3000 || top[0].CumShare != 1 || top[0].FlatShare != 0.75 {
		t.Errorf("top[0] = %+v; want cum 4000 µs, flat 3000 µs, shares 1 and 0.75", top[0])
	}

	d := all.minus(sy)
	if d.total != 60e6 || d.cum["net/http.(*conn).serve"] != 60e6 || d.cum[route] != 0 || d.areas[historyArea] != 0 {
		t.Errorf("all − switchyard: total %v, serve %v, route %v, history %v; want 60e6, 60e6, 0, 0", d.total, d.cum["net/http.(*conn).serve"], d.cum[route], d.areas[historyArea])
	}
	if top := d.top(5, false, 1, nil); len(top) != 1 || top[0].Func != "backend/experiment.(*Client).Chat" {
		t.Errorf("top of the difference = %+v; want the client alone (nothing negative or zero)", top)
	}
}

// A window of the cumulative allocation profile holds what was allocated
// in it alone.
func TestWindow(t *testing.T) {
	from, to := testProfile(), testProfile()
	to.Sample[0].Value = []int64{3, 50e6}
	w, err := window(from, to)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sumCosts(w, "cpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.total != 20e6 || c.flat["backend/router.(*Router).Stream"] != 20e6 || c.cum["net/http.(*conn).serve"] != 20e6 {
		t.Errorf("window: total %v, flat %v; want 20e6 in the router's sample alone", c.total, c.flat)
	}
}

// Allocations of the client and the simulated upstream are not
// Switchyard's: stacks with one of their frames are left out of both
// windows.
func TestWindowCostsLeavesOutHarness(t *testing.T) {
	base, w := testProfile(), testProfile()
	w.Sample[0].Value = []int64{2, 50e6}
	w.Sample[2].Value = []int64{9, 900e6} // the client's
	c, err := windowCosts(w, base, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if c.total != 20e6 || c.cum["backend/experiment.(*Client).Chat"] != 0 {
		t.Errorf("windowCosts: total %v, client %v; want 20e6 and 0", c.total, c.cum["backend/experiment.(*Client).Chat"])
	}
}

func TestMarkdownProfileSection(t *testing.T) {
	r := sampleReport()
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Where the time goes\n\nThis run was not profiled") {
		t.Errorf("markdown without a profile lacks the note:\n%s", md.String())
	}

	p := testProfile()
	cpu, _ := sumCosts(p, "cpu", isSwitchyard)
	all, _ := sumCosts(p, "cpu", nil)
	m := ProfileMode{Stream: true, Requests: 10, AllocRequests: 5, Files: []string{"cpu-stream.pprof"}}
	summarize(&m, cpu, all.total, cpu, 20)
	if m.CPU != 4000 || m.CPUShare != 0.4 || m.ProcessCPU != 10000 || m.AllocBytes != 8e6 || m.AllocObjects != 4 {
		t.Errorf("summarize: CPU %v µs, share %v, process %v µs, allocated %v B in %v objects; want 4000, 0.4, 10000, 8e6, 4",
			m.CPU, m.CPUShare, m.ProcessCPU, m.AllocBytes, m.AllocObjects)
	}
	// The cumulative table lists Switchyard's own functions alone.
	if len(m.CPUCum) != 2 || m.CPUCum[0].Func != "backend/router.(*Router).Stream" || m.CPUCum[1].Func != "backend/history.(*Store).Record" {
		t.Errorf("CPUCum = %+v; want the router, then the history", m.CPUCum)
	}
	r.Profile = &ProfileResult{Dir: "build/bench", Modes: []ProfileMode{m}}
	md.Reset()
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Where the time goes\n\nProfiles of the Switchyard path at concurrency 1, one request at a time, streamed and not, in build/bench. CPU: 10 requests per mode",
		"- stream: Switchyard's goroutines used 4000 µs of CPU per request, 40% of the process's 10000 µs; Switchyard allocated 7.6 MiB in 4 objects per request; files cpu-stream.pprof.",
		"### Where Switchyard's CPU and allocations go, by area (concurrency 1)",
		"| " + historyArea + " | 25% | 25% |",
		"### Switchyard's CPU, stream: top 8 functions by flat time",
		"| backend/router.(*Router).Stream | 3000.0 | 75% | 4000.0 | 100% |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// A ratio that its two decimals would put on the goal's bound gets a
// third, so that the figure reads as its verdict says.
func TestFiguresRatioAtTheBound(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		want  string
		met   bool
	}{
		{0.8966, "0.897× proxy's (median of rounds)", false},
		{0.9031, "0.903× proxy's (median of rounds)", true},
		{0.9, "0.90× proxy's (median of rounds)", true},
		{0.8849, "0.88× proxy's (median of rounds)", false},
	} {
		r := &Report{Throughput: []ThroughputRow{{Concurrency: 64, Stream: true, Ratio: &c.ratio}}}
		f := r.figures()[0]
		if f.Ratio != c.want || *f.Met != c.met {
			t.Errorf("throughput ratio %v: %q, met %v; want %q, met %v", c.ratio, f.Ratio, *f.Met, c.want, c.met)
		}
	}
}

// The peers table gives each router's added latency with its ratio to
// the bare proxy's, and the bare proxy's and the direct path's alone.
func TestPeersTable(t *testing.T) {
	r := &Report{}
	for i, name := range append(pathNames[:], peerNames...) {
		add := float64(100 * i)
		r.Peers = append(r.Peers, PeerRow{Stream: true, Path: name, Timing: timingOf(true, 1000+add, 2000, 1100+add, 2100),
			AddedTTFT: &Added{P50: add}, AddedTotal: Added{P50: add}})
	}
	var ts []table
	for _, tb := range r.tables() {
		if strings.HasPrefix(tb.title, "Peers:") {
			ts = append(ts, tb)
		}
	}
	if len(ts) != 1 || len(ts[0].rows) != 5 {
		t.Fatalf("peers tables %+v; want one of five rows", ts)
	}
	want := [][2]string{{"", ""}, {"+100 µs", "+100 µs"}, {"+200 µs (2.00×)", "+200 µs (2.00×)"}, {"+300 µs (3.00×)", "+300 µs (3.00×)"}, {"+400 µs (4.00×)", "+400 µs (4.00×)"}}
	for i, row := range ts[0].rows {
		if got := [2]string{row[8], row[9]}; got != want[i] {
			t.Errorf("row %d (%s): added %q; want %q", i, row[2], got, want[i])
		}
	}
}

// A peers directory without the peers' binaries is refused, naming what
// is missing.
func TestPeersDirectoryChecked(t *testing.T) {
	_, err := Run(t.Context(), Options{Sizes: Tiny(), TempDir: t.TempDir(), Only: []string{"peers"}, Executable: "unused", Peers: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "the peers' directory has no config/profiles") {
		t.Fatalf("Run with an empty peers directory = %v; want it to name what is missing", err)
	}
}
