// Command switchyard routes chat requests across a fleet of local model
// servers (Ollama, vLLM, llama.cpp, LM Studio) so that a sick server never
// spoils an answer. With no subcommand it opens the desktop app; `serve`
// runs the same router, API and web UI headless.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/switchyard/switchyard/backend/bench"
	"github.com/switchyard/switchyard/backend/system"
)

//go:embed all:frontend/dist
var assets embed.FS

// wailsJSON is the project file Wails builds from; its info.productVersion
// is Switchyard's version, stated there only.
//
//go:embed wails.json
var wailsJSON []byte

// version is Switchyard's version (wails.json's info.productVersion).
var version = func() string {
	var w struct {
		Info struct {
			ProductVersion string `json:"productVersion"`
		} `json:"info"`
	}
	if json.Unmarshal(wailsJSON, &w) != nil || w.Info.ProductVersion == "" {
		return "dev"
	}
	return w.Info.ProductVersion
}()

const usage = `Switchyard routes chat requests across your local model servers.

Usage:
  switchyard                    open the desktop app
  switchyard serve [flags]      run headless: the API and web UI at http://ADDR/
  switchyard demo [flags]       serve a simulated fleet, for trying it with nothing installed
  switchyard check [--config F] validate the config and check each candidate
  switchyard experiment [flags] run the failover experiment against a simulated fleet (--requests N --concurrency C --json FILE)
  switchyard bench [flags]      benchmark Switchyard on loopback (--quick --json FILE --markdown FILE --profile DIR)
  switchyard version

Flags of serve and demo:
  --config FILE   config file (default $XDG_CONFIG_HOME/switchyard/config.yaml)
  --addr ADDR     listen address (default 127.0.0.1:8484)
  --db FILE       history database (default $XDG_DATA_HOME/switchyard/history.db)
  --demo          serve the simulated demo fleet (serve only)
`

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1 // a failure while running, or a bad config
	exitUsage     = 2
	exitUnhealthy = 3 // check: a candidate did not answer
	exitAddrInUse = 4 // serve, demo: the address is taken (said in one line; make run ends there quietly)
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("switchyard: ")
	// `switchyard bench` starts this program again as its upstream, bare
	// proxy and Switchyard, each in a process of its own (bench.RunChild).
	if played, err := bench.RunChild(); played {
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// sayStart logs what serve and the window say as they start: a line per
// candidate (whether its server answers and serves its model), the config
// in force and where the history is kept.
func sayStart(ctx context.Context, logf func(string, ...any), sys *system.System) {
	for _, line := range sys.CandidateLines(ctx) {
		logf("%s", line)
	}
	logf("%s", sys.ConfigLine())
	logf("history: %s", sys.HistoryPath())
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return desktop(stderr)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve", "demo":
		return serve(cmd, rest, stdout, stderr)
	case "check":
		return check(rest, stdout, stderr)
	case "experiment":
		return experiment(rest, stdout, stderr)
	case "bench":
		return benchmark(rest, stdout, stderr)
	case "version", "--version":
		fl := newCommand("version", "Print this Switchyard's version.", stdout, stderr)
		if exit, ok := fl.parse(rest); !ok {
			return exit
		}
		fmt.Fprintln(stdout, "switchyard", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "switchyard: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// baseOptions are the system options every subcommand shares: XDG
// directories, the environment, the embedded UI and logging.
func baseOptions(stderr io.Writer) system.Options {
	home, _ := os.UserHomeDir()
	o := system.Options{
		ConfigHome: envOr("XDG_CONFIG_HOME", filepath.Join(home, ".config")),
		DataHome:   envOr("XDG_DATA_HOME", filepath.Join(home, ".local", "share")),
		Getenv:     os.Getenv,
		Version:    version,
		Logf:       log.New(stderr, "switchyard: ", log.LstdFlags).Printf,
	}
	if ui, err := fs.Sub(assets, "frontend/dist"); err == nil {
		o.UI = ui
	}
	return o
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// The summaries of serve and demo, for their --help.
const (
	serveSummary = `Run the router headless: the OpenAI- and Ollama-compatible API and the web UI
at http://ADDR/. With no config file it looks for local servers (Ollama on
127.0.0.1:11434, OpenAI-compatible on 127.0.0.1:8000 and :8080) and routes to
their models; if none answers it serves the simulated demo fleet.`
	demoSummary = `Serve the simulated demo fleet: four model servers in-process (Ollama,
vLLM and llama.cpp wire formats) offering six candidates, whose faults you
can inject from the UI, to try Switchyard with nothing installed. Its history
is kept apart from the real one ($XDG_DATA_HOME/switchyard/demo-history.db).`
)

func serve(cmd string, args []string, stdout, stderr io.Writer) int {
	summary := serveSummary
	if cmd == "demo" {
		summary = demoSummary
	}
	fl := newCommand(cmd, summary, stdout, stderr)
	o := baseOptions(stderr)
	fl.StringVar(&o.ConfigPath, "config", "", "config `FILE` (default $XDG_CONFIG_HOME/switchyard/config.yaml)")
	fl.StringVar(&o.Addr, "addr", "", "listen `ADDR`ESS, host:port (default the config's listen, 127.0.0.1:8484)")
	dbDefault := "the config's history.path, else $XDG_DATA_HOME/switchyard/" + system.HistoryFile + "; with --demo, " + system.DemoHistoryFile + " there"
	if cmd == "demo" {
		dbDefault = "$XDG_DATA_HOME/switchyard/" + system.DemoHistoryFile + ", apart from the real history"
	}
	fl.StringVar(&o.DBPath, "db", "", "history database `FILE` (default "+dbDefault+")")
	demo := new(bool)
	if cmd == "serve" {
		fl.BoolVar(demo, "demo", false, "serve the simulated demo fleet instead of the configured servers")
	}
	if exit, ok := fl.parse(args); !ok {
		return exit
	}
	o.Demo = *demo || cmd == "demo"

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sys, err := system.New(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		if errors.Is(err, system.ErrAddrInUse) {
			return exitAddrInUse
		}
		return exitError
	}
	label := ""
	if sys.Source() == system.SourceDemo {
		label = " (demo fleet: simulated servers)"
	}
	sayStart(ctx, o.Logf, sys)
	o.Logf("serving on %s%s — open %s/ for the UI; press Ctrl+C to stop", sys.Addr(), label, sys.URL())
	if err := sys.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return exitError
	}
	o.Logf("stopped")
	return exitOK
}
