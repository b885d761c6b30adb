package config

//go:generate go test -run ^TestConfigDoc$ -update

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/deadline"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/httpapi"
	"github.com/switchyard/switchyard/backend/pressure"
	"github.com/switchyard/switchyard/backend/router"
)

// configKeys is every key of a config file but those of a candidate, in
// the order Render writes them and docs/CONFIG.md lists them. It is the
// one place a key is stated: its default (the using package's own), its
// decoding and checks, its rendering and its docs. To add a key, add its
// row here and its field to Config.
var configKeys = []key[Config]{
	field("listen", func(c *Config) *string { return &c.Listen }, text, "127.0.0.1:8484",
		"address of the localhost API, host:port; a non-loopback address needs api_key",
		listenAddr, exposed),
	field("api_key", func(c *Config) *string { return &c.APIKey }, text, "",
		`when set, API callers must send "Authorization: Bearer <api_key>"`,
		apiKey),
	field("allowed_origins", func(c *Config) *[]string { return &c.AllowedOrigins }, list(text), nil,
		`browser origins allowed besides this machine's pages and local app shells; "*" is any text without "/", e.g. ["https://tools.example:3000", "chrome-extension://*"]`,
		each(origin)),
	field("body_limit", func(c *Config) *int64 { return &c.BodyLimit }, sizeOf[int64](), httpapi.DefaultBodyLimit,
		"largest request body the API accepts; larger ones get 413",
		nonZero),

	section[Config]("history", "the request history store"),
	field("history.path", func(c *Config) *string { return &c.History.Path }, text, "",
		`SQLite file, opened at start; "" is $XDG_DATA_HOME/switchyard/history.db`),
	field("history.retention", func(c *Config) *time.Duration { return &c.History.Retention }, duration, history.DefaultRetention,
		"how long requests are kept",
		positive),

	section[Config]("team", "several Switchyards sharing one fleet through PostgreSQL (docs/DESIGN.md, \"Teams\")"),
	field("team.database_env", func(c *Config) *string { return &c.Team.DatabaseEnv }, text, "",
		`name of the environment variable that holds the team's PostgreSQL connection string, read at start; "": no team`,
		envName),
	field("team.node", func(c *Config) *string { return &c.Team.Node }, text, "",
		`this Switchyard's name in the team, unique in it, read at start; "" is the host name`,
		nodeName),

	section[Config]("selection", "circuit breakers and first-token deadlines"),
	field("selection.failure_threshold", func(c *Config) *int { return &c.Selection.FailureThreshold }, integer, breaker.DefaultFailureThreshold,
		"consecutive failures that open a candidate's breaker",
		atLeast(1)),
	field("selection.open_duration", func(c *Config) *time.Duration { return &c.Selection.OpenDuration }, duration, breaker.DefaultOpenDuration,
		"how long an open breaker refuses calls before it lets one probe through",
		positive),
	field("selection.first_token_timeout", func(c *Config) *time.Duration { return &c.Selection.FirstTokenTimeout }, duration, router.DefaultFirstTokenTimeout,
		"ceiling of every first-token deadline; the deadline of a candidate with too few samples",
		positive),
	field("selection.stall_timeout", func(c *Config) *time.Duration { return &c.Selection.StallTimeout }, duration, router.DefaultStallTimeout,
		"a committed stream silent this long ends with an error",
		positive),
	field("selection.hedge", func(c *Config) *bool { return &c.Selection.Hedge }, boolean, false,
		"start the next candidate too when the first token is later than the current one's p95"),
	field("selection.balance", func(c *Config) *string { return &c.Selection.Balance }, text, router.BalanceFastest,
		"within a band of equal priority: fastest (the predicted first token soonest) or ordered (by id)",
		balance),
	field("selection.ttft_multiplier", func(c *Config) *float64 { return &c.Selection.TTFTMultiplier }, number, deadline.DefaultMultiplier,
		"k in the learned deadline clamp(k × p99 warm TTFT, deadline_floor, first_token_timeout); at least 1",
		multiplier),
	field("selection.deadline_floor", func(c *Config) *time.Duration { return &c.Selection.DeadlineFloor }, duration, deadline.DefaultFloor,
		"smallest learned first-token deadline; at most first_token_timeout",
		positive, belowCeiling),
	field("selection.min_samples", func(c *Config) *int { return &c.Selection.MinSamples }, integer, deadline.DefaultMinSamples,
		"warm TTFT samples a candidate needs before its deadline is learned",
		atLeast(1)),
	field("selection.busy_backoff", func(c *Config) *time.Duration { return &c.Selection.BusyBackoff }, duration, router.DefaultBusyBackoff,
		"how long a busy candidate is skipped when its answer has no Retry-After",
		positive),

	section[Config]("gpu", "demotion of candidates whose GPUs run short of memory"),
	field("gpu.demote_free_below", func(c *Config) *uint64 { return &c.GPU.DemoteFreeBelow }, size, pressure.DefaultDemoteFreeBelow,
		"demote a candidate when a GPU it uses has less free memory than this",
		nonZero),
	field("gpu.demote_used_ratio", func(c *Config) *float64 { return &c.GPU.DemoteUsedRatio }, number, pressure.DefaultDemoteUsedRatio,
		"... or has more than this share of its memory in use; in (0, 1]",
		ratio),

	section[Config]("chat", "the candidates and the first choices"),
	field("chat.default_model", func(c *Config) *string { return &c.Chat.DefaultModel }, text, "",
		`id of the candidate tried first; "" orders by priority alone`,
		candidateID),
	field("chat.deep_thinking_model", func(c *Config) *string { return &c.Chat.DeepThinkingModel }, text, "",
		`id of the candidate tried first in thinking mode; "" is default_model`,
		candidateID),
	field("chat.candidates", func(c *Config) *[]Candidate { return &c.Chat.Candidates }, candidates, nil,
		"the (server, model) pairs to route to; each item has the keys below"),
}

