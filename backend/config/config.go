// Package config loads, validates and watches Switchyard's YAML
// configuration file (SPEC 6.2).
//
// Parse is strict: unknown keys, duplicate candidate ids, bad URLs and
// impossible values are errors, and every error names the key path it is
// about ("chat.candidates[1].url: ..."). Load reads a file; Watcher reloads
// it when it changes. The package reads no environment variables: callers
// pass XDG_CONFIG_HOME to DefaultPath and a getenv func to Candidate.Fleet.
//
// Besides the keys of SPEC 6.2, the file may set these (all optional; the
// defaults are those of SPEC 3 and 6.3):
//
//	body_limit: 4MiB           # largest request body the API accepts
//	selection:
//	  ttft_multiplier: 4       # k in clamp(k × p99 warm TTFT, floor, ceiling)
//	  deadline_floor: 2s       # floor of a learned first-token deadline
//	  min_samples: 20          # warm TTFT samples before a deadline is learned
//	  busy_backoff: 1s         # back-off of a busy candidate without Retry-After
//	chat:
//	  candidates:
//	    - load_time: 40s       # expected cold-load time of the model
//	      size: 20GiB          # size of the model in memory
//	      parallel: 4          # requests the server runs at once for it
//
// Durations use Go syntax ("30s", "720h", "1h30m"); sizes are plain
// integers (bytes) or a number with a unit: B, KB, MB, GB, TB (powers of
// 1000) or KiB, MiB, GiB, TiB (powers of 1024). example.yaml beside this
// file shows every key.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Config is the whole configuration. Parse and Default return it with every
// default filled in; for a Config built in code, a zero field means its
// default, as stated field by field.
type Config struct {
	// Listen is the address of the localhost API (YAML listen). Default
	// "127.0.0.1:8484". A non-loopback address needs APIKey.
	Listen string
	// APIKey, when set, is the bearer token API callers must send
	// (YAML api_key). Default "": no token needed.
	APIKey string
	// AllowedOrigins are extra browser origins ("https://host:port")
	// allowed to call the API (YAML allowed_origins). Default none.
	AllowedOrigins []string
	History        History
	Selection      Selection
	GPU            GPU
	// BodyLimit is the largest request body the API accepts, in bytes
	// (YAML body_limit). Default 4 MiB.
	BodyLimit int64
	Chat      Chat
}

// History configures the request history store (YAML history).
type History struct {
	// Path is the SQLite file (YAML history.path). Default "": the caller
	// picks $XDG_DATA_HOME/switchyard/history.db.
	Path string
	// Retention is how long rows are kept (YAML history.retention).
	// Default 720h (30 days).
	Retention time.Duration
}

// Selection configures breakers and first-token deadlines (YAML selection).
type Selection struct {
	// FailureThreshold is the number of consecutive failures that opens a
	// candidate's breaker (YAML selection.failure_threshold). Default 2.
	FailureThreshold int
	// OpenDuration is how long an open breaker refuses calls before one
	// probe is let through (YAML selection.open_duration). Default 30s.
	OpenDuration time.Duration
	// FirstTokenTimeout is the ceiling of every first-token deadline, and
	// the deadline of a candidate without enough samples
	// (YAML selection.first_token_timeout). Default 60s.
	FirstTokenTimeout time.Duration
	// StallTimeout ends a committed stream that sent no bytes for this
	// long (YAML selection.stall_timeout). Default 60s.
	StallTimeout time.Duration
	// Hedge starts the next candidate in parallel when the first token is
	// later than the current one's p95 (YAML selection.hedge). Default
	// false.
	Hedge bool
	// TTFTMultiplier is k in clamp(k × p99 warm TTFT, floor, ceiling)
	// (YAML selection.ttft_multiplier). Default 4; at least 1.
	TTFTMultiplier float64
	// DeadlineFloor is the smallest learned first-token deadline
	// (YAML selection.deadline_floor). Default 2s; at most
	// FirstTokenTimeout.
	DeadlineFloor time.Duration
	// MinSamples is the number of warm TTFT samples a candidate needs
	// before its deadline is learned (YAML selection.min_samples).
	// Default 20.
	MinSamples int
	// BusyBackoff is how long a busy candidate is skipped when its answer
	// has no Retry-After (YAML selection.busy_backoff). Default 1s.
	BusyBackoff time.Duration
}

