package history

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestAfterPagesInWriteOrder(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0, Cause: "2 failures"})
	mustRecord(t, s, rec("a", t0.Add(time.Second)), rec("b", t0.Add(2*time.Second)))
	s.settle(ctx)
	// c is written after a and b though it started before them (a long
	// stream): the write order, not the start time, is what a shipper
	// follows, so it is not passed over.
	mustRecord(t, s, rec("c", t0))
	s.settle(ctx)

	b, err := s.After(ctx, Cursor{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(b.Requests); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("After(zero, 2) requests = %v; want [a b]", got)
	}
	if len(b.Requests[0].Attempts) != 1 || b.Requests[0].Attempts[0].Candidate != "a" {
		t.Errorf("After() attempts of a = %+v; want its one attempt", b.Requests[0].Attempts)
	}
	if len(b.Breakers) != 1 || b.Breakers[0].To != fleet.BreakerOpen || !b.Breakers[0].At.Equal(t0) {
		t.Errorf("After() breakers = %+v; want the one opening", b.Breakers)
	}
	b, err = s.After(ctx, b.Next, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(b.Requests); !slices.Equal(got, []string{"c"}) || len(b.Breakers) != 0 {
		t.Errorf("After(next) = %v, %d breakers; want [c], 0", got, len(b.Breakers))
	}
	end := b.Next
	b, err = s.After(ctx, end, 2)
	if err != nil || len(b.Requests) != 0 || b.Next != end {
		t.Errorf("After(end) = %d requests, next %+v, %v; want none, %+v", len(b.Requests), b.Next, err, end)
	}
	// A cursor past the end (the numbering started over) starts again.
	b, err = s.After(ctx, Cursor{Request: end.Request + 10, Breaker: end.Breaker + 10}, 10)
	if err != nil || len(b.Requests) != 3 || len(b.Breakers) != 1 {
		t.Errorf("After(past the end) = %d requests, %d breakers, %v; want 3, 1 from the start", len(b.Requests), len(b.Breakers), err)
	}
}