// candidateKeys is every key of an item of chat.candidates, as configKeys
// is the others.
var candidateKeys = []key[Candidate]{
	need("id", func(c *Candidate) *string { return &c.ID }, "",
		`names it in requests, history and the UI; unique, no spaces, not "auto"`,
		newID),
	need("provider", func(c *Candidate) *string { return (*string)(&c.Provider) }, " "+providers,
		"wire protocol: ollama, or openai (vLLM, llama.cpp, LM Studio, ...)",
		provider),
	withCandidate(need("url", func(c *Candidate) *string { return &c.URL }, "",
		"base URL as the server's own clients take it: http://host:11434 (Ollama), http://host:8000/v1 (OpenAI)",
		httpURL), ollamaRoot),
	need("model", func(c *Candidate) *string { return &c.Model }, "",
		"the model name the server knows",
		modelName),
	field("priority", func(c *Candidate) *int { return &c.Priority }, integer, 0,
		"order after the first choice: lower is tried earlier"),
	field("enabled", func(c *Candidate) *bool { return &c.Enabled }, boolean, true,
		"false keeps it in the file but never routes to it"),
	field("supports_thinking", func(c *Candidate) *bool { return &c.SupportsThinking }, boolean, false,
		"usable in thinking mode (Ollama may also report the capability)"),
	field("embeddings", func(c *Candidate) *bool { return &c.Embeddings }, boolean, false,
		"makes embeddings: embedding requests for auto go to it (Ollama may also report the capability)"),
	field("gpus", func(c *Candidate) *[]int { return &c.GPUs }, listOrNone(integer), nil,
		"local GPU indexes it runs on; omitted: every local GPU of a local server; []: none",
		gpuIndexes),
	field("api_key_env", func(c *Candidate) *string { return &c.APIKeyEnv }, text, "",
		`name of the environment variable that holds the server's API key; "": no key`,
		envName),
	field("server_key", func(c *Candidate) *string { return &c.ServerKey }, text, "",
		`names its server across a team's nodes when their URLs for it differ; "": the URL's host and port, and a loopback URL is not shared`,
		nodeName),
	field("load_time", func(c *Candidate) *time.Duration { return &c.LoadTime }, duration, 0,
		"expected time to load the model when it is not resident; 0s: learned from history",
		notNegative),
	field("size", func(c *Candidate) *uint64 { return &c.Size }, size, 0,
		"the model's size in memory; 0: unknown"),
	field("parallel", func(c *Candidate) *int { return &c.Parallel }, integer, 0,
		"requests the server runs at once for it (OLLAMA_NUM_PARALLEL, --parallel); 0: as the server reports",
		notNegative),
}

