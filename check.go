package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/backend/system"
	"github.com/switchyard/switchyard/backend/team"
)

// check validates the config and reports each candidate's reachability.
func check(args []string, stdout, stderr io.Writer) int {
	fl := newCommand("check", `Validate the config and ask each candidate's server whether it answers and
serves its model (a disabled one is not asked); read the GPUs.
Exit 0 when all is well, 1 for a bad config, 3 when a candidate did not answer,
answered with an error or lacks its model.`, stdout, stderr)
	o := baseOptions(stderr)
	fl.StringVar(&o.ConfigPath, "config", "", "config `FILE` (default $XDG_CONFIG_HOME/switchyard/config.yaml)")
	if exit, ok := fl.parse(args); !ok {
		return exit
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := system.Check(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return exitError
	}
	if rep.Missing {
		printProbes(stdout, rep)
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
	asked, silent, refused, missing := 0, 0, 0, 0
	for _, r := range rep.Results {
		mark := "ok"
		switch {
		case r.Disabled:
			mark = "off"
		case r.Refused:
			mark = "FAIL"
			refused++
		case !r.Answered:
			mark = "FAIL"
			silent++
		case !r.OK:
			mark = "FAIL"
			missing++
		}
		if !r.Disabled {
			asked++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, r.Candidate.ID, r.Candidate.Provider, r.Candidate.URL, r.Detail+" ("+r.Took.Round(time.Millisecond).String()+")")
	}
	tw.Flush()
	var problems []string
	if tc := rep.Team; tc != nil {
		if msg := printTeam(stdout, tc); msg != "" {
			problems = append(problems, msg)
		}
	}
	if asked == 0 && !rep.Missing {
		problems = append(problems, "no candidate is enabled: nothing would be routed")
	}
	if silent > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d candidates did not answer", silent, asked))
	}
	if refused > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d answered with an error", refused, asked))
	}
	if missing > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d answered but do not serve their model", missing, asked))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "switchyard: %s\n", strings.Join(problems, "; "))
		return exitUnhealthy
	}
	return exitOK
}

// printTeam says what the team database holds, and returns the problem
// when it could not be read.
func printTeam(w io.Writer, tc *system.TeamCheck) string {
	if tc.Err != nil {
		fmt.Fprintf(w, "FAIL  team: node %s, database from $%s: %v\n", tc.Node, tc.Env, tc.Err)
		var pe *pgconn.PgError
		switch {
		case errors.Is(tc.Err, system.ErrTeamUnset), errors.Is(tc.Err, team.ErrConnString):
			return "the team database is not set up: see its FAIL line"
		case errors.Is(tc.Err, team.ErrSchemaTooNew):
			return "the team database is newer than this binary"
		case errors.Is(tc.Err, team.ErrCannotWrite):
			return "this node's role can't write the team database: see its FAIL line"
		case errors.As(tc.Err, &pe):
			return "the team database refused this node: " + pe.Message
		}
		return "the team database did not answer"
	}
	f := tc.Found
	schema := fmt.Sprintf("schema %d of %d", f.Schema, f.Known)
	if f.Schema == 0 {
		schema = "not migrated yet (serve migrates it)"
	}
	var nodes []string
	for _, n := range f.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s %s (%s, seen %s ago)", n.Name, n.Link, n.Version, time.Since(n.LastSeen).Round(time.Second)))
	}
	if len(nodes) == 0 {
		nodes = []string{"none yet"}
	}
	fmt.Fprintf(w, "ok    team: node %s, PostgreSQL %s from $%s, %s; nodes: %s\n", tc.Node, f.Server, tc.Env, schema, strings.Join(nodes, ", "))
	return ""
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// printProbes says, for a machine without a config file, where serve looks
// for servers, what it found, and what it would do.
func printProbes(w io.Writer, rep system.CheckReport) {
	fmt.Fprintf(w, "no config at %s: the embedded default applies. Looked for local model servers:\n", rep.Path)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	models := 0
	for _, p := range rep.Probes {
		kind := "Ollama"
		if p.Provider != "ollama" {
			kind = "OpenAI-compatible"
		}
		var found string
		switch {
		case p.Err != nil:
			found = "nothing answered (" + p.Err.Error() + ")"
		case len(p.Models) == 0:
			found = "answered, with no models"
		default:
			names := make([]string, len(p.Models))
			for i, m := range p.Models {
				names[i] = m.Name
			}
			found = fmt.Sprintf("found %d: %s", len(names), strings.Join(names, ", "))
			models += len(names)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", kind, p.URL, found)
	}
	tw.Flush()
	if models == 0 {
		fmt.Fprintln(w, "serve would start the demo fleet (simulated servers); write a config to route to servers elsewhere (docs/CONFIG.md)")
		return
	}
	fmt.Fprintf(w, "serve would route to these %d models\n", models)
}
