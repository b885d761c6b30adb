package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestRecordRoundTrip(t *testing.T) {
	s, path := openTemp(t, Options{})
	ctx := context.Background()
	at := t0.Add(-time.Minute)
	want := fleet.RequestRecord{
		ID: "req-1", StartedAt: at, Protocol: fleet.ProtocolOllama, Stream: true, Thinking: true,
		RequestedModel: "auto", ServedCandidate: "b", ServedModel: "qwen3:8b", IsFallback: true,
		Status: fleet.StatusOK, HTTPStatus: 200, Error: "",
		TTFT: 3210 * time.Millisecond, Latency: 9876 * time.Millisecond,
		PromptTokens: 42, CompletionTokens: 317,
		Attempts: []fleet.Attempt{
			{
				RequestID: "req-1", Order: 0, Candidate: "a", Outcome: fleet.OutcomeTimeout, Fault: fleet.FaultServer,
				Error: "no first token before the deadline", StartedAt: at,
				Deadline: 2500 * time.Millisecond, Duration: 2501 * time.Millisecond,
				Cold: true, Demoted: true,
				Reading: &fleet.GPUReading{GPU: 1, Source: "nvml", FreeBytes: 600 << 20, UsedBytes: 23 << 30, TotalBytes: 1<<34 + 1, Reason: "free 0.6 GiB < 1 GiB"},
			},
			{
				RequestID: "req-1", Order: 1, Candidate: "c", Outcome: fleet.OutcomeSkippedOpen,
			},
			{
				RequestID: "req-1", Order: 2, Candidate: "d", Outcome: fleet.OutcomeBusy, Fault: fleet.FaultQueued,
				Error: "upstream HTTP 503: server busy", HTTPStatus: 503,
				StartedAt: at.Add(2501 * time.Millisecond), Deadline: 4 * time.Second, Duration: 7 * time.Millisecond,
			},
			{
				RequestID: "req-1", Order: 3, Candidate: "b", Outcome: fleet.OutcomeSuccess,
				StartedAt: at.Add(2508 * time.Millisecond), Deadline: 4 * time.Second,
				TTFT: 700 * time.Millisecond, Duration: 7368 * time.Millisecond,
			},
		},
	}
	mustRecord(t, s, want)

	got, err := s.Request(ctx, "req-1")
	if err != nil {
		t.Fatalf("Request(req-1) = %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Request(req-1) =\n%+v\nwant\n%+v", got, want)
	}
	list, err := s.Requests(ctx, Filter{})
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], want) {
		t.Errorf("Requests() = %+v, %v; want [%+v]", list, err, want)
	}

	// A failed request with no attempts and nothing served.
	failed := fleet.RequestRecord{
		ID: "req-2", StartedAt: at, Protocol: fleet.ProtocolUI, RequestedModel: "nope",
		Status: fleet.StatusFailed, HTTPStatus: 404, Error: "unknown model", Latency: time.Millisecond,
		Attempts: []fleet.Attempt{},
	}
	mustRecord(t, s, failed)
	// Read through a second Store on the file, as another process would,
	// once this one has committed it (a job commits what waits).
	if err := s.do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	other := openAt(t, path, Options{})
	if got, err := other.Request(ctx, "req-2"); err != nil || !reflect.DeepEqual(got, failed) {
		t.Errorf("Request(req-2) = %+v, %v; want %+v", got, err, failed)
	}
}