// candidates is the kind of chat.candidates: a list of mappings, each
// decoded and checked by candidateKeys, and written as a block with the
// doc comments on the first item.
var candidates = kind[[]Candidate]{
	name: "list of candidates",
	decode: func(d *decoder, p string, n *yaml.Node, dst *[]Candidate) {
		d.sequence(p, n, func(p string, n *yaml.Node) { *dst = append(*dst, d.candidate(p, n)) })
	},
	node: func(v []Candidate) *yaml.Node {
		if len(v) > 0 {
			return nil // a block
		}
		return &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	},
	block: func(p *page, indent string, v []Candidate) {
		for i := range v {
			if i > 0 {
				p.add("", "")
			}
			first := len(p.lines)
			writeKeys(p, candidateKeys, &v[i], indent+"  ", i == 0)
			// The item's first key carries its dash.
			p.lines[first].text = indent + "- " + strings.TrimPrefix(p.lines[first].text, indent+"  ")
		}
	},
}

// The checks of the keys above. Each reports what is wrong with a decoded
// value, as "must be ...", or quoting the value.

func positive(r report, v time.Duration) {
	if v <= 0 {
		r.fail("must be positive, got %s", v)
	}
}

func nonZero[T uint64 | int64](r report, v T) {
	if v <= 0 {
		r.fail("must be positive")
	}
}

func notNegative[T int | time.Duration](r report, v T) {
	if v < 0 {
		r.fail("must not be negative, got %v", v)
	}
}

func atLeast(least int) check[int] {
	return func(r report, v int) {
		if v < least {
			r.fail("must be at least %d, got %d", least, v)
		}
	}
}

func multiplier(r report, v float64) {
	if !(v >= 1) || math.IsInf(v, 0) {
		r.fail("must be a finite number of at least 1, got %v", v)
	}
}

func ratio(r report, v float64) {
	if !(v > 0 && v <= 1) {
		r.fail("must be in (0, 1], got %v", v)
	}
}

// each checks every item of a list with c.
func each[T any](c check[T]) check[[]T] {
	return func(r report, v []T) {
		for i, item := range v {
			c(r.item(i), item)
		}
	}
}

func listenAddr(r report, addr string) {
	if err := CheckAddr(addr); err != nil {
		r.fail("%v", err)
	}
}

// exposed checks that api_key protects listen.
func exposed(r report, addr string) {
	if err := CheckExposure(addr, r.d.cfg.APIKey); err != nil {
		r.fail("%v", err)
	}
}

// maxID is the longest candidate id: a request's model names it, with
// ":latest" as Ollama's clients write it, within httpapi.MaxModelName.
const maxID = httpapi.MaxModelName - len(":latest")

// modelName checks a candidate's model: a request may name it, within
// httpapi.MaxModelName (which also keeps a team's notices about it within
// PostgreSQL's 8000 bytes).
func modelName(r report, name string) {
	if len(name) > httpapi.MaxModelName {
		r.fail("is %d bytes long: at most %d, so that a request can name it", len(name), httpapi.MaxModelName)
	}
}

// apiKey checks the key API callers send: what an Authorization header can
// carry, no control characters and no spaces around it.
func apiKey(r report, s string) {
	if strings.ContainsFunc(s, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		r.fail("has control characters, which no Authorization header carries")
		return
	}
	trimmed(r, s)
}

func trimmed(r report, s string) {
	if s != strings.TrimSpace(s) {
		r.fail("has leading or trailing spaces")
	}
}

func origin(r report, o string) {
	if reason := checkOrigin(o); reason != "" {
		r.fail("%q %s", o, reason)
	}
}

// belowCeiling checks selection.deadline_floor against
// selection.first_token_timeout. It blames the floor when the file sets
// it, and the ceiling when only the ceiling is set.
func belowCeiling(r report, floor time.Duration) {
	ceiling := r.d.cfg.Selection.FirstTokenTimeout
	if floor <= ceiling || ceiling <= 0 {
		return
	}
	if r.set() {
		r.fail("%s is above selection.first_token_timeout (%s)", floor, ceiling)
		return
	}
	r.d.fail("selection.first_token_timeout", "%s is below selection.deadline_floor (%s)", ceiling, floor)
}

