package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Parse decodes and validates a config file. Keys the file omits take their
// defaults (see Default); an empty file is all defaults.
//
// A malformed YAML document is returned as the YAML parser reports it. Any
// other problem is a *FieldError naming its key path; all of them are
// returned at once, joined with errors.Join (see FieldErrors), so a user can
// fix the whole file in one go. On error the Config is the zero value.
func Parse(data []byte) (Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Default(), nil // empty, or only comments
		}
		return Config{}, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return Config{}, err
	case len(extra.Content) > 0 && !isNull(extra.Content[0]):
		return Config{}, &FieldError{Line: extra.Line, Reason: "a second YAML document (after ---): a config file holds one"}
	}

	d := decoder{lines: map[string]int{}, bad: map[string]bool{}, ids: map[string]string{}}
	cfg := Default()
	if len(doc.Content) > 0 {
		d.root(doc.Content[0], &cfg)
	}
	d.validate(&cfg)
	if len(d.errs) > 0 {
		return Config{}, errors.Join(d.errs...)
	}
	return cfg, nil
}

// decoder walks a YAML node tree into a Config, collecting errors with key
// paths. It remembers the line of every key it saw, for errors found after
// the walk, and reports at most one error per key path, so a value that
// failed to decode does not also fail validation.
type decoder struct {
	errs  []error
	lines map[string]int    // key path → line
	bad   map[string]bool   // key paths with an error
	ids   map[string]string // candidate id → its path
}

// fail records a problem with the key at path, at the line of that key or,
// when the file lacks it, of the nearest enclosing key.
func (d *decoder) fail(path string, format string, args ...any) {
	line := 0
	for p := path; p != ""; p = parent(p) {
		if l, ok := d.lines[p]; ok {
			line = l
			break
		}
	}
	d.failAt(line, path, format, args...)
}

func (d *decoder) failAt(line int, path string, format string, args ...any) {
	if d.bad[path] {
		return
	}
	d.bad[path] = true
	d.errs = append(d.errs, &FieldError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)})
}

// parent returns the path of the key or list that holds path's key.
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

// field is one key of a mapping and what to do with its value.
type field struct {
	key    string
	decode func(path string, n *yaml.Node)
}

// mapping walks the mapping n at path, handing each key's value to its
// field. Unknown and repeated keys are errors; a null n is an empty mapping.
func (d *decoder) mapping(path string, n *yaml.Node, fields []field) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.failAt(n.Line, path, "the file must be a mapping of keys (listen, selection, chat, ...), got %s", describe(n))
		} else {
			d.fail(path, "must be a mapping, got %s", describe(n))
		}
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.failAt(k.Line, path, "keys must be plain names, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.failAt(k.Line, p, "repeated key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[p] = k.Line
		if k.ShortTag() == "!!merge" {
			d.fail(p, "merge keys are not supported")
			continue
		}
		f := indexOf(fields, k.Value)
		if f < 0 {
			d.fail(p, "unknown key%s", suggest(k.Value, fields))
			continue
		}
		fields[f].decode(p, resolve(v))
	}
}

// sequence walks the list n at path, handing each item to item; a null n is
// an empty list.
func (d *decoder) sequence(path string, n *yaml.Node, item func(path string, n *yaml.Node)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(path, "must be a list, got %s", describe(n))
		return
	}
	for i, v := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = v.Line
		if v = resolve(v); isNull(v) {
			d.fail(p, "empty list item")
			continue
		}
		item(p, v)
	}
}

