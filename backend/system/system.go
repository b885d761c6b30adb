// Package system is the composition root: it loads the config (or the
// embedded default), opens the history, builds the adapters, the router and
// the API, watches the config file, and runs and stops them all. Only the
// top imports it: the binary (main.go, app.go), and the experiment and
// benchmark, which run a real Switchyard; backend/deps_test.go holds it to
// that. It offers narrow methods and no mutable fields.
package system

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/deadline"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/httpapi"
	"github.com/switchyard/switchyard/backend/metrics"
	"github.com/switchyard/switchyard/backend/pressure"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/team"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
	"github.com/switchyard/switchyard/backend/upstream/report"
)

// Options say how to run. Main fills them from the command line and the
// environment; nothing below reads the environment itself.
type Options struct {
	// ConfigPath is the config file; empty means the default path under
	// ConfigHome. A missing file means the embedded default (docs/DESIGN.md,
	// "Embedded default and demo fleet").
	ConfigPath string
	// ConfigHome and DataHome are $XDG_CONFIG_HOME and $XDG_DATA_HOME (or
	// their fallbacks under the home directory).
	ConfigHome, DataHome string
	// Addr overrides the config's listen address ("127.0.0.1:0" picks a
	// free port).
	Addr string
	// DBPath overrides the history file.
	DBPath string
	// Demo serves the simulated demo fleet instead of configured servers.
	Demo bool
	// Getenv resolves candidates' api_key_env. Default os.Getenv.
	Getenv func(string) string
	// UI is the built frontend, served at /.
	UI fs.FS
	// Webview: the desktop app's window calls the API, so its webview's
	// origin is allowed.
	Webview bool
	// PortFallback: when the address is taken, listen on a free port of
	// the same host instead, and say so in the status (the desktop app,
	// whose window finds its API wherever it is).
	PortFallback bool
	// Logf logs one line. Default: discard.
	Logf func(format string, args ...any)
	// DiscoverOllama and DiscoverOpenAI are the base URLs probed for local
	// servers when there is no config file. Defaults: Ollama on
	// 127.0.0.1:11434, OpenAI-compatible on 127.0.0.1:8000 and :8080.
	DiscoverOllama, DiscoverOpenAI []string
	// ShutdownGrace is how long in-flight streams may finish on shutdown
	// before they are ended with an error event. Default 10s.
	ShutdownGrace time.Duration
	// PollInterval is how often each server is asked what it reports
	// about itself (resident models, slots, queue, loading). Default 5s.
	PollInterval time.Duration
	// Version is Switchyard's version, as the status reports it (main
	// reads it from wails.json). Default "dev".
	Version string
}

// Source says where the candidates in force came from.
type Source string

const (
	SourceFile       Source = "file"
	SourceDiscovered Source = "discovered"
	SourceDemo       Source = "demo"
)

// System is a running Switchyard. Create it with New, then Run it.
type System struct {
	o        Options
	pool     *upstream.Pool
	ollama   *ollama.Backend
	openai   *openai.Backend
	router   *router.Router
	store    *history.Store
	team     *team.Team // nil: no team
	hub      *httpapi.Hub
	metrics  *metrics.Metrics
	learner  *deadline.Learner
	sampler  *gpu.Sampler
	poller   *report.Poller
	monitor  *pressure.Monitor
	nvml     *gpu.NVML
	api      *httpapi.Server
	demo     *simfleet.Fleet
	demoGPUs *simfleet.GPUs // the demo machine's simulated GPUs, nil out of demo mode
	ln       net.Listener
	httpSrv  *http.Server
	// teamInForce is the team block the node started with: edits of it
	// apply at the next start.
	teamInForce config.Team
	// serving counts the handlers running, so that a shutdown that closes
	// connections still lets their requests be recorded before the
	// history closes.
	serving atomic.Int64
	// listenTaken is the address that was wanted and taken (PortFallback),
	// "" when the API listens where it was asked to.
	listenTaken string
	baseStop    context.CancelFunc
	// demoFrom is the config file whose settings the demo runs under, ""
	// when none was read.
	demoFrom string
	// historyPath is the history database's file.
	historyPath string

	watchReady chan struct{} // closed once the config file is watched

	mu         sync.Mutex
	learned    map[string]learned // by candidate id: what its server said of its model
	relearn    chan struct{}      // a config change asks watchModels to learn again
	cfg        config.Config
	cfgPath    string
	cfgText    string // the YAML in force
	source     Source
	rejected   error
	rejectedAt time.Time
}