// GPU configures demotion under memory pressure (YAML gpu).
type GPU struct {
	// DemoteFreeBelow demotes a candidate when a GPU it uses has less free
	// memory than this many bytes (YAML gpu.demote_free_below). Default
	// 1 GiB.
	DemoteFreeBelow uint64
	// DemoteUsedRatio demotes a candidate when a GPU it uses has
	// used/total above it (YAML gpu.demote_used_ratio). Default 0.95; in
	// (0, 1].
	DemoteUsedRatio float64
}

// Chat names the candidates and the first choices (YAML chat).
type Chat struct {
	// DefaultModel is the id of the candidate tried first
	// (YAML chat.default_model). Default "": order by priority alone.
	DefaultModel string
	// DeepThinkingModel is the id of the candidate tried first in thinking
	// mode (YAML chat.deep_thinking_model). Default "": DefaultModel.
	DeepThinkingModel string
	// Candidates in file order (YAML chat.candidates). Default none.
	Candidates []Candidate
}

// Candidate is one configured (endpoint, model) pair, as the file states it;
// Fleet turns it into the router's fleet.Candidate.
type Candidate struct {
	// ID names the candidate in requests, history and the UI. Required,
	// unique, no spaces, not "auto".
	ID string
	// Provider is the wire protocol: "ollama" or "openai". Required.
	Provider fleet.Provider
	// URL is the base URL as the server's own clients take it: Ollama
	// "http://host:11434", OpenAI-compatible "http://host:8000/v1".
	// Required, absolute http or https.
	URL string
	// Model is the model name the upstream knows. Required.
	Model string
	// Priority orders candidates after the first choice; lower is tried
	// earlier. Default 0.
	Priority int
	// Enabled is false only when the file says "enabled: false": Parse
	// sets it to true when the key is omitted. (The zero Candidate is
	// disabled.)
	Enabled bool
	// SupportsThinking marks a candidate usable in thinking mode.
	// Default false (Ollama may still report the capability).
	SupportsThinking bool
	// GPUs are the local GPU indexes the candidate runs on. Default nil:
	// all local GPUs for a local endpoint. An empty list ("gpus: []")
	// means none.
	GPUs []int
	// APIKeyEnv names the environment variable that holds the upstream's
	// API key. Default "": no key.
	APIKeyEnv string
	// LoadTime is the expected time to load the model when it is not
	// resident (YAML load_time). Default 0: unknown, learned from history.
	LoadTime time.Duration
	// Size is the model's size in memory, in bytes (YAML size). Default 0:
	// unknown.
	Size uint64
	// Parallel is how many requests the server runs at once for this
	// model (YAML parallel: llama.cpp's --parallel, OLLAMA_NUM_PARALLEL).
	// Default 0: as the server reports (llama.cpp's /slots; 1 for Ollama).
	// A first-token wait while Switchyard has this many requests running
	// there is a queue, not a failure.
	Parallel int
}

// Default returns the configuration in force when a file sets nothing: the
// defaults of every field, and no candidates.
func Default() Config {
	return Config{
		Listen:    "127.0.0.1:8484",
		History:   History{Retention: 720 * time.Hour},
		BodyLimit: 4 << 20,
		Selection: Selection{
			FailureThreshold:  2,
			OpenDuration:      30 * time.Second,
			FirstTokenTimeout: 60 * time.Second,
			StallTimeout:      60 * time.Second,
			TTFTMultiplier:    4,
			DeadlineFloor:     2 * time.Second,
			MinSamples:        20,
			BusyBackoff:       time.Second,
		},
		GPU: GPU{DemoteFreeBelow: 1 << 30, DemoteUsedRatio: 0.95},
	}
}

// maxFileSize bounds what Load reads: a config file is a few kilobytes, and
// a path pointing at something else should fail rather than fill memory.
const maxFileSize = 1 << 20

// Load reads and parses the file at path. A missing file is an error that
// satisfies errors.Is(err, fs.ErrNotExist), so the caller can fall back to
// its embedded default; every error names the path.
func Load(path string) (Config, error) {
	data, err := readFile(path)
	if err != nil {
		return Config{}, err
	}
	return parseFile(path, data)
}

