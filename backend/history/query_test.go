package history

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func ids(recs []fleet.RequestRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func TestRequestsFilters(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	mk := func(id string, m int, served string, fallback bool, st fleet.Status) fleet.RequestRecord {
		r := rec(id, min(m))
		r.ServedCandidate, r.IsFallback, r.Status = served, fallback, st
		r.Attempts[0].Candidate = served
		return r
	}
	// Recorded out of order: listing order must come from started_at.
	mustRecord(t, s,
		mk("c", -3, "a", false, fleet.StatusOK),
		mk("a", -5, "a", false, fleet.StatusOK),
		mk("e", -1, "b", true, fleet.StatusFailed),
		mk("b", -4, "b", true, fleet.StatusOK),
		mk("d", -2, "a", false, fleet.StatusClientAbort),
	)
	yes, no := true, false
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all, newest first", Filter{}, []string{"e", "d", "c", "b", "a"}},
		{"limit", Filter{Limit: 2}, []string{"e", "d"}},
		{"served candidate", Filter{ServedCandidate: "b"}, []string{"e", "b"}},
		{"fallbacks", Filter{Fallback: &yes}, []string{"e", "b"}},
		{"not fallbacks", Filter{Fallback: &no}, []string{"d", "c", "a"}},
		{"status", Filter{Status: fleet.StatusOK}, []string{"c", "b", "a"}},
		{"since (inclusive)", Filter{Since: min(-3)}, []string{"e", "d", "c"}},
		{"until (exclusive)", Filter{Until: min(-3)}, []string{"b", "a"}},
		{"window", Filter{Since: min(-4), Until: min(-1)}, []string{"d", "c", "b"}},
		{"before cursor", Filter{Before: "c"}, []string{"b", "a"}},
		{"combined", Filter{ServedCandidate: "a", Status: fleet.StatusOK, Before: "d", Limit: 1}, []string{"c"}},
		{"unknown cursor", Filter{Before: "zz"}, []string{}},
		{"nothing matches", Filter{ServedCandidate: "nobody"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Requests(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("Requests(%+v) = %v; want %v", tt.f, ids(got), tt.want)
			}
			for _, r := range got {
				if len(r.Attempts) != 1 || r.Attempts[0].RequestID != r.ID || r.Attempts[0].Candidate != r.ServedCandidate {
					t.Errorf("request %s came with attempts %+v", r.ID, r.Attempts)
				}
			}
		})
	}
}

func TestRequestsPaging(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	// 23 requests, three to a millisecond, so the cursor must break ties.
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("r%02d", i)
		r := rec(id, t0.Add(time.Duration(i/3)*time.Millisecond))
		for j := range i % 4 { // a varying number of attempts per request
			r.Attempts = append(r.Attempts, fleet.Attempt{Candidate: fmt.Sprint("x", j), Outcome: fleet.OutcomeError})
		}
		mustRecord(t, s, r)
		want = append(want, id)
	}
	slices.Reverse(want)

	var got []string
	f := Filter{Limit: 5}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("paging did not end; got %v", got)
		}
		page, err := s.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			var i int
			fmt.Sscanf(r.ID, "r%d", &i)
			if len(r.Attempts) != 1+i%4 {
				t.Errorf("request %s has %d attempts; want %d", r.ID, len(r.Attempts), 1+i%4)
			}
			for k, a := range r.Attempts {
				if a.Order != k || a.RequestID != r.ID {
					t.Errorf("request %s attempt %d = order %d of %s", r.ID, k, a.Order, a.RequestID)
				}
			}
		}
		got = append(got, ids(page)...)
		f.Before = page[len(page)-1].ID
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages joined = %v; want %v", got, want)
	}
}

func TestRequestsLimitCapped(t *testing.T) {
	s, _ := openTemp(t, Options{})
	// Not MaxLimit+1 records (slow); check the cap reaches the query.
	mustRecord(t, s, rec("a", t0), rec("b", t0))
	got, err := s.Requests(context.Background(), Filter{Limit: MaxLimit * 10})
	if err != nil || len(got) != 2 {
		t.Errorf("Requests(Limit: %d) = %d records, %v; want 2", MaxLimit*10, len(got), err)
	}
}

// attempted records one request per attempt, each attempt of candidate c
// with the given outcome, ttft and cold flag, at the given offset from t0.
type attempted struct {
	c       string
	at      time.Duration
	outcome fleet.Outcome
	ttft    time.Duration
	cold    bool
}