func (d *decoder) root(n *yaml.Node, c *Config) {
	d.mapping("", n, []field{
		{"listen", d.str(&c.Listen)},
		{"api_key", d.str(&c.APIKey)},
		{"allowed_origins", func(p string, n *yaml.Node) {
			d.sequence(p, n, func(p string, n *yaml.Node) {
				var s string
				if d.decoded(p, n, d.str(&s)) {
					c.AllowedOrigins = append(c.AllowedOrigins, s)
				}
			})
		}},
		{"history", func(p string, n *yaml.Node) {
			d.mapping(p, n, []field{
				{"path", d.str(&c.History.Path)},
				{"retention", d.duration(&c.History.Retention)},
			})
		}},
		{"selection", func(p string, n *yaml.Node) {
			s := &c.Selection
			d.mapping(p, n, []field{
				{"failure_threshold", d.integer(&s.FailureThreshold)},
				{"open_duration", d.duration(&s.OpenDuration)},
				{"first_token_timeout", d.duration(&s.FirstTokenTimeout)},
				{"stall_timeout", d.duration(&s.StallTimeout)},
				{"hedge", d.boolean(&s.Hedge)},
				{"ttft_multiplier", d.float(&s.TTFTMultiplier)},
				{"deadline_floor", d.duration(&s.DeadlineFloor)},
				{"min_samples", d.integer(&s.MinSamples)},
				{"busy_backoff", d.duration(&s.BusyBackoff)},
			})
		}},
		{"gpu", func(p string, n *yaml.Node) {
			d.mapping(p, n, []field{
				{"demote_free_below", d.size(&c.GPU.DemoteFreeBelow)},
				{"demote_used_ratio", d.float(&c.GPU.DemoteUsedRatio)},
			})
		}},
		{"body_limit", func(p string, n *yaml.Node) {
			size := uint64(c.BodyLimit)
			d.size(&size)(p, n)
			if size > math.MaxInt64 {
				d.fail(p, "%s is too large", n.Value)
				return
			}
			c.BodyLimit = int64(size)
		}},
		{"chat", func(p string, n *yaml.Node) {
			d.mapping(p, n, []field{
				{"default_model", d.str(&c.Chat.DefaultModel)},
				{"deep_thinking_model", d.str(&c.Chat.DeepThinkingModel)},
				{"candidates", func(p string, n *yaml.Node) {
					d.sequence(p, n, func(p string, n *yaml.Node) {
						c.Chat.Candidates = append(c.Chat.Candidates, d.candidate(p, n))
					})
				}},
			})
		}},
	})
}

func (d *decoder) candidate(path string, n *yaml.Node) Candidate {
	c := Candidate{Enabled: true}
	var provider string
	d.mapping(path, n, []field{
		{"id", d.str(&c.ID)},
		{"provider", d.str(&provider)},
		{"url", d.str(&c.URL)},
		{"model", d.str(&c.Model)},
		{"priority", d.integer(&c.Priority)},
		{"enabled", d.boolean(&c.Enabled)},
		{"supports_thinking", d.boolean(&c.SupportsThinking)},
		{"gpus", func(p string, n *yaml.Node) {
			c.GPUs = []int{}
			d.sequence(p, n, func(p string, n *yaml.Node) {
				var gpu int
				if d.decoded(p, n, d.integer(&gpu)) {
					c.GPUs = append(c.GPUs, gpu)
				}
			})
		}},
		{"api_key_env", d.str(&c.APIKeyEnv)},
		{"load_time", d.duration(&c.LoadTime)},
		{"size", d.size(&c.Size)},
		{"parallel", d.integer(&c.Parallel)},
	})
	c.Provider = fleet.Provider(provider)
	d.validateCandidate(path, c)
	return c
}

// decoded reports whether decode took n without an error.
func (d *decoder) decoded(path string, n *yaml.Node, decode func(string, *yaml.Node)) bool {
	decode(path, n)
	return !d.bad[path]
}

// The scalar decoders below leave dst alone when the value is null (the key
// is present but empty), so the default stands.

func (d *decoder) str(dst *string) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.fail(p, "must be a string, got %s", describe(n))
			return
		}
		*dst = n.Value
	}
}

func (d *decoder) integer(dst *int) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		var v int
		if isNull(n) {
			return
		}
		// Only an !!int: yaml would truncate a float into an int.
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			d.fail(p, "must be an integer, got %s", describe(n))
			return
		}
		*dst = v
	}
}

func (d *decoder) float(dst *float64) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		var v float64
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!str" || n.Decode(&v) != nil {
			d.fail(p, "must be a number, got %s", describe(n))
			return
		}
		*dst = v
	}
}

func (d *decoder) boolean(dst *bool) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		var v bool
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.fail(p, "must be true or false, got %s", describe(n))
			return
		}
		*dst = v
	}
}

