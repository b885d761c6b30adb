package history

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Issue 24: what keeps a history of months fast. These tests fail when a
// query stops using its index, when the charts' roll-ups answer otherwise
// than the rows, when a sweep holds the writer longer than a step,
// and when an older file does not upgrade in place.

// randomRecords are n requests over three days before t0, at random
// milliseconds, by three candidates, with failovers, failures, aborts and
// attempts that never started.
func randomRecords(n int, seed uint64) []fleet.RequestRecord {
	rng := rand.New(rand.NewPCG(seed, 24))
	cands := []string{"a", "b", "c"}
	var recs []fleet.RequestRecord
	for i := range n {
		at := t0.Add(-time.Duration(rng.Int64N(int64(72 * time.Hour))))
		r := fleet.RequestRecord{ID: fmt.Sprintf("r%05d", i), StartedAt: at, Protocol: fleet.ProtocolOpenAI,
			RequestedModel: "auto", Status: fleet.StatusOK, Latency: time.Second}
		tries := 1 + rng.IntN(3)
		for k := range tries {
			a := fleet.Attempt{Candidate: cands[rng.IntN(3)], Outcome: fleet.OutcomeError, Deadline: time.Second,
				StartedAt: at.Add(time.Duration(k) * time.Duration(rng.IntN(90000)) * time.Millisecond)}
			switch {
			case k == tries-1 && rng.IntN(10) > 0:
				a.Outcome, a.TTFT = fleet.OutcomeSuccess, time.Duration(rng.IntN(400))*time.Millisecond
			case rng.IntN(5) == 0:
				a.Outcome, a.StartedAt = fleet.OutcomeSkippedOpen, time.Time{}
			}
			r.Attempts = append(r.Attempts, a)
		}
		last := r.Attempts[tries-1]
		switch {
		case last.Outcome == fleet.OutcomeSuccess:
			r.ServedCandidate, r.IsFallback = last.Candidate, tries > 1
		case rng.IntN(4) == 0:
			r.Status = fleet.StatusClientAbort
		case rng.IntN(3) == 0:
			r.Status = fleet.StatusUpstreamErrorAfterCommit
		default:
			r.Status = fleet.StatusFailed
		}
		recs = append(recs, r)
	}
	return recs
}

