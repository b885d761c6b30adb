package system

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/pgtest"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/team"
)

// teamNode starts a Switchyard in front of f, a node of the team in the
// database at url when url is not "" (sharing on), alone otherwise.
func teamNode(t *testing.T, f *simfleet.Fleet, name, url string) *System {
	t.Helper()
	return teamNodeWith(t, f, name, url, "selection:\n  failure_threshold: 2\n  open_duration: 5m\n  first_token_timeout: 1s\n  deadline_floor: 500ms\n")
}

// teamNodeWith is teamNode with the selection section given.
func teamNodeWith(t *testing.T, f *simfleet.Fleet, name, url, selection string) *System {
	t.Helper()
	cfg, db := teamConfig(t, f, name, url != "", selection)
	sys, err := New(t.Context(), Options{ConfigPath: cfg, Addr: "127.0.0.1:0", DBPath: db,
		ShutdownGrace: time.Second, Getenv: teamEnv(url)})
	if err != nil {
		t.Fatal(err)
	}
	runSystem(t, sys)
	return sys
}

// teamSetup starts a PostgreSQL with an empty database (url) and n fast
// simulated servers, all gone when t ends.
func teamSetup(t *testing.T, n int) (*pgtest.Server, string, *simfleet.Fleet) {
	t.Helper()
	pg := pgtest.Start(t)
	url := pg.NewDatabase()
	f, err := simfleet.StartFast(n, fleet.ProviderOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return pg, url, f
}

// teamEnv is an environment holding only $TEAM_DB, url.
func teamEnv(url string) func(string) string {
	return func(k string) string {
		if k == "TEAM_DB" {
			return url
		}
		return ""
	}
}

// startCrashChild starts this test binary as a Switchyard (TestMain's
// crashChild) on cfg and db, with env added, and returns it and its URL.
func startCrashChild(t *testing.T, cfg, db string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), append([]string{"SWITCHYARD_CRASH_CHILD=" + cfg, "SWITCHYARD_CRASH_DB=" + db}, env...)...)
	out, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("child said %q, %v", line, err)
	}
	return child, strings.TrimSpace(line)
}

// teamConfig writes the config of a node named name in front of f, in a
// team whose connection string is in $TEAM_DB when inTeam, and returns
// its path and the history file's beside it.
func teamConfig(t *testing.T, f *simfleet.Fleet, name string, inTeam bool, selection string) (cfg, db string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(selection)
	if inTeam {
		fmt.Fprintf(&b, "team:\n  database_env: TEAM_DB\n  node: %s\n", name)
	}
	b.WriteString("chat:\n  candidates:\n")
	for _, c := range f.Candidates() {
		// Every node reaches the servers by loopback: server_key says they
		// are the same servers.
		fmt.Fprintf(&b, "    - {id: %s, provider: %s, url: %q, model: %s, priority: %d, server_key: %s}\n", c.ID, c.Provider, c.URL, c.Model, c.Priority, c.ID)
	}
	dir := t.TempDir()
	cfg = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "h.db")
}

func teamChat(t *testing.T, sys *System) {
	t.Helper()
	resp, err := http.Post(sys.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat on %s = %d; want 200", sys.URL(), resp.StatusCode)
	}
}

// wasted counts the attempts sys made on candidate bad: tried, not
// skipped or demoted.
func wasted(t *testing.T, sys *System, bad string) int {
	t.Helper()
	n := 0
	f := history.Filter{Limit: history.MaxLimit}
	for {
		recs, err := sys.store.Requests(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			for _, a := range r.Attempts {
				if a.Candidate == bad && a.Outcome != fleet.OutcomeSkippedOpen && a.Outcome != fleet.OutcomeDemoted {
					n++
				}
			}
		}
		if len(recs) < f.Limit {
			return n
		}
		f.Before = recs[len(recs)-1].ID
	}
}

