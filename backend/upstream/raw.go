package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
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
	keys := make([]string, 0, len(fields)+len(set))
	size := 64 // room for keys that need escaping
	for k, v := range fields {
		if _, over := set[k]; !over {
			keys = append(keys, k)
			size += len(k) + len(v) + 4
		}
	}
	vals := make(map[string][]byte, len(set))
	for k, v := range set {
		if v == nil {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
		vals[k] = b
		keys = append(keys, k)
		size += len(k) + len(b) + 4
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
		if b, ok := vals[k]; ok {
			out = append(out, b...)
		} else {
			out = append(out, fields[k]...)
		}
	}
	return append(out, '}'), nil
}

// appendKey appends k as a JSON string: as it is when it needs no
// escaping, else as encoding/json writes it.
func appendKey(dst []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(k)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"')
}
