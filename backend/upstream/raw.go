package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// MergeRaw is the body sent to an upstream that speaks the caller's
// dialect: every field the caller sent, also those Switchyard does not
// know, with the fields in set put over them (the model the candidate
// serves, stream: true, ...). A nil value in set removes the field. The
// caller's map is not changed.
//
// The caller's values are written as they came, not re-encoded: they are
// JSON already (the API edge decoded them into fields), and re-encoding a
// conversation of kilobytes validated and compacted every byte of it
// again (BenchmarkMergeRaw). The keys are sorted, as encoding/json sorts a
// map's.
func MergeRaw(fields map[string]json.RawMessage, set map[string]any) ([]byte, error) {
	// The names of a usual body fit an array on the stack.
	var names [24]string
	keys := names[:0]
	size := 64 // room for keys that need escaping, and for the values set
	for k, v := range fields {
		if _, over := set[k]; !over {
			keys = append(keys, k)
			size += len(k) + len(v) + 4
		}
	}
	for k, v := range set {
		if v != nil {
			keys = append(keys, k)
			size += len(k) + 32
		}
	}
	slices.Sort(keys)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendKey(out, k)
		out = append(out, ':')
		v, over := set[k]
		if !over {
			out = append(out, fields[k]...)
			continue
		}
		var err error
		if out, err = appendValue(out, v); err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
	}
	return append(out, '}'), nil
}

// appendValue appends v as json.Marshal encodes it. The values MergeRaw is
// usually given (the model's name, stream: true, a field as JSON already)
// are written without reflection.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		if plainKey(v) {
			return strconv.AppendQuote(dst, v), nil // nothing in it to escape
		}
	case json.RawMessage:
		if plainJSON(v) && Valid(v) {
			return append(dst, v...), nil // already as json.Marshal would compact and escape it
		}
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// appendKey appends k as a JSON string: as it is when it needs no
// escaping, else as encoding/json writes it.
func appendKey(dst []byte, k string) []byte {
	if !plainKey(k) {
		b, _ := json.Marshal(k)
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"')
}

// plainJSON reports whether b holds nothing json.Marshal would compact
// or escape in a json.RawMessage: printable ASCII without space or <>&.
func plainJSON(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainKey reports whether s is printable ASCII that encoding/json writes
// as it is, quotes around it.
func plainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
