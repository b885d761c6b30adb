package team

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/pgtest"
)

// These tests run against a real PostgreSQL (backend/pgtest) and wait for
// its goroutines with eventually, bounded by waitLimit.

const waitLimit = 20 * time.Second

// eventually polls cond until it holds, failing t after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fast are Options that make a test's team act within milliseconds.
func fast(url, node string) Options {
	return Options{
		URL: url, Node: node, Version: "test", ConfigHash: "h",
		ShipEvery: 20 * time.Millisecond, Heartbeat: 200 * time.Millisecond, MinGap: 20 * time.Millisecond,
		OpTimeout: time.Second, RetryPause: 20 * time.Millisecond, Logf: func(string, ...any) {},
	}
}

func start(t *testing.T, o Options) *Team {
	t.Helper()
	tm, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	tm.Update([]fleet.Candidate{shared})
	tm.Start()
	t.Cleanup(tm.Close)
	return tm
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// count runs a counting query; -1 when it fails (the database is down).
func count(url, q string, args ...any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

func TestThreeNodesMigrateAnEmptyDatabaseOnce(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		conn := connect(t, url)
		wg.Go(func() { errs[i] = Migrate(context.Background(), conn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate() on node %d = %v; want nil", i, err)
		}
	}
	if n := count(url, "SELECT count(*) FROM team_schema"); n != len(ms) {
		t.Errorf("team_schema rows = %d; want %d, each migration once", n, len(ms))
	}
	if err := Migrate(context.Background(), connect(t, url)); err != nil {
		t.Errorf("Migrate() again = %v; want nil", err)
	}
	// A newer binary's database is refused.
	conn := connect(t, url)
	if _, err := conn.Exec(context.Background(), "INSERT INTO team_schema (version) VALUES ($1)", len(ms)+1); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(context.Background(), conn); err == nil {
		t.Error("Migrate() of a newer schema = nil; want ErrSchemaTooNew")
	}
}

func openHistory(t *testing.T) *history.Store {
	t.Helper()
	s, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.Options{Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// teamReading is the word that demoted record's first attempt.
var teamReading = fleet.GPUReading{GPU: -1, Source: "team", Reason: "node b: breaker open since 05:25:23"}

func record(t *testing.T, s *history.Store, from, to int) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i := from; i < to; i++ {
		id := fmt.Sprintf("r%05d", i)
		err := s.Record(context.Background(), fleet.RequestRecord{
			ID: id, StartedAt: at, Protocol: fleet.ProtocolOpenAI, RequestedModel: "auto", ServedCandidate: "big",
			Status: fleet.StatusOK, HTTPStatus: 200, Latency: time.Second,
			Attempts: []fleet.Attempt{
				{Candidate: "small", Outcome: fleet.OutcomeTimeout, Fault: fleet.FaultServer, StartedAt: at, Deadline: time.Second,
					Demoted: true, Reading: &teamReading},
				{Candidate: "big", Outcome: fleet.OutcomeSuccess, StartedAt: at, TTFT: 100 * time.Millisecond},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestShippingSurvivesCrashesAndRestarts: records written while the
// database is down (crashed with pg_ctl -m immediate) or frozen (SIGSTOP)
// are shipped once it is back, none lost and none doubled, and a node that
// restarts resumes from its cursor.
func TestShippingSurvivesCrashesAndRestarts(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase()
	hist := openHistory(t)
	o := fast(url, "a")
	o.History = hist
	tm := start(t, o)

	requests := func() int { return count(url, "SELECT count(*) FROM team_requests WHERE node = 'a'") }
	attempts := func() int { return count(url, "SELECT count(*) FROM team_attempts WHERE node = 'a'") }
	record(t, hist, 0, 100)
	eventually(t, "100 records shipped", func() bool { return requests() == 100 })
	eventually(t, "link online", func() bool { return tm.Status().Link == LinkOnline })

	pg.Stop()
	eventually(t, "team link offline after a crash", func() bool { return tm.Status().Link == LinkOffline })
	record(t, hist, 100, 200)
	pg.Start()
	eventually(t, "200 records shipped after the crash", func() bool { return requests() == 200 })

	pg.Freeze()
	record(t, hist, 200, 300)
	eventually(t, "team link offline while frozen", func() bool { return tm.Status().Link == LinkOffline })
	pg.Thaw()
	eventually(t, "300 records shipped after the freeze", func() bool { return requests() == 300 })
	if n := attempts(); n != 600 {
		t.Errorf("attempts shipped = %d; want 600", n)
	}

	// A restart resumes from the cursor: nothing is shipped twice.
	tm.Close()
	record(t, hist, 300, 310)
	tm2 := start(t, o)
	eventually(t, "310 records after a restart", func() bool { return requests() == 310 })
	eventually(t, "the restarted node idles", func() bool { return tm2.Status().Link == LinkOnline })
	if n := tm2.Shipped(); n != 10 {
		t.Errorf("restarted node shipped %d records; want the 10 new ones", n)
	}

	recs, err := tm2.Requests(context.Background(), "a", 5)
	if err != nil || len(recs) != 5 || recs[0].Node != "a" || len(recs[0].Attempts) != 2 || recs[0].Attempts[1].Outcome != fleet.OutcomeSuccess {
		t.Errorf("Requests(a, 5) = %d records (first %+v), %v; want 5 of node a with their 2 attempts", len(recs), recs, err)
	} else if r := recs[0].Attempts[0].Reading; r == nil || *r != teamReading || recs[0].Attempts[1].Reading != nil {
		t.Errorf("attempts' readings = %+v, %+v; want the demotion's reading as recorded, and none", r, recs[0].Attempts[1].Reading)
	}
	if recs, err := tm2.Requests(context.Background(), "nobody", 5); err != nil || len(recs) != 0 {
		t.Errorf("Requests(nobody) = %d records, %v; want none", len(recs), err)
	}
}

// TestNewHistoryFileShipsFromItsStart: a node that starts on a new history
// file under its old name (the file deleted, or --db pointed elsewhere)
// numbers its rows from 1 again. Written while the database was down and
// past the old file's cursor, they are shipped all the same, none skipped.
func TestNewHistoryFileShipsFromItsStart(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase()
	requests := func() int { return count(url, "SELECT count(*) FROM team_requests WHERE node = 'a'") }
	o := fast(url, "a")
	o.History = openHistory(t)
	tm := start(t, o)
	record(t, o.History.(*history.Store), 0, 3)
	eventually(t, "3 records shipped", func() bool { return requests() == 3 })
	tm.Close()
	// The test cluster commits without waiting for its WAL, which a crash
	// loses: a checkpoint writes it.
	if _, err := connect(t, url).Exec(context.Background(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	pg.Stop()
	o.History = openHistory(t)
	record(t, o.History.(*history.Store), 100, 106) // rowids 1 to 6
	eventually(t, "the records in the new file's tables", func() bool {
		b, err := o.History.After(context.Background(), history.Cursor{}, 10)
		return err == nil && len(b.Requests) == 6
	})
	start(t, o)
	pg.Start()
	eventually(t, "the new file's 6 records shipped too", func() bool { return requests() == 9 })
}

// TestRetentionDropsWholePartitions: a day past retention goes as a whole
// partition; today's stays.
func TestRetentionDropsWholePartitions(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	conn := connect(t, url)
	ctx := context.Background()
	if err := Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.AddDate(0, 0, -40)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return partitions{}.ensure(ctx, tx, old, now)
	})
	if err != nil {
		t.Fatal(err)
	}
	parts := func() int {
		return count(url, `SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'team_requests'`)
	}
	if n := parts(); n != 2 {
		t.Fatalf("partitions of team_requests = %d; want 2", n)
	}
	dropped, err := dropBefore(ctx, conn, now.Add(-DefaultRetention))
	if err != nil || dropped != len(partitioned) {
		t.Errorf("dropBefore() = %d, %v; want %d (the old day of each table)", dropped, err, len(partitioned))
	}
	if n := parts(); n != 1 {
		t.Errorf("partitions of team_requests after retention = %d; want 1", n)
	}

	// A node drops them itself when it connects (and every hour).
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return partitions{}.ensure(ctx, tx, old) })
	if err != nil {
		t.Fatal(err)
	}
	tm := start(t, fast(url, "a"))
	eventually(t, "the node drops the old day", func() bool { return parts() == 1 })

	// A reload that shortens the retention drops what is past it at once,
	// not at the next hourly round.
	recent := now.AddDate(0, 0, -3)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return partitions{}.ensure(ctx, tx, recent) })
	if err != nil {
		t.Fatal(err)
	}
	if n := parts(); n != 2 {
		t.Fatalf("partitions of team_requests = %d; want 2", n)
	}
	tm.Tune(0, 0, 48*time.Hour)
	eventually(t, "the reload drops the day three days old", func() bool { return parts() == 1 })
}

// TestConfigHashFollowsReloads: the hash a node says of itself is the one
// of the config it runs now, at the next heartbeat.
func TestConfigHashFollowsReloads(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	tm := start(t, fast(url, "a"))
	hashed := func(h string) func() bool {
		return func() bool {
			return count(url, `SELECT count(*) FROM team_nodes WHERE node = 'a' AND config_hash = $1`, h) == 1
		}
	}
	eventually(t, "the node says its start's hash", hashed("h"))
	tm.SetConfigHash("reloaded")
	eventually(t, "the node says the reloaded config's hash", hashed("reloaded"))
}

// TestUpgradeAddsTheReadingToExistingPartitions: a database a node of
// schema 1 made, with a day's partition and its rows, takes migration 2
// in place; its old attempts read back without a reading.
func TestUpgradeAddsTheReadingToExistingPartitions(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	conn := connect(t, url)
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE TABLE team_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ms[0].sql); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO team_schema (version) VALUES (1)"); err != nil {
			return err
		}
		now := time.Now()
		if err := (partitions{}).ensure(ctx, tx, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO team_requests (node, id, started_at, protocol, stream, thinking, requested_model,
			served_candidate, served_model, is_fallback, status, http_status, latency_ms) VALUES ('old', 'r1', $1, 'openai', false, false,
			'auto', 'big', 'm', false, 'ok', 200, 5)`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO team_attempts (node, request_id, request_started_at, ord, candidate, outcome,
			deadline_ms, duration_ms, cold, demoted) VALUES ('old', 'r1', $1, 0, 'big', 'success', 1000, 5, false, false)`, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate() of schema 1 = %v", err)
	}
	if n := count(url, "SELECT max(version) FROM team_schema"); n != len(ms) {
		t.Errorf("schema after Migrate = %d; want %d", n, len(ms))
	}
	tm := start(t, fast(url, "a"))
	recs, err := tm.Requests(ctx, "old", 5)
	if err != nil || len(recs) != 1 || len(recs[0].Attempts) != 1 || recs[0].Attempts[0].Reading != nil {
		t.Errorf("Requests(old) after the upgrade = %+v, %v; want r1 with its attempt, no reading", recs, err)
	}
}

// TestTwoNodesOfOneName: a second Switchyard started under a name a linked
// node has stays out of the team, saying why, until the first is gone.
func TestTwoNodesOfOneName(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	first := start(t, fast(url, "a"))
	eventually(t, "the first node links", first.Online)
	var mu sync.Mutex
	var logged []string
	o := fast(url, "a")
	o.Logf = func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, args...))
	}
	second := start(t, o)
	eventually(t, "the second says why it stays out", func() bool {
		st := second.Status()
		return st.Link == LinkOffline && strings.Contains(st.LinkError, "give each node its own team.node")
	})
	if !first.Online() {
		t.Error("the first node lost its link to the second")
	}
	// PostgreSQL finds a dead node's connection, and frees its name, in
	// half a minute rather than the system's two hours.
	c, err := pgx.ConnectConfig(context.Background(), first.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var idle string
	if err := c.QueryRow(context.Background(), "SHOW tcp_keepalives_idle").Scan(&idle); err != nil || idle != "15" {
		t.Errorf("tcp_keepalives_idle of a node's connection = %q, %v; want 15", idle, err)
	}
	c.Close(context.Background())
	first.Close()
	eventually(t, "the second links once the first is gone", second.Online)
	mu.Lock()
	defer mu.Unlock()
	if n := len(logged); n < 2 || !strings.Contains(logged[0], "give each node its own team.node") || !strings.Contains(logged[n-1], "linked to the team database as node a") {
		t.Errorf("log = %q; want why it stayed out, then linked", logged)
	}
}