// TestTeamSharesWhatItLearns: three Switchyards in front of one simulated
// fleet, a dead server and a hung one, each first in the order. Alone,
// each node pays its own failed attempts before its breaker opens; in a
// team, the first node's open breaker demotes the server on the others,
// who pay none. Their history reaches the team database, each record
// once, under its node's name.
func TestTeamSharesWhatItLearns(t *testing.T) {
	pg := pgtest.Start(t)
	for _, fault := range []simfleet.FaultKind{simfleet.FaultRefuse, simfleet.FaultHangFirstToken} {
		for _, sharing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s sharing %v", fault, sharing), func(t *testing.T) {
				f, err := simfleet.StartFleet([]simfleet.Member{
					{ID: "bad", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "m"}}}},
					{ID: "good", Priority: 2, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "m"}}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(f.Close)
				if err := f.SetFault("bad", simfleet.Fault{Kind: fault}); err != nil {
					t.Fatal(err)
				}
				url := ""
				if sharing {
					url = pg.NewDatabase()
				}
				nodes := []*System{teamNode(t, f, "n1", url), teamNode(t, f, "n2", url), teamNode(t, f, "n3", url)}
				if sharing {
					for _, n := range nodes {
						eventually(t, 20*time.Second, "team link online", func() bool { return n.team.Status().Link == team.LinkOnline })
					}
				}
				// n1 meets the fault first: two failures open its breaker.
				teamChat(t, nodes[0])
				teamChat(t, nodes[0])
				if sharing {
					bad := nodes[1].router.Fleet().Targets[0].Candidate
					for _, n := range nodes[1:] {
						eventually(t, 20*time.Second, "evidence reaches the others", func() bool { return n.team.Remote(bad, time.Now()).Suspect })
					}
				}
				for range 3 {
					for _, n := range nodes {
						teamChat(t, n)
					}
				}
				var per []int
				total := 0
				for _, n := range nodes {
					w := wasted(t, n, "bad")
					per = append(per, w)
					total += w
				}
				t.Logf("%s, sharing %v: wasted attempts per node %v, total %d", fault, sharing, per, total)
				want := 6 // each node's two failures before its breaker opens
				if sharing {
					want = 2 // n1's only
				}
				if total != want {
					t.Errorf("wasted attempts = %v (total %d); want total %d", per, total, want)
				}
				if !sharing {
					return
				}
				eventually(t, 20*time.Second, "every record shipped once", func() bool {
					return rows(t, url, "SELECT count(*) FROM team_requests") == 11 &&
						rows(t, url, "SELECT count(DISTINCT node) FROM team_requests") == 3
				})
				// Any node reads the whole team's history, or one node's.
				all, err := nodes[0].teamAPI().Requests(t.Context(), "", 100)
				if err != nil || len(all.Requests) != 11 {
					t.Errorf("team requests = %d, %v; want all 11", len(all.Requests), err)
				}
				n2, err := nodes[0].teamAPI().Requests(t.Context(), "n2", 100)
				if err != nil || len(n2.Requests) != 3 || n2.Requests[0].Node != "n2" {
					t.Errorf("team requests of n2 = %+v, %v; want its 3", n2.Requests, err)
				}
			})
		}
	}
}