// readFile reads path, refusing files larger than maxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("read config %s: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

// parseFile parses data read from path and names the path in its error.
func parseFile(path string, data []byte) (Config, error) {
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// DefaultPath returns the config file's default location under configHome,
// which is $XDG_CONFIG_HOME, or ~/.config when that is unset; the caller
// reads the environment.
func DefaultPath(configHome string) string {
	return filepath.Join(configHome, "switchyard", "config.yaml")
}

// Fleet returns c as the router sees it: the key named by APIKeyEnv looked
// up with getenv (nil getenv: no key), and Local set when the URL's host is
// a loopback address or "localhost". GPUs is copied.
func (c Candidate) Fleet(getenv func(string) string) fleet.Candidate {
	fc := fleet.Candidate{
		ID:               c.ID,
		Provider:         c.Provider,
		URL:              c.URL,
		Model:            c.Model,
		Priority:         c.Priority,
		Enabled:          c.Enabled,
		SupportsThinking: c.SupportsThinking,
		GPUs:             slices.Clone(c.GPUs),
		Slots:            c.Parallel,
	}
	if c.APIKeyEnv != "" && getenv != nil {
		fc.APIKey = getenv(c.APIKeyEnv)
	}
	if u, err := url.Parse(c.URL); err == nil {
		fc.Local = loopbackHost(u.Hostname())
	}
	return fc
}

// Candidates returns every candidate, enabled or not, in file order, through
// Candidate.Fleet.
func (c Config) Candidates(getenv func(string) string) []fleet.Candidate {
	out := make([]fleet.Candidate, 0, len(c.Chat.Candidates))
	for _, cand := range c.Chat.Candidates {
		out = append(out, cand.Fleet(getenv))
	}
	return out
}

// IsLoopback reports whether the listen address addr ("host:port", or a
// bare host) binds only this machine: a 127.0.0.0/8 or ::1 address, or
// "localhost". An empty host (":8484") binds every interface and is not
// loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	}
	return loopbackHost(host)
}

// MinAPIKeyLen is the shortest api_key accepted for a non-loopback
// address: a key anyone on the network may try to guess.
const MinAPIKeyLen = 16

// CheckAddr reports whether addr is a listen address: host:port with a
// port number (0 picks a free one) and a host that is an IP address,
// "localhost", or empty (every interface).
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !validPort(port) {
		return fmt.Errorf("%q is not a host:port address (like 127.0.0.1:8484)", addr)
	}
	if host != "" && !strings.EqualFold(host, "localhost") && net.ParseIP(host) == nil {
		return fmt.Errorf("%q is not a host:port address: the host must be an IP address or localhost", addr)
	}
	return nil
}

// CheckExposure reports whether apiKey protects a server listening on
// addr: a loopback address needs no key; any other address needs one of at
// least MinAPIKeyLen characters, since anyone who can reach it may try.
// Every way the address can be set (listen, --addr, a reload) is checked
// with it.
func CheckExposure(addr, apiKey string) error {
	if IsLoopback(addr) {
		return nil
	}
	switch {
	case apiKey == "":
		return fmt.Errorf("%q is not a loopback address: set api_key (at least %d characters) to listen on it", addr, MinAPIKeyLen)
	case len(apiKey) < MinAPIKeyLen:
		return fmt.Errorf("%q is not a loopback address: its api_key must have at least %d characters, not %d", addr, MinAPIKeyLen, len(apiKey))
	}
	return nil
}

// loopbackHost reports whether host, a name or an IP without brackets or
// port, is this machine.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// FieldError is one problem with one key of a config file. Parse returns
// them joined with errors.Join, in file order.
type FieldError struct {
	// Path is the key path, e.g. "chat.candidates[1].url"; empty for the
	// document as a whole.
	Path string
	// Line is the 1-based line of the key in the file; 0 when the key is
	// absent (a missing or defaulted value).
	Line int
	// Reason says what is wrong, e.g. `"htp:/x" is not an absolute
	// http(s) URL`.
	Reason string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// FieldErrors returns the FieldErrors in err (as returned by Parse, Load or
// a Watcher), in order; nil when there are none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return out
}
