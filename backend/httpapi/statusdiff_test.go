package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/switchyard/switchyard/backend/schema"
)

// Each second an events subscriber is sent what changed in the status,
// not the whole of it: with 200 candidates and one that changed, a small
// fraction of the bytes.
func TestStatusDiff(t *testing.T) {
	status := func(n int) schema.Status {
		st := schema.Status{Version: "v", DefaultModel: "c0"}
		for i := range n {
			st.Candidates = append(st.Candidates, schema.Candidate{ID: fmt.Sprintf("c%d", i), URL: "http://127.0.0.1:11434", Model: "qwen3:8b", DeadlineMS: 60000})
		}
		return st
	}
	var d statusDiff
	st := status(200)
	if _, _, first := d.next(st); !first {
		t.Fatal("the first status is not sent whole")
	}
	if delta, changed, _ := d.next(status(200)); changed {
		t.Errorf("an unchanged status sent %+v", delta)
	}
	st = status(200)
	st.Candidates[7].InFlight = 1
	delta, changed, _ := d.next(st)
	if !changed || len(delta.Candidates) != 1 || delta.Candidates[0].ID != "c7" || delta.Rest != nil || len(delta.Order) != 0 || len(delta.Removed) != 0 {
		t.Errorf("one candidate changed: delta %+v", delta)
	}
	whole, _ := json.Marshal(st)
	part, _ := json.Marshal(delta)
	if len(part)*50 > len(whole) {
		t.Errorf("the delta is %d bytes of a %d-byte status; want under 2%%", len(part), len(whole))
	}
	t.Logf("whole status %d bytes, delta %d bytes", len(whole), len(part))

	st = status(199)
	st.DefaultModel = "c1"
	slices.Reverse(st.Candidates)
	delta, changed, _ = d.next(st)
	if !changed || delta.Rest == nil || delta.Rest.DefaultModel != "c1" || delta.Rest.Candidates != nil {
		t.Errorf("the rest changed: delta.Rest %+v", delta.Rest)
	}
	if !slices.Equal(delta.Removed, []string{"c199"}) || len(delta.Order) != 199 || delta.Order[0] != "c198" {
		t.Errorf("removed %v, order %d long starting %v; want c199 gone and the new order", delta.Removed, len(delta.Order), delta.Order[:1])
	}
	if len(delta.Candidates) != 1 {
		t.Errorf("%d candidates resent; want only c7, which changed back", len(delta.Candidates))
	}
}
