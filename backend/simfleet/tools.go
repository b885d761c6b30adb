package simfleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tool is a function a chat request offers the model.
type tool struct {
	name       string
	parameters json.RawMessage // its JSON schema; may be empty
}

// toolCall is a call of a tool in an answer.
type toolCall struct {
	index     int    // among the calls of the answer
	id        string // "" for a server that sends none
	name      string
	arguments string // a JSON object
}

// outputFormat is a request for structured output.
type outputFormat struct {
	schema json.RawMessage // nil: any JSON object
}

// wireTool is a tool as both protocols send it: {"type":"function",
// "function":{"name","description","parameters"}}.
type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// tools turns wire tools into the tools of a request, skipping those that
// are not functions.
func tools(in []wireTool) []tool {
	var out []tool
	for _, t := range in {
		if t.Type != "" && t.Type != "function" {
			continue
		}
		out = append(out, tool{name: t.Function.Name, parameters: t.Function.Parameters})
	}
	return out
}

// callID makes a deterministic tool-call id: prefix, then n characters of
// alphabet drawn from a hash of the exchange and the call.
func callID(x *exchange, c toolCall, prefix, alphabet string, n int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", x.id, c.index, c.name))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[int(sum[i%len(sum)])%len(alphabet)]
	}
	return prefix + string(b)
}

// wholeCall is a call sent in one token, as Ollama sends it.
func wholeCall(c toolCall) []token {
	return []token{{text: c.arguments, call: &c, head: true}}
}

// fragmentedCall is a call streamed in pieces as vLLM and llama-server
// stream it: a head token with the id and name and no arguments, then the
// arguments in fragments.
func fragmentedCall(c toolCall) []token {
	toks := []token{{call: &c, head: true}}
	for _, f := range fragments(c.arguments, fragmentBytes) {
		toks = append(toks, token{text: f, call: &c})
	}
	return toks
}

// maxDepth bounds how deep instance follows nested schemas and $refs; a
// value deeper than that is null.
const maxDepth = 12

// instance returns a JSON value that satisfies schema, the same every
// time: the argument of a tool call, the answer of a request for
// structured output. It knows the keywords that tool and response schemas
// use: type (also a list), properties with required (only the required
// properties are given, or all of them when required is absent), items
// and prefixItems, enum, const, anyOf/oneOf/allOf (the first choice),
// $ref into $defs or definitions, minLength/maxLength, minimum/maximum
// (also exclusive), minItems/maxItems and the common string formats.
// Strings read "sample <name>", after the property they are for, with
// the server's name: "sample city (qwen3-8b)". A schema that says nothing
// ({} or none) gives an empty object.
func instance(schema json.RawMessage, server string) json.RawMessage {
	if len(bytes.TrimSpace(schema)) == 0 {
		return json.RawMessage("{}")
	}
	g := generator{root: schema, server: server}
	var b bytes.Buffer
	g.value(&b, schema, "value", 0, 0)
	return b.Bytes()
}

// generator writes instances of the schemas under root.
type generator struct {
	root   json.RawMessage
	server string
}

// node is the part of a JSON schema the generator reads.
type node struct {
	Type        json.RawMessage            `json:"type"`
	Properties  json.RawMessage            `json:"properties"`
	Required    []string                   `json:"required"`
	Items       json.RawMessage            `json:"items"`
	PrefixItems []json.RawMessage          `json:"prefixItems"`
	Enum        []json.RawMessage          `json:"enum"`
	Const       json.RawMessage            `json:"const"`
	AnyOf       []json.RawMessage          `json:"anyOf"`
	OneOf       []json.RawMessage          `json:"oneOf"`
	AllOf       []json.RawMessage          `json:"allOf"`
	Ref         string                     `json:"$ref"`
	Defs        map[string]json.RawMessage `json:"$defs"`
	Definitions map[string]json.RawMessage `json:"definitions"`
	Format      string                     `json:"format"`
	MinLength   *int                       `json:"minLength"`
	MaxLength   *int                       `json:"maxLength"`
	Minimum     *float64                   `json:"minimum"`
	Maximum     *float64                   `json:"maximum"`
	// exclusiveMinimum/Maximum: a number (draft 6 on) or a bool (draft 4).
	ExclusiveMinimum json.RawMessage `json:"exclusiveMinimum"`
	ExclusiveMaximum json.RawMessage `json:"exclusiveMaximum"`
	MinItems         *int            `json:"minItems"`
	MaxItems         *int            `json:"maxItems"`
}

