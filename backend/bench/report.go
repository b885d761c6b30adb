package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard/switchyard/backend/simfleet"
)

// Goals of performance (see docs/BENCHMARKS.md).
const (
	goalOverheadP50   = 100.0  // µs Switchyard adds at the median
	goalOverheadP99   = 1000.0 // µs at the 99th percentile
	goalProxyRatio    = 1.5    // Switchyard's added latency over the bare proxy's
	goalFailoverP99   = 2000.0 // µs a fast failure adds before the fallback's first token
	goalThroughput    = 0.8    // Switchyard's requests/s over the bare proxy's
	goalStreamBytes   = 16 << 10
	goalHistoryAddP50 = 100.0 // µs the history adds at the median
)

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
	return fmt.Sprintf("%.2f× %s", *r, of)
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

// figures derives the goal comparisons from the sections that ran.
func (r *Report) figures() []Figure {
	var fs []Figure
	for _, row := range r.Overhead {
		for _, m := range []struct {
			metric    string
			sy, proxy Added
		}{
			{"TTFT", row.SwitchyardTTFT, row.ProxyTTFT},
			{"total", row.SwitchyardTotal, row.ProxyTotal},
		} {
			for _, p := range []struct {
				name      string
				sy, proxy float64
				goal      float64
			}{
				{"p50", m.sy.P50, m.proxy.P50, goalOverheadP50},
				{"p99", m.sy.P99, m.proxy.P99, goalOverheadP99},
			} {
				rt := ratio(p.sy, p.proxy)
				// With the proxy adding nothing measurable (noise put its
				// percentile at or below direct's) the ratio is n/a and
				// only the absolute goal counts.
				ok := p.sy <= p.goal && (p.sy <= 0 || rt == nil || *rt <= goalProxyRatio)
				fs = append(fs, Figure{
					Section: "overhead",
					Name:    fmt.Sprintf("%s %s added, concurrency %d", m.metric, p.name, row.Concurrency),
					Value:   fmt.Sprintf("%s (bare proxy %s)", fmtAdded(p.sy), fmtAdded(p.proxy)),
					Ratio:   fmtRatio(rt, "proxy's"),
					Goal:    fmt.Sprintf("≤ %s and ≤ %.1f× proxy's", fmtUS(p.goal), goalProxyRatio),
					Met:     met(ok),
				})
			}
		}
	}
	for _, row := range r.Failover {
		fs = append(fs, Figure{
			Section: "failover",
			Name:    "TTFT cost of a failing primary: " + row.Fault,
			Value:   fmt.Sprintf("p50 %s, p99 %s", fmtAdded(row.Cost.P50), fmtAdded(row.Cost.P99)),
			Ratio:   fmtRatio(ratio(row.Failover.TTFT.P99, row.Direct.TTFT.P99), "fallback first (p99)"),
			Goal:    fmt.Sprintf("p99 ≤ %s", fmtUS(goalFailoverP99)),
			Met:     met(row.Cost.P99 <= goalFailoverP99 && row.NotFallback == 0),
		})
	}
	if h := r.Hang; h != nil {
		d := h.DeadlineMS * 1000
		fs = append(fs, Figure{
			Section: "failover",
			Name:    fmt.Sprintf("TTFT beyond the %.0f ms deadline: hang_first_token", h.DeadlineMS),
			Value:   fmt.Sprintf("p50 %s, p99 %s", fmtAdded(h.Beyond.P50), fmtAdded(h.Beyond.P99)),
			Ratio:   fmtRatio(ratio(h.Failover.TTFT.P50, d+h.Direct.TTFT.P50), "deadline + fallback first (p50)"),
			Goal:    fmt.Sprintf("p99 ≤ deadline + %s", fmtUS(goalFailoverP99)),
			Met:     met(h.Beyond.P99 <= goalFailoverP99 && h.NotFallback == 0),
		})
	}
	if b := r.Breaker; b != nil {
		rt := ratio(b.Skipped.TTFT.P50, b.Direct.TTFT.P50)
		fs = append(fs, Figure{
			Section: "breaker",
			Name:    "TTFT added while the breaker is open",
			Value:   fmt.Sprintf("p50 %s, p99 %s (%d requests)", fmtAdded(b.Extra.P50), fmtAdded(b.Extra.P99), b.Skipped.TTFT.N),
			Ratio:   fmtRatio(rt, "fallback first (p50)"),
			Goal:    fmt.Sprintf("≈ 0: p50 ≤ %s, p99 ≤ %s", fmtUS(goalOverheadP50), fmtUS(goalOverheadP99)),
			Met:     met(b.Skipped.TTFT.N > 0 && b.Extra.P50 <= goalOverheadP50 && b.Extra.P99 <= goalOverheadP99),
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
	if t := r.Throughput; t != nil {
		fs = append(fs, Figure{
			Section: "throughput",
			Name:    fmt.Sprintf("requests/s at concurrency %d", t.Concurrency),
			Value:   fmt.Sprintf("%.0f/s (bare proxy %.0f/s, direct %.0f/s)", t.Switchyard, t.Proxy, t.Direct),
			Ratio:   fmtRatio(t.Ratio, "proxy's (median of rounds)"),
			Goal:    fmt.Sprintf("≥ %.1f× proxy's", goalThroughput),
			Met:     met(t.Ratio != nil && *t.Ratio >= goalThroughput),
		})
	}
	if m := r.Memory; m != nil {
		fs = append(fs, Figure{
			Section: "memory",
			Name:    fmt.Sprintf("heap+stack per open stream, %d streams", m.Streams),
			Value:   fmt.Sprintf("%s (bare proxy %s; RSS %s)", fmtBytes(m.SwitchyardPerStream), fmtBytes(m.ProxyPerStream), fmtBytes(m.SwitchyardRSSPerStream)),
			Ratio:   fmtRatio(ratio(m.SwitchyardPerStream, m.ProxyPerStream), "proxy's"),
			Goal:    "≤ " + fmtBytes(goalStreamBytes),
			Met:     met(m.SwitchyardPerStream <= goalStreamBytes),
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
				Name:    fmt.Sprintf("total latency the history adds, concurrency %d", l.Concurrency),
				Value:   fmt.Sprintf("p50 %s, p99 %s; Record p50 %s (%.0f%% of the request)", fmtAdded(l.Added.P50), fmtAdded(l.Added.P99), fmtUS(l.Record.P50), 100*l.RecordShare),
				Ratio:   fmtRatio(ratio(l.On.Total.P50, l.Off.Total.P50), "history off (p50)"),
				Goal:    fmt.Sprintf("p50 ≤ %s (docs/DESIGN.md, \"Durability\")", fmtUS(goalHistoryAddP50)),
				Met:     met(l.Added.P50 <= goalHistoryAddP50),
			})
		}
	}
	return fs
}

// table is a titled grid of text, written as aligned text or markdown.
type table struct {
	title string
	head  []string
	rows  [][]string
}

func (r *Report) tables() []table {
	var ts []table
	if len(r.Overhead) > 0 {
		t := table{title: "Overhead: latency as the client saw it (TTFT / total), interleaved request by request",
			head: []string{"concurrency", "path", "n", "TTFT p50", "TTFT p99", "total p50", "total p99", "added TTFT p50", "added TTFT p99", "added total p50", "added total p99"}}
		for _, row := range r.Overhead {
			for _, p := range []struct {
				name         string
				t            Timing
				ttft, totalA *Added
			}{
				{"direct", row.Direct, nil, nil},
				{"bare proxy", row.Proxy, &row.ProxyTTFT, &row.ProxyTotal},
				{"switchyard", row.Switchyard, &row.SwitchyardTTFT, &row.SwitchyardTotal},
			} {
				cells := []string{fmt.Sprint(row.Concurrency), p.name, fmt.Sprint(p.t.TTFT.N),
					fmtUS(p.t.TTFT.P50), fmtUS(p.t.TTFT.P99), fmtUS(p.t.Total.P50), fmtUS(p.t.Total.P99)}
				if p.ttft == nil {
					cells = append(cells, "", "", "", "")
				} else {
					cells = append(cells, fmtAdded(p.ttft.P50), fmtAdded(p.ttft.P99), fmtAdded(p.totalA.P50), fmtAdded(p.totalA.P99))
				}
				t.rows = append(t.rows, cells)
			}
		}
		ts = append(ts, t)
	}
	if len(r.Failover) > 0 || r.Hang != nil {
		t := table{title: "Failover: TTFT with the primary failing vs the fallback as first choice, concurrency 1 (hang: 8)",
			head: []string{"fault", "n", "failover TTFT p50", "p99", "fallback first p50", "p99", "cost p50", "cost p99", "not served by fallback"}}
		for _, row := range r.Failover {
			t.rows = append(t.rows, []string{row.Fault, fmt.Sprint(row.Failover.TTFT.N), fmtUS(row.Failover.TTFT.P50), fmtUS(row.Failover.TTFT.P99),
				fmtUS(row.Direct.TTFT.P50), fmtUS(row.Direct.TTFT.P99), fmtAdded(row.Cost.P50), fmtAdded(row.Cost.P99), fmt.Sprint(row.NotFallback)})
		}
		if h := r.Hang; h != nil {
			t.rows = append(t.rows, []string{fmt.Sprintf("hang_first_token (deadline %.0f ms; cost beyond it)", h.DeadlineMS), fmt.Sprint(h.Failover.TTFT.N),
				fmtUS(h.Failover.TTFT.P50), fmtUS(h.Failover.TTFT.P99), fmtUS(h.Direct.TTFT.P50), fmtUS(h.Direct.TTFT.P99),
				fmtAdded(h.Beyond.P50), fmtAdded(h.Beyond.P99), fmt.Sprint(h.NotFallback)})
		}
		ts = append(ts, t)
	}
	if b := r.Breaker; b != nil {
		ts = append(ts, table{title: "Breaker open: primary answering HTTP 500, threshold 2, concurrency 4",
			head: []string{"ran", "open duration", "skipped (n)", "skipped TTFT p50", "p99", "fallback first p50", "p99", "extra p50", "extra p99", "probes", "primary requests", "cool-downs"},
			rows: [][]string{{fmt.Sprintf("%.1f s", b.RanS), fmt.Sprintf("%.0f ms", b.OpenDurationMS), fmt.Sprint(b.Skipped.TTFT.N),
				fmtUS(b.Skipped.TTFT.P50), fmtUS(b.Skipped.TTFT.P99), fmtUS(b.Direct.TTFT.P50), fmtUS(b.Direct.TTFT.P99),
				fmtAdded(b.Extra.P50), fmtAdded(b.Extra.P99), fmt.Sprint(b.Probed), fmt.Sprint(b.PrimaryRequests), fmt.Sprint(b.CoolDowns)}}})
	}
	if t := r.Throughput; t != nil {
		ts = append(ts, table{title: fmt.Sprintf("Throughput: alternating rounds, all %d workers on one path at a time", t.Concurrency),
			head: []string{"rounds", "direct", "bare proxy", "switchyard", "switchyard / proxy, median of rounds", "each round"},
			rows: [][]string{{fmt.Sprint(t.Rounds), fmt.Sprintf("%.0f/s", t.Direct), fmt.Sprintf("%.0f/s", t.Proxy), fmt.Sprintf("%.0f/s", t.Switchyard),
				fmtRatio(t.Ratio, ""), fmtRatios(t.RoundRatios)}}})
	}
	if m := r.Memory; m != nil {
		t := table{title: fmt.Sprintf("Memory: %d streams held open mid-answer (RLIMIT_NOFILE %d); heap+stack = HeapAlloc+StackInuse after GC", m.Streams, m.FDLimit),
			head: []string{"path", "idle heap+stack", "open heap+stack", "per stream", "idle RSS", "open RSS", "RSS per stream", "goroutines idle → open", "opened in"}}
		for _, p := range []struct {
			name string
			s    MemSample
		}{{"direct", m.Direct}, {"bare proxy", m.Proxy}, {"switchyard", m.Switchyard}} {
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
			head: []string{"concurrency", "total p50 on", "off", "total p99 on", "off", "added p50", "added p99", "Record p50", "Record p99", "Record share"}}
		for _, l := range h.Latency {
			t.rows = append(t.rows, []string{fmt.Sprint(l.Concurrency), fmtUS(l.On.Total.P50), fmtUS(l.Off.Total.P50), fmtUS(l.On.Total.P99), fmtUS(l.Off.Total.P99),
				fmtAdded(l.Added.P50), fmtAdded(l.Added.P99), fmtUS(l.Record.P50), fmtUS(l.Record.P99), fmt.Sprintf("%.0f%%", 100*l.RecordShare)})
		}
		ts = append(ts, t)
	}
	return ts
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

// WriteTable writes the report as aligned text tables.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Switchyard benchmark: %s, %d CPUs (%s), %s, %s; %.1f s\n",
		r.Started.Format(time.RFC3339), r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS, r.ElapsedS)
	if r.Incomplete != "" {
		fmt.Fprintf(tw, "INCOMPLETE: %s\n", r.Incomplete)
	}
	for _, t := range append(r.tables(), r.figureTable()) {
		fmt.Fprintf(tw, "\n%s\n", t.title)
		fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

// WriteMarkdown writes the report as a markdown document for
// docs/BENCHMARKS.md: the machine, the command that reproduces it, each
// figure with its ratio and goal, and the detailed tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Generated by `switchyard bench --markdown docs/BENCHMARKS.md`; do not edit by hand, rerun it.\n")
	b.WriteString("Everything runs in one process on 127.0.0.1: simulated upstreams (`backend/simfleet`, OpenAI dialect, ")
	fmt.Fprintf(&b, "first token after %v, %d tokens, no gap between them), a real Switchyard (`system.New`) with its SQLite history, ", simfleet.FastTTFT, upTokens)
	b.WriteString("a bare `httputil.ReverseProxy` (`FlushInterval: -1`) as the baseline every Go router pays, and a client that reads the SSE itself and measures time to first content token (TTFT) and to `[DONE]` (total). ")
	b.WriteString("Paths are interleaved request by request (throughput: in alternating rounds), so machine noise hits them alike. ")
	b.WriteString("“Added” is a percentile through a path minus the same percentile straight to the upstream.\n\n")
	b.WriteString(`How to read the figures:

- The load generator, the upstreams and Switchyard share the machine's cores, so CPU that Switchyard spends on a request shows up as latency, and at concurrency 64 every path's latency is mostly queueing for the CPU.
- The bare proxy reads each request body whole before forwarding it, as Switchyard does: streaming the caller's body through ` + "`httputil.ReverseProxy`" + ` makes about one streamed POST in 300 fail under concurrency on Go 1.26 (the transport closes the upstream connection mid-answer).
- Failover cost is measured with a breaker that never opens, so every request tries the failing primary first. ` + "`error_event`" + ` arrives when the primary's first token would (after its 1 ms TTFT), so its cost includes that wait. ` + "`hang_first_token`" + ` is reported beyond Switchyard's first-token deadline.
- Memory: Switchyard, the upstreams and the client share one process, so a path's cost per stream is its growth less the direct path's (the client and the upstream, nothing between). Heap+stack is ` + "`runtime.MemStats`" + ` HeapAlloc+StackInuse after a collection (live memory, what the goal is about); RSS is VmRSS after ` + "`debug.FreeOSMemory`" + `. RLIMIT_NOFILE is raised to the hard limit when 4 descriptors per stream do not fit.
- History: two Switchyards assembled alike from router, API and upstream pool (no metrics or events), one recording into SQLite and one recording nothing, interleaved; "Record" is the time spent inside ` + "`history.Store.Record`" + `, which the router waits for before it ends the response.

Why the missed goals are missed, as far as the profiles tell:

- Overhead at concurrency 1: Switchyard decodes every upstream chunk and encodes it again in the caller's protocol (it must, to find the first real token, to translate between Ollama and OpenAI, and to stop at a truncated stream), routes, and publishes metrics and live events; the bare proxy copies bytes. On a 2-core machine shared with the load generator and the upstreams that CPU is latency. Beyond the first token, the total also pays the history write: the request's record is committed to SQLite before the caller receives the end of its answer, so that no answered request is ever missing from history (a deliberate trade, see the History rows; it never delays a first token).
- Concurrency 8 and 64: every path queues for the same two cores; Switchyard's overhead is then within about 1.1× of the bare proxy's for TTFT.
- Throughput: the same extra CPU per request, plus the SQLite writer (about a tenth of the process's CPU in profiles).
- Memory per stream: with ` + "`net/http`" + ` on both sides a proxied stream costs four goroutines (server connection and its background read, the transport's read and write loops) and four 4 KiB buffers; the bare proxy pays more than Switchyard does. 16 KiB is out of reach without leaving ` + "`net/http`" + `.

`)
	fmt.Fprintf(&b, "## Results of %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
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
	_, err := io.WriteString(w, b.String())
	return err
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
