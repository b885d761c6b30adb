package experiment

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes the report as a table, one row per scenario, followed
// by the problems of every scenario whose expectation failed.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tfault\trequests\terrors\tfallbacks\t(skipped_open)\tmixed\tp50 latency\tp95 latency\tp50 TTFT\tp95 TTFT\texpected\tholds\t\n")
	for _, res := range r.Results {
		holds := "yes"
		if !res.Held {
			holds = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t(%d)\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			res.Scenario, res.Fault, res.Requests, res.Errors, res.Fallbacks, res.SkippedOpen, res.Mixed,
			ms(res.LatencyP50), ms(res.LatencyP95), ms(res.TTFTP50), ms(res.TTFTP95), res.Expect, holds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		for _, p := range res.Problems {
			fmt.Fprintf(w, "FAIL %s: %s\n", res.Scenario, p)
		}
	}
	verdict := "every expectation holds"
	if !r.Held() {
		verdict = "SOME EXPECTATIONS FAILED"
	}
	_, err := fmt.Fprintf(w, "%d requests per scenario at concurrency %d, %s: %s\n",
		r.Requests, r.Concurrency, r.Elapsed.Round(10*time.Millisecond), verdict)
	return err
}

// ms formats d in milliseconds, "-" for zero (no sample).
func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
