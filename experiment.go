package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	failover "github.com/switchyard/switchyard/backend/experiment"
)

// experiment runs the failover experiment (docs/DESIGN.md,
// "Failover experiment"): a table on stdout, a
// progress bar on stderr, exit 1 when an expectation fails.
func experiment(args []string, stdout, stderr io.Writer) int {
	fl := newCommand("experiment", `Run the failover experiment: start a simulated fleet and Switchyard, send
requests through it with the primary healthy, failing and dying, print a table
of errors, fallbacks and latencies per scenario, and exit 1 when a scenario
does not end as expected.`, stdout, stderr)
	var o failover.Options
	fl.IntVar(&o.Requests, "requests", 100, "requests per scenario")
	fl.IntVar(&o.Concurrency, "concurrency", 10, "requests in flight at once")
	jsonPath := fl.String("json", "", "also write the results as JSON to `FILE`")
	if exit, ok := fl.parse(args); !ok {
		return exit
	}
	if o.Requests < 1 || o.Concurrency < 1 {
		fmt.Fprintln(stderr, "switchyard experiment: --requests and --concurrency must be at least 1 (see switchyard experiment --help)")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgress(stderr)
	o.Progress = bar.set
	rep, err := failover.Run(ctx, o)
	bar.finish()
	if err != nil {
		fmt.Fprintf(stderr, "switchyard experiment: %v\n", err)
		return exitError
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "switchyard experiment: %v\n", err)
		return exitError
	}
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, rep); err != nil {
			fmt.Fprintf(stderr, "switchyard experiment: %v\n", err)
			return exitError
		}
	}
	if !rep.Held() {
		return exitError
	}
	return exitOK
}

// writeJSON writes v, indented, to the file at path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// progress is a one-line progress bar. On a terminal it redraws in place
// at most every 100ms; elsewhere (a file, a pipe) it writes one line per
// label and a last one at the end. A dependency for this was not worth
// three more modules in go.sum.
type progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last time.Time
	seen string // the label of the last line written elsewhere
	line string // what the bar shows now
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

const barWidth = 30

// set shows done of total, with a label.
func (p *progress) set(done, total int, label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	filled := barWidth * done / max(total, 1)
	p.line = fmt.Sprintf("[%s%s] %3d%% %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		100*done/max(total, 1), done, total, label)
	if p.tty {
		if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || done == total {
			p.last = now
			fmt.Fprintf(p.w, "\r\033[K%s", p.line)
		}
		return
	}
	if label != p.seen {
		p.seen = label
		fmt.Fprintln(p.w, p.line)
	}
}

// finish ends the bar's line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line == "" {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line)
	} else {
		fmt.Fprintln(p.w, p.line)
	}
}
