package config

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// This file holds the machinery of the key tables in keys.go: a key, the
// kinds of value a key can hold, and the walks over a table that Default,
// Parse and Render are made of.

// key is one row of a key table: one YAML key of S (Config, or Candidate
// for the keys of each chat.candidates item) with everything this package
// knows about it. Build it with field, need or section; the funcs close over
// the key's typed value in S.
type key[S any] struct {
	path     string // dotted, below S: "selection.min_samples"
	doc      string // one line: Render's comment, the text in docs/CONFIG.md
	kind     string // what the value is, for the docs: "duration"; "" for a section
	def      string // the default as YAML, for the docs; "" when it is written by leaving the key out
	required bool   // a file must set it; it has no default

	reset  func(s *S)                                        // sets the default
	decode func(d *decoder, path string, n *yaml.Node, s *S) // nil for a section
	check  func(r report, s *S)                              // after the walk; nil: nothing to check
	write  func(p *page, indent string, s *S, doc string)    // the key's line(s), at indent
}

// field is the key at path that holds the T that at points to in S, with
// default def, decoded and written as k and checked by checks, in order.
func field[S, T any](path string, at func(*S) *T, k kind[T], def T, doc string, checks ...check[T]) key[S] {
	name := path[strings.LastIndexByte(path, '.')+1:]
	return key[S]{
		path: path, doc: doc, kind: k.name, def: inline(k.node(def)),
		reset:  func(s *S) { *at(s) = def },
		decode: func(d *decoder, p string, n *yaml.Node, s *S) { k.decode(d, p, n, at(s)) },
		check: func(r report, s *S) {
			for _, c := range checks {
				c(r, *at(s))
			}
		},
		write: func(p *page, indent string, s *S, doc string) {
			v := *at(s)
			switch n := k.node(v); {
			case n != nil:
				p.add(indent+name+": "+inline(n), doc)
			case k.block != nil:
				p.add(indent+name+":", doc)
				k.block(p, indent+"  ", v)
			default: // v is said by leaving the key out: show it commented out
				p.add(indent+"# "+name+":", doc)
			}
		},
	}
}

// need is a string field a file must set: an empty value is "missing",
// followed by hint, and is not checked further.
func need[S any](path string, at func(*S) *string, hint, doc string, checks ...check[string]) key[S] {
	k := field(path, at, text, "", doc, func(r report, v string) {
		if v == "" {
			r.fail("missing%s", hint)
			return
		}
		for _, c := range checks {
			c(r, v)
		}
	})
	k.required, k.def = true, ""
	return k
}

// section is the mapping at path that holds the keys its path prefixes.
func section[S any](path, doc string) key[S] {
	name := path[strings.LastIndexByte(path, '.')+1:]
	return key[S]{
		path: path, doc: doc,
		write: func(p *page, indent string, _ *S, doc string) { p.add(indent+name+":", doc) },
	}
}

func (k key[S]) isSection() bool { return k.decode == nil }

// check is one rule a key's value must follow; it reports what is wrong to
// r.
type check[T any] func(r report, v T)

// report is where a check reports: the decoder and the path of the key it
// checks. The decoder reports one problem per path, so a value that failed
// to decode, or failed an earlier check, is not reported again.
type report struct {
	d    *decoder
	path string
}

func (r report) fail(format string, args ...any) { r.d.fail(r.path, format, args...) }

// item is the report of the i-th item of the list r checks.
func (r report) item(i int) report { return report{r.d, r.path + "[" + strconv.Itoa(i) + "]"} }

// set reports whether the file states the key (as opposed to its default
// standing).
func (r report) set() bool {
	_, ok := r.d.lines[r.path]
	return ok
}

// kind is how values of the Go type T are written in a config file.
type kind[T any] struct {
	name string // for the docs: "duration"
	// decode sets *dst from n, the value at path. It leaves *dst alone
	// when n is null, and when n is wrong, which it reports.
	decode func(d *decoder, path string, n *yaml.Node, dst *T)
	// node returns v as a YAML value that decodes back to v, or nil when
	// v has no inline form.
	node func(v T) *yaml.Node
	// block writes a v that has no inline form under its key. Nil: such a
	// v is written by leaving the key out.
	block func(p *page, indent string, v T)
}

// The kinds of the keys in keys.go.
var (
	text     = kind[string]{name: "string", decode: (*decoder).str, node: textNode}
	integer  = kind[int]{name: "integer", decode: (*decoder).integer, node: plain(strconv.Itoa)}
	number   = kind[float64]{name: "number", decode: (*decoder).float, node: plain(formatFloat)}
	boolean  = kind[bool]{name: "true or false", decode: (*decoder).boolean, node: plain(strconv.FormatBool)}
	duration = kind[time.Duration]{name: "duration", decode: (*decoder).duration, node: plain(formatDuration)}
	size     = sizeOf[uint64]()
)

// sizeOf is the kind of a size in bytes held in a T: an integer (bytes) or
// a number with a unit (see parseSize).
func sizeOf[T uint64 | int64]() kind[T] {
	return kind[T]{
		name: "size",
		decode: func(d *decoder, p string, n *yaml.Node, dst *T) {
			v := uint64(*dst)
			d.size(p, n, &v)
			if T(v) < 0 {
				d.fail(p, "%s is too large", n.Value)
				return
			}
			*dst = T(v)
		},
		node: plain(func(v T) string {
			if v < 0 {
				return strconv.FormatInt(int64(v), 10)
			}
			return formatSize(uint64(v))
		}),
	}
}