// scrape is what sys's /metrics says.
func scrape(t *testing.T, sys *System) string {
	t.Helper()
	resp, err := http.Get(sys.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func connectTo(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func rows(t *testing.T, url, q string) int {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return -1
	}
	return n
}

// TestTeamDatabaseFaultsLeaveRequestsAlone: with the team database frozen
// (SIGSTOP) and then crashed (pg_ctl -m immediate), a node answers as fast
// as ever, says "team link offline", and ships what it served once the
// database is back, every record once.
func TestTeamDatabaseFaultsLeaveRequestsAlone(t *testing.T) {
	pg, url, f := teamSetup(t, 1)
	n := teamNode(t, f, "n1", url)
	eventually(t, 20*time.Second, "team link online", func() bool { return n.team.Status().Link == team.LinkOnline })
	// An alert can watch the link.
	if m := scrape(t, n); !strings.Contains(m, "switchyard_team_link_online 1") || !strings.Contains(m, "switchyard_team_shipped_records_total") {
		t.Errorf("/metrics lacks the team's link:\n%s", m)
	}
	served := 0
	serve := func(k int) {
		for range k {
			begin := time.Now()
			teamChat(t, n)
			if d := time.Since(begin); d > time.Second {
				t.Errorf("a request took %v with the team database down; want no wait on it", d)
			}
			served++
		}
	}
	serve(5)
	for _, fault := range []struct {
		name     string
		down, up func()
	}{
		{"frozen", pg.Freeze, pg.Thaw},
		{"crashed", pg.Stop, pg.Start},
	} {
		fault.down()
		serve(10)
		eventually(t, 30*time.Second, fault.name+": team link offline", func() bool { return n.team.Status().Link == team.LinkOffline })
		if m := scrape(t, n); !strings.Contains(m, "switchyard_team_link_online 0") {
			t.Errorf("%s: /metrics does not say the link is offline", fault.name)
		}
		serve(5)
		fault.up()
		eventually(t, 30*time.Second, fault.name+": every record shipped once", func() bool {
			return rows(t, url, "SELECT count(*) FROM team_requests WHERE node = 'n1'") == served
		})
	}
}

// TestCheckSaysWhatItFoundInTheTeam: check connects to the team database
// and reports its schema and nodes, or why it could not.
func TestCheckSaysWhatItFoundInTheTeam(t *testing.T) {
	_, url, f := teamSetup(t, 1)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("team:\n  database_env: TEAM_DB\n  node: n1\nchat:\n  candidates:\n    - {id: a, provider: openai, url: %q, model: %s}\n",
		f.Candidates()[0].URL, f.Candidates()[0].Model)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(url string) *TeamCheck {
		rep, err := Check(t.Context(), Options{ConfigPath: cfg, Getenv: func(string) string { return url }})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Team
	}
	if tc := check(url); tc == nil || tc.Err != nil || tc.Node != "n1" || tc.Found.Schema != 0 || !strings.HasPrefix(tc.Found.Server, "15") {
		t.Errorf("Check() team of an empty database = %+v; want PostgreSQL 15, not migrated", tc)
	}
	n := teamNode(t, f, "n1", url)
	eventually(t, 20*time.Second, "team link online", func() bool { return n.team.Status().Link == team.LinkOnline })
	if tc := check(url); tc.Err != nil || tc.Found.Schema != tc.Found.Known || len(tc.Found.Nodes) != 1 || tc.Found.Nodes[0].Name != "n1" {
		t.Errorf("Check() team with n1 running = %+v; want the schema up to date and node n1", tc)
	}
	if tc := check(""); !errors.Is(tc.Err, ErrTeamUnset) {
		t.Errorf("Check() team with the variable unset: %v; want ErrTeamUnset", tc.Err)
	}
	if tc := check("postgres://u:S3cret@PW@127.0.0.1:x/t"); !errors.Is(tc.Err, team.ErrConnString) || strings.Contains(tc.Err.Error(), "S3cret") {
		t.Errorf("Check() team with a string pgx can't read: %v; want ErrConnString, not repeating it", tc.Err)
	}
	// A role that may read but not write: serve's node could never join,
	// so check fails it, naming what the role lacks.
	ro := "ro_" + strings.TrimPrefix(url[strings.LastIndex(url, "/")+1:strings.Index(url, "?")], "/")
	for _, q := range []string{
		"CREATE ROLE " + ro + " LOGIN", "GRANT USAGE ON SCHEMA public TO " + ro, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ro,
	} {
		conn := connectTo(t, url)
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		conn.Close(t.Context())
	}
	roURL := strings.Replace(url, "postgres://postgres@", "postgres://"+ro+"@", 1)
	if tc := check(roURL); !errors.Is(tc.Err, team.ErrCannotWrite) || !strings.Contains(tc.Err.Error(), "INSERT on team_requests") || !strings.Contains(tc.Err.Error(), "CREATE on schema public") {
		t.Errorf("Check() team as a read-only role: %v; want ErrCannotWrite naming what it lacks", tc.Err)
	}

	// A database a newer Switchyard migrated is refused by serve: check
	// fails it too.
	if n := rows(t, url, "WITH v AS (INSERT INTO team_schema (version) VALUES (99) RETURNING 1) SELECT count(*) FROM v"); n != 1 {
		t.Fatalf("schema 99 inserted: %d rows", n)
	}
	if tc := check(url); !errors.Is(tc.Err, team.ErrSchemaTooNew) {
		t.Errorf("Check() team of a newer schema: %v; want ErrSchemaTooNew", tc.Err)
	}
}

// TestTeamNodeKilledCatchesUp: a node killed with SIGKILL ships, once it
// starts again, every record it had answered (none lost, none doubled), and
// replays what the others reported while it was dead.
func TestTeamNodeKilledCatchesUp(t *testing.T) {
	_, url, f := teamSetup(t, 2)
	const sel = "selection:\n  failure_threshold: 2\n"
	cfg, db := teamConfig(t, f, "victim", true, sel)
	witness := teamNodeWith(t, f, "witness", url, sel)

	child, base := startCrashChild(t, cfg, db, "TEAM_DB="+url)
	const answered = 30
	for range answered {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat = %d", resp.StatusCode)
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()

	// While it is dead, the witness sees fast-1's breaker open.
	witness.team.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "fast-1", From: fleet.BreakerClosed, To: fleet.BreakerOpen, Cause: "2 failures"}})
	eventually(t, 20*time.Second, "the witness's report written", func() bool {
		return rows(t, url, "SELECT count(*) FROM team_evidence WHERE node = 'witness' AND status = 'breaker_open'") == 1
	})

	sys, err := New(t.Context(), Options{ConfigPath: cfg, Addr: "127.0.0.1:0", DBPath: db, ShutdownGrace: time.Second, Getenv: teamEnv(url)})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	runSystem(t, sys)
	eventually(t, 20*time.Second, "every answered record shipped once", func() bool {
		return rows(t, url, "SELECT count(*) FROM team_requests WHERE node = 'victim'") == answered
	})
	fast1 := candidate(sys, "fast-1")
	eventually(t, 20*time.Second, "the restarted node replays the witness's report", func() bool {
		return sys.team.Remote(fast1, time.Now()).Suspect
	})
}

