package experiment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/system"
)

// Setup says how to start an in-process Switchyard.
type Setup struct {
	// Selection are keys of the config's selection section with their YAML
	// values, like {"failure_threshold": "2", "open_duration": "1s"}.
	Selection map[string]string
	// DefaultModel is chat.default_model.
	DefaultModel string
	// Candidates are chat.candidates (ID, Provider, URL, Model, Priority;
	// all enabled).
	Candidates []fleet.Candidate
	// TempDir is where the config file and the history database are made,
	// in a directory of their own that Close removes. Default os.TempDir().
	TempDir string
}

// Switchyard is a real Switchyard (system.New, then Run) serving on a free
// port of 127.0.0.1, with its config file and history database in a
// temporary directory. Create it with StartSwitchyard; Close it.
type Switchyard struct {
	*system.System
	stop func() error
}

// StartSwitchyard writes a config for s, starts Switchyard with it and
// returns once it serves.
func StartSwitchyard(ctx context.Context, s Setup) (_ *Switchyard, err error) {
	dir, err := os.MkdirTemp(s.TempDir, "switchyard-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	cfgPath, dbPath, err := s.Files(dir)
	if err != nil {
		return nil, err
	}
	sys, err := system.New(ctx, system.Options{
		ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: dbPath,
		ShutdownGrace: time.Second,
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- sys.Run(runCtx) }()
	return &Switchyard{System: sys, stop: func() error {
		cancel()
		return errors.Join(<-ran, os.RemoveAll(dir))
	}}, nil
}

// Files writes the config file s describes into dir, and makes the
// directory of its history, as the default layout keeps them ($XDG_DATA_HOME
// for the history, $XDG_CONFIG_HOME for the config: beside the config,
// each of the history's writes would wake the config's watcher). It
// returns the paths to give Switchyard.
func (s Setup) Files(dir string) (configPath, dbPath string, err error) {
	cfg, err := s.config()
	if err != nil {
		return "", "", err
	}
	configPath = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config.Render(cfg)), 0o600); err != nil {
		return "", "", err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return "", "", err
	}
	return configPath, filepath.Join(data, "history.db"), nil
}

// config returns the configuration s describes: the defaults, with the
// selection keys of s decoded and checked as a config file's are, and the
// candidates of s.
func (s Setup) config() (config.Config, error) {
	selection := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range slices.Sorted(maps.Keys(s.Selection)) {
		selection.Content = append(selection.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Value: s.Selection[k]})
	}
	doc, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "selection"}, selection,
	}})
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := config.Parse(doc)
	if err != nil {
		return config.Config{}, fmt.Errorf("setup selection: %w", err)
	}
	cfg.Chat.DefaultModel = s.DefaultModel
	for _, c := range s.Candidates {
		cfg.Chat.Candidates = append(cfg.Chat.Candidates, config.Candidate{
			ID: c.ID, Provider: c.Provider, URL: c.URL, Model: c.Model, Priority: c.Priority,
			Enabled: true, Parallel: c.Slots,
		})
	}
	return cfg, nil
}

// Close stops Switchyard, flushes its history and removes its directory.
func (s *Switchyard) Close() error { return s.stop() }

// NewClient returns a client for baseURL (up to and including /v1) with
// its own keep-alive connections, up to conns of them idle. Close its idle
// connections with CloseIdle when done.
func NewClient(baseURL string, conns int) *Client {
	return &Client{
		HTTP: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			DisableCompression:  true,
		}},
		BaseURL: baseURL,
	}
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() {
	if c.HTTP != nil {
		c.HTTP.CloseIdleConnections()
	}
}