// New builds everything and binds the listener; nothing is served until
// Run. On error everything it opened is closed.
func New(ctx context.Context, o Options) (_ *System, err error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	defaultDiscovery(&o)
	s := &System{o: o, pool: upstream.NewPool(upstream.Settings{}), hub: httpapi.NewHub(), metrics: metrics.New(),
		watchReady: make(chan struct{}), learned: make(map[string]learned), relearn: make(chan struct{}, 1)}
	s.ollama = ollama.New(s.pool)
	s.openai = openai.New(s.pool)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	if err := s.readConfig(); err != nil {
		return nil, err
	}
	listen := s.cfg.Listen
	if o.Addr != "" {
		if err := config.CheckAddr(o.Addr); err != nil {
			return nil, fmt.Errorf("--addr: %w", err)
		}
		listen = o.Addr
		if err := config.CheckExposure(listen, s.cfg.APIKey); err != nil {
			return nil, fmt.Errorf("--addr: %w (in the config)", err)
		}
	}
	// Bind before anything starts (the demo fleet, discovery): a taken
	// port is said at once and nothing is started twice.
	s.ln, err = net.Listen("tcp", listen)
	if errors.Is(err, syscall.EADDRINUSE) && o.PortFallback {
		if host, _, splitErr := net.SplitHostPort(listen); splitErr == nil {
			s.listenTaken = listen
			o.Logf("%s is taken (another Switchyard?): the API listens on a free port instead", listen)
			s.ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: %s is taken by another program (another Switchyard?): choose another address with --addr 127.0.0.1:PORT (make run ADDR=127.0.0.1:PORT), or set listen in the config", ErrAddrInUse, listen)
		}
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	if err := s.startFleet(ctx); err != nil {
		return nil, err
	}
	cfg := s.cfg
	cfg.Listen = listen

	dbPath := o.DBPath
	if dbPath == "" && s.demo == nil {
		// The demo's simulated requests never mix with the real ones.
		dbPath = cfg.History.Path
	}
	if dbPath == "" {
		dbPath = filepath.Join(o.DataHome, "switchyard", defaultHistoryFile(s.demo != nil))
	}
	s.historyPath = dbPath
	s.store, err = history.Open(dbPath, history.Options{Retention: cfg.History.Retention, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	if s.source == SourceDemo {
		// The demo's config is shown, never written: it says the address
		// and the history file in force, which --addr and the demo's own
		// file set, not the defaults.
		shown := s.cfg
		shown.Listen, shown.History.Path = s.Addr(), dbPath
		s.cfgText = demoConfig(shown, s.demoFrom)
	}
	s.metrics.WatchHistory(func() metrics.HistoryHealth {
		h := s.store.Health()
		return metrics.HistoryHealth{Writable: h.Err == nil, Pending: h.Pending, WriteErrors: h.WriteErrors, Lost: h.Lost}
	})

	// GPU and host readings, and the endpoints' own pressure reports, are
	// sampled off the request path; the router only reads the cache.
	var gpus gpu.Reader
	if s.demo != nil {
		// The demo machine's GPUs are simulated, one per server: the GPU
		// panel and demotion show without an NVIDIA card, and a real
		// card's readings never demote a simulated server.
		s.demoGPUs = simfleet.NewGPUs(len(s.demo.Candidates()))
		gpus = s.demoGPUs
	} else {
		s.nvml = gpu.OpenNVML()
		gpus = s.nvml
		if why := gpu.WhyNoNVML(); why != "" {
			o.Logf("no NVML support: GPU memory is not read and no candidate is demoted for it: %s", why)
		}
	}
	s.sampler = &gpu.Sampler{GPU: gpus, Logf: o.Logf, OnSample: s.published}
	// A first reading before the API answers, so that its status never
	// says "no GPU" for the moment before the sampler's first tick.
	s.sampler.Sample(ctx)
	s.poller = report.NewPoller(s.pool, report.PollerSettings{Interval: o.PollInterval})
	s.poller.Update(cfg.Candidates(o.Getenv))
	s.monitor = pressure.NewMonitor(policy(cfg), pressure.Sources{GPU: s.sampler.Latest, Reports: s.poller, Size: s.modelSize})
	s.learner = deadline.New(deadline.Settings{
		Multiplier: cfg.Selection.TTFTMultiplier, Floor: cfg.Selection.DeadlineFloor, MinSamples: cfg.Selection.MinSamples,
		LoadTime: s.loadTime, Resident: s.poller.Residency,
	})
	if err := s.openTeam(cfg); err != nil {
		return nil, err
	}
	s.teamInForce = cfg.Team
	if s.team != nil {
		s.metrics.WatchTeam(func() metrics.TeamHealth {
			return metrics.TeamHealth{Online: s.team.Online(), Shipped: s.team.Shipped()}
		})
	}
	s.router = router.New(s.routerFleet(cfg), router.Deps{
		Recorder:  httpapi.StatusRecorder{Next: s.store},
		Observer:  s.observers(),
		Evidence:  s.evidence(),
		Deadlines: s.learner,
		Pressure:  s.monitor,
		Capacity:  s.monitor,
		Liveness:  liveness{s.poller},
	})
	s.restore(ctx)
	s.publishCandidates()

	s.api = httpapi.New(httpapi.Options{
		Router: s.router, Upstreams: upstream.Direct{Pool: s.pool}, History: s.store, Hub: s.hub, Demo: s.demoControl(),
		Metrics: s.metrics.Handler(), UI: o.UI, Webview: o.Webview,
		Status: s.Status, Config: s.Config, WriteConfig: s.WriteConfig, Team: s.teamAPI(),
		Listen: s.ln.Addr().String(), APIKey: cfg.APIKey, AllowedOrigins: cfg.AllowedOrigins, BodyLimit: cfg.BodyLimit,
		Version: o.Version,
	})
	s.httpSrv = s.api.HTTPServer()
	api := s.httpSrv.Handler
	s.httpSrv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serving.Add(1)
		defer s.serving.Add(-1)
		api.ServeHTTP(w, r)
	})
	base, stop := context.WithCancelCause(context.Background())
	// Requests cut by the shutdown are recorded as such, not as callers
	// that went away.
	s.baseStop = func() { stop(fleet.ErrShutdown) }
	s.httpSrv.BaseContext = func(net.Listener) context.Context { return base }
	return s, nil
}

// ErrAddrInUse is the cause of New's error when its address is taken.
var ErrAddrInUse = errors.New("address in use")

// routerFleet turns a config into what the router routes over.
func (s *System) routerFleet(cfg config.Config) router.Fleet {
	fl := router.Fleet{
		DefaultModel: cfg.Chat.DefaultModel, DeepThinkingModel: cfg.Chat.DeepThinkingModel,
		Settings: router.Settings{
			FirstTokenTimeout: cfg.Selection.FirstTokenTimeout,
			StallTimeout:      cfg.Selection.StallTimeout,
			BusyBackoff:       cfg.Selection.BusyBackoff,
			Hedge:             cfg.Selection.Hedge,
			Balance:           cfg.Selection.Balance,
		},
	}
	fl.Settings.Breaker.FailureThreshold = cfg.Selection.FailureThreshold
	fl.Settings.Breaker.OpenDuration = cfg.Selection.OpenDuration
	for _, c := range cfg.Candidates(s.o.Getenv) {
		fl.Targets = append(fl.Targets, router.Target{Candidate: s.applyLearned(c), Backend: s.backend(c.Provider)})
	}
	return fl
}

func (s *System) backend(p fleet.Provider) fleet.Backend {
	if p == fleet.ProviderOllama {
		return s.ollama
	}
	return s.openai
}

func policy(cfg config.Config) pressure.Policy {
	return pressure.Policy{FreeBelow: cfg.GPU.DemoteFreeBelow, UsedRatio: cfg.GPU.DemoteUsedRatio}
}

// published spreads a GPU and host sample: metrics and the events stream.
func (s *System) published(smp gpu.Sample) {
	for _, d := range smp.GPU.Devices {
		s.metrics.SetGPU(d.Index, d.Used, d.Total)
	}
	s.hub.PublishGPU(smp)
}

// candidateConfig is the config of the candidate with c's id.
func (s *System) candidateConfig(c fleet.Candidate) config.Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cc := range s.cfg.Chat.Candidates {
		if cc.ID == c.ID {
			return cc
		}
	}
	return config.Candidate{}
}