// list is the kind of a YAML list of items. An empty list is nil, as is
// the default of every list key but gpus (see listOrNone).
func list[T any](item kind[T]) kind[[]T] {
	return kind[[]T]{
		name:   "list of " + item.name + "s",
		decode: func(d *decoder, p string, n *yaml.Node, dst *[]T) { *dst = decodeList(d, p, n, item, nil) },
		node:   func(v []T) *yaml.Node { return listNode(item, v) },
	}
}

// listOrNone is list for a key whose empty list says something its absence
// does not (gpus: [] is no GPU, no gpus key every local one): the key
// present, the list is not nil; the list nil, the key is left out.
func listOrNone[T any](item kind[T]) kind[[]T] {
	k := list(item)
	k.decode = func(d *decoder, p string, n *yaml.Node, dst *[]T) { *dst = decodeList(d, p, n, item, []T{}) }
	k.node = func(v []T) *yaml.Node {
		if v == nil {
			return nil
		}
		return listNode(item, v)
	}
	return k
}

// decodeList appends the items of the list n at path to empty.
func decodeList[T any](d *decoder, path string, n *yaml.Node, item kind[T], empty []T) []T {
	out := empty
	d.sequence(path, n, func(p string, n *yaml.Node) {
		var v T
		if d.decoded(p, n, func(p string, n *yaml.Node) { item.decode(d, p, n, &v) }) {
			out = append(out, v)
		}
	})
	return out
}

func listNode[T any](item kind[T], v []T) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, it := range v {
		n.Content = append(n.Content, item.node(it))
	}
	return n
}

// members returns how to decode the keys of table directly under the
// section prefix ("" for the top) into s, in table order.
func members[S any](d *decoder, table []key[S], prefix string, s *S) []member {
	var out []member
	for _, k := range table {
		name, ok := strings.CutPrefix(k.path, prefix)
		if !ok || name == "" || strings.Contains(name, ".") {
			continue
		}
		if k.isSection() {
			inner := members(d, table, k.path+".", s)
			out = append(out, member{name, func(p string, n *yaml.Node) { d.mapping(p, n, inner) }})
			continue
		}
		out = append(out, member{name, func(p string, n *yaml.Node) { k.decode(d, p, n, s) }})
	}
	return out
}

// checkKeys runs the checks of every key of table in s, whose path is at.
func checkKeys[S any](d *decoder, table []key[S], at string, s *S) {
	for _, k := range table {
		if k.check != nil {
			k.check(report{d, join(at, k.path)}, s)
		}
	}
}

// defaults returns the S in which every key of table has its default.
func defaults[S any](table []key[S]) S {
	var s S
	for _, k := range table {
		if k.reset != nil {
			k.reset(&s)
		}
	}
	return s
}

// writeKeys writes every key of table in s at indent, with its doc as a
// comment when docs is set.
func writeKeys[S any](p *page, table []key[S], s *S, indent string, docs bool) {
	for _, k := range table {
		doc := ""
		if docs {
			doc = k.doc
		}
		depth := strings.Count(k.path, ".")
		if k.isSection() && depth == 0 {
			p.add("", "")
		}
		k.write(p, indent+strings.Repeat("  ", depth), s, doc)
	}
}

// Default returns the configuration in force when a file sets nothing: the
// defaults of every key in keys.go, and no candidates.
func Default() Config { return defaults(configKeys) }

// candidate decodes the item of chat.candidates n at path, and checks it
// (so that its problems come in file order, and a later candidate cannot
// take its id).
func (d *decoder) candidate(path string, n *yaml.Node) Candidate {
	c := defaults(candidateKeys)
	d.mapping(path, n, members(d, candidateKeys, "", &c))
	if !d.bad[path] { // not a mapping, already reported
		checkKeys(d, candidateKeys, path, &c)
	}
	return c
}

// plain makes a YAML node of the text format gives, written as it is.
func plain[T any](format func(T) string) func(T) *yaml.Node {
	return func(v T) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: format(v)} }
}

// textNode is s as a YAML string: plain where YAML reads it back as this
// string, quoted where it would read as something else ("true", "8", "")
// or has characters a plain scalar cannot hold; double-quoted, on one line,
// when it has control characters (a line break).
func textNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.ContainsFunc(s, unicode.IsControl) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// inline is n as YAML on one line; "" for nil.
func inline(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		// The kinds above make only scalars and flow lists of them.
		panic("config: cannot write a value: " + err.Error())
	}
	return strings.TrimSuffix(string(b), "\n")
}

// formatDuration is d as Go writes it, without trailing zero units:
// "720h", "1h30m", "1m", "500ms".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatSize is v in the largest unit of sizeUnits that divides it, or
// in bytes: "4MiB", "5200MB", "1023".
func formatSize(v uint64) string {
	unit := sizeUnits[len(sizeUnits)-1]
	for _, u := range sizeUnits {
		if v != 0 && v%u.bytes == 0 && u.bytes > unit.bytes {
			unit = u
		}
	}
	if unit.bytes == 1 {
		return strconv.FormatUint(v, 10)
	}
	return strconv.FormatUint(v/unit.bytes, 10) + unit.name
}

// formatFloat is v as YAML reads it back: "0.95", "4", ".inf".
func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return ".nan"
	case math.IsInf(v, 1):
		return ".inf"
	case math.IsInf(v, -1):
		return "-.inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
