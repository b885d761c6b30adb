package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as the process it kills.
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// t0 is the tests' "now"; records are placed around it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable Now for Options.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// openAt opens path with Now fixed at t0 unless o sets it, and the hooks
// h (one at most), and closes it when the test ends.
func openAt(t testing.TB, path string, o Options, h ...hooks) *Store {
	t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return t0 }
	}
	s, err := openWith(path, o, append(h, hooks{})[0])
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

func openTemp(t testing.TB, o Options, h ...hooks) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	return openAt(t, path, o, h...), path
}

// rec is a successful request served by candidate "a" on its first attempt.
func rec(id string, at time.Time) fleet.RequestRecord {
	return fleet.RequestRecord{
		ID: id, StartedAt: at, Protocol: fleet.ProtocolOpenAI, Stream: true,
		RequestedModel: "auto", ServedCandidate: "a", ServedModel: "llama3",
		Status: fleet.StatusOK, HTTPStatus: 200, TTFT: 120 * time.Millisecond, Latency: time.Second,
		Attempts: []fleet.Attempt{{
			RequestID: id, Candidate: "a", Outcome: fleet.OutcomeSuccess, StartedAt: at,
			Deadline: 5 * time.Second, TTFT: 110 * time.Millisecond, Duration: time.Second,
		}},
	}
}

func mustRecord(t testing.TB, s *Store, recs ...fleet.RequestRecord) {
	t.Helper()
	for _, r := range recs {
		if err := s.Record(context.Background(), r); err != nil {
			t.Fatalf("Record(%s) = %v", r.ID, err)
		}
	}
}