// modelSize is a candidate's configured model size, zero when unknown.
func (s *System) modelSize(c fleet.Candidate) uint64 { return s.candidateConfig(c).Size }

// loadTime is a candidate's configured load time, zero when unknown.
func (s *System) loadTime(c fleet.Candidate) time.Duration { return s.candidateConfig(c).LoadTime }

// restore rebuilds breaker states and learned TTFTs from history. A
// damaged file is said once, by the history, with what to do.
func (s *System) restore(ctx context.Context) {
	last, err := s.store.LastBreakerStates(ctx)
	if err != nil && !errors.Is(err, history.ErrDamaged) {
		s.o.Logf("restore breaker states: %v", err)
	}
	for _, t := range s.router.Fleet().Targets {
		id := t.Candidate.ID
		if ch, ok := last[id]; ok {
			s.router.Breaker(id).Restore(ch)
		}
		ttfts, err := s.store.WarmTTFTs(ctx, id, deadline.DefaultWindow)
		if err != nil {
			if !errors.Is(err, history.ErrDamaged) {
				s.o.Logf("learn TTFT of %s: %v", id, err)
			}
			continue
		}
		s.learner.Seed(id, ttfts)
	}
}

func (s *System) publishCandidates() {
	fl := s.router.Fleet()
	names := []string{router.AliasAuto}
	breakers := map[string]fleet.BreakerState{}
	for _, t := range fl.Targets {
		names = append(names, t.Candidate.ID, t.Candidate.Model)
		breakers[t.Candidate.ID] = s.router.Breaker(t.Candidate.ID).Snapshot().State
	}
	s.metrics.SetCandidates(names, breakers)
}

