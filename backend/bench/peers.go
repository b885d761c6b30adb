package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
)

// The peers section measures Switchyard beside the routers its users
// weigh it against, each built from its own source: Olla
// (github.com/thushan/olla) and llama-swap (github.com/mostlygeek/llama-swap).
// They are not Go modules that can be fetched, so the section runs only
// when Options.Peers names a directory holding their binaries, `olla` and
// `llama-swap`, and Olla's `config/profiles` beside them (Olla reads its
// profiles from the directory it runs in); docs/DESIGN.md, "Beside its
// peers", says how to build them. Each runs in a process of its own, in
// front of the same upstream process as the processes section, with the
// settings its documentation recommends.

// peerNames are the peers, in the order their paths follow the three of
// the processes section.
var peerNames = []string{"olla", "llama-swap"}

// PeerRow is one path's latency at concurrency 1 in front of one kind of
// upstream, for streams or whole answers, and what it added to the direct
// path's.
type PeerRow struct {
	HeadWithFirstToken bool   `json:"head_with_first_token"`
	Stream             bool   `json:"stream"`
	Path               string `json:"path"`
	Timing             Timing `json:"timing"`
	// AddedTTFT is nil for whole answers, which have none.
	AddedTTFT  *Added `json:"added_ttft,omitempty"`
	AddedTotal Added  `json:"added_total"`
}

// peerStart bounds the wait for a peer to answer its first request.
const peerStart = 30 * time.Second

// peers measures the three paths of the processes section and the peers,
// interleaved request by request, in front of both kinds of upstream.
func (b *bencher) peers(ctx context.Context) error {
	if b.o.Peers == "" {
		return nil
	}
	for _, name := range append([]string{filepath.Join("config", "profiles")}, peerNames...) {
		if _, err := os.Stat(filepath.Join(b.o.Peers, name)); err != nil {
			return fmt.Errorf("the peers' directory has no %s: %w", name, err)
		}
	}
	return b.eachUpstream(ctx, "peers", func(late bool, ps *processes) error {
		rows, err := b.peerRows(ctx, late, ps)
		b.rep.Peers = append(b.rep.Peers, rows...)
		return err
	})
}

// peerRows starts the peers in front of the upstream of ps and measures
// them and the three paths of ps, interleaved request by request.
func (b *bencher) peerRows(ctx context.Context, headLate bool, ps *processes) (rows []PeerRow, err error) {
	urls, stop, err := startPeers(ctx, b.o.Peers, ps.dir, ps.up.url())
	if err != nil {
		return nil, err
	}
	defer stop()
	names := append(pathNames[:], peerNames...)
	clients := ps.clients[:]
	for _, u := range urls {
		c := experiment.NewClient(u, 1)
		defer c.CloseIdle()
		clients = append(clients, c)
	}
	var paths []path
	for _, stream := range modes {
		for i, c := range clients {
			paths = append(paths, newPath(names[i], c, upID, stream))
		}
	}
	for _, p := range paths[len(pathNames):len(names)] {
		if err := awaitPath(ctx, p); err != nil {
			return nil, err
		}
	}
	got := b.measureProcesses(ctx, paths)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b.noteErrors("peers, "+headName(headLate), paths, got)
	for m, stream := range modes {
		direct := timing(got[m*len(names)], stream)
		for i, name := range names {
			tm := timing(got[m*len(names)+i], stream)
			row := PeerRow{HeadWithFirstToken: headLate, Stream: stream, Path: name, Timing: tm, AddedTotal: added(tm.Total, direct.Total)}
			if stream {
				a := added(tm.TTFT, direct.TTFT)
				row.AddedTTFT = &a
			}
			rows = append(rows, row)
		}
		b.o.Logf("  %s, %s: done", headName(headLate), modeName(stream))
	}
	return rows, nil
}

// awaitPath sends p's request until it is answered, for at most peerStart:
// a peer serves before it has found its upstream healthy.
func awaitPath(ctx context.Context, p path) error {
	deadline := time.Now().Add(peerStart)
	for {
		a := p.send(ctx)
		if a.Err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s does not answer: %w", p.name, a.Err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startPeers starts each peer in front of upstream (a base URL), its
// config in dir, and returns their OpenAI base URLs in peerNames' order
// and a function that stops them.
func startPeers(ctx context.Context, bin, dir, upstream string) (urls []string, stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		// SIGTERM, so that llama-swap stops the command it started.
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(peerStart):
				c.Process.Kill()
				<-done
			}
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	start := func(name, cwd string, port int, config string, args ...string) error {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			return err
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "CONFIG", path)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = cwd
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		cmds = append(cmds, cmd)
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", port))
		return nil
	}
	ports := make([]int, len(peerNames))
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, nil, err
		}
	}
	// Olla: the settings its FAQ recommends for production, the priority
	// balancer, and the upstream as the vLLM endpoint it is; its rate
	// limits, which would throttle a benchmark, off.
	olla := fmt.Sprintf(`server:
  host: "127.0.0.1"
  port: %d
  request_logging: false
  rate_limits:
    global_requests_per_minute: 0
    per_ip_requests_per_minute: 0
    health_requests_per_minute: 0
proxy:
  engine: "olla"
  profile: "auto"
  load_balancer: "priority"
logging:
  level: "warn"
  format: "json"
discovery:
  type: "static"
  static:
    endpoints:
      - url: %q
        name: %q
        type: "vllm"
        priority: 100
        model_url: "/v1/models"
        health_check_url: "/health"
        check_interval: 2s
        check_timeout: 1s
  model_discovery:
    interval: 15m
`, ports[0], upstream, upID)
	if err := start("olla", bin, ports[0], olla, "-c", "CONFIG"); err != nil {
		return nil, nil, err
	}
	urls[0] += "/olla/proxy/v1"
	// llama-swap: the upstream as a model it runs, whose server is up as
	// soon as llama-swap starts it (a command that only waits), checked
	// on its health endpoint.
	swap := fmt.Sprintf(`healthCheckTimeout: 15
logLevel: warn
models:
  %s:
    cmd: sleep 86400
    proxy: %s
    checkEndpoint: /health
`, upID, upstream)
	if err := start("llama-swap", dir, ports[1], swap, "-config", "CONFIG", "-listen", fmt.Sprintf("127.0.0.1:%d", ports[1])); err != nil {
		return nil, nil, err
	}
	urls[1] += "/v1"
	return urls, stop, nil
}

// freePort returns a port of 127.0.0.1 that nothing listens on, for a
// peer that must be told its port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return a.Port, nil
	}
	return 0, errors.New("no TCP port")
}