// count is how many rows table holds once s has moved its inbox, as a
// query would.
func count(t testing.TB, s *Store, table string) int {
	t.Helper()
	s.settle(context.Background())
	var n int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestOpenCreatesDirAndSettings(t *testing.T) {
	// A nested directory that does not exist yet, with characters that a
	// DSN or URI would otherwise take for syntax.
	path := filepath.Join(t.TempDir(), "a dir#1", "50%?x", "history.db")
	s := openAt(t, path, Options{})
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("history file not at %s: %v", path, err)
	}
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"synchronous":  "1", // NORMAL
		"foreign_keys": "1",
		"busy_timeout": "5000",
	} {
		var got string
		if err := s.db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q; want %q", pragma, got, want)
		}
	}
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	ms, err := loadMigrations(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	mustRecord(t, s, rec("r1", t0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	v, err := userVersion(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	if v != len(ms) || v < 1 {
		t.Errorf("user_version = %d; want %d", v, len(ms))
	}
	if _, err := s.Request(context.Background(), "r1"); err != nil {
		t.Errorf("after reopen, Request(r1) = %v", err)
	}
}

func TestFutureSchemaRefused(t *testing.T) {
	_, path := openTemp(t, Options{})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a version 999 file succeeded; want ErrSchemaTooNew")
	}
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "999") {
		t.Errorf("Open = %v; want ErrSchemaTooNew naming version 999", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr bool
	}{
		{"ordered by version, not by name", fstest.MapFS{
			"m/10_j.sql": file("j"), "m/2_b.sql": file("b"), "m/1_a.sql": file("a"),
			"m/3_c.sql": file("c"), "m/4_d.sql": file("d"), "m/5_e.sql": file("e"),
			"m/6_f.sql": file("f"), "m/7_g.sql": file("g"), "m/8_h.sql": file("h"),
			"m/9_i.sql": file("i"), "m/README": file("not sql"),
		}, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"gap", fstest.MapFS{"m/0001_a.sql": file("a"), "m/0003_c.sql": file("c")}, nil, true},
		{"repeat", fstest.MapFS{"m/0001_a.sql": file("a"), "m/0001_b.sql": file("b")}, nil, true},
		{"no version", fstest.MapFS{"m/init.sql": file("a")}, nil, true},
		{"zero", fstest.MapFS{"m/0000_a.sql": file("a")}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.fsys, "m")
			if (err != nil) != tt.wantErr {
				t.Fatalf("loadMigrations() error = %v; want error %v", err, tt.wantErr)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if !equalInts(got, tt.want) {
				t.Errorf("loadMigrations() versions = %v; want %v", got, tt.want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPrune(t *testing.T) {
	c := &clock{now: t0}
	s, path := openTemp(t, Options{Now: c.Now, Retention: 30 * 24 * time.Hour, PruneEvery: -1})
	ctx := context.Background()
	old, fresh := rec("old", t0.Add(-31*24*time.Hour)), rec("fresh", t0.Add(-29*24*time.Hour))
	mustRecord(t, s, old, fresh)
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: old.StartedAt})
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerOpen, To: fleet.BreakerHalfOpen, At: fresh.StartedAt})
	// Close flushes the breaker changes; reopening at t0 - 1 day prunes
	// nothing, as everything is then younger than 30 days.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(-24 * time.Hour))
	s = openAt(t, path, Options{Now: c.Now, PruneEvery: -1})
	if n := count(t, s, "requests"); n != 2 {
		t.Fatalf("after Open at t0-1d, %d requests; want 2", n)
	}

	c.Set(t0)
	n, err := s.Prune(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Prune() = %d, %v; want 2 (one request, one breaker event)", n, err)
	}
	if _, err := s.Request(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Request(old) after Prune = %v; want ErrNotFound", err)
	}
	if _, err := s.Request(ctx, "fresh"); err != nil {
		t.Errorf("Request(fresh) after Prune = %v", err)
	}
	if got := count(t, s, "attempts"); got != 1 {
		t.Errorf("attempts after Prune = %d; want 1 (the old request's went with it)", got)
	}
	evs, err := s.breakerEvents(ctx, 0)
	if err != nil || len(evs) != 1 || evs[0].To != fleet.BreakerHalfOpen {
		t.Errorf("breakerEvents() after Prune = %v, %v; want the half_open one", evs, err)
	}

	// The writer prunes once Open has returned, too.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(2 * 24 * time.Hour))
	s = openAt(t, path, Options{Now: c.Now, PruneEvery: -1})
	<-s.startSwept
	if n := count(t, s, "requests"); n != 0 {
		t.Errorf("after Open 31 days after fresh, %d requests; want 0", n)
	}
}

func TestPruneNegativeRetentionKeepsAll(t *testing.T) {
	s, _ := openTemp(t, Options{Retention: -1})
	mustRecord(t, s, rec("ancient", t0.Add(-10*365*24*time.Hour)))
	if n, err := s.Prune(context.Background()); n != 0 || err != nil {
		t.Errorf("Prune() = %d, %v; want 0, nil", n, err)
	}
}

func TestPrunesEveryHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Inside the bubble time.Now is the bubble's clock.
		s, _ := openTemp(t, Options{Retention: 30 * time.Minute, Now: time.Now})
		ctx := context.Background()
		mustRecord(t, s, rec("r", time.Now()))
		time.Sleep(DefaultPruneEvery - time.Second)
		synctest.Wait()
		if _, err := s.Request(ctx, "r"); err != nil {
			t.Fatalf("before the first hourly prune, Request(r) = %v", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, err := s.Request(ctx, "r"); !errors.Is(err, ErrNotFound) {
			t.Errorf("after the hourly prune, Request(r) = %v; want ErrNotFound", err)
		}
	})
}

// A reload that shortens the retention sweeps at once, even while a
// sweep of the old one is under way; one that lengthens it sweeps nothing.
func TestSetRetentionSweepsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTemp(t, Options{Retention: -1, Now: time.Now})
		ctx := context.Background()
		now := time.Now()
		for i := range 300 {
			mustRecord(t, s, rec(fmt.Sprintf("ancient-%03d", i), now.Add(-40*24*time.Hour)))
		}
		mustRecord(t, s, rec("week", now.Add(-7*24*time.Hour)), rec("today", now))
		if err := s.SetRetention(ctx, 30*24*time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.SetRetention(ctx, 5*24*time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // far less than the hourly sweep
		synctest.Wait()
		if n := count(t, s, "requests"); n != 1 {
			t.Fatalf("a minute after the retention went to 30 days, then 5: %d requests; want 1 (today's)", n)
		}
		if err := s.SetRetention(ctx, 0); err != nil { // the default, 30 days: longer
			t.Fatal(err)
		}
		mustRecord(t, s, rec("month", now.Add(-20*24*time.Hour)))
		if err := s.SetRetention(ctx, 25*24*time.Hour); err != nil { // shorter, but nothing expired
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, err := s.Request(ctx, "month"); err != nil {
			t.Errorf("Request(month) under a retention of 25 days = %v; want it kept", err)
		}
	})
}

func TestCloseFlushesBreakerChanges(t *testing.T) {
	s, path := openTemp(t, Options{})
	const n = 50
	for i := range n {
		s.RecordBreaker(fleet.BreakerChange{Candidate: "a", From: fleet.BreakerClosed, To: fleet.BreakerOpen, At: t0.Add(time.Duration(i) * time.Second), Cause: "2 failures"})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Dropped() != 0 {
		t.Errorf("Dropped() = %d; want 0", s.Dropped())
	}
	s = openAt(t, path, Options{})
	if got := count(t, s, "breaker_events"); got != n {
		t.Errorf("after Close and reopen, %d breaker events; want %d", got, n)
	}
}

func TestClosed(t *testing.T) {
	s, _ := openTemp(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(context.Background(), rec("late", t0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v; want ErrClosed", err)
	}
	s.RecordBreaker(fleet.BreakerChange{Candidate: "a"})
	if s.Dropped() != 1 {
		t.Errorf("Dropped() after RecordBreaker on a closed Store = %d; want 1", s.Dropped())
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}

// Records, queries and prunes that race with Close fail or succeed, and
// never touch a closed connection.
func TestCloseWhileBusy(t *testing.T) {
	s, err := openWith(filepath.Join(t.TempDir(), "history.db"), Options{}, hooks{moveAt: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch g {
				case 0, 1:
					s.Record(ctx, rec(fmt.Sprint(g, "-", i), t0))
				case 2:
					s.Requests(ctx, Filter{})
				case 3:
					s.Prune(ctx)
				}
			}
		})
	}
	mustRecord(t, s, rec("before", t0))
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	close(stop)
	wg.Wait()
	if err := s.Record(ctx, rec("after", t0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v; want ErrClosed", err)
	}
}
