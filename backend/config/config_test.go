package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestCandidateFleet(t *testing.T) {
	env := map[string]string{"VLLM_KEY": "sk-123"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name   string
		c      Candidate
		getenv func(string) string
		want   fleet.Candidate
	}{
		{
			name:   "key from env, remote",
			c:      Candidate{ID: "v", Provider: fleet.ProviderOpenAI, URL: "http://192.0.2.20:8000/v1", Model: "m", Priority: 2, Enabled: true, SupportsThinking: true, GPUs: []int{1}, APIKeyEnv: "VLLM_KEY", ServerKey: "gpu1"},
			getenv: getenv,
			want:   fleet.Candidate{ID: "v", Provider: fleet.ProviderOpenAI, URL: "http://192.0.2.20:8000/v1", Model: "m", Priority: 2, Enabled: true, SupportsThinking: true, GPUs: []int{1}, APIKey: "sk-123", ServerKey: "gpu1"},
		},
		{
			name:   "unset env var gives no key",
			c:      Candidate{ID: "v", URL: "http://h.invalid:1", APIKeyEnv: "MISSING"},
			getenv: getenv,
			want:   fleet.Candidate{ID: "v", URL: "http://h.invalid:1"},
		},
		{
			name:   "nil getenv gives no key",
			c:      Candidate{ID: "v", URL: "http://h.invalid:1", APIKeyEnv: "VLLM_KEY"},
			getenv: nil,
			want:   fleet.Candidate{ID: "v", URL: "http://h.invalid:1"},
		},
		{
			name:   "no api_key_env never calls getenv",
			c:      Candidate{ID: "v", URL: "http://h.invalid:1"},
			getenv: func(string) string { panic("getenv called") },
			want:   fleet.Candidate{ID: "v", URL: "http://h.invalid:1"},
		},
		{"127.0.0.1 is local", Candidate{URL: "http://127.0.0.1:11434"}, nil, fleet.Candidate{URL: "http://127.0.0.1:11434", Local: true}},
		{"127.0.0.0/8 is local", Candidate{URL: "http://127.1.2.3:8000/v1"}, nil, fleet.Candidate{URL: "http://127.1.2.3:8000/v1", Local: true}},
		{"::1 is local", Candidate{URL: "http://[::1]:8080/v1"}, nil, fleet.Candidate{URL: "http://[::1]:8080/v1", Local: true}},
		{"localhost is local", Candidate{URL: "https://LocalHost:1234/v1"}, nil, fleet.Candidate{URL: "https://LocalHost:1234/v1", Local: true}},
		{"localhost. is local", Candidate{URL: "http://localhost.:11434"}, nil, fleet.Candidate{URL: "http://localhost.:11434", Local: true}},
		{"0.0.0.0 is this machine", Candidate{URL: "http://0.0.0.0:8000/v1"}, nil, fleet.Candidate{URL: "http://0.0.0.0:8000/v1", Local: true}},
		{":: is this machine", Candidate{URL: "http://[::]:8000/v1"}, nil, fleet.Candidate{URL: "http://[::]:8000/v1", Local: true}},
		{"another machine is not", Candidate{URL: "http://192.0.2.20:11434"}, nil, fleet.Candidate{URL: "http://192.0.2.20:11434"}},
		{"LAN is not local", Candidate{URL: "http://198.51.100.2:11434"}, nil, fleet.Candidate{URL: "http://198.51.100.2:11434"}},
		{"name is not local", Candidate{URL: "http://gpu-box.invalid:11434"}, nil, fleet.Candidate{URL: "http://gpu-box.invalid:11434"}},
		{"localhost.example is not local", Candidate{URL: "http://localhost.example"}, nil, fleet.Candidate{URL: "http://localhost.example"}},
		{"empty gpus stay empty", Candidate{GPUs: []int{}}, nil, fleet.Candidate{GPUs: []int{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Fleet(tt.getenv); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fleet() = %+v; want %+v", got, tt.want)
			}
		})
	}

	// The fleet candidate owns its GPUs.
	c := Candidate{GPUs: []int{0, 1}}
	fc := c.Fleet(nil)
	fc.GPUs[0] = 7
	if c.GPUs[0] != 0 {
		t.Errorf("Fleet() shares GPUs with the config: %v", c.GPUs)
	}
}

func TestConfigCandidates(t *testing.T) {
	cfg, err := Parse([]byte(candidateYAML + `    - id: b
      provider: openai
      url: http://gpu-box.invalid:8000/v1
      model: m
      enabled: false
      api_key_env: B_KEY
`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Candidates(func(k string) string { return "key-of-" + k })
	want := []fleet.Candidate{
		{ID: "a", Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:11434", Model: "m", Enabled: true, Local: true},
		{ID: "b", Provider: fleet.ProviderOpenAI, URL: "http://gpu-box.invalid:8000/v1", Model: "m", APIKey: "key-of-B_KEY"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Candidates() = %+v; want %+v", got, want)
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8484", true},
		{"127.9.9.9:1", true},
		{"localhost:8484", true},
		{"[::1]:8484", true},
		{"127.0.0.1", true},
		{"[::1]", true},
		{"::1", true},
		{"0.0.0.0:8484", false},
		{":8484", false},
		{"[::]:8484", false},
		{"192.0.2.5:8484", false},
		{"example.invalid:80", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsLoopback(tt.addr); got != tt.want {
			t.Errorf("IsLoopback(%q) = %v; want %v", tt.addr, got, tt.want)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	if got, want := DefaultPath("/home/u/.config"), "/home/u/.config/switchyard/config.yaml"; got != want {
		t.Errorf("DefaultPath() = %q; want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := write("good.yaml", candidateYAML)
	cfg, err := Load(good)
	if err != nil || len(cfg.Chat.Candidates) != 1 {
		t.Errorf("Load(good) = %+v, %v; want one candidate", cfg, err)
	}

	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) error = %v; want fs.ErrNotExist naming the path", err)
	}

	bad := write("bad.yaml", "selection: {bogus: 1}\n")
	_, err = Load(bad)
	if fes := fieldErrors(err); len(fes) != 1 || fes[0].Path != "selection.bogus" || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) error = %v; want selection.bogus, naming the path", err)
	}

	huge := write("huge.yaml", "# "+strings.Repeat("x", maxFileSize)+"\n")
	if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), huge) {
		t.Errorf("Load(huge) error = %v; want too large, naming the path", err)
	}

	if _, err := Load(dir); err == nil {
		t.Errorf("Load(a directory) succeeded; want an error")
	}
}
