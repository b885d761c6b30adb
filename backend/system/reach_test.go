package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/schema"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// logLines collects what a System logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A configured server that is not running is said at start-up, one line
// per candidate, and the status says since when it does not answer,
// while its breaker, which no request has tried yet, is still closed.
func TestDeadServersAreSaid(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: "up", Priority: 2, Config: simfleet.Config{Provider: fleet.ProviderOllama, Models: []simfleet.Model{{Name: "qwen3:8b"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dead := closedPort(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`chat:
  default_model: gone
  candidates:
    - {id: gone, provider: ollama, url: "http://%s", model: "qwen3:8b", priority: 1}
    - {id: nomodel, provider: ollama, url: %q, model: "llama3.2:3b", priority: 2}
    - {id: up, provider: ollama, url: %q, model: "qwen3:8b", priority: 3}
`, dead, f.Server("up").URL(), f.Server("up").URL())), 0o644)
	sys, err := New(t.Context(), Options{ConfigPath: cfg, ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	lines := sys.CandidateLines(t.Context())
	want := []string{
		fmt.Sprintf("candidate gone (ollama http://%s, model qwen3:8b): unreachable (connection refused)", dead),
		fmt.Sprintf("candidate nomodel (ollama %s, model llama3.2:3b): model not found: the server answers but does not serve model \"llama3.2:3b\" (it lists qwen3:8b)", f.Server("up").URL()),
		fmt.Sprintf("candidate up (ollama %s, model qwen3:8b): answers and serves its model", f.Server("up").URL()),
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("CandidateLines() =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	before := time.Now()
	sys.poller.Poll(t.Context())
	byID := map[string]schema.Candidate{}
	for _, c := range sys.Status().Candidates {
		byID[c.ID] = c
	}
	g := byID["gone"]
	if g.Unreachable != "connection refused" || g.UnreachableSince == nil || g.UnreachableSince.Before(before.Add(-time.Second)) || g.Breaker.State != fleet.BreakerClosed {
		t.Errorf("status of the dead server: unreachable %q since %v, breaker %s; want connection refused, now, closed", g.Unreachable, g.UnreachableSince, g.Breaker.State)
	}
	if u := byID["up"]; u.Unreachable != "" || u.UnreachableSince != nil {
		t.Errorf("status of the running server: unreachable %q since %v; want none", u.Unreachable, u.UnreachableSince)
	}
}

// Discovery says where it looked and what answered there.
func TestDiscoverySaysWhereItLooked(t *testing.T) {
	dead := closedPort(t)
	var log logLines
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0", Logf: log.logf,
		DiscoverOllama: []string{"http://" + dead}, DiscoverOpenAI: []string{"http://" + dead + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	for _, want := range []string{
		"looked for Ollama at http://" + dead + ": nothing answered (connection refused)",
		"looked for an OpenAI-compatible server at http://" + dead + "/v1: nothing answered (connection refused)",
		"no local Ollama or OpenAI-compatible server answered; starting the demo fleet",
	} {
		if !strings.Contains(log.text(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.text())
		}
	}
}

// The demo's simulated requests are kept in a history file of their own,
// even when the config names one: they never show among the real ones.
func TestDemoHistoryIsApart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	real := filepath.Join(dir, "real.db")
	os.WriteFile(cfg, []byte("history: {path: "+real+"}\n"), 0o644)
	demo, err := New(t.Context(), Options{Demo: true, ConfigPath: cfg, ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := demo.HistoryPath(), filepath.Join(dir, "switchyard", DemoHistoryFile); got != want {
		t.Errorf("demo history at %s; want %s", got, want)
	}
	demo.Close()
	sys, err := New(context.Background(), Options{ConfigPath: cfg, ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if sys.HistoryPath() != real {
		t.Errorf("history at %s; want the config's %s", sys.HistoryPath(), real)
	}
}

// The config that discovery made can be written as the config file, once:
// never over an existing file, and never the demo's.
func TestWriteConfig(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: "ol", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOllama, Models: []simfleet.Model{{Name: "qwen3:8b"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0",
		DiscoverOllama: []string{f.Server("ol").URL()}, DiscoverOpenAI: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	path, err := sys.WriteConfig()
	if want := filepath.Join(dir, "switchyard", "config.yaml"); err != nil || path != want {
		t.Fatalf("WriteConfig() = %q, %v; want %q", path, err, want)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "# written by Switchyard") || !strings.Contains(string(data), "url: "+f.Server("ol").URL()) {
		t.Errorf("written config:\n%s", data)
	}
	if _, err := sys.WriteConfig(); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "never overwrites") {
		t.Errorf("WriteConfig() again = %v; want it to refuse to overwrite", err)
	}
	demo, err := New(t.Context(), Options{Demo: true, ConfigHome: t.TempDir(), DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	if _, err := demo.WriteConfig(); err == nil || errors.Is(err, fs.ErrExist) {
		t.Errorf("WriteConfig() of the demo = %v; want a refusal", err)
	}
}

// The start-up line says which config is in force and where one goes; a
// config written at the default path while the demo fleet stands in for
// it is said to need a restart, in the log, the status and the Settings.
func TestDemoStandInSaysWhatAConfigNeeds(t *testing.T) {
	dead := closedPort(t)
	var log logLines
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0", Logf: log.logf,
		DiscoverOllama: []string{"http://" + dead}, DiscoverOpenAI: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "switchyard", "config.yaml")
	if got, want := sys.ConfigLine(), "config: none at "+path+": serving the demo fleet; write a config there (docs/CONFIG.md) and restart to serve your own servers"; got != want {
		t.Errorf("ConfigLine() = %q; want %q", got, want)
	}
	runSystem(t, sys)
	<-sys.watchReady
	events := subscribe(t, sys.URL())
	os.WriteFile(path, []byte("chat:\n  candidates:\n    - {id: mine, provider: ollama, url: \"http://"+dead+"\", model: m}\n"), 0o600)
	var d map[string]any
	if err := json.Unmarshal(events.next(t, schema.EventConfig), &d); err != nil {
		t.Fatal(err)
	}
	const want = "restart it to serve this file's servers"
	if d["ok"] != false || !strings.Contains(fmt.Sprint(d["error"]), want) {
		t.Errorf("config event = %v; want rejected, saying %q", d, want)
	}
	if st := sys.Config(); st.Source != string(SourceDemo) || !strings.Contains(st.Error, want) {
		t.Errorf("config state = %+v; want the demo, and the restart said", st.ConfigState)
	}
	if !strings.Contains(log.text(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.text())
	}
	// The file gone again is where it started: nothing refused.
	os.Remove(path)
	if err := json.Unmarshal(events.next(t, schema.EventConfig), &d); err != nil {
		t.Fatal(err)
	}
	if st := sys.Config(); d["ok"] != true || st.Error != "" {
		t.Errorf("after the file went: event %v, config state %+v; want nothing refused", d, st.ConfigState)
	}

	// The demo with a config file says so, in its line and its YAML.
	cfg := filepath.Join(dir, "demo.yaml")
	os.WriteFile(cfg, []byte("selection: {open_duration: 1m}\n"), 0o600)
	demo, err := New(t.Context(), Options{Demo: true, ConfigPath: cfg, ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	if got, want := demo.ConfigLine(), "config: "+cfg+", its candidates replaced by the demo fleet's"; got != want {
		t.Errorf("demo ConfigLine() = %q; want %q", got, want)
	}
	if y := demo.Config().YAML; !strings.HasPrefix(y, "# generated: the demo fleet, with the other settings of "+cfg+"\n") || !strings.Contains(y, "open_duration: 1m") {
		t.Errorf("demo config YAML:\n%s\nwant the demo fleet with %s's settings", y, cfg)
	}
}

func TestListsModels(t *testing.T) {
	for _, tt := range []struct {
		models []string
		want   string
	}{
		{nil, "it lists none"},
		{[]string{"a"}, "it lists a"},
		{[]string{"a", "b", "c"}, "it lists a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, "it lists a, b, c and 2 more"},
	} {
		if got := listsModels(tt.models); got != tt.want {
			t.Errorf("listsModels(%q) = %q; want %q", tt.models, got, tt.want)
		}
	}
}

// A config with no enabled candidate is said at start-up: every chat would
// get 503 otherwise, with no word why until one was tried.
func TestNoCandidateIsSaid(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:8484\n"), 0o600)
	sys, err := New(t.Context(), Options{ConfigPath: cfg, ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if got := sys.CandidateLines(t.Context()); len(got) != 1 || !strings.HasPrefix(got[0], "no candidate is enabled") || !strings.Contains(got[0], "chat.candidates") {
		t.Errorf("CandidateLines() = %q; want one line saying none is enabled and where to add one", got)
	}
}

// The demo starts though the user's own config, not named, is broken: it
// says so and runs on the defaults. A file named with --config is still
// refused.
func TestDemoStartsBesideABrokenConfig(t *testing.T) {
	dir := t.TempDir()
	path := config.DefaultPath(dir)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("chat:\n  candidates:\n    - {id: a, provider: ollama, url: \"http://127.0.0.1:1\", model: m, priorty: 1}\n"), 0o600)
	var log logLines
	sys, err := New(t.Context(), Options{Demo: true, Addr: "127.0.0.1:0", ConfigHome: dir, DataHome: dir, Logf: log.logf})
	if err != nil {
		t.Fatalf("New(demo) beside a broken config = %v; want the demo", err)
	}
	sys.Close()
	if !strings.Contains(log.text(), "priorty") || !strings.Contains(log.text(), "the demo runs on the default settings") {
		t.Errorf("log = %q; want the config's error and that the demo runs on defaults", log.text())
	}
	if _, err := New(t.Context(), Options{Demo: true, Addr: "127.0.0.1:0", ConfigPath: path, DataHome: dir}); err == nil {
		t.Error("New(demo, --config broken) = nil; want the config's error")
	}
}