func TestRecordTruncatesToMilliseconds(t *testing.T) {
	s, _ := openTemp(t, Options{})
	r := rec("r", t0.Add(1500*time.Microsecond))
	r.TTFT = 2999 * time.Microsecond
	mustRecord(t, s, r)
	got, err := s.Request(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if !got.StartedAt.Equal(t0.Add(time.Millisecond)) || got.TTFT != 2*time.Millisecond {
		t.Errorf("StartedAt, TTFT = %v, %v; want %v, 2ms", got.StartedAt, got.TTFT, t0.Add(time.Millisecond))
	}
}

// A first token within a millisecond is a TTFT of 0 ms, not none: it
// counts in the TTFT statistics.
func TestSubMillisecondTTFTCounts(t *testing.T) {
	s, _ := openTemp(t, Options{})
	r := rec("r", t0)
	r.Attempts[0].TTFT = 400 * time.Microsecond
	mustRecord(t, s, r)
	stats, err := s.TTFTStats(context.Background(), t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if st := stats["a"]; st.N != 1 || st.P50 != 0 {
		t.Errorf("TTFTStats()[a] = %+v; want one attempt at 0 ms", st)
	}
}

func TestRequestNotFound(t *testing.T) {
	s, _ := openTemp(t, Options{})
	if _, err := s.Request(context.Background(), "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Request(missing) = %v; want ErrNotFound", err)
	}
}

func TestRecordRejectsEmptyID(t *testing.T) {
	s, _ := openTemp(t, Options{})
	if err := s.Record(context.Background(), rec("", t0)); err == nil {
		t.Error("Record with an empty id succeeded; want an error")
	}
}

func TestRecordCanceledContext(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Record(ctx, rec("r", t0)); !errors.Is(err, context.Canceled) {
		t.Errorf("Record(canceled ctx) = %v; want context.Canceled", err)
	}
	if n := count(t, s, "requests"); n != 0 {
		t.Errorf("%d requests after a Record whose ctx was done; want 0", n)
	}
}

// gate makes the writer's first transaction wait, once it has begun, until
// n Record calls (the one it holds included) have queued their records. It
// returns a channel closed when the writer is held.
func gate(h *hooks, n int) <-chan struct{} {
	var queued sync.WaitGroup
	queued.Add(n)
	held := make(chan struct{})
	var first sync.Once
	h.afterEnqueue = queued.Done
	h.beforeCommit = func(int, int) { first.Do(func() { close(held); queued.Wait() }) }
	return held
}

func TestGroupCommit(t *testing.T) {
	const n = 40
	h := hooks{noJournal: true}
	held := gate(&h, n)
	s, path := openTemp(t, Options{}, h)
	other := openAt(t, path, Options{})
	ctx := context.Background()

	var wg sync.WaitGroup
	record := func(id string) {
		if err := s.Record(ctx, rec(id, t0)); err != nil {
			t.Errorf("Record(%s) = %v", id, err)
			return
		}
		// Acknowledged means committed: another connection sees it.
		if _, err := other.Request(ctx, id); err != nil {
			t.Errorf("after Record(%s) returned, a second Store reads %v", id, err)
		}
	}
	wg.Go(func() { record("first") })
	<-held
	// The writer is in the transaction of "first"; the rest arrive now.
	for i := range n - 1 {
		wg.Go(func() { record(fmt.Sprintf("r%02d", i)) })
	}
	wg.Wait()
	if c := s.Commits(); c != 2 {
		t.Errorf("Commits() = %d for %d Records, %d of them queued together; want 2", c, n, n-1)
	}
	if got := count(t, other, "requests"); got != n {
		t.Errorf("%d requests stored; want %d", got, n)
	}
}

func TestBadRecordFailsOnlyItself(t *testing.T) {
	const n = 6
	s, path := openTemp(t, Options{})
	mustRecord(t, s, rec("dup", t0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int32
	h := hooks{noJournal: true}
	held := gate(&h, n)
	s = openAt(t, path, Options{Logf: func(string, ...any) { logged.Add(1) }}, h)

	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { mustRecord(t, s, rec("first", t0)) })
	<-held
	// These share one transaction, which the repeated id fails.
	errs := make([]error, n-1)
	for i := range n - 1 {
		id := fmt.Sprintf("r%d", i)
		if i == 2 {
			id = "dup"
		}
		wg.Go(func() { errs[i] = s.Record(ctx, rec(id, t0)) })
	}
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i == 2) {
			t.Errorf("Record #%d = %v; want an error only for the repeated id", i, err)
		}
	}
	if got := count(t, s, "requests"); got != n {
		t.Errorf("%d requests stored; want %d", got, n)
	}
	if logged.Load() == 0 {
		t.Error("a failed batch was not logged")
	}
}

func TestRecordBreakerDropsWhenFull(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o := Options{BatchSize: 1}
	s, path := openTemp(t, o, hooks{beforeCommit: func(int, int) {
		once.Do(func() { close(entered); <-release })
	}})
	ch := fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0}
	s.RecordBreaker(ch) // taken by the writer, which then waits
	<-entered
	for range 4 * o.BatchSize { // fills the queue
		s.RecordBreaker(ch)
	}
	s.RecordBreaker(ch) // no room
	if s.Dropped() != 1 {
		t.Errorf("Dropped() = %d; want 1", s.Dropped())
	}
	close(release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if got := count(t, s, "breaker_events"); got != 5 {
		t.Errorf("%d breaker events stored; want 5", got)
	}
}

