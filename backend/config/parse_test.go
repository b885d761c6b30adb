package config

import (
	"errors"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// specExample is the example config of docs/DESIGN.md, "Configuration",
// its first part.
const specExample = `listen: 127.0.0.1:8484
api_key: ""                # when set, API callers need "Authorization: Bearer <key>"
allowed_origins: []        # extra browser origins allowed to call the API
history: {path: "", retention: 720h}
selection:
  failure_threshold: 2
  open_duration: 30s
  first_token_timeout: 60s
  stall_timeout: 60s
  hedge: false             # race the next candidate when the first token is late
gpu: {demote_free_below: 1GiB, demote_used_ratio: 0.95}
chat:
  default_model: qwen3-8b
  deep_thinking_model: qwen3-32b
  candidates:
    - id: qwen3-8b
      provider: ollama      # ollama | openai (vLLM, llama.cpp, LM Studio, ...)
      url: http://127.0.0.1:11434
      model: qwen3:8b
      priority: 1
      enabled: true
      supports_thinking: true
      gpus: [0]
      api_key_env: ""       # name of an env var holding the upstream key
`

// specSecondCandidate is the candidate that example names as
// deep_thinking_model but leaves out of its list.
const specSecondCandidate = `    - id: qwen3-32b
      provider: openai
      url: http://127.0.0.1:8000/v1
      model: Qwen/Qwen3-32B
`

func TestDefault(t *testing.T) {
	want := Config{
		Listen:    "127.0.0.1:8484",
		History:   History{Retention: 30 * 24 * time.Hour},
		BodyLimit: 4 * 1024 * 1024,
		Selection: Selection{
			FailureThreshold:  2,
			OpenDuration:      30 * time.Second,
			FirstTokenTimeout: 60 * time.Second,
			StallTimeout:      60 * time.Second,
			Balance:           "fastest",
			TTFTMultiplier:    4,
			DeadlineFloor:     2 * time.Second,
			MinSamples:        20,
			BusyBackoff:       time.Second,
		},
		GPU: GPU{DemoteFreeBelow: 1024 * 1024 * 1024, DemoteUsedRatio: 0.95},
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v; want %+v", got, want)
	}
	// A file that sets nothing is all defaults.
	for _, src := range []string{"", "\n", "# nothing here\n", "~\n", "---\n", "{}\n", "selection:\nchat: {}\n"} {
		got, err := Parse([]byte(src))
		if err != nil {
			t.Errorf("Parse(%q) error: %v", src, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v; want the defaults", src, got)
		}
	}
}

func TestParseSpecExample(t *testing.T) {
	// Alone, the example's first part names a deep_thinking_model it does not
	// list: that is the one error, and it names the key.
	_, err := Parse([]byte(specExample))
	fes := fieldErrors(err)
	if len(fes) != 1 || fes[0].Path != "chat.deep_thinking_model" || fes[0].Line != 14 {
		t.Fatalf("Parse(example) = %v; want only chat.deep_thinking_model at line 14", err)
	}

	// With that candidate listed, the example parses exactly as written.
	got, err := Parse([]byte(specExample + specSecondCandidate))
	if err != nil {
		t.Fatalf("Parse(example + qwen3-32b) error: %v", err)
	}
	want := Default()
	want.Chat = Chat{
		DefaultModel:      "qwen3-8b",
		DeepThinkingModel: "qwen3-32b",
		Candidates: []Candidate{{
			ID:               "qwen3-8b",
			Provider:         fleet.ProviderOllama,
			URL:              "http://127.0.0.1:11434",
			Model:            "qwen3:8b",
			Priority:         1,
			Enabled:          true,
			SupportsThinking: true,
			GPUs:             []int{0},
		}, {
			ID:       "qwen3-32b",
			Provider: fleet.ProviderOpenAI,
			URL:      "http://127.0.0.1:8000/v1",
			Model:    "Qwen/Qwen3-32B",
			Enabled:  true,
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(example) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseExampleFile(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(example.yaml) error: %v", err)
	}
	// The example states every default; the defaults must agree with it.
	d := Default()
	if cfg.Listen != d.Listen || cfg.BodyLimit != d.BodyLimit || cfg.History != d.History ||
		cfg.Selection != d.Selection || cfg.GPU != d.GPU {
		t.Errorf("example.yaml settings = %+v; want the defaults %+v", cfg, d)
	}
	cands := cfg.Chat.Candidates
	if len(cands) != 4 {
		t.Fatalf("example.yaml has %d candidates; want 4", len(cands))
	}
	if c := cands[0]; c.LoadTime != 8*time.Second || c.Size != 5_200_000_000 || !slices.Equal(c.GPUs, []int{0}) {
		t.Errorf("candidates[0] = %+v; want load_time 8s, size 5.2GB, gpus [0]", c)
	}
	if c := cands[1]; !c.Enabled || c.GPUs != nil || c.APIKeyEnv != "VLLM_API_KEY" || c.Size != 64<<30 || c.LoadTime != 2*time.Minute {
		t.Errorf("candidates[1] = %+v; want enabled by default, gpus nil, VLLM_API_KEY, 64GiB, 2m", c)
	}
	if c := cands[2]; c.Enabled || c.GPUs == nil || len(c.GPUs) != 0 {
		t.Errorf("candidates[2] = %+v; want disabled, gpus empty but not nil", c)
	}
	if c := cands[3]; !c.Embeddings || c.SupportsThinking || !c.Fleet(nil).Embeds {
		t.Errorf("candidates[3] = %+v; want an embedding model", c)
	}
}

// candidateYAML is one valid candidate, for tests to add keys to.
const candidateYAML = `chat:
  candidates:
    - id: a
      provider: ollama
      url: http://127.0.0.1:11434
      model: m
`

func TestParseValues(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(Config) bool
	}{
		{"enabled defaults to true", candidateYAML,
			func(c Config) bool { return c.Chat.Candidates[0].Enabled }},
		{"enabled false", candidateYAML + "      enabled: false\n",
			func(c Config) bool { return !c.Chat.Candidates[0].Enabled }},
		{"enabled null keeps default", candidateYAML + "      enabled:\n",
			func(c Config) bool { return c.Chat.Candidates[0].Enabled }},
		{"gpus omitted is nil", candidateYAML,
			func(c Config) bool { return c.Chat.Candidates[0].GPUs == nil }},
		{"gpus empty is empty", candidateYAML + "      gpus: []\n",
			func(c Config) bool { g := c.Chat.Candidates[0].GPUs; return g != nil && len(g) == 0 }},
		{"duration hours", "history: {retention: 48h}",
			func(c Config) bool { return c.History.Retention == 48*time.Hour }},
		{"duration compound", "selection: {open_duration: 1h30m}",
			func(c Config) bool { return c.Selection.OpenDuration == 90*time.Minute }},
		{"duration ms", "selection: {busy_backoff: 250ms}",
			func(c Config) bool { return c.Selection.BusyBackoff == 250*time.Millisecond }},
		{"size GiB", "gpu: {demote_free_below: 2GiB}",
			func(c Config) bool { return c.GPU.DemoteFreeBelow == 2<<30 }},
		{"size MiB", "gpu: {demote_free_below: 512MiB}",
			func(c Config) bool { return c.GPU.DemoteFreeBelow == 512<<20 }},
		{"size MB", "body_limit: 4MB",
			func(c Config) bool { return c.BodyLimit == 4_000_000 }},
		{"size with space, lower case", "body_limit: 8 kib",
			func(c Config) bool { return c.BodyLimit == 8192 }},
		{"size fraction", "gpu: {demote_free_below: 1.5GiB}",
			func(c Config) bool { return c.GPU.DemoteFreeBelow == 3<<29 }},
		{"size plain integer", "body_limit: 1048576",
			func(c Config) bool { return c.BodyLimit == 1<<20 }},
		{"size quoted integer", `body_limit: "1000"`,
			func(c Config) bool { return c.BodyLimit == 1000 }},
		{"size hex integer", "body_limit: 0x100",
			func(c Config) bool { return c.BodyLimit == 256 }},
		{"candidate size and load_time", candidateYAML + "      size: 20GB\n      load_time: 45s\n",
			func(c Config) bool {
				return c.Chat.Candidates[0].Size == 20e9 && c.Chat.Candidates[0].LoadTime == 45*time.Second
			}},
		{"float from integer", "selection: {ttft_multiplier: 3}",
			func(c Config) bool { return c.Selection.TTFTMultiplier == 3 }},
		{"ratio 1 allowed", "gpu: {demote_used_ratio: 1}",
			func(c Config) bool { return c.GPU.DemoteUsedRatio == 1 }},
		{"floor equal to ceiling", "selection: {first_token_timeout: 5s, deadline_floor: 5s}",
			func(c Config) bool { return c.Selection.DeadlineFloor == 5*time.Second }},
		{"hedge", "selection: {hedge: true}",
			func(c Config) bool { return c.Selection.Hedge }},
		{"balance", "selection: {balance: ordered}",
			func(c Config) bool { return c.Selection.Balance == "ordered" }},
		{"non-loopback listen with api_key", "listen: 0.0.0.0:8484\napi_key: s3cret-0123456789",
			func(c Config) bool { return c.Listen == "0.0.0.0:8484" && c.APIKey == "s3cret-0123456789" }},
		{"listen localhost", "listen: localhost:9000",
			func(c Config) bool { return c.Listen == "localhost:9000" }},
		{"listen ipv6 loopback", "listen: '[::1]:9000'",
			func(c Config) bool { return c.Listen == "[::1]:9000" }},
		{"origins", "allowed_origins: [https://a.example, 'http://127.0.0.1:3000', 'chrome-extension://*', 'https://localhost:*']",
			func(c Config) bool {
				return slices.Equal(c.AllowedOrigins, []string{"https://a.example", "http://127.0.0.1:3000", "chrome-extension://*", "https://localhost:*"})
			}},
		{"anchors and aliases", "selection: {open_duration: &d 45s, stall_timeout: *d}",
			func(c Config) bool { return c.Selection.StallTimeout == 45*time.Second }},
		{"negative priority", candidateYAML + "      priority: -3\n",
			func(c Config) bool { return c.Chat.Candidates[0].Priority == -3 }},
		{"https url with path", strings.NewReplacer("http://127.0.0.1:11434", "https://api.example/v1", "ollama", "openai").Replace(candidateYAML),
			func(c Config) bool { return c.Chat.Candidates[0].URL == "https://api.example/v1" }},
		{"Ollama behind a proxy's path", strings.Replace(candidateYAML, "http://127.0.0.1:11434", "https://gw.example/ollama", 1),
			func(c Config) bool { return c.Chat.Candidates[0].URL == "https://gw.example/ollama" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.src))
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.src, err)
			}
			if !tt.check(cfg) {
				t.Errorf("Parse(%q) = %+v; check failed", tt.src, cfg)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cand := func(extra string) string { return candidateYAML + extra }
	// withURL is candidateYAML with its url replaced.
	withURL := func(u string) string { return strings.Replace(candidateYAML, "http://127.0.0.1:11434", u, 1) }
	tests := []struct {
		name   string
		src    string
		path   string // the key path the one error must name
		reason string // a part of its reason
		line   int    // its line; 0: not checked
	}{
		{"unknown top-level key", "listen: 127.0.0.1:1\nbogus: 1", "bogus", "unknown key", 2},
		{"unknown nested key", "selection:\n  bogus: 1", "selection.bogus", "unknown key", 2},
		{"typo gets a suggestion", "selection: {hedges: true}", "selection.hedges", `did you mean "hedge"`, 1},
		{"unknown candidate key", cand("      modle: x\n"), "chat.candidates[0].modle", `did you mean "model"`, 7},
		{"repeated key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2", "listen", "repeated key (first at line 1)", 2},
		{"merge key", "selection:\n  <<: {hedge: true}", "selection.<<", "merge keys", 2},
		{"root not a mapping", "- a\n- b", "", "must be a mapping", 1},
		{"section not a mapping", "selection: 5", "selection", "must be a mapping", 1},
		{"candidates not a list", "chat: {candidates: {id: a}}", "chat.candidates", "must be a list", 1},
		{"candidate not a mapping", "chat: {candidates: [a]}", "chat.candidates[0]", "must be a mapping", 1},
		{"empty candidate", "chat:\n  candidates:\n    -\n", "chat.candidates[0]", "empty list item", 0},
		{"string not a list", "api_key: [a]", "api_key", "must be a string", 1},
		{"integer", "selection: {failure_threshold: two}", "selection.failure_threshold", `must be an integer, got "two"`, 1},
		{"integer not a float", "selection: {min_samples: 2.5}", "selection.min_samples", "must be an integer", 1},
		{"boolean", "selection: {hedge: maybe}", "selection.hedge", "must be true or false", 1},
		{"number", "gpu: {demote_used_ratio: lots}", "gpu.demote_used_ratio", "must be a number", 1},
		{"duration without unit", "selection: {open_duration: 30}", "selection.open_duration", `has no unit (write e.g. "30s")`, 1},
		{"duration garbage", "selection: {open_duration: soon}", "selection.open_duration", "is not a duration", 1},
		{"duration in days", "history: {retention: 30d}", "history.retention", "is not a duration", 1},
		{"balance unknown", "selection: {balance: random}", "selection.balance", "is not a balance", 1},
		{"zero duration", "selection: {open_duration: 0s}", "selection.open_duration", "must be positive", 1},
		{"negative duration", "selection: {stall_timeout: -1s}", "selection.stall_timeout", "must be positive", 1},
		{"zero retention", "history: {retention: 0s}", "history.retention", "must be positive", 1},
		{"team database_env holds a connection string", "team: {database_env: 'postgres://u:S3cret@db/x'}", "team.database_env", "not an environment variable name", 1},
		{"team node with a space", "team: {node: 'my box'}", "team.node", "contains spaces", 1},
		{"zero first token timeout", "selection: {first_token_timeout: 0s}", "selection.first_token_timeout", "must be positive", 1},
		{"zero busy backoff", "selection: {busy_backoff: 0s}", "selection.busy_backoff", "must be positive", 1},
		{"zero deadline floor", "selection: {deadline_floor: 0s}", "selection.deadline_floor", "must be positive", 1},
		{"threshold zero", "selection: {failure_threshold: 0}", "selection.failure_threshold", "at least 1", 1},
		{"threshold negative", "selection: {failure_threshold: -2}", "selection.failure_threshold", "at least 1", 1},
		{"min samples zero", "selection: {min_samples: 0}", "selection.min_samples", "at least 1", 1},
		{"multiplier below 1", "selection: {ttft_multiplier: 0.5}", "selection.ttft_multiplier", "at least 1", 1},
		{"multiplier infinite", "selection: {ttft_multiplier: .inf}", "selection.ttft_multiplier", "finite", 1},
		{"multiplier NaN", "selection: {ttft_multiplier: .nan}", "selection.ttft_multiplier", "finite", 1},
		{"floor above ceiling", "selection:\n  first_token_timeout: 10s\n  deadline_floor: 20s", "selection.deadline_floor", "above selection.first_token_timeout", 3},
		{"ceiling below default floor", "selection:\n  first_token_timeout: 1s", "selection.first_token_timeout", "below selection.deadline_floor (2s)", 2},
		{"ratio above 1", "gpu: {demote_used_ratio: 1.5}", "gpu.demote_used_ratio", "(0, 1]", 1},
		{"ratio zero", "gpu: {demote_used_ratio: 0}", "gpu.demote_used_ratio", "(0, 1]", 1},
		{"ratio negative", "gpu: {demote_used_ratio: -0.1}", "gpu.demote_used_ratio", "(0, 1]", 1},
		{"free below zero", "gpu: {demote_free_below: 0}", "gpu.demote_free_below", "must be positive", 1},
		{"free below negative", "gpu: {demote_free_below: -1}", "gpu.demote_free_below", "must not be negative", 1},
		{"size bad unit", "gpu: {demote_free_below: 4XB}", "gpu.demote_free_below", "is not a size", 1},
		{"size ambiguous unit", "gpu: {demote_free_below: 4G}", "gpu.demote_free_below", "is not a size", 1},
		{"size fraction of a byte", "gpu: {demote_free_below: 1.5B}", "gpu.demote_free_below", "whole number of bytes", 1},
		{"size too large", "gpu: {demote_free_below: 99999999TiB}", "gpu.demote_free_below", "too large", 1},
		{"body limit zero", "body_limit: 0", "body_limit", "must be positive", 1},
		{"body limit above int64", "body_limit: 18446744073709551615", "body_limit", "too large", 1},
		{"listen not host:port", "listen: 8484", "listen", "not a host:port", 1},
		{"listen bad port", "listen: 127.0.0.1:99999", "listen", "not a host:port", 1},
		{"listen empty", `listen: ""`, "listen", "not a host:port", 1},
		{"listen a name", `listen: "nonsense:80"`, "listen", "must be an IP address or localhost", 1},
		{"non-loopback listen with a short key", "listen: 0.0.0.0:8484\napi_key: s3cret", "listen", "at least 16 characters, not 6", 1},
		{"non-loopback listen without api_key", "listen: 0.0.0.0:8484", "listen", "set api_key", 1},
		{"all interfaces without api_key", "listen: :8484", "listen", "set api_key", 1},
		{"a network address without api_key", "listen: 192.0.2.5:8484", "listen", "set api_key", 1},
		{"api key with spaces", "api_key: ' k '", "api_key", "spaces", 1},
		{"origin wildcard", "allowed_origins: ['*']", "allowed_origins[0]", "list each origin", 1},
		{"origin wildcard scheme", "allowed_origins: ['*://x']", "allowed_origins[0]", "name the scheme", 1},
		{"origin pattern with a path", "allowed_origins: ['chrome-extension://*/x']", "allowed_origins[0]", "more than scheme://host[:port]", 1},
		{"origin bad host", "allowed_origins: ['app://[a']", "allowed_origins[0]", "is not an origin", 1},
		{"origin with path", "allowed_origins: [https://a.example, https://b.example/app]", "allowed_origins[1]", "more than scheme://host[:port]", 1},
		{"origin without scheme", "allowed_origins: [a.example]", "allowed_origins[0]", "is not an origin", 1},
		{"origin empty item", "allowed_origins: [~]", "allowed_origins[0]", "empty list item", 1},
		{"missing id", "chat:\n  candidates:\n    - provider: ollama\n      url: http://h.invalid:1\n      model: m\n", "chat.candidates[0].id", "missing", 3},
		{"missing provider", "chat:\n  candidates:\n    - id: a\n      url: http://h.invalid:1\n      model: m\n", "chat.candidates[0].provider", "missing (ollama or openai)", 3},
		{"missing url", "chat:\n  candidates:\n    - id: a\n      provider: openai\n      model: m\n", "chat.candidates[0].url", "missing", 3},
		{"missing model", "chat:\n  candidates:\n    - id: a\n      provider: openai\n      url: http://h.invalid:1\n", "chat.candidates[0].model", "missing", 3},
		{"empty model", strings.Replace(candidateYAML, "model: m", `model: ""`, 1), "chat.candidates[0].model", "missing", 6},
		{"bad provider", strings.Replace(candidateYAML, "provider: ollama", "provider: vllm", 1), "chat.candidates[0].provider", `"vllm" is not a provider`, 4},
		{"url bad scheme", withURL("htp:/x"), "chat.candidates[0].url", `"htp:/x" is not an absolute http(s) URL`, 5},
		{"url ftp", withURL("ftp://h/x"), "chat.candidates[0].url", "not an absolute http(s) URL", 5},
		{"url without host", withURL("http:///v1"), "chat.candidates[0].url", "not an absolute http(s) URL", 5},
		{"url without scheme", withURL("localhost:11434"), "chat.candidates[0].url", "not an absolute http(s) URL", 5},
		{"url relative", withURL("/v1"), "chat.candidates[0].url", "not an absolute http(s) URL", 5},
		{"url unparsable", withURL("http://h.invalid:port"), "chat.candidates[0].url", "not an absolute http(s) URL", 5},
		{"url port out of range", withURL("http://127.0.0.1:99999/v1"), "chat.candidates[0].url", "port 99999 is not a port", 5},
		{"url with a query", withURL("http://127.0.0.1:8000/v1?x=1"), "chat.candidates[0].url", "has a query or fragment", 5},
		{"url with a fragment", withURL("http://127.0.0.1:8000/v1#f"), "chat.candidates[0].url", "has a query or fragment", 5},
		{"an Ollama candidate on its /v1", withURL("http://127.0.0.1:11434/v1"), "chat.candidates[0].url", "is Ollama's OpenAI-compatible API: an Ollama candidate takes the server's root", 5},
		{"an Ollama candidate on an endpoint", withURL("http://127.0.0.1:11434/v1/chat/completions"), "chat.candidates[0].url", "OpenAI-compatible API", 5},
		{"an Ollama candidate on /api/chat", withURL("http://127.0.0.1:11434/api/chat"), "chat.candidates[0].url", "names Ollama's API", 5},
		{"an Ollama candidate on /V1", withURL("http://127.0.0.1:11434/V1"), "chat.candidates[0].url", "OpenAI-compatible API", 5},
		{"url with a password", withURL("http://user:S3cret@127.0.0.1:8000/v1"), "chat.candidates[0].url", "has a user or password in it", 5},
		{"id too long", strings.Replace(candidateYAML, "id: a", "id: "+strings.Repeat("a", 250), 1), "chat.candidates[0].id", "at most 249", 3},
		{"model too long", strings.Replace(candidateYAML, "model: m", "model: "+strings.Repeat("m", 8500), 1), "chat.candidates[0].model", "at most 256", 6},
		{"server_key too long", strings.Replace(candidateYAML, "id: a", "id: a\n      server_key: "+strings.Repeat("k", 9000), 1), "chat.candidates[0].server_key", "at most 200", 4},
		{"api_key with a newline", "api_key: \"abc\\ndef0123456789012\"\n", "api_key", "control characters", 1},
		{"duplicate id", candidateYAML + "    - id: a\n      provider: openai\n      url: http://h.invalid:1/v1\n      model: m2\n",
			"chat.candidates[1].id", `"a" is already the id of chat.candidates[0]`, 7},
		{"id auto", strings.Replace(candidateYAML, "id: a", "id: auto", 1), "chat.candidates[0].id", "reserved", 3},
		{"id with space", strings.Replace(candidateYAML, "id: a", "id: 'a b'", 1), "chat.candidates[0].id", "spaces", 3},
		{"api_key_env holds a key", cand("      api_key_env: sk-abc123\n"), "chat.candidates[0].api_key_env", "not an environment variable name", 7},
		{"api_key_env starts with digit", cand("      api_key_env: 1KEY\n"), "chat.candidates[0].api_key_env", "not an environment variable name", 7},
		{"server_key with a space", cand("      server_key: gpu box\n"), "chat.candidates[0].server_key", "contains spaces", 7},
		{"gpu negative", cand("      gpus: [0, -1]\n"), "chat.candidates[0].gpus[1]", "must not be negative", 7},
		{"gpu twice", cand("      gpus: [1, 1]\n"), "chat.candidates[0].gpus[1]", "listed twice", 7},
		{"gpu not an integer", cand("      gpus: [one]\n"), "chat.candidates[0].gpus[0]", "must be an integer", 7},
		{"gpus not a list", cand("      gpus: 0\n"), "chat.candidates[0].gpus", "must be a list", 7},
		{"negative load time", cand("      load_time: -5s\n"), "chat.candidates[0].load_time", "must not be negative", 7},
		{"negative size", cand("      size: -5\n"), "chat.candidates[0].size", "must not be negative", 7},
		{"priority not an integer", cand("      priority: high\n"), "chat.candidates[0].priority", "must be an integer", 7},
		{"default model not a candidate", candidateYAML + "  default_model: b\n", "chat.default_model", `"b" is not the id of a candidate`, 7},
		{"deep thinking model not a candidate", "chat:\n  deep_thinking_model: big\n", "chat.deep_thinking_model", `"big" is not the id of a candidate`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v; want an error naming %s", tt.src, cfg, tt.path)
			}
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Errorf("Parse(%q) returned a config with its error: %+v", tt.src, cfg)
			}
			fes := fieldErrors(err)
			if len(fes) != 1 {
				t.Fatalf("Parse(%q) = %d errors: %v; want one, naming %s", tt.src, len(fes), err, tt.path)
			}
			fe := fes[0]
			if fe.Path != tt.path || !strings.Contains(fe.Reason, tt.reason) {
				t.Errorf("Parse(%q) = %q; want path %q, reason containing %q", tt.src, err, tt.path, tt.reason)
			}
			if tt.line != 0 && fe.Line != tt.line {
				t.Errorf("Parse(%q) = %q; want line %d", tt.src, err, tt.line)
			}
			// A secret put where its variable's name belongs is not repeated.
			for _, secret := range []string{"S3cret", "sk-abc123"} {
				if strings.Contains(tt.src, secret) && strings.Contains(err.Error(), secret) {
					t.Errorf("Parse(%q) = %q repeats the secret", tt.src, err)
				}
			}
			// The message leads with the key path.
			if tt.path != "" && !strings.HasPrefix(err.Error(), tt.path+": ") {
				t.Errorf("Parse(%q) error %q does not start with %q", tt.src, err, tt.path+": ")
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `listen: 0.0.0.0:8484
selection:
  failure_threshold: 0
  bogus: true
gpu: {demote_used_ratio: 2}
chat:
  default_model: nope
  candidates:
    - id: a
      provider: ollama
      url: http://127.0.0.1:11434
      model: m
    - id: b
      provider: openai
      url: "htp:/x"
      model: m
`
	_, err := Parse([]byte(src))
	var got []string
	for _, fe := range fieldErrors(err) {
		got = append(got, fe.Error())
	}
	// In file order, except the checks of values against each other,
	// which come after the walk.
	want := []string{
		"selection.bogus: unknown key (line 4)",
		`chat.candidates[1].url: "htp:/x" is not an absolute http(s) URL (line 15)`,
		`listen: "0.0.0.0:8484" is not a loopback address: set api_key (at least 16 characters) to listen on it (line 1)`,
		"selection.failure_threshold: must be at least 1, got 0 (line 3)",
		"gpu.demote_used_ratio: must be in (0, 1], got 2 (line 5)",
		`chat.default_model: "nope" is not the id of a candidate (line 7)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Parse errors =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Parse error text = %q; want the errors one per line", err)
	}
}

func TestParseYAMLErrors(t *testing.T) {
	for _, src := range []string{
		"listen: [\n",
		"a: b: c\n",
		"\tlisten: x\n",
		"listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n",
		"listen: 127.0.0.1:1\n---\nlisten: [\n",
	} {
		if cfg, err := Parse([]byte(src)); err == nil {
			t.Errorf("Parse(%q) = %+v; want an error", src, cfg)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"512", 512, true},
		{"1B", 1, true},
		{"1KB", 1000, true},
		{"1kB", 1000, true},
		{"4MB", 4_000_000, true},
		{"2GB", 2_000_000_000, true},
		{"1TB", 1_000_000_000_000, true},
		{"1KiB", 1024, true},
		{"512MiB", 512 << 20, true},
		{"1GiB", 1 << 30, true},
		{"1gib", 1 << 30, true},
		{"2TiB", 2 << 40, true},
		{"1.5GiB", 3 << 29, true},
		{"0.5KiB", 512, true},
		{" 3 MiB ", 3 << 20, true},
		{"16777216TiB", 0, false}, // 2^64
		{"1.5B", 0, false},
		{"", 0, false},
		{"GiB", 0, false},
		{"1..5GiB", 0, false},
		{".5GiB", 0, false},
		{"5.GiB", 0, false},
		{"-1GiB", 0, false},
		{"1e3", 0, false},
		{"1 G", 0, false},
		{"1GiBs", 0, false},
		{"NaN", 0, false},
		{"1_000", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if tt.ok && (err != nil || got != tt.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if !tt.ok && err == nil {
			t.Errorf("parseSize(%q) = %d; want an error", tt.in, got)
		}
	}
}

func TestFieldErrorText(t *testing.T) {
	tests := []struct {
		fe   FieldError
		want string
	}{
		{FieldError{Path: "a.b", Line: 3, Reason: "bad"}, "a.b: bad (line 3)"},
		{FieldError{Path: "a.b", Reason: "bad"}, "a.b: bad"},
		{FieldError{Line: 2, Reason: "bad"}, "bad (line 2)"},
	}
	for _, tt := range tests {
		if got := tt.fe.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q; want %q", tt.fe, got, tt.want)
		}
	}
	if got := fieldErrors(errors.New("x")); got != nil {
		t.Errorf("fieldErrors(plain error) = %v; want nil", got)
	}
}

// FuzzParse feeds Parse arbitrary input: it must not panic, and whatever it
// accepts must hold the invariants the rest of Switchyard relies on.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("example.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(specExample))
	f.Add([]byte(specExample + specSecondCandidate))
	f.Add([]byte(candidateYAML + "      gpus: [0, 1]\n      size: 1.5GiB\n      load_time: 1m\n"))
	f.Add([]byte("a: &x [*x, *x]\nchat: {candidates: &c [*c]}\n"))
	f.Add([]byte("selection: {<<: &m {hedge: true}, open_duration: *m}\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Add([]byte("listen: ':0'\napi_key: k\nbody_limit: 9223372036854775807\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Fatalf("Parse returned a config with its error %v", err)
			}
			return
		}
		if !IsLoopback(cfg.Listen) && cfg.APIKey == "" {
			t.Fatalf("accepted non-loopback listen %q without api_key", cfg.Listen)
		}
		s := cfg.Selection
		if s.FailureThreshold < 1 || s.OpenDuration <= 0 || s.FirstTokenTimeout <= 0 || s.StallTimeout <= 0 ||
			s.DeadlineFloor <= 0 || s.DeadlineFloor > s.FirstTokenTimeout || !(s.TTFTMultiplier >= 1) ||
			math.IsInf(s.TTFTMultiplier, 0) || s.MinSamples < 1 || s.BusyBackoff <= 0 {
			t.Fatalf("accepted impossible selection %+v", s)
		}
		if cfg.BodyLimit <= 0 || cfg.History.Retention <= 0 || cfg.GPU.DemoteFreeBelow == 0 ||
			!(cfg.GPU.DemoteUsedRatio > 0 && cfg.GPU.DemoteUsedRatio <= 1) {
			t.Fatalf("accepted impossible settings %+v", cfg)
		}
		ids := map[string]bool{}
		for _, c := range cfg.Chat.Candidates {
			if c.ID == "" || ids[c.ID] || c.URL == "" || c.Model == "" ||
				(c.Provider != fleet.ProviderOllama && c.Provider != fleet.ProviderOpenAI) {
				t.Fatalf("accepted bad candidate %+v", c)
			}
			ids[c.ID] = true
		}
		for _, id := range []string{cfg.Chat.DefaultModel, cfg.Chat.DeepThinkingModel} {
			if id != "" && !ids[id] {
				t.Fatalf("accepted first choice %q that is no candidate", id)
			}
		}
	})
}