func (d *decoder) duration(dst *time.Duration) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.fail(p, "must be a duration, got %s", describe(n))
			return
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			if _, numErr := strconv.ParseFloat(n.Value, 64); numErr == nil {
				d.fail(p, "%q has no unit (write e.g. \"%ss\")", n.Value, n.Value)
			} else {
				d.fail(p, "%q is not a duration (write e.g. \"30s\", \"5m\", \"720h\")", n.Value)
			}
			return
		}
		*dst = v
	}
}

func (d *decoder) size(dst *uint64) func(string, *yaml.Node) {
	return func(p string, n *yaml.Node) {
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.fail(p, "must be a size, got %s", describe(n))
			return
		}
		if n.ShortTag() == "!!int" {
			// Plain integers are bytes, in any notation YAML allows.
			var v uint64
			if err := n.Decode(&v); err != nil {
				d.fail(p, "%s is not a size in bytes (must not be negative)", n.Value)
				return
			}
			*dst = v
			return
		}
		v, err := parseSize(n.Value)
		if err != nil {
			d.fail(p, "%v", err)
			return
		}
		*dst = v
	}
}

// sizeUnit returns the bytes in one unit of a size, matched
// case-insensitively; "" is bytes.
func sizeUnit(unit string) (uint64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	case "tib":
		return 1 << 40, true
	}
	return 0, false
}