func TestRecordWaitsForRoom(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	queued := make(chan struct{}, 16)
	var once sync.Once
	o := Options{BatchSize: 1}
	s, _ := openTemp(t, o, hooks{
		afterEnqueue: func() { queued <- struct{}{} },
		beforeCommit: func(int, int) { once.Do(func() { close(held); <-release }) },
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { mustRecord(t, s, rec("first", t0)) })
	<-held
	// The writer holds "first"; four more fill the queue.
	for i := range 4 * o.BatchSize {
		wg.Go(func() { mustRecord(t, s, rec(fmt.Sprint("q", i), t0)) })
	}
	for range 1 + 4*o.BatchSize {
		<-queued
	}
	// With the queue full, a Record waits for room, here until its
	// deadline, rather than dropping its record or overfilling the queue.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := s.Record(short, rec("late", t0)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Record on a full queue = %v; want context.DeadlineExceeded", err)
	}
	close(release)
	wg.Wait()
	if got := count(t, s, "requests"); got != 5 {
		t.Errorf("%d requests stored; want 5", got)
	}
}

// An idle writer commits a record at once: no wait for a tick or for a
// batch to fill (the bubble's clock does not move), and a batch of one.
func TestIdleWriterCommitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var batches []int
		s, _ := openTemp(t, Options{Now: time.Now}, hooks{noJournal: true, beforeCommit: func(records, _ int) {
			batches = append(batches, records)
		}})
		start := time.Now()
		for i := range 3 {
			mustRecord(t, s, rec(fmt.Sprint("r", i), t0))
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("three Records on an idle writer took %v of the bubble's clock; want none", d)
		}
		if !reflect.DeepEqual(batches, []int{1, 1, 1}) {
			t.Errorf("commits of %v records; want three of one", batches)
		}
		// Committed, and not moved yet: that waits for moveDelay.
		if n := rows(t, s.db, "inbox"); n != 3 {
			t.Errorf("%d records in the inbox; want 3", n)
		}
	})
}

// rows counts table's rows as they are now, without moving the inbox.
func rows(t testing.TB, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// The WAL stays bounded under a steady stream of records: the writer
// checkpoints it whole, between commits. (A checkpoint on a connection of
// its own never caught up with the commits, and the WAL grew by about
// 10 KiB a record: 30 MiB here.)
func TestWALStaysBounded(t *testing.T) {
	for _, h := range []hooks{{}, {noJournal: true}} {
		t.Run(fmt.Sprintf("journal=%v", !h.noJournal), func(t *testing.T) { walStaysBounded(t, h) })
	}
}

// walStaysBounded records 3000 requests from 4 callers and checks the
// WAL's size: without the journal, the writer commits beside the
// checkpoints, and the WAL still starts again.
func walStaysBounded(t *testing.T, h hooks) {
	s, path := openTemp(t, Options{}, h)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 750 {
				mustRecord(t, s, rec(fmt.Sprint(w, "-", i), t0))
			}
		})
	}
	wg.Wait()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL: %d KiB after 3000 records", fi.Size()>>10)
	if fi.Size() > 16<<20 {
		t.Errorf("WAL is %d MiB after 3000 records; want it checkpointed and started again, a few MiB", fi.Size()>>20)
	}
}

// A job commits what waits, and what it leaves in the inbox is moved
// moveDelay later, as after any commit.
func TestJobsCommitIsMovedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTemp(t, Options{Now: time.Now}, hooks{viaInbox: true})
		synctest.Wait()
		mustRecord(t, s, rec("waiting", t0)) // journaled: commitDelay to go
		if err := s.Import(context.Background(), []fleet.RequestRecord{rec("imported", t0)}); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, s.db, "inbox"); n != 1 {
			t.Fatalf("%d records in the inbox after the job; want the waiting one", n)
		}
		time.Sleep(moveDelay)
		synctest.Wait()
		if n := rows(t, s.db, "inbox"); n != 0 {
			t.Errorf("%d records in the inbox moveDelay after the job committed them; want 0", n)
		}
	})
}

// A WAL past its limit is copied whole and cut to nothing at the end of a
// checkpoint: with two Switchyards committing on one file, no checkpoint
// copied it all and it grew to 246 MB under load before one did.
func TestCheckpointCutsALongWAL(t *testing.T) {
	s, path := openTemp(t, Options{}, hooks{walMax: 64 << 10, noJournal: true})
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for i := range 100 {
		mustRecord(t, s, rec(fmt.Sprint("r", i), t0))
	}
	if n := walSize(); n <= 64<<10 {
		t.Fatalf("WAL is %d bytes after 100 records; the test wants it past 64 KiB", n)
	}
	if err := s.do(t.Context(), func() error { s.checkpointed(nil); return nil }); err != nil {
		t.Fatal(err)
	}
	if n := walSize(); n != 0 {
		t.Errorf("WAL is %d bytes after a checkpoint past the limit; want it cut to nothing", n)
	}
	if got := count(t, s, "requests"); got != 100 {
		t.Errorf("%d requests after the cut; want 100", got)
	}
}
