package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestTinyRun runs every section with a few requests and checks that the
// report is whole and its numbers are sane. It asserts no timings.
func TestTinyRun(t *testing.T) {
	rep, err := Run(t.Context(), Options{Sizes: Tiny(), Command: "go test", TempDir: t.TempDir(), Logf: t.Logf})
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
	sane := func(name string, tm Timing, n int) {
		t.Helper()
		// The bare proxy baseline fails a request now and then (see the
		// package doc); the other paths never may.
		allowed := 0
		if strings.Contains(name, "proxy") {
			allowed = n / 5
		}
		if tm.Errors > allowed || tm.TTFT.N != n-tm.Errors || tm.Total.N != n-tm.Errors {
			t.Errorf("%s: %d errors, %d/%d samples; want at most %d errors, %d samples in all", name, tm.Errors, tm.TTFT.N, tm.Total.N, allowed, n)
		}
		positive(name, tm.TTFT.P50, tm.TTFT.P99, tm.TTFT.Mean, tm.Total.P50, tm.Total.P99, tm.Total.Mean)
		if tm.TTFT.P50 > tm.Total.P50 || tm.TTFT.P50 > tm.TTFT.P99 {
			t.Errorf("%s: TTFT p50 %v, p99 %v, total p50 %v; want TTFT p50 ≤ both", name, tm.TTFT.P50, tm.TTFT.P99, tm.Total.P50)
		}
	}

	sz := Tiny()
	if len(rep.Overhead) != len(sz.Concurrency) {
		t.Fatalf("%d overhead rows; want %d", len(rep.Overhead), len(sz.Concurrency))
	}
	for _, row := range rep.Overhead {
		sane("overhead direct", row.Direct, sz.Overhead)
		sane("overhead proxy", row.Proxy, sz.Overhead)
		sane("overhead switchyard", row.Switchyard, sz.Overhead)
		finite("overhead added", row.SwitchyardTTFT.P50, row.SwitchyardTotal.P99, row.ProxyTTFT.P50, row.ProxyTotal.P99)
	}
	if len(rep.Failover) != len(fastFaults) {
		t.Fatalf("%d failover rows; want %d", len(rep.Failover), len(fastFaults))
	}
	for _, row := range rep.Failover {
		sane("failover "+row.Fault, row.Failover, sz.Failover)
		sane("fallback first "+row.Fault, row.Direct, sz.Failover)
		if row.NotFallback != 0 {
			t.Errorf("%s: %d answers not from the fallback", row.Fault, row.NotFallback)
		}
	}
	if h := rep.Hang; h == nil {
		t.Error("no hang result")
	} else {
		sane("hang", h.Failover, sz.Hang)
		if h.Failover.TTFT.P50 < 1000*h.DeadlineMS {
			t.Errorf("hang TTFT p50 %vµs; want at least the deadline %vms", h.Failover.TTFT.P50, h.DeadlineMS)
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
	if tp := rep.Throughput; tp == nil {
		t.Error("no throughput result")
	} else {
		positive("throughput", tp.Direct, tp.Proxy, tp.Switchyard, *tp.Ratio)
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
	if h := rep.History; h == nil {
		t.Error("no history result")
	} else {
		positive("history rate", h.RecordsPerSec, h.RowsPerSec, float64(h.Commits))
		if len(h.Latency) != 2 {
			t.Fatalf("%d history latency rows; want 2", len(h.Latency))
		}
		for _, l := range h.Latency {
			sane("history on", l.On, sz.HistoryRequests)
			sane("history off", l.Off, sz.HistoryRequests)
			positive("Record", l.Record.P50, l.RecordShare)
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
	for _, want := range []string{"# Benchmarks", "| figure | value | ratio | goal | met |", "go test", "nproc"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}
