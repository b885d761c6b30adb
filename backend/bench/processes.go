package bench

import (
	"context"
	"errors"
	"os"
	"slices"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// ProcessRow is the overhead at concurrency 1 with the upstream, the bare
// proxy and Switchyard each in a process of its own (child.go), for one
// kind of upstream: one that sends its headers at once, as llama-server
// does, or one that sends them with its first token, as Ollama does.
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
	return "headers at once (as llama-server)"
}

// processes measures the three paths in both modes at concurrency 1, with
// the upstream, the bare proxy and Switchyard each in a process of its
// own, for each kind of upstream (headTimings).
func (b *bencher) processes(ctx context.Context) error {
	return b.eachUpstream(ctx, "processes", func(late bool, ps *processes) error {
		rows, err := b.processRows(ctx, late, ps)
		b.rep.Processes = append(b.rep.Processes, rows...)
		return err
	})
}

// processRows measures the three paths of ps, in front of an upstream
// that sends its headers at once or with its first token, interleaved
// request by request.
func (b *bencher) processRows(ctx context.Context, headLate bool, ps *processes) ([]ProcessRow, error) {
	var rows []ProcessRow
	var paths []path
	for _, stream := range modes {
		for i, c := range ps.clients {
			paths = append(paths, newPath(pathNames[i], c, upID, stream))
		}
	}
	got := b.measureProcesses(ctx, paths)
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

// processes are the upstream, the bare proxy and Switchyard, each a child
// process, with a client for each (direct, bare proxy, Switchyard:
// pathNames' order) and a directory for what they need.
type processes struct {
	dir      string
	up       *child
	children []*child
	clients  [3]*experiment.Client
}

// eachUpstream runs f, for each kind of upstream (headTimings), with the
// three processes started in front of it, and stops them after. A run
// with no executable to start them from leaves section out, with a note.
func (b *bencher) eachUpstream(ctx context.Context, section string, f func(headLate bool, ps *processes) error) error {
	if b.o.Executable == "" {
		b.rep.Notes = append(b.rep.Notes, section+": left out, since this run has no executable to start the processes from (Options.Executable).")
		return nil
	}
	for _, late := range headTimings {
		if err := b.withProcesses(ctx, late, f); err != nil {
			return err
		}
	}
	return nil
}

// withProcesses runs f with the three processes started in front of an
// upstream that sends its headers at once or with its first token, and
// stops them after.
func (b *bencher) withProcesses(ctx context.Context, headLate bool, f func(bool, *processes) error) (err error) {
	ps, err := b.startProcesses(ctx, headLate)
	if err != nil {
		return err
	}
	defer func() {
		if e := ps.close(); e != nil && err == nil {
			err = e
		}
	}()
	return f(headLate, ps)
}

// startProcesses starts the three processes in front of an upstream that
// sends its headers at once or with its first token.
func (b *bencher) startProcesses(ctx context.Context, headLate bool) (_ *processes, err error) {
	dir, err := os.MkdirTemp(b.o.TempDir, "processes-")
	if err != nil {
		return nil, err
	}
	ps := &processes{dir: dir}
	defer func() {
		if err != nil {
			ps.close()
		}
	}()
	start := func(spec childSpec) (*child, error) {
		c, err := startChild(ctx, b.o.Executable, spec)
		if err == nil {
			ps.children = append(ps.children, c)
		}
		return c, err
	}
	if ps.up, err = start(childSpec{Role: "upstream", HeadWithFirstToken: headLate}); err != nil {
		return nil, err
	}
	px, err := start(childSpec{Role: "proxy", Target: ps.up.url()})
	if err != nil {
		return nil, err
	}
	setup := experiment.Setup{DefaultModel: upID, Candidates: []fleet.Candidate{{
		ID: upID, Provider: fleet.ProviderOpenAI, URL: ps.up.url() + "/v1", Model: upID, Priority: 1,
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
	ps.clients = [3]*experiment.Client{
		experiment.NewClient(ps.up.url()+"/v1", 1),
		experiment.NewClient(px.url()+"/v1", 1),
		experiment.NewClient(sy.url()+"/v1", 1),
	}
	return ps, nil
}

// close stops the processes, the last started first, and removes their
// directory.
func (ps *processes) close() error {
	var errs []error
	for _, c := range ps.clients {
		if c != nil {
			c.CloseIdle()
		}
	}
	for _, c := range slices.Backward(ps.children) {
		errs = append(errs, c.stop())
	}
	errs = append(errs, os.RemoveAll(ps.dir))
	return errors.Join(errs...)
}

// measureProcesses settles paths through fresh processes and then
// measures them at concurrency 1, interleaved.
func (b *bencher) measureProcesses(ctx context.Context, paths []path) [][]experiment.Answer {
	// A fresh process pays for its first requests (its heap, its
	// connections, its code's first pages): settle them first.
	interleave(ctx, paths, 1, min(processWarm, max(16, b.sz.Overhead/10)))
	return interleave(ctx, paths, 1, b.sz.Overhead)
}

// processWarm is the most requests per path that settle fresh processes
// before the processes section measures them.
const processWarm = 100
