package history

import (
	"context"
	"database/sql"
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

// ShipFrom: a new file ships from its beginning whatever the team's
// cursor says (it counts in another file); a file that shipped before
// starts at the lower of its own and the team's; a sweep that empties a
// table starts its shipping over; a file shipped from before 0006
// trusts the team's cursor.
func TestShipFromCountsInThisFile(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0}
	s, path := openTemp(t, Options{Now: c.Now, Retention: 24 * time.Hour, PruneEvery: -1})
	team := Cursor{Request: 3, Breaker: 2}
	if got, err := s.ShipFrom(ctx, "a", team); err != nil || got != (Cursor{}) {
		t.Errorf("ShipFrom() of a new file = %+v, %v; want its beginning", got, err)
	}
	if err := s.Shipped(ctx, "a", Cursor{Request: 5, Breaker: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ShipFrom(ctx, "a", team); got != (Cursor{Request: 3, Breaker: 1}) {
		t.Errorf("ShipFrom() after Shipped = %+v; want the lower of each, {3 1}", got)
	}
	if got, _ := s.ShipFrom(ctx, "b", team); got != (Cursor{}) {
		t.Errorf("ShipFrom() under another name = %+v; want the beginning", got)
	}

	mustRecord(t, s, rec("old", t0.Add(-2*time.Hour)))
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0.Add(23 * time.Hour)})
	s.settle(ctx)
	c.Set(t0.Add(24 * time.Hour))
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ShipFrom(ctx, "a", team); got != (Cursor{Breaker: 1}) {
		t.Errorf("ShipFrom() once a sweep emptied requests = %+v; want requests from the beginning, {0 1}", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A file that held records when 0006 came trusts the team's cursor.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP TABLE team_shipped", "ALTER TABLE attempts DROP COLUMN warm", "PRAGMA user_version = 5", "DELETE FROM requests", "DELETE FROM breaker_events"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s = openAt(t, path, Options{})
	if got, _ := s.ShipFrom(ctx, "a", team); got != (Cursor{}) {
		t.Errorf("ShipFrom() of an empty file made before 0006 = %+v; want the beginning", got)
	}
	mustRecord(t, s, rec("kept", t0))
	s.Close()
	db, _ = sql.Open("sqlite", "file:"+path)
	for _, q := range []string{"DROP TABLE team_shipped", "ALTER TABLE attempts DROP COLUMN warm", "PRAGMA user_version = 5"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s = openAt(t, path, Options{})
	if got, _ := s.ShipFrom(ctx, "a", team); got != team {
		t.Errorf("ShipFrom() of a file with records made before 0006 = %+v; want the team's %+v", got, team)
	}
}
