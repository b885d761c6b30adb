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
)

// Parse decodes and validates a config file. Keys the file omits take their
// defaults (see Default); an empty file is all defaults.
//
// A malformed YAML document is returned as the YAML parser reports it. Any
// other problem is a *FieldError naming its key path; all of them are
// returned at once, joined with errors.Join, so a user can
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

	cfg := Default()
	d := decoder{cfg: &cfg, lines: map[string]int{}, bad: map[string]bool{}, ids: map[string]string{}}
	if len(doc.Content) > 0 {
		d.mapping("", doc.Content[0], members(&d, configKeys, "", &cfg))
	}
	// The checks come after the walk: some relate a key to others (listen
	// to api_key, the first choices to the candidates' ids).
	checkKeys(&d, configKeys, "", &cfg)
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
	cfg   *Config // the config being decoded, for checks that relate keys
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

// member is one key of a mapping and what to do with its value.
type member struct {
	key    string
	decode func(path string, n *yaml.Node)
}

// mapping walks the mapping n at path, handing each key's value to its
// member. Unknown and repeated keys are errors; a null n is an empty mapping.
func (d *decoder) mapping(path string, n *yaml.Node, members []member) {
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
		f := indexOf(members, k.Value)
		if f < 0 {
			d.fail(p, "unknown key%s", suggest(k.Value, members))
			continue
		}
		members[f].decode(p, resolve(v))
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

// decoded reports whether decode took n without an error.
func (d *decoder) decoded(path string, n *yaml.Node, decode func(string, *yaml.Node)) bool {
	decode(path, n)
	return !d.bad[path]
}

// The scalar decoders below are the decode funcs of the kinds in
// table.go. They leave dst alone when the value is null (the key is present
// but empty), so the default stands, and when it is wrong, which they
// report.

func (d *decoder) str(p string, n *yaml.Node, dst *string) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(p, "must be a string, got %s", describe(n))
		return
	}
	*dst = n.Value
}

func (d *decoder) integer(p string, n *yaml.Node, dst *int) {
	// Only an !!int: yaml would truncate a float into an int.
	scalar(d, p, n, dst, "an integer", n.ShortTag() == "!!int")
}

func (d *decoder) float(p string, n *yaml.Node, dst *float64) {
	scalar(d, p, n, dst, "a number", n.ShortTag() != "!!str")
}

func (d *decoder) boolean(p string, n *yaml.Node, dst *bool) {
	scalar(d, p, n, dst, "true or false", true)
}

// scalar has yaml decode the scalar n at p into dst when tagOK (its tag is
// one a T may come from), and reports that the value must be want
// otherwise.
func scalar[T any](d *decoder, p string, n *yaml.Node, dst *T, want string, tagOK bool) {
	var v T
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode || !tagOK || n.Decode(&v) != nil {
		d.fail(p, "must be %s, got %s", want, describe(n))
		return
	}
	*dst = v
}

func (d *decoder) duration(p string, n *yaml.Node, dst *time.Duration) {
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

func (d *decoder) size(p string, n *yaml.Node, dst *uint64) {
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

// sizeUnits are the units a size may carry; bytes come last.
var sizeUnits = []struct {
	name  string
	bytes uint64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	{"B", 1},
}

// sizeUnit returns the bytes in one unit of a size, matched
// case-insensitively; "" is bytes.
func sizeUnit(unit string) (uint64, bool) {
	if unit == "" {
		return 1, true
	}
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			return u.bytes, true
		}
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

// checkOrigin returns why o is not a browser origin ("scheme://host[:port]"),
// or "" when it is one.
func checkOrigin(o string) string {
	if o == "*" {
		return "is not allowed: list each origin"
	}
	scheme, _, _ := strings.Cut(o, "://")
	if strings.Contains(scheme, "*") {
		return "is not allowed: name the scheme"
	}
	// A "*" stands for any text without a "/": check the origin it makes.
	u, err := url.Parse(strings.ReplaceAll(strings.ReplaceAll(o, ":*", ":1"), "*", "x"))
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

func indexOf(members []member, key string) int {
	for i, f := range members {
		if f.key == key {
			return i
		}
	}
	return -1
}

// suggest returns ` (did you mean "x"?)` for the known key closest to an
// unknown one, or "" when none is close.
func suggest(key string, members []member) string {
	best, bestDist := "", 3 // at most two edits away
	for _, f := range members {
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