func recordAttempts(t *testing.T, s *Store, as []attempted) {
	t.Helper()
	for i, a := range as {
		id := fmt.Sprint("t", i)
		r := rec(id, t0.Add(a.at))
		r.Attempts[0] = fleet.Attempt{RequestID: id, Candidate: a.c, Outcome: a.outcome, StartedAt: t0.Add(a.at), TTFT: a.ttft, Cold: a.cold,
			Warm: a.outcome == fleet.OutcomeSuccess && !a.cold}
		mustRecord(t, s, r)
	}
}

func TestTTFTStats(t *testing.T) {
	s, _ := openTemp(t, Options{})
	var as []attempted
	for i := 1; i <= 100; i++ { // candidate a: 1ms..100ms
		as = append(as, attempted{"a", time.Duration(i) * time.Second, fleet.OutcomeSuccess, time.Duration(i) * time.Millisecond, i%2 == 0})
	}
	as = append(as,
		attempted{"b", time.Second, fleet.OutcomeSuccess, 40 * time.Millisecond, false},
		attempted{"b", time.Second, fleet.OutcomeSuccess, 20 * time.Millisecond, false},
		attempted{"b", time.Second, fleet.OutcomeTimeout, 0, false},                     // not a success
		attempted{"b", time.Second, fleet.OutcomeFailedAfterCommit, time.Second, false}, // not a success
		attempted{"b", -time.Second, fleet.OutcomeSuccess, time.Hour, false},            // before since
		attempted{"c", -time.Second, fleet.OutcomeSuccess, time.Hour, false},            // before since
	)
	recordAttempts(t, s, as)
	got, err := s.TTFTStats(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := map[string]TTFTStats{
		"a": {N: 100, P50: 50 * ms, P95: 95 * ms, P99: 99 * ms},
		"b": {N: 2, P50: 20 * ms, P95: 40 * ms, P99: 40 * ms},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TTFTStats(t0) = %+v; want %+v", got, want)
	}
}

func TestPercentile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m))
		}
		return out
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{ds(7), 50, 7},
		{ds(7), 99, 7},
		{ds(1, 2), 50, 1},
		{ds(1, 2), 51, 2},
		{ds(1, 2, 3, 4), 0, 1},
		{ds(1, 2, 3, 4), 100, 4},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 95, 10},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v; want %v", tt.sorted, tt.p, got, tt.want)
		}
	}
}

func TestWarmTTFTs(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ms := time.Millisecond
	recordAttempts(t, s, []attempted{
		{"a", 1 * time.Second, fleet.OutcomeSuccess, 10 * ms, false},
		{"a", 2 * time.Second, fleet.OutcomeSuccess, 900 * ms, true}, // cold
		{"a", 3 * time.Second, fleet.OutcomeSuccess, 30 * ms, false},
		{"a", 4 * time.Second, fleet.OutcomeTimeout, 0, false},
		{"a", 5 * time.Second, fleet.OutcomeNoContent, 0, false},
		{"b", 6 * time.Second, fleet.OutcomeSuccess, 60 * ms, false},
		{"a", 7 * time.Second, fleet.OutcomeSuccess, 70 * ms, false},
	})
	// A wait behind another client's work is no sample, after a restart
	// either (SPEC 2.4; u1 review, item 2).
	queued := rec("q", t0.Add(8*time.Second))
	queued.Attempts[0] = fleet.Attempt{RequestID: "q", Candidate: "a", Outcome: fleet.OutcomeSuccess, StartedAt: t0.Add(8 * time.Second), TTFT: 11 * time.Second}
	mustRecord(t, s, queued)
	ctx := context.Background()
	tests := []struct {
		c     string
		limit int
		want  []time.Duration
	}{
		{"a", 0, []time.Duration{70 * ms, 30 * ms, 10 * ms}},
		{"a", 2, []time.Duration{70 * ms, 30 * ms}},
		{"b", 10, []time.Duration{60 * ms}},
		{"nobody", 10, nil},
	}
	for _, tt := range tests {
		got, err := s.WarmTTFTs(ctx, tt.c, tt.limit)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("WarmTTFTs(%s, %d) = %v, %v; want %v", tt.c, tt.limit, got, err, tt.want)
		}
	}
	// A row written before schema 7 does not say whether it was a
	// sample: it is not taken.
	s.settle(ctx)
	if _, err := s.db.Exec("UPDATE attempts SET warm = NULL WHERE request_id = 't6'"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.WarmTTFTs(ctx, "a", 0); !slices.Equal(got, []time.Duration{30 * ms, 10 * ms}) {
		t.Errorf("WarmTTFTs(a) with a row of before schema 7 = %v; want it left out", got)
	}
}

