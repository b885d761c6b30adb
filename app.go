package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	wailsruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/system"
)

// App is the Wails binding layer: it starts the router and the localhost
// API in-process, and offers the UI a few desktop niceties. It is the only
// code that touches the Wails runtime (whose calls kill the process when
// given any context but the one Wails handed to startup).
type App struct {
	sys     *system.System
	dataDir string

	mu  sync.Mutex
	ctx context.Context // Wails' context, set in startup

	titleOnce sync.Once
	stop      chan struct{} // closed at shutdown: ends the title loop
}

// APIInfo tells the UI where the API is.
type APIInfo struct {
	Base  string `json:"base"`
	Token string `json:"token"`
}

// APIBase returns the API's base URL and token, for the UI inside the
// webview (whose own origin is wails://wails).
func (a *App) APIBase() APIInfo { return APIInfo{Base: a.sys.URL(), Token: a.sys.APIKey()} }

// OpenDataFolder opens the folder holding the history database.
func (a *App) OpenDataFolder() error {
	ctx := a.wailsContext()
	if ctx == nil {
		return fmt.Errorf("the window is not ready")
	}
	wailsruntime.BrowserOpenURL(ctx, "file://"+a.dataDir)
	return nil
}

// CopyText puts text on the clipboard.
func (a *App) CopyText(text string) error {
	ctx := a.wailsContext()
	if ctx == nil {
		return fmt.Errorf("the window is not ready")
	}
	return wailsruntime.ClipboardSetText(ctx, text)
}

func (a *App) wailsContext() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ctx
}

func (a *App) startup(ctx context.Context) {
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
}

// domReady keeps the window title showing the fleet's health. The webview
// fires it on every reload; one loop is enough, and it ends at shutdown
// (Wails' context is never cancelled).
func (a *App) domReady(ctx context.Context) {
	a.titleOnce.Do(func() { go a.titleLoop(ctx) })
}

func (a *App) titleLoop(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := ""
	for {
		title := "Switchyard — " + a.health()
		if title != last {
			wailsruntime.WindowSetTitle(ctx, title)
			last = title
		}
		select {
		case <-a.stop:
			return
		case <-tick.C:
		}
	}
}

// shutdown runs when the window closes: the title loop ends before Wails
// tears its runtime down, and the router and API stop.
func (a *App) shutdown(stopSystem context.CancelFunc) func(context.Context) {
	return func(context.Context) {
		close(a.stop)
		stopSystem()
	}
}

// health says in a few words how many candidates are usable.
func (a *App) health() string {
	states := a.sys.Status().Candidates
	closed := 0
	for _, s := range states {
		if s.Breaker.State == fleet.BreakerClosed {
			closed++
		}
	}
	label := fmt.Sprintf("%d/%d candidates healthy", closed, len(states))
	if a.sys.Source() == system.SourceDemo {
		label += " (demo fleet)"
	}
	return label
}

// x11Dir is where X servers keep their sockets.
var x11Dir = "/tmp/.X11-unix"

// displayProblem says why a desktop window can't open here, "" when it
// can, or may: GTK panics with a stack trace when DISPLAY names a
// display that is not there (a stale DISPLAY over SSH, in a container),
// so the display's socket is tried first.
func displayProblem(getenv func(string) string) string {
	if runtime.GOOS != "linux" {
		return ""
	}
	x, wl := getenv("DISPLAY"), getenv("WAYLAND_DISPLAY")
	if x == "" && wl == "" {
		return "no display found (DISPLAY and WAYLAND_DISPLAY are unset)"
	}
	var why []string
	if wl != "" {
		sock := wl
		if !filepath.IsAbs(sock) {
			sock = filepath.Join(getenv("XDG_RUNTIME_DIR"), wl)
		}
		if err := dialDisplay("unix", sock); err != nil {
			why = append(why, fmt.Sprintf("WAYLAND_DISPLAY=%s does not answer (%v)", wl, err))
		} else {
			return ""
		}
	}
	if x != "" {
		host, num, ok := strings.Cut(x, ":")
		num, _, _ = strings.Cut(num, ".")
		switch {
		case !ok || num == "":
			why = append(why, fmt.Sprintf("DISPLAY=%s is not a display (host:number)", x))
		case host != "" && host != "unix":
			return "" // a display over the network: GTK will say
		default:
			err := dialDisplay("unix", filepath.Join(x11Dir, "X"+num))
			if err != nil {
				// Linux X servers listen on an abstract socket too.
				err = dialDisplay("unix", "@"+filepath.Join(x11Dir, "X"+num))
			}
			if err == nil {
				return ""
			}
			why = append(why, fmt.Sprintf("DISPLAY=%s does not answer", x))
		}
	}
	return strings.Join(why, "; ")
}

// dialDisplay connects to a display's socket and hangs up.
func dialDisplay(network, addr string) error {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return unwrapOp(err)
	}
	return c.Close()
}

