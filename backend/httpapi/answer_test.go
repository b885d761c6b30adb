package httpapi

import (
	"testing"

	"github.com/switchyard/switchyard/backend/router"
)

// The upstream's JSON is put together at the edge: the fields of the
// events that carry them, later ones winning, and the chunks' log
// probabilities as one array.
func TestAssemble(t *testing.T) {
	ans := assemble(&router.Answer{
		Events: [][]byte{
			[]byte(`{"fingerprint":"fp_1","role":"assistant"}`),
			[]byte(`not an object`),
			[]byte(`{"finish":"stop","timings":{"predicted_ms":12},"fingerprint":"fp_2"}`),
		},
		Logprobs: [][]byte{[]byte(`[{"token":"Hi"}]`), []byte(` [] `), []byte(`[{"token":" there"}]`)},
	})
	if string(ans.Fields["fingerprint"]) != `"fp_2"` || string(ans.Fields["timings"]) != `{"predicted_ms":12}` || string(ans.Fields["role"]) != `"assistant"` {
		t.Errorf("Fields = %v", ans.Fields)
	}
	if got := string(ans.Logprobs); got != `[{"token":"Hi"},{"token":" there"}]` {
		t.Errorf("Logprobs = %s", got)
	}
	if none := assemble(&router.Answer{}); none.Fields != nil || none.Logprobs != nil {
		t.Errorf("assemble of nothing = %v, %s; want nil, nil", none.Fields, none.Logprobs)
	}
	if empty := assemble(&router.Answer{Logprobs: [][]byte{[]byte(`[]`)}}); string(empty.Logprobs) != `[]` {
		t.Errorf("empty logprobs = %s; want []", empty.Logprobs)
	}
}
