package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard/switchyard/backend/simfleet"
)

// Goals of performance (docs/BENCHMARKS.md shows each met or not). Where a
// baseline makes sense, a goal is a ratio to the bare proxy measured in
// the same run.
const (
	// goalConcurrency is the concurrency of the latency goals; the
	// other concurrencies are shown for information.
	goalConcurrency   = 1
	goalHistoryAddP50 = 50.0   // µs the history adds to the total at the median, at most
	goalThroughput    = 0.9    // Switchyard's requests/s over the bare proxy's, at least
	goalStreamRatio   = 0.5    // heap+stack per open stream over the bare proxy's, at most
	goalFailoverP99   = 2000.0 // µs a failing primary adds before the fallback answers
	goalBreakerP50    = 100.0  // µs a primary with an open breaker adds at the median
	goalBreakerP99    = 1000.0 // and at the 99th percentile
)

// latencyGoals bound the latency Switchyard adds at goalConcurrency, as a
// multiple of what the bare proxy adds: the TTFT of streams, and the total
// of streamed and whole answers alike.
var latencyGoals = []latencyGoal{
	{"TTFT", 50, 1.25},
	{"TTFT", 99, 1.5},
	{"total", 50, 1.5},
	{"total", 99, 2},
}

// latencyGoal bounds one latency figure.
type latencyGoal struct {
	metric string // "TTFT" or "total"
	pct    int    // 50 or 99
	limit  float64
}

// withinRatio says whether v is at most limit times base. When base is not
// positive (noise put the baseline at or below the direct path) only a v
// that is not positive either is within it.
func withinRatio(v, base, limit float64) bool {
	return v <= limit*max(base, 0)
}

// Figure is one measured figure next to its goal.
type Figure struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	Value   string `json:"value"`
	Ratio   string `json:"ratio,omitempty"`
	Goal    string `json:"goal,omitempty"`
	// Met is nil for a figure without a goal.
	Met *bool `json:"met,omitempty"`
}

func met(ok bool) *bool { return &ok }