// parseSize parses a byte size: a decimal number ("512", "1.5") with an
// optional unit ("GiB", "MB"), optionally separated by a space.
func parseSize(s string) (uint64, error) {
	num := strings.TrimSpace(s)
	end := strings.IndexFunc(num, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	unit := ""
	if end >= 0 {
		num, unit = num[:end], strings.TrimSpace(num[end:])
	}
	mult, ok := sizeUnit(unit)
	if num == "" || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' || !ok {
		return 0, fmt.Errorf("%q is not a size (write e.g. \"512MiB\", \"1GiB\", \"4MB\" or a number of bytes)", s)
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil || v > math.MaxUint64/mult {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return v * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	v := f * float64(mult)
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return uint64(v), nil
}

// validate checks the values outside chat.candidates (which candidate
// checks as it decodes them) against their ranges and each other. A value
// that failed to decode has an error already, which fail does not repeat.
func (d *decoder) validate(c *Config) {
	if err := CheckAddr(c.Listen); err != nil {
		d.fail("listen", "%v", err)
	} else if err := CheckExposure(c.Listen, c.APIKey); err != nil {
		d.fail("listen", "%v", err)
	}
	if c.APIKey != strings.TrimSpace(c.APIKey) {
		d.fail("api_key", "has leading or trailing spaces")
	}
	for i, o := range c.AllowedOrigins {
		if reason := checkOrigin(o); reason != "" {
			d.fail(fmt.Sprintf("allowed_origins[%d]", i), "%q %s", o, reason)
		}
	}

	positive := func(path string, v time.Duration) {
		if v <= 0 {
			d.fail(path, "must be positive, got %s", v)
		}
	}
	positive("history.retention", c.History.Retention)

	s := c.Selection
	if s.FailureThreshold < 1 {
		d.fail("selection.failure_threshold", "must be at least 1, got %d", s.FailureThreshold)
	}
	positive("selection.open_duration", s.OpenDuration)
	positive("selection.first_token_timeout", s.FirstTokenTimeout)
	positive("selection.stall_timeout", s.StallTimeout)
	if !(s.TTFTMultiplier >= 1) || math.IsInf(s.TTFTMultiplier, 0) {
		d.fail("selection.ttft_multiplier", "must be a finite number of at least 1, got %v", s.TTFTMultiplier)
	}
	positive("selection.deadline_floor", s.DeadlineFloor)
	if s.DeadlineFloor > s.FirstTokenTimeout && s.FirstTokenTimeout > 0 {
		if _, set := d.lines["selection.deadline_floor"]; set {
			d.fail("selection.deadline_floor", "%s is above selection.first_token_timeout (%s)", s.DeadlineFloor, s.FirstTokenTimeout)
		} else {
			d.fail("selection.first_token_timeout", "%s is below selection.deadline_floor (%s)", s.FirstTokenTimeout, s.DeadlineFloor)
		}
	}
	if s.MinSamples < 1 {
		d.fail("selection.min_samples", "must be at least 1, got %d", s.MinSamples)
	}
	positive("selection.busy_backoff", s.BusyBackoff)

	if c.GPU.DemoteFreeBelow == 0 {
		d.fail("gpu.demote_free_below", "must be positive")
	}
	if r := c.GPU.DemoteUsedRatio; !(r > 0 && r <= 1) {
		d.fail("gpu.demote_used_ratio", "must be in (0, 1], got %v", r)
	}
	if c.BodyLimit <= 0 {
		d.fail("body_limit", "must be positive")
	}

	for _, f := range []struct{ path, id string }{
		{"chat.default_model", c.Chat.DefaultModel},
		{"chat.deep_thinking_model", c.Chat.DeepThinkingModel},
	} {
		if _, ok := d.ids[f.id]; f.id != "" && !ok {
			d.fail(f.path, "%q is not the id of a candidate", f.id)
		}
	}
}

// validateCandidate checks the candidate at path, and adds its id to d.ids.
func (d *decoder) validateCandidate(path string, c Candidate) {
	if d.bad[path] {
		return // not a mapping, already reported
	}
	at := func(key string) string { return path + "." + key }
	missing := func(key, hint string) { d.fail(at(key), "missing%s", hint) }

	switch {
	case c.ID == "":
		missing("id", "")
	case strings.ContainsFunc(c.ID, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		d.fail(at("id"), "%q contains spaces or control characters", c.ID)
	case c.ID == "auto":
		d.fail(at("id"), `"auto" is reserved for the default chain`)
	default:
		if first, dup := d.ids[c.ID]; dup {
			d.fail(at("id"), "%q is already the id of %s", c.ID, first)
		} else {
			d.ids[c.ID] = path
		}
	}

	switch c.Provider {
	case fleet.ProviderOllama, fleet.ProviderOpenAI:
	case "":
		missing("provider", " (ollama or openai)")
	default:
		d.fail(at("provider"), "%q is not a provider (ollama or openai)", c.Provider)
	}

	if c.URL == "" {
		missing("url", "")
	} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		d.fail(at("url"), "%q is not an absolute http(s) URL", c.URL)
	}
	if c.Model == "" {
		missing("model", "")
	}

	seen := map[int]bool{}
	for i, gpu := range c.GPUs {
		p := fmt.Sprintf("%s[%d]", at("gpus"), i)
		switch {
		case gpu < 0:
			d.fail(p, "must not be negative, got %d", gpu)
		case seen[gpu]:
			d.fail(p, "GPU %d is listed twice", gpu)
		}
		seen[gpu] = true
	}
	if c.APIKeyEnv != "" && !isEnvName(c.APIKeyEnv) {
		d.fail(at("api_key_env"), "%q is not an environment variable name (name the variable that holds the key, not the key)", c.APIKeyEnv)
	}
	if c.LoadTime < 0 {
		d.fail(at("load_time"), "must not be negative, got %s", c.LoadTime)
	}
	if c.Parallel < 0 {
		d.fail(at("parallel"), "must not be negative, got %d", c.Parallel)
	}
}

// checkOrigin returns why o is not a browser origin ("scheme://host[:port]"),
// or "" when it is one.
func checkOrigin(o string) string {
	if o == "*" {
		return "is not allowed: list each origin"
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return `is not an origin (write e.g. "https://app.example:3000")`
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "is not an origin: it has more than scheme://host[:port]"
	}
	return ""
}

func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	for i, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what n is, for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if v := []rune(n.Value); len(v) > 40 {
			return strconv.Quote(string(v[:40])) + "..."
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexOf(fields []field, key string) int {
	for i, f := range fields {
		if f.key == key {
			return i
		}
	}
	return -1
}

// suggest returns ` (did you mean "x"?)` for the known key closest to an
// unknown one, or "" when none is close.
func suggest(key string, fields []field) string {
	best, bestDist := "", 3 // at most two edits away
	for _, f := range fields {
		if dist := editDistance(key, f.key); dist < bestDist {
			best, bestDist = f.key, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt // not a typo of a key
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