// bound is the address the listener was asked for: --addr, else the
// config's listen. Unlike Addr it keeps an unspecified host (0.0.0.0, ::)
// as it was given, which binds every interface.
func (s *System) bound() string {
	if s.o.Addr != "" {
		return s.o.Addr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Listen
}

// generatedConfig is the YAML of a config that came from discovery or the
// demo rather than a file: every key, as a user would write it.
func generatedConfig(cfg config.Config) string {
	return "# generated: no config file was found\n" + config.Render(cfg)
}

// demoConfig is the YAML of the demo's config: the demo fleet, with the
// other settings of the file at path when one was read.
func demoConfig(cfg config.Config, path string) string {
	if path == "" {
		return generatedConfig(cfg)
	}
	return "# generated: the demo fleet, with the other settings of " + path + "\n" + config.Render(cfg)
}

// Requests reads the history, as GET /switchyard/v1/requests does.
func (s *System) Requests(ctx context.Context, f history.Filter) ([]fleet.RequestRecord, error) {
	return s.store.Requests(ctx, f)
}

// Addr is the address the API listens on.
func (s *System) Addr() string { return s.ln.Addr().String() }

// URL is the API's base URL.
func (s *System) URL() string { return "http://" + s.Addr() }

// ConfigLine says, for the start-up log, which config is in force and
// where a config file goes.
func (s *System) ConfigLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.source == SourceFile:
		return "config: " + s.cfgPath
	case s.source == SourceDiscovered:
		return "config: none at " + s.cfgPath + ": serving the servers found on this machine until a config is written there (the UI's Settings can write this one)"
	case s.o.Demo && s.demoFrom != "":
		return "config: " + s.demoFrom + ", its candidates replaced by the demo fleet's"
	case s.o.Demo:
		return "config: none (the demo fleet)"
	default:
		return "config: none at " + s.cfgPath + ": serving the demo fleet; write a config there (docs/CONFIG.md) and restart to serve your own servers"
	}
}

// Source says where the candidates came from.
func (s *System) Source() Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source
}

// Demo returns the demo fleet, nil when not in demo mode.
func (s *System) Demo() *simfleet.Fleet { return s.demo }