// The old scans of the rows, as query.go ran them before the roll-ups:
// what the charts' answers must stay.
func scanSeries(t *testing.T, db *sql.DB, since time.Time, width int64) []SeriesPoint {
	t.Helper()
	rows, err := db.Query(`SELECT started_at - started_at % ?1 AS bucket, candidate, ttft_ms
		FROM attempts WHERE outcome = 'success' AND ttft_ms IS NOT NULL AND started_at >= ?2
		ORDER BY bucket, candidate`, width, since.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var points []SeriesPoint
	var ds []time.Duration
	flush := func() {
		if len(ds) > 0 {
			slices.Sort(ds)
			p := &points[len(points)-1]
			p.N, p.P50, p.P95 = len(ds), percentile(ds, 50), percentile(ds, 95)
			ds = ds[:0]
		}
	}
	for rows.Next() {
		var at, ttft int64
		var c string
		if err := rows.Scan(&at, &c, &ttft); err != nil {
			t.Fatal(err)
		}
		if len(points) == 0 || points[len(points)-1].Candidate != c || !points[len(points)-1].At.Equal(fromMillis(at)) {
			flush()
			points = append(points, SeriesPoint{At: fromMillis(at), Candidate: c})
		}
		ds = append(ds, millis(ttft))
	}
	flush()
	return points
}

func scanRate(t *testing.T, db *sql.DB, since time.Time, width int64) []RatePoint {
	t.Helper()
	rows, err := db.Query(`SELECT started_at - started_at % ?1 AS bucket,
		COUNT(*), SUM(is_fallback), SUM(status IN (?3, ?4))
		FROM requests WHERE started_at >= ?2 GROUP BY bucket ORDER BY bucket`,
		width, since.UnixMilli(), string(fleet.StatusFailed), string(fleet.StatusUpstreamErrorAfterCommit))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var points []RatePoint
	for rows.Next() {
		var at int64
		var p RatePoint
		if err := rows.Scan(&at, &p.Requests, &p.Fallbacks, &p.Errors); err != nil {
			t.Fatal(err)
		}
		p.At = fromMillis(at)
		points = append(points, p)
	}
	return points
}

func scanStats(t *testing.T, db *sql.DB, since time.Time) map[string]TTFTStats {
	t.Helper()
	stats := map[string]TTFTStats{}
	for _, p := range scanSeries(t, db, since, 1<<62) {
		var ds []time.Duration
		rows, err := db.Query(`SELECT ttft_ms FROM attempts WHERE candidate = ? AND outcome = 'success'
			AND ttft_ms IS NOT NULL AND started_at >= ?`, p.Candidate, since.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int64
			rows.Scan(&v)
			ds = append(ds, millis(v))
		}
		rows.Close()
		slices.Sort(ds)
		stats[p.Candidate] = TTFTStats{N: len(ds), P50: percentile(ds, 50), P95: percentile(ds, 95), P99: percentile(ds, 99)}
	}
	return stats
}

// sameAnswers checks the charts' queries against the old scans for windows
// that start on and off minute and hour boundaries, and buckets read from
// minute roll-ups, hour roll-ups and the rows. The scans read the tables
// alone, so what waits is moved there first (TestQueriesReadWhatWaits has
// the records that wait).
func sameAnswers(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	s.settle(ctx)
	sinces := []time.Time{
		t0.Add(-24 * time.Hour), t0.Add(-24*time.Hour + 17*time.Second + 3*time.Millisecond),
		t0.Add(-71*time.Hour - 31*time.Minute - 5*time.Second), t0.Add(-100 * time.Hour), t0.Add(-5 * time.Minute),
	}
	buckets := []time.Duration{time.Second, 90 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 7 * time.Hour}
	for _, since := range sinces {
		for _, b := range buckets {
			series, err := s.TTFTSeries(ctx, since, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := scanSeries(t, s.db, since, b.Milliseconds()); !reflect.DeepEqual(series, want) {
				t.Errorf("TTFTSeries(%v, %v): %d points; want the scan's %d\n got %v\nwant %v", since, b, len(series), len(want), head(series), head(want))
			}
			rate, err := s.FailoverRate(ctx, since, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := scanRate(t, s.db, since, b.Milliseconds()); !reflect.DeepEqual(rate, want) {
				t.Errorf("FailoverRate(%v, %v): %d points; want the scan's %d\n got %v\nwant %v", since, b, len(rate), len(want), head(rate), head(want))
			}
		}
		stats, err := s.TTFTStats(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if want := scanStats(t, s.db, since); !reflect.DeepEqual(stats, want) {
			t.Errorf("TTFTStats(%v) = %v; want the scan's %v", since, stats, want)
		}
	}
}

func head[T any](xs []T) []T { return xs[:min(len(xs), 4)] }

// The roll-ups answer as the rows did, whether the records came through
// Record (and the inbox) or Import.
func TestRollupsAnswerAsTheRows(t *testing.T) {
	s, _ := openTemp(t, Options{})
	recs := randomRecords(3000, 1)
	mustRecord(t, s, recs[:1000]...)
	if err := s.Import(context.Background(), recs[1000:]); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, s)
}

// insertAttempt3 is insertAttempt as the schema of version 3 took it.
const insertAttempt3 = `INSERT INTO attempts (request_id, ord, candidate, outcome, error,
	http_status, started_at, deadline_ms, ttft_ms, duration_ms, cold, demoted, reading, fault)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// A file made by the schema before roll-ups and indexes (version 3, with
// auto_vacuum off) upgrades in place: its rows stay, its roll-ups are
// filled from them, its indexes made, and it gives pages back from then on.
func TestUpgradeInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := migrate(ctx, old, ms[:3]); err != nil {
		t.Fatal(err)
	}
	recs := randomRecords(2000, 2)
	for _, r := range recs {
		b, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := decodeRecord(b)
		if _, err := old.Exec(insertRequest, anys(rows[0])...); err != nil {
			t.Fatal(err)
		}
		for _, a := range rows[1:] {
			// The attempts of version 3 had no warm (0007).
			if _, err := old.Exec(insertAttempt3, anys(a[:attemptValues1])...); err != nil {
				t.Fatal(err)
			}
		}
	}
	var av int
	old.QueryRow("PRAGMA auto_vacuum").Scan(&av)
	old.Close()
	if av != 0 {
		t.Fatalf("the old file has auto_vacuum %d; want 0 (none), as files made before 0005", av)
	}

	s := openAt(t, path, Options{})
	if v, err := userVersion(ctx, s.db); err != nil || v != len(ms) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(ms))
	}
	if err := s.db.QueryRow("PRAGMA auto_vacuum").Scan(&av); err != nil || av != 2 {
		t.Errorf("auto_vacuum %d, %v after the upgrade; want 2 (incremental)", av, err)
	}
	if n := count(t, s, "requests"); n != len(recs) {
		t.Errorf("%d requests after the upgrade; want %d", n, len(recs))
	}
	sameAnswers(t, s)
	// And it keeps them as records arrive.
	more := randomRecords(300, 3)
	for i := range more {
		more[i].ID = "new-" + more[i].ID
	}
	mustRecord(t, s, more...)
	sameAnswers(t, s)
}

func anys(row []driver.Value) []any {
	out := make([]any, len(row))
	for i, v := range row {
		out[i] = v
	}
	return out
}

// plan is SQLite's plan for q, one line per step.
func plan(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return lines
}

// Every filter the list offers, and every other query of the store, reads
// through an index: no full scan of requests or attempts, and no sort of
// all that a filter matches (issue 24: a filter matching nothing scanned
// the whole table, 341 ms at 1M requests).
func TestQueriesUseTheirIndexes(t *testing.T) {
	s, _ := openTemp(t, Options{})
	mustRecord(t, s, randomRecords(200, 4)...)
	yes, no := true, false
	week := t0.Add(-7 * 24 * time.Hour)
	filters := map[string]Filter{
		"served by":          {ServedCandidate: "a"},
		"status":             {Status: fleet.StatusFailed},
		"fallbacks":          {Fallback: &yes},
		"first choices":      {Fallback: &no},
		"since":              {Since: week},
		"until":              {Until: week},
		"page N":             {Before: "r00010"},
		"status since":       {Status: fleet.StatusFailed, Since: week},
		"served by, page N":  {ServedCandidate: "a", Before: "r00010"},
		"status, page N":     {Status: fleet.StatusFailed, Before: "r00010"},
		"fallbacks, page N":  {Fallback: &yes, Before: "r00010"},
		"served by, status":  {ServedCandidate: "a", Status: fleet.StatusOK},
		"fallbacks, status":  {Fallback: &yes, Status: fleet.StatusOK, Since: week},
		"served by, between": {ServedCandidate: "a", Since: week, Until: t0},
	}
	check := func(name string, lines []string, want string) {
		t.Helper()
		joined := strings.Join(lines, "; ")
		for _, l := range lines {
			if strings.HasPrefix(l, "SCAN requests") || strings.HasPrefix(l, "SCAN attempts") || strings.Contains(l, "TEMP B-TREE") {
				t.Errorf("%s: plan %q; want no full scan and no sort", name, joined)
				return
			}
		}
		if !strings.Contains(joined, want) {
			t.Errorf("%s: plan %q; want it to use %s", name, joined, want)
		}
	}
	for name, f := range filters {
		q, args := listQuery(f, t0.UnixMilli())
		check(name, plan(t, s.db, q, args...), "USING INDEX requests_")
	}
	// Two filters: the index of the one likely to match least, whichever
	// SQLite would take (it took the larger, and read all of it for a pair
	// that matched nothing).
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{Status: fleet.StatusShutdown, Fallback: &no}, "requests_status"},
		{Filter{Status: fleet.StatusFailed, Fallback: &yes}, "requests_status"},
		{Filter{Status: fleet.StatusOK, Fallback: &yes}, "requests_fallback"},
		{Filter{Status: fleet.StatusFailed, ServedCandidate: "a"}, "requests_status"},
		{Filter{Status: fleet.StatusOK, ServedCandidate: "a"}, "requests_served_candidate"},
		{Filter{Fallback: &no, ServedCandidate: "a", Before: "r00010"}, "requests_served_candidate"},
	} {
		q, args := listQuery(c.f, t0.UnixMilli())
		check(fmt.Sprintf("%+v", c.f), plan(t, s.db, q, args...), "USING INDEX "+c.want+" ")
	}
	// The list with no filter walks the time index backwards, a page's worth.
	q, args := listQuery(Filter{}, 0)
	if got := plan(t, s.db, q, args...); !slices.Equal(got, []string{"SCAN requests USING INDEX requests_started_at"}) {
		t.Errorf("list: plan %q; want the time index alone", got)
	}
	for _, c := range []struct {
		name, q, want string
		args          []any
	}{
		{"request", "SELECT " + requestColumns + " FROM requests WHERE id = ?", "USING INDEX sqlite_autoindex_requests_1", []any{"r1"}},
		{"attempts", "SELECT " + attemptColumns + " FROM attempts WHERE request_id IN (?, ?) ORDER BY request_id, ord", "USING PRIMARY KEY", []any{"r1", "r2"}},
		{"warm ttfts", warmTTFTs, "USING INDEX attempts_success", []any{"a", 10}},
		{"raw window, requests", windowRequests, "USING INDEX requests_started_at", []any{1, 2}},
		{"raw window, attempts", windowTTFTs, "USING INDEX attempts_started_at", []any{1, 2}},
		{"roll-ups", windowRollups, "USING PRIMARY KEY", []any{1, 2, 3}},
		{"sweep", sweepRequests, "INDEX requests_started_at", []any{1, 2}},
		{"sweep breaker events", sweepBreakers, "INDEX breaker_events_at", []any{1, 2}},
		{"sweep roll-ups", sweepRollups, "USING PRIMARY KEY (width=? AND at<?)", []any{1, 2, 60000}},
	} {
		check(c.name, plan(t, s.db, c.q, c.args...), c.want)
	}
}

// A sweep deletes a batch a transaction. A query needs nothing of the
// writer: one asked while a batch runs, on the writer goroutine itself,
// sees the record just made. And the writer takes a job waiting between
// two batches (an Import, or a query when much waits), so such a job
// waits for one batch at most: here one asks while the first batch runs,
// and is done before the second. A query that waited for the writer, or
// a sweep that held the writer across batches as the one big DELETE did,
// fails it.
func TestSweepLetsQueriesInBetweenBatches(t *testing.T) {
	const batch = 16
	c := &clock{now: t0}
	var s *Store
	var batches []int64
	ctx := context.Background()
	asking := make(chan struct{}, 1)
	answered := make(chan error, 1)
	jobsBefore := 0
	s, _ = openTemp(t, Options{Now: c.Now, Retention: 24 * time.Hour, PruneEvery: -1}, hooks{
		sweepBatch: batch,
		jobQueued: func() {
			select {
			case asking <- struct{}{}:
			default:
			}
		},
		swept: func(n int64) { // on the writer goroutine
			batches = append(batches, n)
			switch len(batches) {
			case 1:
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				mustRecord(t, s, rec("between", t0))
				if _, err := s.Request(qctx, "between"); err != nil {
					t.Errorf("Request during a sweep's batch = %v; want the record just made", err)
				}
				jobsBefore = s.w.jobsRun
				go func() { answered <- s.do(ctx, func() error { return nil }) }()
				<-asking // the job waits for the writer
			case 2:
				if s.w.jobsRun == jobsBefore {
					t.Error("the second batch of a sweep ran before the job that waited for the writer")
				}
			}
		},
	})
	<-s.startSwept
	old := randomRecords(100, 5) // 3 days before t0: two thirds expire
	if err := s.Import(ctx, old); err != nil {
		t.Fatal(err)
	}
	<-asking // Import's own
	var expired int64
	for _, r := range old {
		if r.StartedAt.Before(t0.Add(-24 * time.Hour).Truncate(time.Minute)) {
			expired++
		}
	}
	n, err := s.Prune(ctx)
	if err != nil || n != expired {
		t.Fatalf("Prune() = %d, %v; want %d", n, err, expired)
	}
	if err := <-answered; err != nil {
		t.Errorf("a job during a sweep = %v", err)
	}
	var deleted int64
	for _, b := range batches {
		if b > batch {
			t.Errorf("a sweep transaction deleted %d rows; want at most a batch (%d)", b, batch)
		}
		deleted += min(b, batch)
	}
	if len(batches) < int(expired)/batch {
		t.Errorf("%d transactions for %d rows; want one per batch of %d", len(batches), expired, batch)
	}
	sameAnswers(t, s)
}

// A sweep's step waits while a query reads, for sweepYield at most, and
// goes on once the query ends (nextStep: a step beside a query made a
// first page take 10 ms instead of 0.5 at 1M requests). A sweep that
// steps beside an open view, or one that waits for it without end,
// fails it.
func TestSweepWaitsForQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var steps atomic.Int64
		c := &clock{now: t0}
		s, _ := openTemp(t, Options{Now: c.Now, Retention: 24 * time.Hour, PruneEvery: -1},
			hooks{sweepBatch: 8, swept: func(int64) { steps.Add(1) }})
		<-s.startSwept
		ctx := context.Background()
		if err := s.Import(ctx, randomRecords(100, 5)); err != nil { // two thirds expire
			t.Fatal(err)
		}
		v, err := s.view(ctx) // a query reading
		if err != nil {
			t.Fatal(err)
		}
		pruned := make(chan error, 1)
		go func() {
			_, err := s.Prune(ctx)
			pruned <- err
		}()
		synctest.Wait()
		if n := steps.Load(); n != 0 {
			t.Fatalf("%d steps of a sweep while a query read; want none", n)
		}
		time.Sleep(sweepYield)
		synctest.Wait()
		if n := steps.Load(); n != 1 {
			t.Fatalf("%d steps once a query had read for sweepYield; want one, then a wait again", n)
		}
		v.close()
		synctest.Wait()
		select {
		case err := <-pruned:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the sweep is not done once the query ended")
		}
		if n := steps.Load(); n < 8 {
			t.Errorf("%d steps for about 66 requests in batches of 8; want the whole sweep", n)
		}
	})
}

// A checkpoint runs beside the writer: a job handed to the writer while
// one runs (an Import, a query when much waits) is done before it ends.
// (Checkpoints on the writer's own goroutine held every job for their
// fsyncs: a query waited 1.4 s during a sweep at 10M requests, issue 24.)
func TestCheckpointHoldsNoJob(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s, _ := openTemp(t, Options{}, hooks{checkpointing: func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}})
	ctx := context.Background()
	// Records committed and moved make a checkpoint due, which then runs.
	for i := range checkpointAt {
		mustRecord(t, s, rec(fmt.Sprint("r", i), t0))
	}
	<-entered
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.do(qctx, func() error { return nil }); err != nil {
		t.Errorf("a job while a checkpoint runs = %v; want it done before the checkpoint ends", err)
	}
	close(release)
}

// A sweep's step follows sweepStepTime: twice as much after a quick
// one, as much as fits the time after a slow one, within bounds.
func TestSweepStepFollowsItsTime(t *testing.T) {
	for _, c := range []struct {
		n    int
		took time.Duration
		want int
	}{
		{64, time.Millisecond, 128},
		{64, sweepStepTime, 64},
		{64, 4 * sweepStepTime, 16},
		{64, 100 * sweepStepTime, 8},
		{1000, 0, 1024},
	} {
		if got := pace(c.n, c.took, 8, 1024); got != c.want {
			t.Errorf("pace(%d, %v) = %d; want %d", c.n, c.took, got, c.want)
		}
	}
}

// A start with a sweep pending answers before the sweep: the sweep runs
// on the writer goroutine after Open has returned (issue 24: 2.5–5 s added
// to start-up at 1M requests).
func TestSweepAtStartRunsAfterOpen(t *testing.T) {
	c := &clock{now: t0}
	s, path := openTemp(t, Options{Now: c.Now, Retention: -1})
	if err := s.Import(context.Background(), randomRecords(100, 6)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	first := true
	s = openAt(t, path, Options{Now: c.Now, Retention: time.Hour}, hooks{sweepBatch: 8, swept: func(int64) {
		if first {
			first = false
			<-release // hold the sweep after its first batch
		}
	}})
	// Open has returned, the sweep is under way and held: queries answer.
	if recs, err := s.Requests(context.Background(), Filter{Limit: 5}); err != nil || len(recs) != 5 {
		t.Fatalf("Requests while the start's sweep runs = %d, %v; want 5", len(recs), err)
	}
	close(release)
	<-s.startSwept
	if n := count(t, s, "requests"); n >= 100 {
		t.Errorf("%d requests once the start's sweep is done; want the expired ones gone", n)
	}
}
