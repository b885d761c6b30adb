package upstream

import (
	"encoding/json"
	"fmt"
	"maps"
)

// MergeRaw is the body sent to an upstream that speaks the caller's
// dialect: every field the caller sent, also those Switchyard does not
// know, with the fields in set put over them (the model the candidate
// serves, stream: true, ...). A nil value in set removes the field. The
// caller's map is not changed.
func MergeRaw(fields map[string]json.RawMessage, set map[string]any) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(fields)+len(set))
	maps.Copy(out, fields)
	for k, v := range set {
		if v == nil {
			delete(out, k)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
		out[k] = b
	}
	return json.Marshal(out)
}
