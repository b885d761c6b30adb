package history

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// What waits to reach the tables (queued for the writer, or in the inbox)
// is read beside them, and the queries leave it waiting: every query
// answers the same before the move as after it, the list with each
// filter and page, a request, the charts and the breakers' last states.
func TestQueriesReadWhatWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTemp(t, Options{Now: time.Now}, hooks{moveAt: -1, moveDelay: -1, viaInbox: true})
		ctx := context.Background()
		recs := variedRecords(540)
		moved, inbox, queued := recs[:300], recs[300:500], recs[500:]
		commit := func() { // what is queued, into the inbox
			t.Helper()
			if err := s.do(ctx, func() error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		mustRecord(t, s, moved...)
		s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0.Add(-time.Hour), Cause: "moved"})
		s.RecordBreaker(fleet.BreakerChange{Candidate: "b", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0, Cause: "moved"})
		if err := s.do(ctx, func() error { s.move(); return nil }); err != nil {
			t.Fatal(err)
		}
		mustRecord(t, s, inbox...)
		commit()
		// Breaker changes wake the writer, which commits them: those that
		// wait are TestQueriesSeeWhatIsBeingCommitted's.
		s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerOpen, To: fleet.BreakerHalfOpen, At: t0.Add(-time.Minute), Cause: "later"})
		s.RecordBreaker(fleet.BreakerChange{Candidate: "b", From: fleet.BreakerOpen, To: fleet.BreakerHalfOpen, At: t0, Cause: "later, same time"})
		s.RecordBreaker(fleet.BreakerChange{Candidate: "c", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0, Cause: "later, new"})
		synctest.Wait()
		mustRecord(t, s, queued...)
		// A repeated id waiting in the queue is not shown: the commit
		// refuses it. The first of two waiting is shown.
		again := moved[7]
		again.ServedModel = "not this one"
		twice := queued[3]
		twice.ServedModel = "nor this one"
		mustRecord(t, s, again, twice)
		synctest.Wait()
		if n, q := rows(t, s.db, "inbox"), len(s.q.records); n != len(inbox) || q != len(queued)+2 {
			t.Fatalf("inbox %d, queue %d; want %d, %d", n, q, len(inbox), len(queued)+2)
		}

		before := answers(t, s, recs)
		if n, q := rows(t, s.db, "inbox"), len(s.q.records); n != len(inbox) || q != len(queued)+2 {
			t.Errorf("after the queries, inbox %d, queue %d; want them as they were, %d, %d", n, q, len(inbox), len(queued)+2)
		}
		if err := s.do(ctx, func() error { s.move(); return nil }); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, s.db, "inbox") + rows(t, s.db, "requests"); n != len(recs) {
			t.Fatalf("%d records in the inbox and the tables; want %d", n, len(recs))
		}
		after := answers(t, s, recs)
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range after {
				if !yield(k) {
					return
				}
			}
		}) {
			if !reflect.DeepEqual(before[k], after[k]) {
				t.Errorf("%s, with records waiting:\n%+v\nonce they are in the tables:\n%+v", k, before[k], after[k])
			}
		}
		if got, _ := s.Request(ctx, again.ID); got.ServedModel == again.ServedModel {
			t.Errorf("Request(%s) shows the repeated record", again.ID)
		}
	})
}

// variedRecords are randomRecords with some of everything a query reads
// back: readings, cold starts, served models, several at one millisecond.
func variedRecords(n int) []fleet.RequestRecord {
	recs := randomRecords(n, 11)
	for i := range recs {
		r := &recs[i]
		r.ID = fmt.Sprintf("v%04d", (i*7919)%n) // not in time order
		if i%5 == 0 && i > 0 {
			r.StartedAt = recs[i-1].StartedAt // a tie, broken by id
		}
		if r.ServedCandidate != "" {
			r.ServedModel = "m-" + r.ServedCandidate
			r.TTFT = r.Attempts[len(r.Attempts)-1].TTFT
			r.PromptTokens, r.CompletionTokens = i, 2*i
		}
		r.Thinking, r.Stream = i%3 == 0, i%2 == 0
		for k := range r.Attempts {
			a := &r.Attempts[k]
			a.Cold = (i+k)%4 == 0
			a.Warm = a.Outcome == fleet.OutcomeSuccess && !a.Cold && (i+k)%5 != 0
			if (i+k)%6 == 0 {
				a.Reading = &fleet.GPUReading{GPU: k, Source: "nvml", FreeBytes: uint64(i) << 20, TotalBytes: 24 << 30, Reason: "low"}
			}
			if a.Outcome == fleet.OutcomeError {
				a.Error, a.HTTPStatus, a.Fault = "upstream HTTP 500", 500, fleet.FaultServer
			}
		}
	}
	return recs
}

