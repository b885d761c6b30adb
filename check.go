package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard/switchyard/backend/system"
)

// check validates the config and reports each candidate's reachability.
func check(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	fl.SetOutput(stderr)
	o := baseOptions(stderr)
	fl.StringVar(&o.ConfigPath, "config", "", "config file")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := system.Check(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return exitError
	}
	if rep.Missing {
		fmt.Fprintf(stdout, "no config at %s: the embedded default applies (local Ollama on :11434 and OpenAI-compatible servers on :8000/:8080, else the demo fleet)\n", rep.Path)
	} else {
		fmt.Fprintf(stdout, "config %s is valid: %d candidates\n", rep.Path, len(rep.Results))
	}
	if !rep.GPU.Available {
		fmt.Fprintf(stdout, "GPU: %s\n", rep.GPU.Message)
	}
	for _, d := range rep.GPU.Devices {
		fmt.Fprintf(stdout, "GPU %d: %s, %.1f GiB used of %.1f GiB (%.1f GiB free), %.0f%% busy, %d processes\n",
			d.Index, d.Name, gib(d.Used), gib(d.Total), gib(d.Free), d.UtilizationPct, len(d.Processes))
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	silent, missing := 0, 0
	for _, r := range rep.Results {
		mark := "ok"
		switch {
		case !r.Answered:
			mark = "FAIL"
			silent++
		case !r.OK:
			mark = "FAIL"
			missing++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, r.Candidate.ID, r.Candidate.Provider, r.Candidate.URL, r.Detail+" ("+r.Took.Round(time.Millisecond).String()+")")
	}
	tw.Flush()
	var problems []string
	if silent > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d candidates did not answer", silent, len(rep.Results)))
	}
	if missing > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d answered but do not serve their model", missing, len(rep.Results)))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "switchyard: %s\n", strings.Join(problems, "; "))
		return exitUnhealthy
	}
	return exitOK
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