// TestTeamEditWaitsForARestart: an edit of the team block is applied for
// everything else and said to wait for the next start.
func TestTeamEditWaitsForARestart(t *testing.T) {
	_, url, f := teamSetup(t, 1)
	cfgPath, db := teamConfig(t, f, "n1", true, "")
	var log logLines
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, Getenv: teamEnv(url), Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	apply := func(cfg config.Config) {
		t.Helper()
		if err := sys.apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	cfg := sys.cfg
	cfg.Team.Node = "n2"
	apply(cfg)
	if !strings.Contains(log.text(), "apply at the next start") {
		t.Errorf("log = %q; want the team edit said to wait for a restart", log.text())
	}
	if sys.team.Node() != "n1" {
		t.Errorf("node = %s; want n1 until the restart", sys.team.Node())
	}
	if strings.Contains(log.text(), "is empty or unset") {
		t.Errorf("log = %q; the variable is set", log.text())
	}
	// A variable the next start would not find is said now.
	cfg.Team.DatabaseEnv = "NOT_SET_ANYWHERE"
	apply(cfg)
	if !strings.Contains(log.text(), "$NOT_SET_ANYWHERE is empty or unset") {
		t.Errorf("log = %q; want the unset variable said before the next start needs it", log.text())
	}
	// Back to the team in force: nothing waits for a restart.
	cfg.Team.DatabaseEnv, cfg.Team.Node = "TEAM_DB", "n1"
	apply(cfg)
	if !strings.HasSuffix(log.text(), "config: team.database_env and team.node are back to those in force\nconfig "+cfgPath+" applied") {
		t.Errorf("log = %q; want the team said back to the one in force", log.text())
	}
}

// TestConfigHashIsTheSharedConfig: nodes with the same candidates and
// rules show the same hash, however each writes its file and whatever its
// own settings; a change of the shared part changes it.
func TestConfigHashIsTheSharedConfig(t *testing.T) {
	parse := func(text string) config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const fleetA = "chat:\n  default_model: a\n  candidates:\n    - {id: a, provider: ollama, url: \"http://127.0.0.1:11434\", model: \"qwen3:8b\"}\n"
	one := parse("listen: 127.0.0.1:8484\nteam: {database_env: TEAM_DB, node: one}\nhistory: {path: /tmp/one.db}\n" + fleetA)
	two := parse("# the second box\nlisten: 127.0.0.1:9494\nteam: {database_env: TEAM_DB, node: two}\n" + fleetA)
	if configHash(one) != configHash(two) {
		t.Errorf("nodes with one fleet: hashes %s and %s; want the same", configHash(one), configHash(two))
	}
	other := parse(strings.Replace(fleetA, "qwen3:8b", "qwen3:14b", 1))
	if configHash(other) == configHash(one) {
		t.Error("another model has the same hash")
	}
	if rules := parse("selection: {failure_threshold: 3}\n" + fleetA); configHash(rules) == configHash(one) {
		t.Error("other selection rules have the same hash")
	}
}

// TestTeamAddedByAReloadWaitsForARestart: a node in no team that is given
// one by a reload says it stays out until the next start.
func TestTeamAddedByAReloadWaitsForARestart(t *testing.T) {
	f, err := simfleet.StartFast(1, fleet.ProviderOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfgPath, db := teamConfig(t, f, "n1", false, "")
	var log logLines
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, Getenv: teamEnv("postgres://127.0.0.1:1/x"), Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	cfg := sys.cfg
	cfg.Team.DatabaseEnv = "TEAM_DB"
	if err := sys.apply(cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.text(), "config: team.database_env and team.node apply at the next start; this node is in no team until then") {
		t.Errorf("log = %q; want the team said to wait for the next start", log.text())
	}
}
