package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/switchyard/switchyard/backend/bench"
)

// benchmark runs Switchyard's benchmarks on loopback: a table on stdout,
// progress on stderr, and optionally JSON and a markdown document.
func benchmark(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	quick := fl.Bool("quick", false, "a short run (under 30s) instead of the full one (under 3min)")
	jsonPath := fl.String("json", "", "also write the results as JSON to `FILE`")
	mdPath := fl.String("markdown", "", "also write the results as a markdown document to `FILE` (docs/BENCHMARKS.md)")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "switchyard bench: unexpected argument %q\n", fl.Arg(0))
		return exitUsage
	}
	o := bench.Options{Sizes: bench.Full(), Command: "switchyard bench"}
	if *quick {
		o.Sizes, o.Command = bench.Quick(), "switchyard bench --quick"
	}
	if *mdPath != "" {
		o.Command += " --markdown " + *mdPath
	}
	o.Logf = log.New(stderr, "bench: ", log.Ltime).Printf

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard bench: %v\n", err)
		return exitError
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
