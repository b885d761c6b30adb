package bench

import (
	"context"
	"os"
	"slices"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// ProcessRow is the overhead at concurrency 1 with the upstream, the bare
// proxy and Switchyard each in a process of its own (child.go), for one
// kind of upstream: one that sends its headers at once, as llama-server
// and vLLM do, or one that sends them with its first token, as Ollama
// does.
type ProcessRow struct {
	HeadWithFirstToken bool `json:"head_with_first_token"`
	OverheadRow
}

// headTimings are the two kinds of upstream of the processes section.
var headTimings = []bool{false, true}

// headName says when an upstream sends its headers.
func headName(withFirstToken bool) string {
	if withFirstToken {
		return "headers with the first token (as Ollama)"
	}
	return "headers at once (as llama-server, vLLM)"
}

// processes measures the three paths in both modes at concurrency 1, with
// the upstream, the bare proxy and Switchyard each in a process of its
// own, for each kind of upstream (headTimings).
func (b *bencher) processes(ctx context.Context) error {
	if b.o.Executable == "" {
		b.rep.Notes = append(b.rep.Notes, "processes: left out, since this run has no executable to start the processes from (Options.Executable).")
		return nil
	}
	for _, late := range headTimings {
		rows, err := b.processRows(ctx, late)
		if err != nil {
			return err
		}
		b.rep.Processes = append(b.rep.Processes, rows...)
	}
	return nil
}

// processRows starts the three processes in front of an upstream that
// sends its headers at once or with its first token, and measures the
// three paths, interleaved request by request.
func (b *bencher) processRows(ctx context.Context, headLate bool) (rows []ProcessRow, err error) {
	dir, err := os.MkdirTemp(b.o.TempDir, "processes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var children []*child
	defer func() {
		for _, c := range slices.Backward(children) {
			if e := c.stop(); e != nil && err == nil {
				err = e
			}
		}
	}()
	start := func(spec childSpec) (*child, error) {
		c, err := startChild(ctx, b.o.Executable, spec)
		if err == nil {
			children = append(children, c)
		}
		return c, err
	}
	up, err := start(childSpec{Role: "upstream", HeadWithFirstToken: headLate})
	if err != nil {
		return nil, err
	}
	px, err := start(childSpec{Role: "proxy", Target: up.url()})
	if err != nil {
		return nil, err
	}
	setup := experiment.Setup{DefaultModel: upID, Candidates: []fleet.Candidate{{
		ID: upID, Provider: fleet.ProviderOpenAI, URL: up.url() + "/v1", Model: upID, Priority: 1,
		Enabled: true, Local: true, Slots: simfleet.DefaultParallel,
	}}}
	cfgPath, dbPath, err := setup.Files(dir)
	if err != nil {
		return nil, err
	}
	sy, err := start(childSpec{Role: "switchyard", Config: cfgPath, DB: dbPath})
	if err != nil {
		return nil, err
	}
	clients := [3]*experiment.Client{
		experiment.NewClient(up.url()+"/v1", 1),
		experiment.NewClient(px.url()+"/v1", 1),
		experiment.NewClient(sy.url()+"/v1", 1),
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdle()
		}
	}()
	var paths []path
	for _, stream := range modes {
		for i, c := range clients {
			paths = append(paths, newPath(pathNames[i], c, upID, stream))
		}
	}
	// A fresh process pays for its first requests (its heap, its
	// connections, its code's first pages): settle them before measuring.
	interleave(ctx, paths, 1, min(processWarm, max(16, b.sz.Overhead/10)))
	got := interleave(ctx, paths, 1, b.sz.Overhead)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b.noteErrors("processes, "+headName(headLate), paths, got)
	for m, stream := range modes {
		i := 3 * m
		row := ProcessRow{HeadWithFirstToken: headLate,
			OverheadRow: overheadRow(1, stream, timing(got[i], stream), timing(got[i+1], stream), timing(got[i+2], stream))}
		rows = append(rows, row)
		b.o.Logf("  %s, %s: total p50 direct %.0fµs proxy %+.0fµs switchyard %+.0fµs", headName(headLate), modeName(stream),
			row.Direct.Total.P50, row.ProxyTotal.P50, row.SwitchyardTotal.P50)
	}
	return rows, nil
}

// processWarm is the most requests per path that settle fresh processes
// before the processes section measures them.
const processWarm = 100