// candidateID checks that a first choice names a candidate.
func candidateID(r report, id string) {
	if _, ok := r.d.ids[id]; id != "" && !ok {
		r.fail("%q is not the id of a candidate", id)
	}
}

// newID checks a candidate's id and records it, so that no later candidate
// takes it and the first choices can name it.
func newID(r report, id string) {
	switch {
	case strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		r.fail("%q contains spaces or control characters", id)
	case id == "auto":
		r.fail(`"auto" is reserved for the default chain`)
	case len(id) > maxID:
		r.fail("is %d bytes long: at most %d, so that a request can name it (with \":latest\" as Ollama's clients add it)", len(id), maxID)
	default:
		if first, dup := r.d.ids[id]; dup {
			r.fail("%q is already the id of %s", id, first)
		} else {
			r.d.ids[id] = parent(r.path)
		}
	}
}

// balance checks selection.balance.
func balance(r report, v string) {
	if v != router.BalanceFastest && v != router.BalanceOrdered {
		r.fail("%q is not a balance (%s or %s)", v, router.BalanceFastest, router.BalanceOrdered)
	}
}

// providers names the values of provider, for its messages.
const providers = "(ollama or openai)"

func provider(r report, p string) {
	switch fleet.Provider(p) {
	case fleet.ProviderOllama, fleet.ProviderOpenAI:
	default:
		r.fail("%q is not a provider %s", p, providers)
	}
}

func httpURL(r report, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		r.fail("%q is not an absolute http(s) URL", s)
		return
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			r.fail("%q: port %s is not a port (1 to 65535)", s, port)
			return
		}
	}
	switch {
	case u.User != nil:
		// Secrets come from the environment, never from the file.
		r.fail("%q has a user or password in it: put the server's key in an environment variable and name it in api_key_env", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		r.fail("%q has a query or fragment: give the base URL as the server's own clients take it", s)
	}
}

// withCandidate adds to k a check that reads the whole candidate.
func withCandidate(k key[Candidate], c func(r report, cand *Candidate)) key[Candidate] {
	own := k.check
	k.check = func(r report, cand *Candidate) {
		own(r, cand)
		c(r, cand)
	}
	return k
}

// ollamaRoot checks that an Ollama candidate's url is the server's root,
// not its OpenAI-compatible API or one of its endpoints: Switchyard adds
// /api/... itself, and such a url made every model look missing.
func ollamaRoot(r report, c *Candidate) {
	u, err := url.Parse(c.URL)
	if c.Provider != fleet.ProviderOllama || err != nil {
		return
	}
	p := "/" + strings.ToLower(strings.Trim(u.Path, "/"))
	switch {
	case p == "/v1" || strings.HasSuffix(p, "/v1") || strings.Contains(p+"/", "/v1/"):
		r.fail("%q is Ollama's OpenAI-compatible API: an Ollama candidate takes the server's root (http://host:11434), or use provider: openai with this URL", c.URL)
	case p == "/api" || strings.HasSuffix(p, "/api") || strings.Contains(p+"/", "/api/"):
		r.fail("%q names Ollama's API: an Ollama candidate takes the server's root (http://host:11434); Switchyard adds /api itself", c.URL)
	}
}

func gpuIndexes(r report, gpus []int) {
	seen := map[int]bool{}
	for i, g := range gpus {
		switch {
		case g < 0:
			r.item(i).fail("must not be negative, got %d", g)
		case seen[g]:
			r.item(i).fail("GPU %d is listed twice", g)
		}
		seen[g] = true
	}
}

// nodeName checks a name given to a node or a server: printable, no
// spaces.
func nodeName(r report, name string) {
	switch {
	case strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		r.fail("%q contains spaces or control characters", name)
	case len(name) > maxNodeName:
		r.fail("is %d bytes long: at most %d, so that the team's notices carry it (PostgreSQL's NOTIFY holds 8000 bytes)", len(name), maxNodeName)
	}
}

// maxNodeName is the longest team.node or server_key: each goes into every
// notice of evidence a node sends the others.
const maxNodeName = 200

// envName checks the name of a variable that holds a secret. A value
// that is not a name is likely the secret itself (a key, a connection
// string with its password), so the error never repeats it.
func envName(r report, name string) {
	if name != "" && !isEnvName(name) {
		r.fail("is not an environment variable name (letters, digits and _): give the name of the variable that holds the secret, not the secret itself")
	}
}