// unwrapOp is err without the dial's own words, which repeat the address.
func unwrapOp(err error) error {
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		if se, ok := errors.AsType[*os.SyscallError](oe.Err); ok {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// noWindow says why no window opens, and what to run instead.
func noWindow(stderr io.Writer, why string) int {
	fmt.Fprintln(stderr, "switchyard: "+why+".\n"+
		"Run `switchyard serve` for the headless router with the same UI in a browser")
	return exitError
}

// errGTK: GTK could not open the display (wails.Run panics so).
var errGTK = errors.New("failed to init GTK")

// runWails is wails.Run, with the panic of a GTK that can't open its
// display (a display that is there but refuses this program: no X cookie,
// after ssh or sudo) returned as errGTK rather than a goroutine trace. A
// check of our own before Wails (gtk_init_check) said "refused" for a
// working display in about one start in twenty; this is GTK's own answer,
// from the one init Wails makes.
func runWails(o *options.App) (err error) {
	defer func() {
		r := recover()
		if e, ok := r.(error); ok && e.Error() == errGTK.Error() {
			err = errGTK
			return
		}
		if r != nil {
			panic(r)
		}
	}()
	return wails.Run(o)
}

// desktop runs the desktop app: the router and API in-process, and the UI
// in a Wails window; closing the window stops both cleanly.
func desktop(stderr io.Writer) int {
	if !hasWindow {
		fmt.Fprintln(stderr, "switchyard: this is the headless build, without the window: run `make run` for the desktop app, or `switchyard serve` for the same UI at http://127.0.0.1:8484/")
		return exitUsage
	}
	if why := displayProblem(os.Getenv); why != "" {
		return noWindow(stderr, why)
	}
	o := baseOptions(stderr)
	o.Webview = true // the window's webview calls the API
	// The usual address may be taken by a running `serve`: the window's
	// API then gets a port of its own, and its status line says so.
	o.PortFallback = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sys, err := system.New(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		// Started from a launcher, nobody reads stderr: the window says it.
		if werr := runWails(cannotStart(err)); errors.Is(werr, errGTK) {
			return noWindow(stderr, fmt.Sprintf("the display (DISPLAY=%s WAYLAND_DISPLAY=%s) refused to open a window for this program", os.Getenv("DISPLAY"), os.Getenv("WAYLAND_DISPLAY")))
		}
		return exitError
	}
	app := &App{sys: sys, dataDir: filepath.Join(o.DataHome, "switchyard"), stop: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()
	o.Logf("desktop app; API on %s", sys.URL())
	// As serve says them; off the window's start, as the servers are asked.
	go sayStart(ctx, o.Logf, sys)

	ui, _ := fs.Sub(assets, "frontend/dist")
	err = runWails(&options.App{
		Title:            "Switchyard",
		Width:            1280,
		Height:           820,
		MinWidth:         900,
		MinHeight:        600,
		AssetServer:      &assetserver.Options{Assets: ui},
		BackgroundColour: &options.RGBA{R: 250, G: 250, B: 250, A: 255},
		OnStartup:        app.startup,
		OnDomReady:       app.domReady,
		OnShutdown:       app.shutdown(cancel),
		Bind:             []any{app},
	})
	cancel()
	runErr := <-done
	if errors.Is(err, errGTK) {
		return noWindow(stderr, fmt.Sprintf("the display (DISPLAY=%s WAYLAND_DISPLAY=%s) refused to open a window for this program", os.Getenv("DISPLAY"), os.Getenv("WAYLAND_DISPLAY")))
	}
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return exitError
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", runErr)
		return exitError
	}
	return exitOK
}

// cannotStartPage is the window of an app that could not start: why, in
// the words the log says it, and what to do.
var cannotStartPage = template.Must(template.New("").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Switchyard could not start</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; margin: 40px; color: #1d232b; background: #fafafa; }
h1 { font-size: 20px; } pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fff; border: 1px solid #d5dbe3; border-radius: 8px; padding: 12px; }
</style></head><body>
<h1>Switchyard could not start</h1>
<pre id="why">{{.}}</pre>
<p>Fix what it says (the config's reference is docs/CONFIG.md; <code>switchyard check</code> checks a config without starting), then start Switchyard again. <code>switchyard demo</code> runs the simulated demo fleet whatever the config says.</p>
</body></html>`))

// cannotStart is a window that shows why the app could not start.
func cannotStart(why error) *options.App {
	var page bytes.Buffer
	cannotStartPage.Execute(&page, why.Error())
	return &options.App{
		Title:            "Switchyard — could not start",
		Width:            900,
		Height:           600,
		BackgroundColour: &options.RGBA{R: 250, G: 250, B: 250, A: 255},
		AssetServer: &assetserver.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(page.Bytes())
		})},
	}
}
