package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/backend/bench"
)

// benchmark runs Switchyard's benchmarks on loopback: a table on stdout,
// progress on stderr, and optionally JSON, a markdown document and
// profiles.
func benchmark(args []string, stdout, stderr io.Writer) int {
	fl := newCommand("bench", `Measure Switchyard against a bare httputil.ReverseProxy and the upstream
itself on 127.0.0.1, in one process and (the processes section) each in a
process of its own: latency added, failover, the open breaker, throughput,
memory per open stream and the history's cost, for streamed and non-stream
requests, each as a ratio to the bare proxy in the same run. make bench
regenerates docs/BENCHMARKS.md with it.`, stdout, stderr)
	quick := fl.Bool("quick", false, "a short run (about a minute) instead of the full one (about three)")
	jsonPath := fl.String("json", "", "also write the results as JSON to `FILE`")
	mdPath := fl.String("markdown", "", "also write the results as a markdown document to `FILE` (docs/BENCHMARKS.md)")
	only := fl.String("only", "", "run only these `SECTIONS`, comma-separated: "+strings.Join(bench.Sections(), ", "))
	scale := fl.String("history-sizes", "", "fill and measure histories of these `SIZES` (requests, comma-separated) in the history-scale section, instead of the run's own (100000,1000000)")
	budget := fl.Duration("budget", 0, "bound the whole run by `DURATION` instead of the preset's (12m; a 10M-request history takes about 10m on 2 cores)")
	scaleFrom := fl.String("history-from", "", "add the history-scale rows of an earlier run's JSON `FILE` (make bench-history's) for the sizes this run does not measure; a missing file is skipped")
	peers := fl.String("peers", "", "also measure Olla and llama-swap beside Switchyard, each in a process of its own: `DIR` holds their binaries (olla, llama-swap) and Olla's config/profiles, built from their sources (docs/DESIGN.md, \"Beside its peers\")")
	profileDir := fl.String("profile", "", "also profile the Switchyard path at concurrency 1, streamed and not: CPU and allocation profiles and their summary (summary.txt) in `DIR`, which the markdown includes")
	if exit, ok := fl.parse(args); !ok {
		return exit
	}
	o := bench.Options{Sizes: bench.Full(), Command: "switchyard bench", ProfileDir: *profileDir}
	if *quick {
		o.Sizes, o.Command = bench.Quick(), "switchyard bench --quick"
	}
	if *mdPath != "" {
		o.Command += " --markdown " + *mdPath
	}
	if *profileDir != "" {
		o.Command += " --profile " + *profileDir
	}
	if *peers != "" {
		o.Peers = *peers
		o.Command += " --peers " + *peers
	}
	if *scale != "" {
		o.Sizes.HistoryScale = nil
		for _, f := range strings.Split(*scale, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1000 {
				fmt.Fprintf(stderr, "switchyard bench: --history-sizes: %q is not a number of requests (at least 1000)\n", f)
				return exitUsage
			}
			o.Sizes.HistoryScale = append(o.Sizes.HistoryScale, n)
		}
		o.Command += " --history-sizes " + *scale
	}
	if *budget > 0 {
		o.Sizes.Budget = *budget
		o.Command += " --budget " + budget.String()
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
		o.Command += " --only " + *only
	}
	o.Logf = log.New(stderr, "bench: ", log.Ltime).Printf
	if exe, err := os.Executable(); err == nil {
		o.Executable = exe
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard bench: %v\n", err)
		return exitError
	}
	if *scaleFrom != "" {
		var earlier bench.Report
		switch b, err := os.ReadFile(*scaleFrom); {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			fmt.Fprintf(stderr, "switchyard bench: %v\n", err)
			return exitError
		default:
			if err := json.Unmarshal(b, &earlier); err != nil {
				fmt.Fprintf(stderr, "switchyard bench: %s: %v\n", *scaleFrom, err)
				return exitError
			}
			rep.AddScaleFrom(&earlier, "make bench-history")
		}
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "switchyard bench: %v\n", err)
		return exitError
	}
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, rep); err != nil {
			fmt.Fprintf(stderr, "switchyard bench: %v\n", err)
			return exitError
		}
	}
	if *mdPath != "" {
		var md strings.Builder
		rep.WriteMarkdown(&md)
		if err := os.WriteFile(*mdPath, []byte(md.String()), 0o644); err != nil {
			fmt.Fprintf(stderr, "switchyard bench: write %s: %v\n", *mdPath, err)
			return exitError
		}
	}
	if rep.Incomplete != "" {
		return exitError
	}
	return exitOK
}
