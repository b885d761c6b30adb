package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/backend/fleet"
)

// full is a valid config that sets every key to something other than its
// default, with strings YAML would misread if they were written plainly.
func full() Config {
	return Config{
		Listen:         "0.0.0.0:9000",
		APIKey:         "k: #not-a-comment-0123456789",
		AllowedOrigins: []string{"https://a.example:3000", "http://127.0.0.1:5173"},
		History:        History{Path: "/var/lib/switch yard/h #1.db", Retention: 36*time.Hour + 30*time.Minute},
		Selection: Selection{
			FailureThreshold:  5,
			OpenDuration:      1500 * time.Millisecond,
			FirstTokenTimeout: 2 * time.Minute,
			StallTimeout:      90 * time.Second,
			Hedge:             true,
			Balance:           "ordered",
			TTFTMultiplier:    2.5,
			DeadlineFloor:     500 * time.Millisecond,
			MinSamples:        7,
			BusyBackoff:       250 * time.Millisecond,
		},
		GPU:       GPU{DemoteFreeBelow: 1536 << 20, DemoteUsedRatio: 0.9},
		BodyLimit: 1023,
		Chat: Chat{
			DefaultModel:      "true",
			DeepThinkingModel: "123",
			Candidates: []Candidate{{
				ID: "true", Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:11434", Model: "qwen3:8b",
				Priority: -1, Enabled: true, SupportsThinking: true, GPUs: []int{1, 0},
				APIKeyEnv: "OLLAMA_KEY", LoadTime: 45 * time.Second, Size: 5_200_000_000, Parallel: 4,
			}, {
				ID: "123", Provider: fleet.ProviderOpenAI, URL: "https://gpu-box.invalid:8000/v1", Model: "a, [b]: c\nd",
				Priority: 2, GPUs: []int{},
			}, {
				ID: "null", Provider: fleet.ProviderOpenAI, URL: "http://[::1]:8080/v1", Model: "~",
			}},
		},
	}
}

func TestRenderRoundTrip(t *testing.T) {
	example, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromExample, err := Parse(example)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{"Default()": Default(), "full()": full(), "example.yaml": fromExample} {
		text := Render(c)
		got, err := Parse([]byte(text))
		if err != nil {
			t.Errorf("Parse(Render(%s)) error: %v\n%s", name, err, text)
			continue
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("Parse(Render(%s)) =\n%+v\nwant\n%+v\nfrom\n%s", name, got, c, text)
		}
		if again := Render(c); again != text {
			t.Errorf("Render(%s) differs between calls:\n%s\nthen\n%s", name, text, again)
		}
	}
}

func TestRenderEveryKey(t *testing.T) {
	text := Render(full())
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	missing := missingKeys(&doc)
	if len(missing) > 0 {
		t.Errorf("Render(full()) lacks %v:\n%s", missing, text)
	}
	// Each key's doc line is its comment, the candidate keys' on the
	// first candidate.
	for _, k := range configKeys {
		if !strings.Contains(text, "# "+k.doc+"\n") {
			t.Errorf("Render(full()) lacks the doc line of %s", k.path)
		}
	}
	for _, k := range candidateKeys {
		if strings.Count(text, "# "+k.doc+"\n") != 1 {
			t.Errorf("Render(full()) does not have the doc line of candidate key %s once", k.path)
		}
	}
}

func TestRenderGPUs(t *testing.T) {
	c := Default()
	c.Chat.Candidates = []Candidate{{ID: "a", Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:1", Model: "m", Enabled: true}}
	text := Render(c)
	if strings.Contains(text, "\n      gpus:") || !strings.Contains(text, "\n      # gpus:") {
		t.Errorf("Render() of nil gpus does not comment the key out:\n%s", text)
	}
	c.Chat.Candidates[0].GPUs = []int{}
	if text := Render(c); !strings.Contains(text, "\n      gpus: []") {
		t.Errorf("Render() of empty gpus lacks gpus: []:\n%s", text)
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1023, "1023"},
		{1024, "1KiB"},
		{4 << 20, "4MiB"},
		{1 << 30, "1GiB"},
		{1536 << 20, "1536MiB"},
		{5_200_000_000, "5200MB"},
		{64 << 30, "64GiB"},
		{1e9, "1GB"},
		{2 << 40, "2TiB"},
	}
	for _, tt := range tests {
		if got := formatSize(tt.in); got != tt.want {
			t.Errorf("formatSize(%d) = %q; want %q", tt.in, got, tt.want)
		}
		if back, err := parseSize(tt.want); err != nil || back != tt.in {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", tt.in, back, err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 500 * time.Millisecond, time.Second, time.Minute, 90 * time.Second, time.Hour, 720 * time.Hour, 90 * time.Minute, time.Hour + time.Second} {
		s := formatDuration(d)
		if back, err := time.ParseDuration(s); err != nil || back != d {
			t.Errorf("ParseDuration(formatDuration(%v) = %q) = %v, %v", d, s, back, err)
		}
		if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0m") {
			t.Errorf("formatDuration(%v) = %q; want no trailing zero units", d, s)
		}
	}
}

// TestExampleHasEveryKey keeps example.yaml, which is written by hand,
// complete: every key of the tables is set in it (a candidate's keys in
// some candidate).
func TestExampleHasEveryKey(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if missing := missingKeys(&doc); len(missing) > 0 {
		t.Errorf("example.yaml lacks %v", missing)
	}
}

// missingKeys returns the keys of the tables that doc does not set, a
// candidate's keys as "chat.candidates[].id".
func missingKeys(doc *yaml.Node) []string {
	have := map[string]bool{}
	var walk func(path string, n *yaml.Node)
	walk = func(path string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(path, c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := join(path, n.Content[i].Value)
				have[p] = true
				walk(p, n.Content[i+1])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(path+"[]", c)
			}
		}
	}
	walk("", doc)
	var missing []string
	for _, k := range configKeys {
		if !have[k.path] {
			missing = append(missing, k.path)
		}
	}
	for _, k := range candidateKeys {
		if p := "chat.candidates[]." + k.path; !have[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	return missing
}

// FuzzRender checks Render against Parse: whatever Parse accepts, Render
// writes so that Parse gives it back.
func FuzzRender(f *testing.F) {
	if data, err := os.ReadFile("example.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(Render(full())))
	f.Add([]byte(candidateYAML + "      gpus: []\n      size: 1.5GiB\n      load_time: 1m1ms\n      model: \"a\\tb\"\n"))
	f.Add([]byte("allowed_origins: ['http://a.invalid:1']\nhistory: {path: \"#x\"}\nselection: {ttft_multiplier: 1e3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		text := Render(cfg)
		got, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("Parse(Render(c)) error: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(got, cfg) {
			t.Fatalf("Parse(Render(c)) =\n%+v\nwant\n%+v\nfrom\n%s", got, cfg, text)
		}
	})
}