func TestTTFTSeries(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ms, min := time.Millisecond, time.Minute
	recordAttempts(t, s, []attempted{
		{"a", -min, fleet.OutcomeSuccess, 999 * ms, false}, // before since
		{"a", 0, fleet.OutcomeSuccess, 10 * ms, false},
		{"a", 30 * time.Second, fleet.OutcomeSuccess, 30 * ms, false},
		{"a", 59 * time.Second, fleet.OutcomeSuccess, 20 * ms, false},
		{"b", 10 * time.Second, fleet.OutcomeSuccess, 50 * ms, false},
		{"b", 20 * time.Second, fleet.OutcomeError, 0, false},
		{"a", 2*min + time.Second, fleet.OutcomeSuccess, 40 * ms, true},
	})
	got, err := s.TTFTSeries(context.Background(), t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []SeriesPoint{
		{At: t0, Candidate: "a", P50: 20 * ms, P95: 30 * ms, N: 3},
		{At: t0, Candidate: "b", P50: 50 * ms, P95: 50 * ms, N: 1},
		{At: t0.Add(2 * min), Candidate: "a", P50: 40 * ms, P95: 40 * ms, N: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TTFTSeries(t0, 1m) =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := s.TTFTSeries(context.Background(), t0, time.Microsecond); err == nil {
		t.Error("TTFTSeries with a 1µs bucket succeeded; want an error")
	}
}

func TestFailoverRate(t *testing.T) {
	s, _ := openTemp(t, Options{})
	mk := func(id string, at time.Duration, fallback bool, st fleet.Status) fleet.RequestRecord {
		r := rec(id, t0.Add(at))
		r.IsFallback, r.Status = fallback, st
		return r
	}
	mustRecord(t, s,
		mk("old", -time.Second, true, fleet.StatusFailed), // before since
		mk("1", 0, false, fleet.StatusOK),
		mk("2", 10*time.Second, true, fleet.StatusOK),
		mk("3", 20*time.Second, true, fleet.StatusUpstreamErrorAfterCommit),
		mk("4", 30*time.Second, false, fleet.StatusClientAbort), // not an error
		mk("5", 3*time.Minute, false, fleet.StatusFailed),
	)
	got, err := s.FailoverRate(context.Background(), t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []RatePoint{
		{At: t0, Requests: 4, Fallbacks: 2, Errors: 1},
		{At: t0.Add(3 * time.Minute), Requests: 1, Fallbacks: 0, Errors: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FailoverRate(t0, 1m) = %+v; want %+v", got, want)
	}
}

func TestBreakerEvents(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	ch := func(c string, from, to fleet.BreakerState, at time.Duration, cause string) fleet.BreakerChange {
		return fleet.BreakerChange{Candidate: c, From: from, To: to, At: t0.Add(at), Cause: cause}
	}
	open, closed, half := fleet.BreakerOpen, fleet.BreakerClosed, fleet.BreakerHalfOpen
	changes := []fleet.BreakerChange{
		ch("a", closed, open, 0, "2 consecutive failures"),
		ch("b", closed, open, time.Second, "timeout"),
		ch("a", open, half, 30*time.Second, "open period over"),
		ch("b", open, half, 31*time.Second, "open period over"),
		// Same millisecond: the one recorded later is the latest.
		ch("b", half, closed, 32*time.Second, "probe succeeded"),
		ch("b", closed, open, 32*time.Second, "failure"),
	}
	for _, c := range changes {
		s.RecordBreaker(c)
	}
	// A Record commits after every breaker change queued before it.
	mustRecord(t, s, rec("sync", t0))

	got, err := s.breakerEvents(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.BreakerChange{changes[5], changes[4], changes[3]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("breakerEvents(3) = %+v; want %+v", got, want)
	}
	last, err := s.LastBreakerStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLast := map[string]fleet.BreakerChange{"a": changes[2], "b": changes[5]}
	if !reflect.DeepEqual(last, wantLast) {
		t.Errorf("LastBreakerStates() = %+v; want %+v", last, wantLast)
	}
}

// breakerEvents returns the newest breaker transitions, newest first, at
// most limit of them (limit <= 0 means DefaultLimit).
func (s *Store) breakerEvents(ctx context.Context, limit int) ([]fleet.BreakerChange, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	s.settle(ctx)
	chs, err := breakerChanges(ctx, s.db, `SELECT candidate, from_state, to_state, at, cause
		FROM breaker_events ORDER BY at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("breaker events: %w", err)
	}
	return chs, nil
}