// Run serves until ctx is done, then shuts down: in-flight streams get
// ShutdownGrace to finish, then are ended with an error event, and the
// connections of callers that do not read it are closed (at most 5 s
// later); the history is flushed. It watches the config file while it
// runs.
func (s *System) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if s.o.Demo && s.o.ConfigPath == "" {
			close(s.watchReady) // nothing to watch
			return
		}
		// The directory must exist to be watched; a config file created
		// in it later is then picked up.
		if err := os.MkdirAll(filepath.Dir(s.cfgPath), 0o755); err != nil {
			s.o.Logf("config watch: %v", err)
			close(s.watchReady)
			return
		}
		w := config.Watcher{Path: s.cfgPath, Apply: s.apply, Rejected: s.reject, Ready: s.watching}
		if err := w.Run(watchCtx); err != nil && watchCtx.Err() == nil {
			s.o.Logf("config watch stopped: %v", err)
		}
	}()
	var samplers sync.WaitGroup
	samplers.Go(func() { s.sampler.Run(watchCtx) })
	samplers.Go(func() { s.poller.Run(watchCtx) })
	samplers.Go(func() { s.watchModels(watchCtx, time.Minute) })
	samplers.Go(func() { releaseMemory(watchCtx) })
	if s.team != nil {
		s.team.Start()
	}
	served := make(chan error, 1)
	go func() { served <- s.httpSrv.Serve(s.ln) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		err = s.shutdown()
		<-served
	}
	stopWatch()
	<-watchDone
	samplers.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, s.Close())
}

func (s *System) shutdown() error {
	grace, cancel := context.WithTimeout(context.Background(), s.o.ShutdownGrace)
	defer cancel()
	s.api.BeginShutdown()
	err := s.httpSrv.Shutdown(grace)
	if errors.Is(err, context.DeadlineExceeded) {
		// Streams still running: cancelling their context ends each with
		// an error event in its protocol, then the connections close.
		s.baseStop()
		ctx, cancel := context.WithTimeout(context.Background(), min(5*time.Second, s.o.ShutdownGrace/2))
		defer cancel()
		if err = s.httpSrv.Shutdown(ctx); err != nil {
			// A caller that stopped reading holds its handler in a write
			// to it. Closing the connections ends those writes; the
			// requests are recorded cut short by the shutdown, and the
			// stop is still a clean one.
			s.o.Logf("closed the connections of callers that did not read the end of their answers")
			err = s.httpSrv.Close()
			// Their handlers' writes fail now; each records its request.
			// (A count looked at, not a WaitGroup: a handler may still
			// begin on a connection Close has just cut, which a Wait under
			// way must not see.)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for deadline := time.Now().Add(5 * time.Second); s.serving.Load() > 0 && time.Now().Before(deadline); {
				<-tick.C
			}
		}
	}
	return err
}

// Close releases everything New opened. Run calls it; call it yourself only
// when Run was never called.
func (s *System) Close() error {
	var err error
	if s.baseStop != nil {
		s.baseStop()
	}
	if s.ln != nil {
		s.ln.Close()
	}
	if s.team != nil {
		s.team.Close() // it reads the store
	}
	if s.store != nil {
		err = s.store.Close()
	}
	if s.demo != nil {
		s.demo.Close()
	}
	if s.nvml != nil {
		s.nvml.Close()
	}
	s.pool.CloseIdle()
	return err
}

// watching runs once the config file is watched: an edit made between New's
// load and the watch is picked up now.
func (s *System) watching() {
	defer close(s.watchReady)
	data, err := os.ReadFile(s.cfgPath)
	s.mu.Lock()
	changed := err == nil && s.source == SourceFile && string(data) != s.cfgText
	s.mu.Unlock()
	if !changed {
		return
	}
	cfg, err := config.Parse(data)
	if err == nil {
		err = s.apply(cfg)
	}
	if err != nil {
		s.reject(err)
	}
}