// value writes an instance of schema for a value named name, the i-th
// item when it is one of an array's.
func (g generator) value(b *bytes.Buffer, schema json.RawMessage, name string, i, depth int) {
	var n node
	if depth > maxDepth || json.Unmarshal(schema, &n) != nil {
		b.WriteString("null")
		return
	}
	switch {
	case n.Ref != "":
		g.value(b, g.resolve(n.Ref), name, i, depth+1)
		return
	case len(n.Const) > 0:
		b.Write(compact(n.Const))
		return
	case len(n.Enum) > 0:
		b.Write(compact(n.Enum[0]))
		return
	}
	for _, choices := range [][]json.RawMessage{n.AnyOf, n.OneOf, n.AllOf} {
		if len(choices) > 0 {
			g.value(b, firstNotNull(choices), name, i, depth+1)
			return
		}
	}
	switch typeOf(n) {
	case "object":
		g.object(b, n, depth)
	case "array":
		g.array(b, n, name, depth)
	case "string":
		s, _ := json.Marshal(g.text(n, name, i))
		b.Write(s)
	case "integer":
		b.WriteString(strconv.FormatFloat(math.Round(sampleNumber(n, true)+float64(i)), 'f', -1, 64))
	case "number":
		b.WriteString(strconv.FormatFloat(sampleNumber(n, false)+float64(i), 'f', -1, 64))
	case "boolean":
		b.WriteString("true")
	case "null":
		b.WriteString("null")
	default: // any value: an object at the top, a string inside
		if depth == 0 {
			b.WriteString("{}")
			return
		}
		s, _ := json.Marshal(g.text(n, name, i))
		b.Write(s)
	}
}

// typeOf returns the type n describes: its type (the first that is not
// "null" of a list), else what its keywords imply.
func typeOf(n node) string {
	var one string
	var list []string
	switch {
	case json.Unmarshal(n.Type, &one) == nil && one != "":
		return one
	case json.Unmarshal(n.Type, &list) == nil && len(list) > 0:
		for _, t := range list {
			if t != "null" {
				return t
			}
		}
		return "null"
	case len(n.Properties) > 0:
		return "object"
	case len(n.Items) > 0 || len(n.PrefixItems) > 0:
		return "array"
	}
	return ""
}

// firstNotNull returns the first choice that is not {"type":"null"}.
func firstNotNull(choices []json.RawMessage) json.RawMessage {
	for _, c := range choices {
		var n node
		if json.Unmarshal(c, &n) == nil && typeOf(n) != "null" {
			return c
		}
	}
	return choices[0]
}

func (g generator) object(b *bytes.Buffer, n node, depth int) {
	names, props := orderedObject(n.Properties)
	required := make(map[string]bool, len(n.Required))
	for _, r := range n.Required {
		required[r] = true
	}
	b.WriteByte('{')
	first := true
	for _, name := range names {
		if n.Required != nil && !required[name] {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		key, _ := json.Marshal(name)
		b.Write(key)
		b.WriteByte(':')
		g.value(b, props[name], name, 0, depth+1)
	}
	b.WriteByte('}')
}

func (g generator) array(b *bytes.Buffer, n node, name string, depth int) {
	count := max(1, len(n.PrefixItems))
	if n.MinItems != nil {
		count = max(count, *n.MinItems)
	}
	if n.MaxItems != nil {
		count = min(count, *n.MaxItems)
	}
	b.WriteByte('[')
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		item := n.Items
		if i < len(n.PrefixItems) {
			item = n.PrefixItems[i]
		}
		if len(item) == 0 || string(item) == "true" {
			item = json.RawMessage("{}")
		}
		g.value(b, item, name, i, depth+1)
	}
	b.WriteByte(']')
}