// answers is every query's answer about recs, by a name for the query.
func answers(t *testing.T, s *Store, recs []fleet.RequestRecord) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	put := func(k string, v any, err error) {
		if err != nil {
			v = err.Error()
		}
		out[k] = v
	}
	yes, no := true, false
	week := t0.Add(-40 * time.Hour)
	for name, f := range map[string]Filter{
		"all":                 {},
		"served by":           {ServedCandidate: "a"},
		"fallbacks":           {Fallback: &yes},
		"first choices":       {Fallback: &no},
		"status":              {Status: fleet.StatusFailed},
		"since":               {Since: week},
		"between":             {Since: week, Until: t0.Add(-20 * time.Hour)},
		"served by, status":   {ServedCandidate: "b", Status: fleet.StatusOK, Since: week},
		"before a cursor":     {Before: recs[420].ID},
		"before one that isn": {Before: "nothing"},
	} {
		// Every page, 37 at a time, each after the last one's last.
		var all []fleet.RequestRecord
		var err error
		for page := f; ; {
			page.Limit = 37
			var got []fleet.RequestRecord
			if got, err = s.Requests(ctx, page); err != nil || len(got) == 0 {
				break
			}
			all = append(all, got...)
			page.Before = got[len(got)-1].ID
		}
		put("list "+name, all, err)
		top, err := s.Requests(ctx, Filter{Limit: 5, ServedCandidate: f.ServedCandidate, Status: f.Status})
		put("top 5 "+name, top, err)
	}
	for _, r := range recs {
		got, err := s.Request(ctx, r.ID)
		put("request "+r.ID, got, err)
	}
	_, err := s.Request(ctx, "nothing")
	put("request nothing", nil, err)
	for _, since := range []time.Time{time.Time{}, t0.Add(-24 * time.Hour), t0.Add(-71*time.Hour - 17*time.Second)} {
		stats, err := s.TTFTStats(ctx, since)
		put(fmt.Sprint("ttft stats since ", since), stats, err)
		for _, b := range []time.Duration{time.Second, 90 * time.Second, time.Minute, time.Hour} {
			series, err := s.TTFTSeries(ctx, since, b)
			put(fmt.Sprint("ttft series ", since, b), series, err)
			rate, err := s.FailoverRate(ctx, since, b)
			put(fmt.Sprint("failover rate ", since, b), rate, err)
		}
	}
	for _, c := range []string{"a", "b", "c"} {
		for _, n := range []int{3, 1000} {
			warm, err := s.WarmTTFTs(ctx, c, n)
			put(fmt.Sprint("warm ttfts ", c, n), warm, err)
		}
	}
	last, err := s.LastBreakerStates(ctx)
	put("last breaker states", last, err)
	return out
}

// A query sees the records and breaker changes the writer is committing:
// taken from the queue, not yet in the file.
func TestQueriesSeeWhatIsBeingCommitted(t *testing.T) {
	var s *Store
	ctx := context.Background()
	checked := false
	s, _ = openTemp(t, Options{}, hooks{moveAt: -1, moveDelay: -1, beforeCommit: func(records, events int) {
		if checked || records == 0 || events == 0 { // on the writer goroutine
			return
		}
		checked = true
		if _, err := s.Request(ctx, "r"); err != nil {
			t.Errorf("Request(r) while it is committed = %v", err)
		}
		if last, err := s.LastBreakerStates(ctx); err != nil || last["a"].Cause != "now" {
			t.Errorf("LastBreakerStates() while it is committed = %v, %v; want a's change", last, err)
		}
	}})
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0, Cause: "before"})
	if err := s.do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Both queued while the writer is held, so that one commit takes both.
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.do(ctx, func() error { close(entered); <-release; return nil }) }()
	<-entered
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerOpen, To: fleet.BreakerHalfOpen, At: t0, Cause: "now"})
	mustRecord(t, s, rec("r", t0))
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("no commit of both a record and a breaker change")
	}
}

// A journaled record goes straight into requests: a query that read it
// in memory while the writer committed it, and whose snapshot holds the
// commit, shows it once.
func TestQueriesCountACommitThatEndsMeanwhileOnce(t *testing.T) {
	ctx := context.Background()
	var s *Store
	inCommit, release := make(chan struct{}), make(chan struct{})
	var hold, read sync.Once
	s, _ = openTemp(t, Options{}, hooks{
		committing: func() { // on the writer goroutine, the rows written
			hold.Do(func() { close(inCommit); <-release })
		},
		viewing: func() { // in the query, what waits read from memory
			select {
			case <-inCommit:
			default:
				return
			}
			read.Do(func() {
				close(release)
				// A job runs once the commit has ended.
				if err := s.do(ctx, func() error { return nil }); err != nil {
					t.Error(err)
				}
			})
		},
	})
	mustRecord(t, s, rec("r", t0), rec("q", t0))
	// Read once while they wait: decoded, and known not to be stored.
	if got, err := s.Requests(ctx, Filter{}); err != nil || len(got) != 2 {
		t.Fatalf("Requests() while they wait = %d records, %v; want 2", len(got), err)
	}
	done := make(chan error, 1)
	go func() { done <- s.do(ctx, func() error { return nil }) }()
	<-inCommit
	got, err := s.Requests(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{"q", "r"}) {
		t.Errorf("Requests() = %v; want [q r], each once", ids)
	}
	if n := rows(t, s.db, "requests"); n != 2 {
		t.Errorf("requests %d; want 2, committed straight into it", n)
	}
}

// When more records wait in the inbox than a query reads beside the
// tables (the writer has fallen far behind), the query has them moved
// first; fewer, and it leaves them.
func TestQueryMovesWhenMuchWaits(t *testing.T) {
	s, _ := openTemp(t, Options{}, hooks{viewMax: 3, moveAt: -1, moveDelay: -1, noJournal: true})
	ctx := context.Background()
	mustRecord(t, s, rec("r1", t0), rec("r2", t0), rec("r3", t0))
	if got, err := s.Requests(ctx, Filter{}); err != nil || len(got) != 3 {
		t.Fatalf("Requests() = %d records, %v; want 3", len(got), err)
	}
	if n := rows(t, s.db, "inbox"); n != 3 {
		t.Errorf("inbox %d after a query with 3 waiting; want 3, left", n)
	}
	mustRecord(t, s, rec("r4", t0))
	if got, err := s.Requests(ctx, Filter{}); err != nil || len(got) != 4 {
		t.Fatalf("Requests() = %d records, %v; want 4", len(got), err)
	}
	if n := rows(t, s.db, "inbox"); n != 0 {
		t.Errorf("inbox %d after a query with 4 waiting; want them moved", n)
	}
}