func fmtUS(v float64) string {
	switch {
	case v >= 10000 || v <= -10000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case v >= 1000 || v <= -1000:
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

func fmtAdded(v float64) string {
	if v >= 0 {
		return "+" + fmtUS(v)
	}
	return "−" + fmtUS(-v)
}

func fmtRatio(r *float64, of string) string {
	if r == nil {
		return "n/a"
	}
	return strings.TrimSpace(fmt.Sprintf("%.2f× %s", *r, of))
}

// fmtBoundRatio is fmtRatio for a ratio with a goal's bound: a ratio on
// the other side of the bound than its two decimals say (0.8966 against
// ≥ 0.9) gets a third, so that the figure and its verdict agree.
func fmtBoundRatio(r *float64, of string, bound float64) string {
	if r != nil && *r != bound && fmt.Sprintf("%.2f", *r) == fmt.Sprintf("%.2f", bound) {
		return strings.TrimSpace(fmt.Sprintf("%.3f× %s", *r, of))
	}
	return fmtRatio(r, of)
}

// fmtAddedVs is an added latency with its ratio to the baseline's.
func fmtAddedVs(v, base float64) string {
	return fmt.Sprintf("%s (%s)", fmtAdded(v), fmtRatio(ratio(v, base), ""))
}

func fmtRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20 || v <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10 || v <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func fmtShare(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// at is the added latency at the pct-th percentile (50 or 99).
func (a Added) at(pct int) float64 {
	if pct == 99 {
		return a.P99
	}
	return a.P50
}

// untilFirst is what a caller waits for before it has any of the answer:
// the TTFT of a stream, the total of a whole answer.
func (t Timing) untilFirst(stream bool) Dist {
	if stream {
		return t.TTFT
	}
	return t.Total
}

// firstMetric names untilFirst.
func firstMetric(stream bool) string {
	if stream {
		return "TTFT"
	}
	return "total"
}

// met says whether the failover row meets its goal.
func (row FailoverRow) met() bool {
	return row.Cost.P99 <= goalFailoverP99 && row.NotFallback == 0
}

// met says whether the throughput row meets its goal.
func (row ThroughputRow) met() bool {
	return row.Ratio != nil && *row.Ratio >= goalThroughput
}

// met says whether the history row meets its goal.
func (l HistoryLatency) met() bool {
	return l.Added.P50 <= goalHistoryAddP50
}

// figures derives the goal comparisons from the sections that ran.
func (r *Report) figures() []Figure {
	var fs []Figure
	for _, row := range r.Overhead {
		if row.Concurrency != goalConcurrency {
			continue
		}
		for _, g := range latencyGoals {
			if f, ok := latencyFigure("overhead", fmt.Sprintf("concurrency %d, %s", row.Concurrency, modeName(row.Stream)), g, row); ok {
				fs = append(fs, f)
			}
		}
	}
	for _, row := range r.Processes {
		for _, g := range latencyGoals {
			if g.pct != 50 {
				continue // the Processes table has the p99s
			}
			if f, ok := latencyFigure("processes", fmt.Sprintf("each in its own process, %s, %s", modeName(row.Stream), headName(row.HeadWithFirstToken)), g, row.OverheadRow); ok {
				fs = append(fs, f)
			}
		}
	}
	for _, row := range r.Failover {
		metric, mode := firstMetric(row.Stream), modeName(row.Stream)
		name := fmt.Sprintf("%s cost of a failing primary, %s: %s", metric, mode, row.Fault)
		of, goal := "fallback first (p99)", fmt.Sprintf("p99 ≤ %s", fmtUS(goalFailoverP99))
		if row.DeadlineMS > 0 {
			name = fmt.Sprintf("%s beyond the %.0f ms deadline, %s: %s", metric, row.DeadlineMS, mode, row.Fault)
			of, goal = "deadline + fallback first (p99)", fmt.Sprintf("p99 ≤ deadline + %s", fmtUS(goalFailoverP99))
		}
		fo, first := row.Failover.untilFirst(row.Stream), row.Direct.untilFirst(row.Stream)
		fs = append(fs, Figure{
			Section: "failover",
			Name:    name,
			Value:   fmt.Sprintf("p50 %s, p99 %s", fmtAdded(row.Cost.P50), fmtAdded(row.Cost.P99)),
			Ratio:   fmtRatio(ratio(fo.P99, 1000*row.DeadlineMS+first.P99), of),
			Goal:    goal,
			Met:     met(row.met()),
		})
	}
	if b := r.Breaker; b != nil {
		rt := ratio(b.Skipped.TTFT.P50, b.Direct.TTFT.P50)
		fs = append(fs, Figure{
			Section: "breaker",
			Name:    "TTFT added while the breaker is open",
			Value:   fmt.Sprintf("p50 %s, p99 %s (%d requests)", fmtAdded(b.Extra.P50), fmtAdded(b.Extra.P99), b.Skipped.TTFT.N),
			Ratio:   fmtRatio(rt, "fallback first (p50)"),
			Goal:    fmt.Sprintf("≈ 0: p50 ≤ %s, p99 ≤ %s", fmtUS(goalBreakerP50), fmtUS(goalBreakerP99)),
			Met:     met(b.Skipped.TTFT.N > 0 && b.Extra.P50 <= goalBreakerP50 && b.Extra.P99 <= goalBreakerP99),
		})
		perCool := ratio(float64(b.PrimaryRequests), float64(b.CoolDowns))
		fs = append(fs, Figure{
			Section: "breaker",
			Name:    "requests the open primary received",
			Value:   fmt.Sprintf("%d in %.1f s, %d cool-downs of %.0f ms", b.PrimaryRequests, b.RanS, b.CoolDowns, b.OpenDurationMS),
			Ratio:   fmtRatio(perCool, "per cool-down"),
			Goal:    "one half-open probe per cool-down",
			// A probe still running when the time is up reached the primary
			// but is not among the finished answers: Probed may be one short.
			Met: met(b.PrimaryRequests >= 1 && b.PrimaryRequests <= b.CoolDowns+1 &&
				b.Probed <= b.PrimaryRequests && b.PrimaryRequests-b.Probed <= 1),
		})
	}
	for _, t := range r.Throughput {
		fs = append(fs, Figure{
			Section: "throughput",
			Name:    fmt.Sprintf("requests/s at concurrency %d, %s", t.Concurrency, modeName(t.Stream)),
			Value:   fmt.Sprintf("%.0f/s (bare proxy %.0f/s, direct %.0f/s)", t.Switchyard, t.Proxy, t.Direct),
			Ratio:   fmtBoundRatio(t.Ratio, "proxy's (median of rounds)", goalThroughput),
			Goal:    fmt.Sprintf("≥ %g× proxy's", goalThroughput),
			Met:     met(t.met()),
		})
	}
	if m := r.Memory; m != nil {
		fs = append(fs, Figure{
			Section: "memory",
			Name:    fmt.Sprintf("heap+stack per open stream, %d streams", m.Streams),
			Value:   fmt.Sprintf("%s (bare proxy %s; RSS %s)", fmtBytes(m.SwitchyardPerStream), fmtBytes(m.ProxyPerStream), fmtBytes(m.SwitchyardRSSPerStream)),
			Ratio:   fmtBoundRatio(ratio(m.SwitchyardPerStream, m.ProxyPerStream), "proxy's", goalStreamRatio),
			Goal:    fmt.Sprintf("≤ %g× proxy's", goalStreamRatio),
			Met:     met(withinRatio(m.SwitchyardPerStream, m.ProxyPerStream, goalStreamRatio)),
		})
	}
	if h := r.History; h != nil {
		if h.Records > 0 {
			fs = append(fs, Figure{
				Section: "history",
				Name:    fmt.Sprintf("SQLite writer, %d goroutines calling Record", h.Writers),
				Value:   fmt.Sprintf("%.0f records/s = %.0f rows/s (%d commits)", h.RecordsPerSec, h.RowsPerSec, h.Commits),
			})
		}
		for _, l := range h.Latency {
			fs = append(fs, Figure{
				Section: "history",
				Name:    fmt.Sprintf("total latency the history adds, concurrency %d, %s", l.Concurrency, modeName(l.Stream)),
				Value:   fmt.Sprintf("p50 %s, p99 %s; Record p50 %s (%s of the request)", fmtAdded(l.Added.P50), fmtAdded(l.Added.P99), fmtUS(l.Record.P50), fmtShare(l.RecordShare)),
				Ratio:   fmtRatio(ratio(l.On.Total.P50, l.Off.Total.P50), "history off (p50)"),
				Goal:    fmt.Sprintf("p50 ≤ %s (docs/DESIGN.md, \"Durability\")", fmtUS(goalHistoryAddP50)),
				Met:     met(l.met()),
			})
		}
	}
	return fs
}

// missed returns the figures of section whose goal was not met.
// latencyFigure is the figure of latency goal g for row, named after
// what (the concurrency, the request, ...); false when row has no such
// figure (a whole answer has no TTFT).
func latencyFigure(section, what string, g latencyGoal, row OverheadRow) (Figure, bool) {
	sy, px := row.SwitchyardTotal, row.ProxyTotal
	name := fmt.Sprintf("%s p%d added, %s", g.metric, g.pct, what)
	if g.metric == "TTFT" {
		if row.SwitchyardTTFT == nil || row.ProxyTTFT == nil {
			return Figure{}, false
		}
		sy, px = *row.SwitchyardTTFT, *row.ProxyTTFT
	} else {
		name += " (history on)"
	}
	v, base := sy.at(g.pct), px.at(g.pct)
	return Figure{
		Section: section,
		Name:    name,
		Value:   fmt.Sprintf("%s (bare proxy %s)", fmtAdded(v), fmtAdded(base)),
		Ratio:   fmtBoundRatio(ratio(v, base), "proxy's", g.limit),
		Goal:    fmt.Sprintf("≤ %g× proxy's", g.limit),
		Met:     met(withinRatio(v, base, g.limit)),
	}, true
}

func (r *Report) missed(section string) []Figure {
	var out []Figure
	for _, f := range r.Figures {
		if f.Section == section && f.Met != nil && !*f.Met {
			out = append(out, f)
		}
	}
	return out
}

// table is a titled grid of text, written as aligned text or markdown.
type table struct {
	title string
	head  []string
	rows  [][]string
}

// switchyardPath names the Switchyard path in the tables: the product as
// it ships, recording every request.
const switchyardPath = "switchyard (history on)"

func (r *Report) tables() []table {
	var ts []table
	if len(r.Overhead) > 0 {
		t := table{title: "Overhead: latency as the client saw it (TTFT / total), interleaved request by request; beside Switchyard's added latency, its ratio to the bare proxy's",
			head: append([]string{"concurrency"}, overheadHead...)}
		for _, row := range r.Overhead {
			t.rows = append(t.rows, overheadCells(fmt.Sprint(row.Concurrency), row)...)
		}
		ts = append(ts, t)
	}
	if len(r.Split) > 0 {
		t := table{title: "First token, split at the upstream: the way in (the client sends the request → the upstream has read it) and the way out (the upstream starts writing its first token → the client has read it); streams at concurrency 1, the same requests as the Overhead rows; beside Switchyard's added latency, its ratio to the bare proxy's",
			head: []string{"path", "n", "in p50", "in p99", "out p50", "out p99", "added in p50", "added out p50"}}
		direct, proxy := r.splitRow(pathNames[0]), r.splitRow(pathNames[1])
		for _, row := range r.Split {
			name := row.Path
			if name == pathNames[2] {
				name = switchyardPath
			}
			cells := []string{name, fmt.Sprint(row.In.N), fmtUS(row.In.P50), fmtUS(row.In.P99), fmtUS(row.Out.P50), fmtUS(row.Out.P99), "", ""}
			switch {
			case direct == nil || row.Path == pathNames[0]:
			case row.Path == pathNames[2] && proxy != nil:
				cells[6] = fmtAddedVs(row.In.P50-direct.In.P50, proxy.In.P50-direct.In.P50)
				cells[7] = fmtAddedVs(row.Out.P50-direct.Out.P50, proxy.Out.P50-direct.Out.P50)
			default:
				cells[6], cells[7] = fmtAdded(row.In.P50-direct.In.P50), fmtAdded(row.Out.P50-direct.Out.P50)
			}
			t.rows = append(t.rows, cells)
		}
		ts = append(ts, t)
	}
	if len(r.Processes) > 0 {
		t := table{title: "Processes: the upstream, the bare proxy and Switchyard each in a process of its own, as users run them (the client is the bench's); concurrency 1, interleaved request by request, in front of an upstream that sends its headers at once and one that sends them with its first token; beside Switchyard's added latency, its ratio to the bare proxy's",
			head: append([]string{"upstream"}, overheadHead...)}
		for _, row := range r.Processes {
			t.rows = append(t.rows, overheadCells(headName(row.HeadWithFirstToken), row.OverheadRow)...)
		}
		ts = append(ts, t)
	}
	if len(r.Peers) > 0 {
		t := table{title: "Peers: Switchyard beside Olla and llama-swap, built from their sources (docs/DESIGN.md, \"Beside its peers\"), each in a process of its own in front of the same upstream process; concurrency 1, interleaved request by request; beside each router's added latency, its ratio to the bare proxy's",
			head: []string{"upstream", "request", "path", "n", "TTFT p50", "TTFT p99", "total p50", "total p99", "added TTFT p50", "added total p50"}}
		for _, row := range r.Peers {
			ttft := []string{"—", "—", "—"}
			var proxy *PeerRow
			for i := range r.Peers {
				if p := &r.Peers[i]; p.Path == pathNames[1] && p.Stream == row.Stream && p.HeadWithFirstToken == row.HeadWithFirstToken {
					proxy = p
				}
			}
			added := func(v float64, base func(*PeerRow) float64) string {
				switch {
				case row.Path == pathNames[0]:
					return ""
				case proxy == nil || row.Path == pathNames[1]:
					return fmtAdded(v)
				}
				return fmtAddedVs(v, base(proxy))
			}
			if row.AddedTTFT != nil {
				ttft = []string{fmtUS(row.Timing.TTFT.P50), fmtUS(row.Timing.TTFT.P99), added(row.AddedTTFT.P50, func(p *PeerRow) float64 { return p.AddedTTFT.P50 })}
			}
			name := row.Path
			if name == pathNames[2] {
				name = switchyardPath
			}
			t.rows = append(t.rows, []string{headName(row.HeadWithFirstToken), modeName(row.Stream), name, fmt.Sprint(row.Timing.Total.N), ttft[0], ttft[1],
				fmtUS(row.Timing.Total.P50), fmtUS(row.Timing.Total.P99), ttft[2], added(row.AddedTotal.P50, func(p *PeerRow) float64 { return p.AddedTotal.P50 })})
		}
		ts = append(ts, t)
	}
	if len(r.Failover) > 0 {
		t := table{title: fmt.Sprintf("Failover: the primary failing vs the fallback as first choice, through the same Switchyard; TTFT of streams, total of non-stream requests; concurrency 1 (hang: %d)", hangConcurrency),
			head: []string{"fault", "request", "n", "failover p50", "p99", "fallback first p50", "p99", "cost p50", "cost p99", "not served by fallback"}}
		for _, row := range r.Failover {
			fault := row.Fault
			if row.DeadlineMS > 0 {
				fault = fmt.Sprintf("%s (deadline %.0f ms; cost beyond it)", row.Fault, row.DeadlineMS)
			}
			fo, first := row.Failover.untilFirst(row.Stream), row.Direct.untilFirst(row.Stream)
			t.rows = append(t.rows, []string{fault, fmt.Sprintf("%s (%s)", modeName(row.Stream), firstMetric(row.Stream)), fmt.Sprint(fo.N),
				fmtUS(fo.P50), fmtUS(fo.P99), fmtUS(first.P50), fmtUS(first.P99), fmtAdded(row.Cost.P50), fmtAdded(row.Cost.P99), fmt.Sprint(row.NotFallback)})
		}
		ts = append(ts, t)
	}
	if b := r.Breaker; b != nil {
		ts = append(ts, table{title: fmt.Sprintf("Breaker open: primary answering HTTP 500, threshold 2, concurrency %d, streams", breakerConcurrency),
			head: []string{"ran", "open duration", "skipped (n)", "skipped TTFT p50", "p99", "fallback first p50", "p99", "extra p50", "extra p99", "probes", "primary requests", "cool-downs"},
			rows: [][]string{{fmt.Sprintf("%.1f s", b.RanS), fmt.Sprintf("%.0f ms", b.OpenDurationMS), fmt.Sprint(b.Skipped.TTFT.N),
				fmtUS(b.Skipped.TTFT.P50), fmtUS(b.Skipped.TTFT.P99), fmtUS(b.Direct.TTFT.P50), fmtUS(b.Direct.TTFT.P99),
				fmtAdded(b.Extra.P50), fmtAdded(b.Extra.P99), fmt.Sprint(b.Probed), fmt.Sprint(b.PrimaryRequests), fmt.Sprint(b.CoolDowns)}}})
	}
	if len(r.Throughput) > 0 {
		t := table{title: fmt.Sprintf("Throughput: alternating rounds, all %d workers on one path at a time", r.Throughput[0].Concurrency),
			head: []string{"request", "rounds", "direct", "bare proxy", switchyardPath, "switchyard / proxy, median of rounds", "each round"}}
		for _, row := range r.Throughput {
			t.rows = append(t.rows, []string{modeName(row.Stream), fmt.Sprint(row.Rounds), fmt.Sprintf("%.0f/s", row.Direct), fmt.Sprintf("%.0f/s", row.Proxy),
				fmt.Sprintf("%.0f/s", row.Switchyard), fmtRatio(row.Ratio, ""), fmtRatios(row.RoundRatios)})
		}
		ts = append(ts, t)
	}
	if m := r.Memory; m != nil {
		t := table{title: fmt.Sprintf("Memory: %d streams held open mid-answer (RLIMIT_NOFILE %d); heap+stack = HeapAlloc+StackInuse after GC", m.Streams, m.FDLimit),
			head: []string{"path", "idle heap+stack", "open heap+stack", "per stream", "idle RSS", "open RSS", "RSS per stream", "goroutines idle → open", "opened in"}}
		for _, p := range []struct {
			name string
			s    MemSample
		}{{"direct", m.Direct}, {"bare proxy", m.Proxy}, {switchyardPath, m.Switchyard}} {
			t.rows = append(t.rows, []string{p.name, fmtBytes(float64(p.s.IdleHeapStack)), fmtBytes(float64(p.s.OpenHeapStack)), fmtBytes(p.s.PerStream),
				fmtBytes(float64(p.s.IdleRSS)), fmtBytes(float64(p.s.OpenRSS)), fmtBytes(p.s.RSSPerStream),
				fmt.Sprintf("%d → %d", p.s.IdleGoroutines, p.s.OpenGoroutines), fmt.Sprintf("%.2f s", p.s.OpenSeconds)})
		}
		t.rows = append(t.rows, []string{"switchyard − direct", "", "", fmtBytes(m.SwitchyardPerStream), "", "", fmtBytes(m.SwitchyardRSSPerStream), "", ""})
		t.rows = append(t.rows, []string{"bare proxy − direct", "", "", fmtBytes(m.ProxyPerStream), "", "", fmtBytes(m.ProxyRSSPerStream), "", ""})
		ts = append(ts, t)
	}
	if h := r.History; h != nil && len(h.Latency) > 0 {
		t := table{title: "History: the same composed router and API with the SQLite recorder and with none, interleaved",
			head: []string{"concurrency", "request", "total p50 on", "off", "total p99 on", "off", "added p50", "added p99", "Record p50", "Record p99", "Record share"}}
		for _, l := range h.Latency {
			t.rows = append(t.rows, []string{fmt.Sprint(l.Concurrency), modeName(l.Stream), fmtUS(l.On.Total.P50), fmtUS(l.Off.Total.P50), fmtUS(l.On.Total.P99), fmtUS(l.Off.Total.P99),
				fmtAdded(l.Added.P50), fmtAdded(l.Added.P99), fmtUS(l.Record.P50), fmtUS(l.Record.P99), fmtShare(l.RecordShare)})
		}
		ts = append(ts, t)
	}
	if len(r.Band) > 0 {
		ts = append(ts, r.bandTable())
	}
	if len(r.Scale) > 0 {
		ts = append(ts, scaleTable(r.Scale))
	}
	return ts
}

// overheadHead heads an overhead table's columns after its first.
var overheadHead = []string{"request", "path", "n", "TTFT p50", "TTFT p99", "total p50", "total p99", "added TTFT p50", "added TTFT p99", "added total p50", "added total p99"}

// overheadCells are the three rows (direct, bare proxy, Switchyard) of an
// overhead row, each starting with first.
func overheadCells(first string, row OverheadRow) [][]string {
	mode := modeName(row.Stream)
	ttft := func(v float64) string {
		if !row.Stream {
			return "—"
		}
		return fmtUS(v)
	}
	cells := func(name string, tm Timing) []string {
		return []string{first, mode, name, fmt.Sprint(tm.Total.N), ttft(tm.TTFT.P50), ttft(tm.TTFT.P99), fmtUS(tm.Total.P50), fmtUS(tm.Total.P99)}
	}
	noTTFT := []string{"—", "—"}
	direct := append(cells("direct", row.Direct), "", "", "", "")
	proxy, sy := cells("bare proxy", row.Proxy), cells(switchyardPath, row.Switchyard)
	if row.SwitchyardTTFT != nil && row.ProxyTTFT != nil {
		proxy = append(proxy, fmtAdded(row.ProxyTTFT.P50), fmtAdded(row.ProxyTTFT.P99))
		sy = append(sy, fmtAddedVs(row.SwitchyardTTFT.P50, row.ProxyTTFT.P50), fmtAddedVs(row.SwitchyardTTFT.P99, row.ProxyTTFT.P99))
	} else {
		proxy, sy = append(proxy, noTTFT...), append(sy, noTTFT...)
	}
	proxy = append(proxy, fmtAdded(row.ProxyTotal.P50), fmtAdded(row.ProxyTotal.P99))
	sy = append(sy, fmtAddedVs(row.SwitchyardTotal.P50, row.ProxyTotal.P50), fmtAddedVs(row.SwitchyardTotal.P99, row.ProxyTotal.P99))
	return [][]string{direct, proxy, sy}
}

// scaleTable is a row per history size: the growth curve of each figure.
func scaleTable(rows []ScaleRow) table {
	t := table{title: "History at scale: histories filled through Store.Import over 28 days (1.14 attempts a request), a row per size; queries are the median of 5, sweeps run beside a writer and a reader (\"wait\": the reader's longest first page meanwhile)",
		head: []string{"requests", "file (WAL)", "fill", "start cold / warm", "first page", "page N", "detail", "stats 24h / 7d", "nothing, all / 7d", "fallbacks 7d", "sweep a day (wait)", "sweep a week (wait)", "start, prune pending", "file after sweeps (WAL) / closed"}}
	for _, r := range rows {
		cold := fmtUS(r.StartCold)
		if !r.ColdDropped {
			cold += " (cache not dropped)"
		}
		n := fmt.Sprint(r.Requests)
		if r.From != "" {
			n += " (" + r.From + ")"
		}
		t.rows = append(t.rows, []string{
			n,
			fmt.Sprintf("%s (%s)", fmtBytes(float64(r.FileBytes)), fmtBytes(float64(r.WALBytes))),
			fmt.Sprintf("%.1f s", r.FillS),
			cold + " / " + fmtUS(r.StartWarm),
			fmtUS(r.FirstPage), fmtUS(r.PageN), fmtUS(r.Detail),
			fmtUS(r.Stats24h) + " / " + fmtUS(r.Stats7d),
			fmtUS(r.NothingAll) + " / " + fmtUS(r.Nothing7d),
			fmtUS(r.Fallback7d),
			fmt.Sprintf("%s (%s)", fmtUS(r.SweepDay), fmtUS(r.SweepDayWait)),
			fmt.Sprintf("%s (%s)", fmtUS(r.SweepWeek), fmtUS(r.SweepWeekWait)),
			fmtUS(r.StartPrune),
			fmt.Sprintf("%s (%s) / %s", fmtBytes(float64(r.SweptFileBytes)), fmtBytes(float64(r.SweptWALBytes)), fmtBytes(float64(r.ClosedFileBytes))),
		})
	}
	return t
}

func (r *Report) figureTable() table {
	t := table{title: "Goals", head: []string{"figure", "value", "ratio", "goal", "met"}}
	for _, f := range r.Figures {
		m := ""
		if f.Met != nil {
			m = map[bool]string{true: "met", false: "not met"}[*f.Met]
		}
		t.rows = append(t.rows, []string{f.Name, f.Value, f.Ratio, f.Goal, m})
	}
	return t
}

// intro says what the profile section measured and where its files are.
func (p *ProfileResult) intro() string {
	var b strings.Builder
	if len(p.Modes) == 0 {
		return ""
	}
	m0 := p.Modes[0]
	fmt.Fprintf(&b, "Profiles of the Switchyard path at concurrency 1, one request at a time, streamed and not, in %s. ", p.Dir)
	fmt.Fprintf(&b, "CPU: %d requests per mode under the CPU profiler; the figures are those of Switchyard's own goroutines, which carry the pprof label `%s=switchyard` from the goroutine that started Switchyard (`go tool pprof -tagfocus %s=switchyard FILE` shows them alone); background garbage collection belongs to the process and is not counted. ",
		m0.Requests, profileLabel, profileLabel)
	fmt.Fprintf(&b, "Allocations carry no labels: sampled every %s, apart from the CPU profile, they are those of %d requests per mode through Switchyard less those of as many straight to the upstream (`go tool pprof -diff_base` of the two allocs files), leaving out stacks with a frame of the client or the simulated upstream; small negative figures are sampling noise. ",
		fmtBytes(profileMemRate), m0.AllocRequests)
	b.WriteString("An area counts every sample with one of its functions on the stack, so areas overlap.\n")
	for _, m := range p.Modes {
		fmt.Fprintf(&b, "\n- %s: Switchyard's goroutines used %.0f µs of CPU per request, %s of the process's %.0f µs; Switchyard allocated %s in %.0f objects per request; files %s.",
			modeName(m.Stream), m.CPU, fmtShare(m.CPUShare), m.ProcessCPU, fmtBytes(m.AllocBytes), m.AllocObjects, strings.Join(m.Files, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

// tables are the summary's tables: the areas, then each mode's top
// functions.
func (p *ProfileResult) tables() []table {
	var ts []table
	if len(p.Modes) == 0 {
		return nil
	}
	areas := table{title: "Where Switchyard's CPU and allocations go, by area (concurrency 1)", head: []string{"area"}}
	for _, m := range p.Modes {
		areas.head = append(areas.head, modeName(m.Stream)+" CPU", modeName(m.Stream)+" allocated")
	}
	for i, a := range p.Modes[0].Areas {
		row := []string{a.Area}
		for _, m := range p.Modes {
			if i < len(m.Areas) {
				row = append(row, fmtShare(m.Areas[i].CPUShare), fmtShare(m.Areas[i].AllocShare))
			}
		}
		areas.rows = append(areas.rows, row)
	}
	ts = append(ts, areas)
	for _, m := range p.Modes {
		mode := modeName(m.Stream)
		cpu := func(title string, fs []FuncCost) table {
			t := table{title: title, head: []string{"function", "flat µs/request", "flat", "cum µs/request", "cum"}}
			for _, f := range fs {
				t.rows = append(t.rows, []string{f.Func, fmt.Sprintf("%.1f", f.Flat), fmtShare(f.FlatShare), fmt.Sprintf("%.1f", f.Cum), fmtShare(f.CumShare)})
			}
			return t
		}
		ts = append(ts,
			cpu(fmt.Sprintf("Switchyard's CPU, %s: top %d functions by flat time", mode, topFuncs), m.CPUFlat),
			cpu(fmt.Sprintf("Switchyard's CPU, %s: top %d of its own functions by cumulative time", mode, topFuncs), m.CPUCum))
		t := table{title: fmt.Sprintf("Switchyard's allocations, %s: top %d functions by bytes allocated", mode, topFuncs),
			head: []string{"function", "flat per request", "flat", "cum per request", "cum"}}
		for _, f := range m.Allocs {
			t.rows = append(t.rows, []string{f.Func, fmtBytes(f.Flat), fmtShare(f.FlatShare), fmtBytes(f.Cum), fmtShare(f.CumShare)})
		}
		ts = append(ts, t)
	}
	return ts
}

// mode returns the profile of the given mode, nil when there is none.
func (p *ProfileResult) mode(stream bool) *ProfileMode {
	if p == nil {
		return nil
	}
	for i := range p.Modes {
		if p.Modes[i].Stream == stream {
			return &p.Modes[i]
		}
	}
	return nil
}

// area returns the named area of m, nil when m is nil or has none.
func (m *ProfileMode) area(name string) *AreaCost {
	if m == nil {
		return nil
	}
	for i := range m.Areas {
		if m.Areas[i].Area == name {
			return &m.Areas[i]
		}
	}
	return nil
}

// writeText writes tables as aligned text, then the notes.
func writeText(w io.Writer, ts []table, notes []string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, t := range ts {
		fmt.Fprintf(tw, "\n%s\n", t.title)
		fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

// WriteTable writes the report as aligned text tables.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Switchyard benchmark: %s, %d CPUs (%s), %s, %s; %.1f s\n",
		r.Started.Format(time.RFC3339), r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS, r.ElapsedS)
	if r.Incomplete != "" {
		fmt.Fprintf(w, "INCOMPLETE: %s\n", r.Incomplete)
	}
	ts := r.tables()
	if r.Profile != nil {
		ts = append(ts, r.Profile.tables()...)
	}
	return writeText(w, append(ts, r.figureTable()), r.Notes)
}

// WriteMarkdown writes the report as a markdown document for
// docs/BENCHMARKS.md: how it was measured and how to read it, why the
// goals it missed are missed, the machine and the command that reproduce
// it, each figure with its ratio and goal, the detailed tables, and where
// the time goes when the run was profiled.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Generated by `switchyard bench --markdown docs/BENCHMARKS.md --profile DIR` (`make bench`); do not edit by hand, rerun it.\n")
	b.WriteString("Everything runs in one process on 127.0.0.1: simulated upstreams (`backend/simfleet`, OpenAI dialect, ")
	fmt.Fprintf(&b, "first token after %v, %d tokens, no gap between them), a real Switchyard (`system.New`) with its SQLite history, ", simfleet.FastTTFT, upTokens)
	b.WriteString("a bare `httputil.ReverseProxy` (`FlushInterval: -1`) as the baseline every Go router pays, and a client that reads the answers itself: ")
	b.WriteString("for a stream (`\"stream\": true`) the time to the first content token (TTFT) and to `[DONE]` (total), for a non-stream request the time to the end of its one JSON body (total). ")
	b.WriteString("Paths and both kinds of request are interleaved request by request (throughput: in alternating rounds), so machine noise hits them alike. ")
	b.WriteString("“Added” is a percentile through a path minus the same percentile straight to the upstream, and a goal's ratio is Switchyard's figure over the bare proxy's in the same run.\n\n")
	b.WriteString("How to read the figures:\n\n")
	for _, s := range r.howToRead() {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\nWhy the missed goals are missed, as far as this run tells:\n\n")
	for _, s := range r.whyMissed() {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "\n## Results of %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d CPUs (`nproc`), %s, %s, %s\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.OS, r.Machine.GoVersion)
	fmt.Fprintf(&b, "- Reproduce: `%s` (%.0f s)\n", r.Command, r.ElapsedS)
	if r.Incomplete != "" {
		fmt.Fprintf(&b, "- **Incomplete:** %s\n", r.Incomplete)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")
	writeMarkdownTable(&b, r.figureTable(), "###")
	for _, t := range r.tables() {
		writeMarkdownTable(&b, t, "###")
	}
	b.WriteString("## Where the time goes\n\n")
	if r.Profile == nil {
		b.WriteString("This run was not profiled: `switchyard bench --profile DIR` (as `make bench` runs it) profiles the Switchyard path at concurrency 1 and summarises the profiles here.\n")
	} else {
		b.WriteString(r.Profile.intro() + "\n")
		for _, t := range r.Profile.tables() {
			writeMarkdownTable(&b, t, "###")
		}
	}
	b.WriteString("\n" + teamsNote)
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// teamsNote ends docs/BENCHMARKS.md: teams are measured by a test of
// their own, against a real PostgreSQL, which this program does not start.
const teamsNote = "## Teams\n\nSeveral Switchyards sharing one PostgreSQL (docs/DESIGN.md, \"Teams\") are measured against a real PostgreSQL cluster by `make team-figures`: the delay from a breaker opening on one node to the others demoting the server, the attempts wasted on a dead and on a hung server with sharing on and off, the request path while the database is frozen, and the drain of a 100k-record backlog. The figures are in [BENCHMARKS-TEAMS.md](BENCHMARKS-TEAMS.md).\n"

// howToRead are the notes on reading the figures, with what this run
// measured where they quote it.
func (r *Report) howToRead() []string {
	out := []string{
		fmt.Sprintf("Goals: latency goals are at concurrency %d, as ratios of what Switchyard adds to what the bare proxy adds; the Overhead table shows the other concurrencies for information, each added latency of Switchyard with its ratio to the bare proxy's.", goalConcurrency),
		"The load generator, the upstreams and Switchyard share the machine's cores, so CPU that Switchyard spends on a request shows up as latency, and at high concurrency every path's latency is mostly queueing for the CPU." + r.queueing() + r.tailNoise(),
		"The Switchyard path is the product as it ships: it records every request into its SQLite history, and the router waits until the record is durable (written to the history's journal, which the writer commits into SQLite in batches) before it ends the answer (docs/DESIGN.md, \"Durability\"). The History rows measure that cost alone.",
		fmt.Sprintf("A non-stream request has no TTFT: its figure is the total. Switchyard still reads the upstream as a stream (docs/DESIGN.md, \"Non-streaming requests\"), so a non-stream request falls back even after the primary's first token, as the `%s` rows show; a stream cannot, once its first token is sent.", afterFirstFault),
		"The bare proxy reads each request body whole before forwarding it, as Switchyard does: streaming the caller's body through `httputil.ReverseProxy` makes about one streamed POST in 300 fail under concurrency on Go 1.26 (the transport closes the upstream connection mid-answer).",
		fmt.Sprintf("Failover cost is measured with a breaker that never opens, so every request tries the failing primary first. `error_event` arrives when the primary's first token would (after its %v TTFT), and `%s` after the primary's first tokens, so their costs include that wait. `hang_first_token` is reported beyond Switchyard's first-token deadline.", simfleet.FastTTFT, afterFirstFault),
		"Memory: Switchyard, the upstreams and the client share one process, so a path's cost per stream is its growth less the direct path's (the client and the upstream, nothing between). Heap+stack is `runtime.MemStats` HeapAlloc+StackInuse after a collection (live memory, what the goal is about); RSS is VmRSS after `debug.FreeOSMemory`. RLIMIT_NOFILE is raised to the hard limit when 4 descriptors per stream do not fit.",
		"History: two Switchyards assembled alike from router, API and upstream pool (no metrics or events), one recording into SQLite and one recording nothing, interleaved; \"Record\" is the time spent inside `history.Store.Record`.",
		"Processes: the upstream, the bare proxy and Switchyard (`system.New`, as `switchyard serve` runs it, its history on) each run in a process of its own, started from the bench's own executable, and the bench's client reaches them over loopback, as a user's app reaches a router and a model server. Every hop between two processes wakes a thread of the other one, which the one-process rows do not pay. The upstream sends its headers at once, as llama-server does, or with its first token, as Ollama does on /api/chat and /v1 alike (both seen with the real servers, docs/DESIGN.md, \"Where a first token's time goes\").",
	}
	return out
}

// queueing quotes how Switchyard fared against the bare proxy beyond the
// goals' concurrency, from the streamed overhead rows.
func (r *Report) queueing() string {
	var parts []string
	for _, row := range r.Overhead {
		if row.Concurrency == goalConcurrency || !row.Stream || row.SwitchyardTTFT == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s at concurrency %d", fmtRatio(ratio(row.SwitchyardTTFT.P50, row.ProxyTTFT.P50), ""), row.Concurrency))
	}
	if len(parts) == 0 {
		return ""
	}
	return " In this run the TTFT p50 Switchyard added was " + strings.Join(parts, " and ") + " what the bare proxy added."
}

// tailNoise warns that a p99 ratio at the goals' concurrency rests on a
// small difference when the bare proxy added little at p99, quoting the
// smallest.
func (r *Report) tailNoise() string {
	least, found := 0.0, false
	for _, row := range r.Overhead {
		if row.Concurrency != goalConcurrency {
			continue
		}
		for _, a := range []*Added{row.ProxyTTFT, &row.ProxyTotal} {
			if a != nil && (!found || a.P99 < least) {
				least, found = a.P99, true
			}
		}
	}
	if !found {
		return ""
	}
	return fmt.Sprintf(" A p99 ratio divides two differences of tail percentiles: where the bare proxy adds little at p99 (down to %s in this run) it is large and moves from run to run.", fmtAdded(least))
}

// processRow is the Processes row of a mode and a kind of upstream, nil
// when the run has none.
func (r *Report) processRow(stream, headWithFirstToken bool) *ProcessRow {
	for i := range r.Processes {
		if row := &r.Processes[i]; row.Stream == stream && row.HeadWithFirstToken == headWithFirstToken {
			return row
		}
	}
	return nil
}

// processesSays quotes the streams' TTFT from the Processes rows, in
// front of both kinds of upstream, when the run has them.
func (r *Report) processesSays() string {
	var parts []string
	var proxy float64
	for _, late := range headTimings {
		row := r.processRow(true, late)
		if row == nil || row.SwitchyardTTFT == nil || row.ProxyTTFT == nil {
			return ""
		}
		if !late {
			proxy = row.ProxyTTFT.P50
		}
		kind := "one that sends its headers at once"
		if late {
			kind = "one that sends them with its first token, as Ollama does, where the bare proxy's caller too reads the headers when the first token comes"
		}
		parts = append(parts, fmt.Sprintf("%s in front of %s", fmtAddedVs(row.SwitchyardTTFT.P50, row.ProxyTTFT.P50), kind))
	}
	return fmt.Sprintf(" As users run them, each in a process of its own (the Processes rows), every hop wakes a thread of another process: the bare proxy added %s at the TTFT p50, and Switchyard %s.", fmtAdded(proxy), strings.Join(parts, ", and "))
}

// historyNextStep is what would take the rest of the history's cost off
// the answer's path.
const historyNextStep = "Record itself is one write(2) into the journal (docs/DESIGN.md, \"Durability\"); what the history adds beyond it is the writer goroutine's SQLite commit, off the answer's path but on the cores the client and the upstreams share: journaled records go straight into the tables, 64 to a commit once 128 requests a second arrive. What is left is the inserts themselves, six B-trees for a request and three for its attempts, about 25 µs of CPU a record (BenchmarkRecordCPU); each index serves a filter or a sweep that must stay fast at ten million requests (docs/DESIGN.md, \"Growth and bounds\"): none is spare."

// streamedRead says what reading a non-stream request's answer from the
// upstream as a stream cost in this run, when the non-stream latency goal
// is missed: the direct path's streamed total against its whole one at
// the goals' concurrency, and Switchyard's whole answers against the
// bare proxy's streams.
func (r *Report) streamedRead() string {
	var stream, whole *OverheadRow
	for i := range r.Overhead {
		row := &r.Overhead[i]
		if row.Concurrency != goalConcurrency {
			continue
		}
		if row.Stream {
			stream = row
		} else {
			whole = row
		}
	}
	missed := slices.ContainsFunc(r.missed("overhead"), func(f Figure) bool { return strings.Contains(f.Name, "non-stream") && strings.Contains(f.Name, "p50") })
	if stream == nil || whole == nil || !missed {
		return ""
	}
	cost := stream.Direct.Total.P50 - whole.Direct.Total.P50
	out := fmt.Sprintf("Latency of a non-stream request (%s the bare proxy's): Switchyard reads its answer from the upstream as a stream, so that the first-token deadline catches a server that never answers and a failure before the end falls back (docs/DESIGN.md, \"Non-streaming requests\"). The bare proxy asks for one body. In this run streaming alone cost the upstream %s at p50 (straight to it, %s for a stream's total against %s for one body), %s what the bare proxy added in all (%s); Switchyard's whole answers took %s at p50, %s the bare proxy's streamed total (%s).",
		fmtRatio(ratio(whole.SwitchyardTotal.P50, whole.ProxyTotal.P50), ""), fmtAdded(cost), fmtUS(stream.Direct.Total.P50), fmtUS(whole.Direct.Total.P50),
		fmtRatio(ratio(cost, whole.ProxyTotal.P50), ""), fmtAdded(whole.ProxyTotal.P50), fmtUS(whole.Switchyard.Total.P50),
		fmtRatio(ratio(whole.Switchyard.Total.P50, stream.Proxy.Total.P50), ""), fmtUS(stream.Proxy.Total.P50))
	if streams, bodies := r.directRate(true), r.directRate(false); streams > 0 && bodies > 0 {
		out += fmt.Sprintf(" So with throughput: straight to the upstream, %.0f streams/s against %.0f bodies/s at concurrency %d, and Switchyard's rate of whole answers is bounded by the upstream's of streams.", streams, bodies, r.Throughput[0].Concurrency)
	}
	return out
}

// directRate is the direct path's throughput, streamed or not, 0 when
// the run has none.
func (r *Report) directRate(stream bool) float64 {
	for _, t := range r.Throughput {
		if t.Stream == stream {
			return t.Direct
		}
	}
	return 0
}

// splitRow is the Split row of the path named name (pathNames), nil when
// there is none.
func (r *Report) splitRow(name string) *SplitRow {
	for i := range r.Split {
		if r.Split[i].Path == name {
			return &r.Split[i]
		}
	}
	return nil
}

// splitSays says, from the Split rows, where the first token's added
// latency went; "" without them.
func (r *Report) splitSays() string {
	d, px, sy := r.splitRow(pathNames[0]), r.splitRow(pathNames[1]), r.splitRow(pathNames[2])
	if d == nil || px == nil || sy == nil {
		return ""
	}
	return fmt.Sprintf(" Split at the upstream (the First token rows), Switchyard added %s on the way in and %s on the way out at p50, the bare proxy %s and %s."+
		" On the way in, Switchyard decodes and checks the request, orders the candidates, starts the attempt and builds the upstream's request before its one write, where the bare proxy copies the request's bytes."+
		" On the way out, the bare proxy has passed on the upstream's head, which came before the first token, so its client has read that head and handed the answer to its caller before the token arrives; Switchyard sends the caller's head with the first real token, as it must to fall back until then, so its client reads the head, and net/http's transport hands the answer from its reading goroutine to the caller, within the first token's latency; before that, Switchyard reads the upstream's event, finds it a real token, and commits the attempt.",
		fmtAddedVs(sy.In.P50-d.In.P50, px.In.P50-d.In.P50), fmtAddedVs(sy.Out.P50-d.Out.P50, px.Out.P50-d.Out.P50),
		fmtAdded(px.In.P50-d.In.P50), fmtAdded(px.Out.P50-d.Out.P50))
}

// whyMissed explains each missed goal as far as the run can, quoting it.
func (r *Report) whyMissed() []string {
	var out []string
	prof := r.Profile
	if fs := r.missed("overhead"); len(fs) > 0 {
		s := fmt.Sprintf("Latency at concurrency %d (%s): Switchyard does more per request than a proxy that copies bytes. It routes, reads the upstream's answer to find its first real token and to stop at a truncated one, writes the answer in the caller's protocol, and publishes metrics and live events; on %d cores shared with the client and the upstreams, that CPU is latency.",
			goalConcurrency, strings.ReplaceAll(listFigures(fs), fmt.Sprintf(", concurrency %d", goalConcurrency), ""), r.Machine.CPUs)
		if slices.ContainsFunc(fs, func(f Figure) bool { return strings.HasPrefix(f.Name, "TTFT") }) {
			s += r.splitSays()
		}
		s += r.profileSays()
		s += r.processesSays()
		if h := r.historyRow(goalConcurrency, true); h != nil && slices.ContainsFunc(fs, func(f Figure) bool { return strings.HasPrefix(f.Name, "total") }) {
			s += fmt.Sprintf(" Beyond the first token the total also pays the history, whose record is made durable before the caller receives the end of its answer (%s at p50 for a stream at concurrency %d, the History rows).", fmtAdded(h.Added.P50), h.Concurrency)
		}
		s += " The reads and writes on both connections (the system calls) are what any proxy pays, the bare one too; Switchyard, like the bare proxy, writes what the upstream sent together in one write, and its own HTTP/1.1 client reads the upstream on the handler's goroutine, without the two goroutines per connection and their hand-offs that the bare proxy's `net/http` transport pays (docs/DESIGN.md, \"Shared transport\"). The rest is Switchyard's own work, which a proxy does not do: the caller's request decoded and checked (the usual chat request, and the fields kept for the upstream, with jsontext; anything unusual with encoding/json), the candidates ordered and the attempt started, the upstream's request built from the caller's bytes, its events read until the first real token (the common chunk with jsontext), and after the last one the record made durable in the journal. Next step: docs/DESIGN.md, \"Where a first token's time goes\", times each step of both ways. At concurrency 1 they run on a CPU that slept through the upstream's wait, at several times their hot cost (the API edge's whole handler takes 10 µs in BenchmarkSameDialectStream); the request's id, its events and the commit's bookkeeping, moved off the two paths, were measured to be worth a tenth of what Switchyard adds beyond the bare proxy (docs/DESIGN.md, the same section). The rest is the guarantee itself: the request is read before it is routed, and the answer's head waits for a real token."
		out = append(out, s)
	}
	if s := r.streamedRead(); s != "" {
		out = append(out, s)
	}
	if fs := r.missed("processes"); len(fs) > 0 {
		out = append(out, fmt.Sprintf("Latency with each program in a process of its own (%s): in front of an upstream that sends its headers at once, as llama-server does, the bare proxy passes them on before the first token, and its caller's client has read them and handed the answer to its caller by the time the token comes; Switchyard sends its headers with the first real token, as it must to fall back until then, so its caller's client does that on the first token's path (docs/DESIGN.md, \"Where a first token's time goes\"). In front of an upstream that sends its headers with its first token, as Ollama does, the bare proxy's caller does it there too. A non-stream request's answer Switchyard reads from the upstream as a stream (docs/DESIGN.md, \"Non-streaming requests\").", listFigures(fs)))
	}
	for _, row := range r.Failover {
		if row.met() {
			continue
		}
		s := fmt.Sprintf("Failover, `%s` (%s): cost p99 %s", row.Fault, modeName(row.Stream), fmtAdded(row.Cost.P99))
		if row.NotFallback > 0 {
			s += fmt.Sprintf(", and %d answers not served by the fallback", row.NotFallback)
		}
		switch {
		case row.DeadlineMS > 0:
			s += fmt.Sprintf(" beyond the %.0f ms deadline. The fallback's attempt starts when the deadline fires, at concurrency %d, where the fallback-first p99 is itself %s; this run does not break it down further.",
				row.DeadlineMS, hangConcurrency, fmtUS(row.Direct.untilFirst(row.Stream).P99))
		case row.Fault == "error_event":
			s += fmt.Sprintf(". The error arrives where the primary's first token would, after its %v TTFT; the cost includes that wait.", simfleet.FastTTFT)
		case row.Fault == afterFirstFault:
			s += fmt.Sprintf(". The primary dies after its first tokens, %v and more after the request; the cost includes that wait.", simfleet.FastTTFT)
		default:
			s += ". It is the time to try the primary, which this run does not break down further."
		}
		out = append(out, s)
	}
	if fs := r.missed("breaker"); len(fs) > 0 {
		out = append(out, fmt.Sprintf("The open breaker (%s): nothing in this run explains it; rerun to see whether it repeats.", listFigures(fs)))
	}
	var slow []string
	for _, t := range r.Throughput {
		if !t.met() {
			slow = append(slow, fmt.Sprintf("%s %s", modeName(t.Stream), fmtRatio(t.Ratio, "")))
		}
	}
	if len(slow) > 0 {
		s := fmt.Sprintf("Throughput (%s the bare proxy's): the CPU Switchyard spends on each request is spent at every concurrency, on the cores the client and the upstreams share", strings.Join(slow, ", "))
		if m := prof.mode(true); m != nil {
			s += fmt.Sprintf(" (%.0f µs per streamed request at concurrency 1, the profile)", m.CPU)
		}
		s += ", and the history's commits are part of it. A profile at concurrency 64 (docs/DESIGN.md, \"Where a first token's time goes\") found Switchyard's goroutines using about 90 µs of CPU a stream more than the bare proxy's, the history (its writer's commits and the journal write) about 40 µs of it and Switchyard's own reading and routing most of the rest."
		out = append(out, s)
	}
	if m := r.Memory; m != nil && len(r.missed("memory")) > 0 {
		n := float64(m.Streams)
		perStream := func(s MemSample) float64 { return float64(s.OpenGoroutines-s.IdleGoroutines) / n }
		stack := func(s MemSample) float64 { return (float64(s.OpenStack) - float64(s.IdleStack)) / n }
		heap := func(s MemSample) float64 { return s.PerStream - stack(s) }
		out = append(out, fmt.Sprintf("Memory per open stream (%s against the bare proxy's %s): a stream open through a proxy on `net/http` holds goroutines and buffers on both of its sides: the server's connection (its goroutine, a goroutine that watches for the caller's going, a 4 KiB reader and a 4 KiB writer) and the transport's (a read and a write goroutine, 4 KiB buffers each way); Switchyard's upstream side holds no goroutine and a 1 KiB read buffer (its own HTTP/1.1 client, docs/DESIGN.md, \"Shared transport\"). Switchyard held %.1f goroutines per stream more than the direct path, the bare proxy %.1f; their stacks were %s per stream (the bare proxy's %s: Switchyard's handler keeps an 8 KiB stack while the stream waits, docs/DESIGN.md, \"The stack an open stream holds\"), the heap %s (%s). The bare proxy's stacks and those four buffers alone come to %s of the goal's %s, which leaves the rest for all else an open stream holds: its request and response with their headers and contexts, the connections' own state, the router's attempt and the upstream's read buffer.",
			fmtBytes(m.SwitchyardPerStream), fmtBytes(m.ProxyPerStream), perStream(m.Switchyard)-perStream(m.Direct), perStream(m.Proxy)-perStream(m.Direct),
			fmtBytes(stack(m.Switchyard)-stack(m.Direct)), fmtBytes(stack(m.Proxy)-stack(m.Direct)), fmtBytes(heap(m.Switchyard)-heap(m.Direct)), fmtBytes(heap(m.Proxy)-heap(m.Direct)),
			fmtBytes(stack(m.Proxy)-stack(m.Direct)+16<<10), fmtBytes(goalStreamRatio*m.ProxyPerStream)))
	}
	var costly []string
	if r.History != nil {
		for _, l := range r.History.Latency {
			if !l.met() {
				costly = append(costly, fmt.Sprintf("%s at concurrency %d, %s", fmtAdded(l.Added.P50), l.Concurrency, modeName(l.Stream)))
			}
		}
	}
	if len(costly) > 0 {
		s := fmt.Sprintf("The history (p50 %s): the router waits until the record is durable before it ends the answer, so that no answered request is missing from the history after a crash (docs/DESIGN.md, \"Durability\").", strings.Join(costly, "; "))
		if h := r.historyRow(goalConcurrency, true); h != nil {
			s += fmt.Sprintf(" `Record` took %s at p50 for a stream at concurrency %d, %s of the request.", fmtUS(h.Record.P50), h.Concurrency, fmtShare(h.RecordShare))
		}
		if a := prof.mode(true).area(historyArea); a != nil {
			s += fmt.Sprintf(" The history and SQLite take %s of Switchyard's CPU for a stream (the profile).", fmtShare(a.CPUShare))
		}
		s += " " + historyNextStep
		out = append(out, s)
	}
	if len(out) == 0 {
		out = append(out, "This run met every goal.")
	}
	return out
}

// profileSays quotes the profile on Switchyard's CPU per request and its
// largest areas, "" when the run was not profiled.
func (r *Report) profileSays() string {
	var parts []string
	for _, stream := range modes {
		if m := r.Profile.mode(stream); m != nil {
			kind := "streamed"
			if !stream {
				kind = "non-stream"
			}
			parts = append(parts, fmt.Sprintf("%.0f µs per %s request", m.CPU, kind))
		}
	}
	m := r.Profile.mode(true)
	if m == nil {
		return " Rerun with `--profile DIR` to see where its CPU goes."
	}
	areas := slices.Clone(m.Areas)
	slices.SortFunc(areas, func(a, b AreaCost) int { return cmp.Compare(b.CPUShare, a.CPUShare) })
	var top []string
	for _, a := range areas[:min(3, len(areas))] {
		top = append(top, fmt.Sprintf("%s %s", a.Area, fmtShare(a.CPUShare)))
	}
	return fmt.Sprintf(" The profile puts Switchyard's own CPU at %s; for a stream the largest areas are %s (Where the time goes).", strings.Join(parts, " and "), strings.Join(top, ", "))
}

// historyRow is the history latency row at concurrency c of the mode, nil
// when there is none.
func (r *Report) historyRow(c int, stream bool) *HistoryLatency {
	if r.History == nil {
		return nil
	}
	for i, l := range r.History.Latency {
		if l.Concurrency == c && l.Stream == stream {
			return &r.History.Latency[i]
		}
	}
	return nil
}

// listFigures quotes figures briefly: each name with its ratio, or its
// value when it has no ratio.
func listFigures(fs []Figure) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		v := f.Ratio
		if v == "" || v == "n/a" {
			v = f.Value
		}
		parts[i] = f.Name + ": " + v
	}
	return strings.Join(parts, "; ")
}

func writeMarkdownTable(b *strings.Builder, t table, level string) {
	fmt.Fprintf(b, "%s %s\n\n", level, t.title)
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("|")
	for _, h := range t.head {
		b.WriteString(" " + cell(h) + " |")
	}
	b.WriteString("\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range t.rows {
		b.WriteString("|")
		for _, c := range row {
			b.WriteString(" " + cell(c) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}