// text is the string for a value named name: a sample that names the
// server, or what a format wants, cut or padded to the length the schema
// allows.
func (g generator) text(n node, name string, i int) string {
	s := fmt.Sprintf("sample %s (%s)", name, g.server)
	if i > 0 {
		s = fmt.Sprintf("sample %s %d (%s)", name, i+1, g.server)
	}
	switch n.Format {
	case "date-time":
		s = "2026-01-02T03:04:05Z"
	case "date":
		s = "2026-01-02"
	case "time":
		s = "03:04:05Z"
	case "email":
		s = "sample@example.invalid"
	case "uri", "url":
		s = "https://example.invalid/sample"
	case "uuid":
		s = "123e4567-e89b-42d3-a456-426614174000"
	case "ipv4":
		s = "192.0.2.1"
	case "ipv6":
		s = "2001:db8::1"
	case "hostname":
		s = "example.invalid"
	}
	if n.MaxLength != nil && utf8.RuneCountInString(s) > *n.MaxLength {
		s = string([]rune(s)[:max(0, *n.MaxLength)])
	}
	if n.MinLength != nil {
		if pad := *n.MinLength - utf8.RuneCountInString(s); pad > 0 {
			s += strings.Repeat("x", pad)
		}
	}
	return s
}

// sampleNumber returns 42 (4.2 for a non-integer), moved into the bounds
// of n.
func sampleNumber(n node, integer bool) float64 {
	v := 4.2
	step := 0.5
	if integer {
		v, step = 42, 1
	}
	lo, exLo := bound(n.Minimum, n.ExclusiveMinimum)
	hi, exHi := bound(n.Maximum, n.ExclusiveMaximum)
	if lo != nil && hi != nil && !integer {
		step = min(step, (*hi-*lo)/2)
	}
	if lo != nil && (v < *lo || exLo && v <= *lo) {
		v = *lo
		if exLo {
			v += step
		}
		if integer {
			v = math.Ceil(v)
		}
	}
	if hi != nil && (v > *hi || exHi && v >= *hi) {
		v = *hi
		if exHi {
			v -= step
		}
		if integer {
			v = math.Floor(v)
		}
	}
	return v
}

// bound reads a bound and whether it is exclusive, from an inclusive
// bound and an exclusive keyword that is a number (draft 6 on) or a bool
// (draft 4).
func bound(inclusive *float64, exclusive json.RawMessage) (*float64, bool) {
	var f float64
	if json.Unmarshal(exclusive, &f) == nil {
		return &f, true
	}
	var flag bool
	if json.Unmarshal(exclusive, &flag) == nil && flag && inclusive != nil {
		return inclusive, true
	}
	return inclusive, false
}

// resolve returns the schema a local $ref points at ("#", "#/$defs/X",
// "#/definitions/X"), or an empty object schema.
func (g generator) resolve(ref string) json.RawMessage {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return json.RawMessage("{}")
	}
	cur := g.root
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil || obj[part] == nil {
			return json.RawMessage("{}")
		}
		cur = obj[part]
	}
	return cur
}

// orderedObject returns the keys of a JSON object in their order, and its
// values.
func orderedObject(raw json.RawMessage) ([]string, map[string]json.RawMessage) {
	values := map[string]json.RawMessage{}
	if json.Unmarshal(raw, &values) != nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		key, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil, nil
		}
		keys = append(keys, key)
	}
	return keys, values
}

// compact returns raw without insignificant white space.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// hexID is a deterministic id of 32 hex digits for an exchange and a
// suffix, like vLLM's random_uuid().
func hexID(x *exchange, suffix string) string {
	sum := sha256.Sum256([]byte(x.id + "\x00" + suffix))
	return hex.EncodeToString(sum[:16])
}
