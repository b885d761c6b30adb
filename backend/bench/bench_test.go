package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
)

// TestTinyRun runs every section, the profile too, with a few requests
// and checks that the report is whole and its numbers are sane. It asserts
// no timings.
func TestTinyRun(t *testing.T) {
	profDir := filepath.Join(t.TempDir(), "profile")
	// This test binary plays the processes section's children (TestMain).
	rep, err := Run(t.Context(), Options{Sizes: Tiny(), Command: "go test", TempDir: t.TempDir(), Logf: t.Logf, ProfileDir: profDir, Executable: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Incomplete != "" {
		t.Fatalf("incomplete: %s", rep.Incomplete)
	}
	var text, md bytes.Buffer
	if err := rep.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())

	positive := func(name string, vs ...float64) {
		t.Helper()
		for _, v := range vs {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s = %v; want positive and finite", name, v)
			}
		}
	}
	finite := func(name string, vs ...float64) {
		t.Helper()
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s = %v; want finite", name, v)
			}
		}
	}
	sane := func(name string, tm Timing, n int, stream bool) {
		t.Helper()
		// The bare proxy baseline fails a request now and then (see the
		// package doc); the other paths never may.
		allowed := 0
		if strings.Contains(name, "proxy") {
			allowed = n / 5
		}
		ttftN := n - tm.Errors
		if !stream {
			ttftN = 0
		}
		if tm.Errors > allowed || tm.TTFT.N != ttftN || tm.Total.N != n-tm.Errors {
			t.Errorf("%s: %d errors, %d/%d samples; want at most %d errors, %d TTFT and %d total samples", name, tm.Errors, tm.TTFT.N, tm.Total.N, allowed, ttftN, n-tm.Errors)
		}
		positive(name, tm.Total.P50, tm.Total.P99, tm.Total.Mean)
		if !stream {
			return
		}
		positive(name, tm.TTFT.P50, tm.TTFT.P99, tm.TTFT.Mean)
		if tm.TTFT.P50 > tm.Total.P50 || tm.TTFT.P50 > tm.TTFT.P99 {
			t.Errorf("%s: TTFT p50 %v, p99 %v, total p50 %v; want TTFT p50 ≤ both", name, tm.TTFT.P50, tm.TTFT.P99, tm.Total.P50)
		}
	}

	sz := Tiny()
	if len(rep.Overhead) != len(sz.Concurrency)*len(modes) {
		t.Fatalf("%d overhead rows; want %d", len(rep.Overhead), len(sz.Concurrency)*len(modes))
	}
	for _, row := range rep.Overhead {
		name := "overhead " + modeName(row.Stream)
		sane(name+" direct", row.Direct, sz.Overhead, row.Stream)
		sane(name+" proxy", row.Proxy, sz.Overhead, row.Stream)
		sane(name+" switchyard", row.Switchyard, sz.Overhead, row.Stream)
		finite(name+" added", row.SwitchyardTotal.P99, row.ProxyTotal.P99)
		if (row.SwitchyardTTFT != nil) != row.Stream || (row.ProxyTTFT != nil) != row.Stream {
			t.Errorf("%s: added TTFT %v, %v; want them exactly for streams", name, row.SwitchyardTTFT, row.ProxyTTFT)
		}
	}
	// Every stream at concurrency 1 split into its way in and out, each a
	// part of its TTFT.
	if len(rep.Split) != len(pathNames) {
		t.Fatalf("%d first token splits; want %d", len(rep.Split), len(pathNames))
	}
	c1 := rep.Overhead[0] // concurrency 1, streams
	for i, row := range rep.Split {
		if row.Path != pathNames[i] || row.In.N < sz.Overhead/2 || row.Out.N != row.In.N {
			t.Errorf("split %d: %s with %d/%d samples; want %s with about %d", i, row.Path, row.In.N, row.Out.N, pathNames[i], sz.Overhead)
		}
		positive("split "+row.Path, row.In.P50, row.Out.P50)
		// The upstream's wait for its first token lies between the two.
		if ttft := [...]Timing{c1.Direct, c1.Proxy, c1.Switchyard}[i].TTFT.P50; row.In.P50+row.Out.P50 >= ttft {
			t.Errorf("split %s: in %v + out %v µs; want less than its TTFT, %v µs", row.Path, row.In.P50, row.Out.P50, ttft)
		}
	}
	// Both modes in front of both kinds of upstream, each path in a
	// process of its own.
	if len(rep.Processes) != len(headTimings)*len(modes) {
		t.Fatalf("%d processes rows; want %d", len(rep.Processes), len(headTimings)*len(modes))
	}
	for i, row := range rep.Processes {
		name := fmt.Sprintf("processes %s %s", headName(row.HeadWithFirstToken), modeName(row.Stream))
		if row.HeadWithFirstToken != headTimings[i/len(modes)] || row.Stream != modes[i%len(modes)] || row.Concurrency != 1 {
			t.Errorf("processes row %d: %s at concurrency %d; want the upstreams in order, each mode", i, name, row.Concurrency)
		}
		sane(name+" direct", row.Direct, sz.Overhead, row.Stream)
		sane(name+" proxy", row.Proxy, sz.Overhead, row.Stream)
		sane(name+" switchyard", row.Switchyard, sz.Overhead, row.Stream)
	}
	if !strings.Contains(md.String(), "### Processes:") || !strings.Contains(md.String(), "each in its own process, stream, headers with the first token (as Ollama)") {
		t.Error("the markdown has no Processes table or no goal figure of it")
	}
	// Each fast fault in both modes, the fault after the first token for
	// whole answers, the hang in both modes.
	if want := 2*len(fastFaults) + 1 + 2; len(rep.Failover) != want {
		t.Fatalf("%d failover rows; want %d", len(rep.Failover), want)
	}
	for _, row := range rep.Failover {
		name := row.Fault + " " + modeName(row.Stream)
		n := sz.Failover
		if row.DeadlineMS > 0 {
			n = sz.Hang
			if first := row.Failover.untilFirst(row.Stream); first.P50 < 1000*row.DeadlineMS {
				t.Errorf("%s: p50 %vµs; want at least the deadline %vms", name, first.P50, row.DeadlineMS)
			}
		}
		if row.Fault == afterFirstFault && row.Stream {
			t.Errorf("%s: a stream cannot fail over after its first token", name)
		}
		sane("failover "+name, row.Failover, n, row.Stream)
		sane("fallback first "+name, row.Direct, n, row.Stream)
		if row.NotFallback != 0 {
			t.Errorf("%s: %d answers not from the fallback", name, row.NotFallback)
		}
	}
	if b := rep.Breaker; b == nil {
		t.Error("no breaker result")
	} else {
		positive("breaker", b.RanS, b.Skipped.TTFT.P50, b.Direct.TTFT.P50)
		if b.PrimaryRequests < 0 || b.Probed > b.PrimaryRequests {
			t.Errorf("breaker: %d probes, %d primary requests", b.Probed, b.PrimaryRequests)
		}
	}
	if len(rep.Throughput) != len(modes) {
		t.Errorf("%d throughput rows; want %d", len(rep.Throughput), len(modes))
	}
	for _, tp := range rep.Throughput {
		positive("throughput "+modeName(tp.Stream), tp.Direct, tp.Proxy, tp.Switchyard, *tp.Ratio)
	}
	if m := rep.Memory; m == nil {
		t.Error("no memory result")
	} else {
		positive("memory", float64(m.Direct.OpenHeapStack), float64(m.Switchyard.OpenHeapStack), float64(m.FDLimit))
		finite("memory per stream", m.SwitchyardPerStream, m.ProxyPerStream, m.SwitchyardRSSPerStream)
		if m.Switchyard.OpenGoroutines <= m.Switchyard.IdleGoroutines {
			t.Errorf("switchyard goroutines %d idle, %d open; want more while streams are open", m.Switchyard.IdleGoroutines, m.Switchyard.OpenGoroutines)
		}
	}
	if len(rep.Band) != 2 {
		t.Errorf("%d band rows; want ordered and fastest", len(rep.Band))
	}
	for _, row := range rep.Band {
		positive("band "+row.Balance+" requests/s", row.RPS)
		if row.Errors > 0 || row.Queued > 0 {
			t.Errorf("band %s: %d errors, %d liveness checks; want none", row.Balance, row.Errors, row.Queued)
		}
		if row.Balance == "ordered" && row.Served[bandFast] > 0 {
			t.Errorf("band ordered: the fast server served %d; want the id order, the slow one first", row.Served[bandFast])
		}
		// Which server a few requests go to follows the TTFTs learned
		// from a few more, which the machine's load decides as much as
		// the servers (all five went to the slow one in a run beside the
		// whole race suite): the balance itself is the router's tests'
		// (TestBands) and the real servers' (TestRealBandsShareTheLoad).
		if n := row.Served[bandFast] + row.Served[bandSlow]; row.Balance == "fastest" && n >= 100 && row.Served[bandFast] <= row.Served[bandSlow] {
			t.Errorf("band fastest: served %v; want most by the fast one", row.Served)
		}
	}
	if h := rep.History; h == nil {
		t.Error("no history result")
	} else {
		positive("history rate", h.RecordsPerSec, h.RowsPerSec, float64(h.Commits))
		if len(h.Latency) != 2*len(modes) {
			t.Fatalf("%d history latency rows; want %d", len(h.Latency), 2*len(modes))
		}
		for _, l := range h.Latency {
			sane("history on "+modeName(l.Stream), l.On, sz.HistoryRequests, l.Stream)
			sane("history off "+modeName(l.Stream), l.Off, sz.HistoryRequests, l.Stream)
			positive("Record", l.Record.P50, l.RecordShare)
			if l.Record.N != sz.HistoryRequests {
				t.Errorf("history %s c=%d: %d Record times; want %d", modeName(l.Stream), l.Concurrency, l.Record.N, sz.HistoryRequests)
			}
		}
	}
	if p := rep.Profile; p == nil {
		t.Error("no profile result")
	} else {
		if len(p.Modes) != len(modes) {
			t.Fatalf("%d profiled modes; want %d", len(p.Modes), len(modes))
		}
		for _, m := range p.Modes {
			finite("profile "+modeName(m.Stream), m.CPU, m.CPUShare, m.AllocBytes, m.AllocObjects)
			if len(m.Areas) != len(areas) {
				t.Errorf("profile %s: %d areas; want %d", modeName(m.Stream), len(m.Areas), len(areas))
			}
			for _, f := range m.Files {
				if _, err := readProfile(filepath.Join(profDir, f)); err != nil {
					t.Errorf("profile file %s: %v", f, err)
				}
			}
		}
		sum, err := os.ReadFile(filepath.Join(profDir, "summary.txt"))
		if err != nil || !strings.Contains(string(sum), "top 8 functions by flat time") {
			t.Errorf("summary.txt: %v\n%s", err, sum)
		}
	}

	if len(rep.Scale) != 1 || rep.Scale[0].Requests != Tiny().HistoryScale[0] {
		t.Errorf("history at scale: %+v; want one row of %d requests", rep.Scale, Tiny().HistoryScale[0])
	} else {
		r := rep.Scale[0]
		positive("history at scale", r.FillS, float64(r.FileBytes), r.StartCold, r.StartWarm, r.FirstPage, r.PageN, r.Detail,
			r.Stats24h, r.Stats7d, r.NothingAll, r.Nothing7d, r.Fallback7d, r.SweepDay, r.SweepWeek, r.StartPrune, float64(r.ClosedFileBytes))
		if want := int(1.1 * float64(r.Requests)); r.Attempts < want {
			t.Errorf("history at scale: %d attempts for %d requests; want failovers, at least %d", r.Attempts, r.Requests, want)
		}
	}
	if len(rep.Figures) == 0 {
		t.Error("no figures")
	}
	for _, f := range rep.Figures {
		if f.Name == "" || f.Value == "" || strings.Contains(f.Value, "NaN") {
			t.Errorf("figure %+v", f)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("json.Marshal(report) = %v", err)
	}
	for _, want := range []string{"# Benchmarks", "| figure | value | ratio | goal | met |", "go test", "nproc", "## Where the time goes", "non-stream", "History at scale"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// Only runs the sections it names, and refuses a name that is none.
func TestOnly(t *testing.T) {
	rep, err := Run(t.Context(), Options{Sizes: Tiny(), TempDir: t.TempDir(), Only: []string{"history"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.History == nil || len(rep.History.Latency) == 0 || len(rep.Overhead) > 0 || rep.Memory != nil {
		t.Errorf("Only history: history %v, %d overhead rows, memory %v; want the history alone", rep.History != nil, len(rep.Overhead), rep.Memory != nil)
	}
	if _, err := Run(t.Context(), Options{Sizes: Tiny(), TempDir: t.TempDir(), Only: []string{"histroy"}}); err == nil {
		t.Error("Only histroy: no error; want one naming the sections")
	}
}

// An earlier run's history-scale rows join this run's for the sizes it did
// not measure, in order of size, each saying where it comes from.
func TestAddScaleFrom(t *testing.T) {
	rep := &Report{Scale: []ScaleRow{{Requests: 100_000}, {Requests: 1_000_000}}}
	earlier := &Report{Started: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Scale: []ScaleRow{{Requests: 1_000_000, FillS: 99}, {Requests: 10_000_000, FillS: 300}}}
	rep.AddScaleFrom(earlier, "make bench-history")
	var got []string
	for _, r := range rep.Scale {
		got = append(got, fmt.Sprintf("%d %s %g", r.Requests, r.From, r.FillS))
	}
	want := []string{"100000  0", "1000000  0", "10000000 make bench-history of 2026-12-01 300"}
	if !slices.Equal(got, want) {
		t.Errorf("AddScaleFrom: rows %q; want %q", got, want)
	}
}

// A split notes a stream's way in and out from the upstream's marks, and
// leaves out an answer the marks do not fall within.
func TestSplitNote(t *testing.T) {
	sent := time.Now()
	arrived, first := sent.Add(80*time.Microsecond), sent.Add(1100*time.Microsecond)
	s := &split{marks: func() (time.Time, time.Time) { return arrived, first }}
	s.note(experiment.Answer{Sent: sent, TTFT: 1150 * time.Microsecond})
	if len(s.in) != 1 || s.in[0] != 80*time.Microsecond || s.out[0] != 50*time.Microsecond {
		t.Fatalf("in %v, out %v; want [80µs], [50µs]", s.in, s.out)
	}
	for _, a := range []experiment.Answer{
		{Sent: sent, TTFT: 1050 * time.Microsecond},                      // its token before the upstream's: another request's marks
		{Sent: sent.Add(100 * time.Microsecond), TTFT: time.Millisecond}, // sent after the upstream had a request
		{Sent: sent, TTFT: 0},                                            // no first token
		{Sent: sent, TTFT: 1150 * time.Microsecond, Err: errors.New("cut")},
	} {
		s.note(a)
	}
	if len(s.in) != 1 || len(s.out) != 1 {
		t.Errorf("in %v, out %v; want the first answer's alone", s.in, s.out)
	}
}