// apply puts a valid edited config in force. An edit that would leave the
// address Switchyard is bound to, however it was set, without the key it
// needs there is refused whole: no reload may expose it.
func (s *System) apply(cfg config.Config) error {
	s.mu.Lock()
	listen := s.cfg.Listen
	s.mu.Unlock()
	if s.o.Addr == "" && cfg.Listen != listen {
		return fmt.Errorf("listen: changing the address (%s to %s) needs a restart; nothing of this edit was applied", listen, cfg.Listen)
	}
	if err := config.CheckExposure(s.bound(), cfg.APIKey); err != nil {
		return fmt.Errorf("api_key: %w; nothing of this edit was applied", err)
	}
	if s.demo != nil && !s.o.Demo {
		// The demo fleet stood in for a missing file, and its history is
		// the demo's own: the file's servers need a start of their own.
		return errors.New("a config file is here now, but Switchyard started on the demo fleet for want of one: restart it to serve this file's servers")
	}
	data, _ := os.ReadFile(s.cfgPath)
	s.mu.Lock()
	if s.demo != nil {
		cfg.Chat = demoChat(s.demo)
	}
	prevTeam, prevHistory := s.cfg.Team, s.cfg.History
	s.cfg, s.cfgText, s.rejected = cfg, string(data), nil
	if s.source != SourceDemo {
		s.source = SourceFile
	}
	s.mu.Unlock()
	s.api.SetSecurity(httpapi.Security{APIKey: cfg.APIKey, AllowedOrigins: cfg.AllowedOrigins, BodyLimit: cfg.BodyLimit, Webview: s.o.Webview})
	s.router.Update(s.routerFleet(cfg))
	s.poller.Update(cfg.Candidates(s.o.Getenv))
	s.updateTeam(cfg.Candidates(s.o.Getenv))
	s.noteTeamChange(prevTeam, cfg.Team)
	s.retuneHistory(prevHistory, cfg)
	if s.team != nil {
		s.team.SetConfigHash(configHash(cfg))
	}
	s.monitor.SetPolicy(policy(cfg))
	s.learner.Tune(cfg.Selection.TTFTMultiplier, cfg.Selection.DeadlineFloor, cfg.Selection.MinSamples)
	s.publishCandidates()
	select {
	case s.relearn <- struct{}{}:
	default: // a relearn is already due
	}
	s.o.Logf("config %s applied", s.cfgPath)
	s.hub.PublishConfig(nil)
	return nil
}

// retuneHistory applies an edit's history.retention to the history and
// the team, and the breaker's timings to the team's reports; a new
// history.path applies at the next start, and the log says so.
func (s *System) retuneHistory(prev config.History, cfg config.Config) {
	if cfg.History.Retention != prev.Retention {
		if err := s.store.SetRetention(context.Background(), cfg.History.Retention); err != nil {
			s.o.Logf("config: history.retention: %v", err)
		}
	}
	if s.team != nil {
		s.team.Tune(cfg.Selection.OpenDuration, cfg.Selection.FirstTokenTimeout, cfg.History.Retention)
	}
	switch {
	case cfg.History.Path == prev.Path || s.demo != nil:
	case s.o.DBPath != "":
		s.o.Logf("config: history.path does not apply: --db %s sets the history file", s.o.DBPath)
	default:
		s.o.Logf("config: history.path applies at the next start; the history is written to %s until then", s.historyPath)
	}
}

// reject keeps the config in force and shows why the edit was refused. A
// file gone while the demo fleet stands in for a missing one is where it
// started: nothing to refuse.
func (s *System) reject(err error) {
	if s.demo != nil && !s.o.Demo && errors.Is(err, fs.ErrNotExist) {
		s.mu.Lock()
		s.rejected = nil
		s.mu.Unlock()
		s.hub.PublishConfig(nil)
		return
	}
	s.mu.Lock()
	s.rejected, s.rejectedAt = err, time.Now()
	s.mu.Unlock()
	s.o.Logf("config %s rejected, the previous config stays in force: %v", s.cfgPath, err)
	s.hub.PublishConfig(err)
}

// observers fans events out; each must not block.
type observers []router.Observer

func (os observers) Observe(e fleet.Event) {
	for _, o := range os {
		o.Observe(e)
	}
}

// breakerRecorder writes breaker transitions to history.
type breakerRecorder struct{ store *history.Store }

func (b breakerRecorder) Observe(e fleet.Event) {
	if e.Type == fleet.EventBreaker {
		b.store.RecordBreaker(*e.Breaker)
	}
}

// sanitizeID turns an upstream model name into a candidate id.
func sanitizeID(s string) string {
	s = strings.ToLower(s)
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// APIKey is the API's bearer token, empty when none is required.
func (s *System) APIKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.APIKey
}

// liveness asks a server whose first token is late, through the poller,
// whether it is alive and working (router.Liveness).
type liveness struct{ p *report.Poller }

func (l liveness) Check(ctx context.Context, c fleet.Candidate) router.Pulse {
	a := l.p.Alive(ctx, c)
	return router.Pulse{Err: a.Err, Idle: a.Idle, Loading: a.Loading, Evidence: a.Evidence, Progress: a.Progress}
}
