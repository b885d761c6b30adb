package team

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

var t0 = time.Date(2026, 12, 1, 18, 41, 0, 0, time.UTC)

// shared is a candidate on a server two nodes reach by different URLs.
var shared = fleet.Candidate{ID: "big", URL: "http://gpu1.invalid:11434", Model: "qwen3:8b", ServerKey: "gpu1"}

func newTestTeam(t *testing.T, node string, now func() time.Time) *Team {
	t.Helper()
	tm, err := New(Options{URL: "postgres://127.0.0.1:1/x", Node: node, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	tm.Update([]fleet.Candidate{shared})
	return tm
}

func report(seq int64, node, status string, hold time.Duration) row {
	return row{Seq: seq, Node: node, Server: "gpu1", Model: "qwen3:8b", Status: status, Detail: status, ForMS: hold.Milliseconds()}
}

func TestRemoteFolding(t *testing.T) {
	now := t0
	tm := newTestTeam(t, "a", func() time.Time { return now })
	ev := tm.ev
	if got := tm.Remote(shared, now); got.Suspect || got.Out || got.InFlight != 0 {
		t.Fatalf("Remote() with no reports = %+v; want nothing", got)
	}

	ev.fold("a", report(1, "b", StatusBreakerOpen, 30*time.Second), 0, now)
	got := tm.Remote(shared, now)
	if !got.Suspect || got.Out || !strings.Contains(got.Reason, "node b: breaker open since") {
		t.Errorf("Remote() after one node = %+v; want suspect with node b's reason", got)
	}

	// A second node's report, written 10s ago (replayed): out until the
	// longer of the two holds.
	ev.fold("a", report(1, "c", StatusProbeFailed, 15*time.Second), 10*time.Second, now)
	got = tm.Remote(shared, now)
	if !got.Out || !got.Until.Equal(now.Add(30*time.Second)) {
		t.Errorf("Remote() after two nodes = %+v; want out until %v", got, now.Add(30*time.Second))
	}

	// c's report expires after 5 s: still out, until the longer cool-down
	// ends; b's after 30 s: clear.
	now = t0.Add(6 * time.Second)
	if got := tm.Remote(shared, now); !got.Out || !got.Until.Equal(t0.Add(30*time.Second)) || !strings.Contains(got.Reason, "node c: probe failed") {
		t.Errorf("Remote() once c's report expired = %+v; want out until %v, naming both nodes", got, t0.Add(30*time.Second))
	}
	now = t0.Add(31 * time.Second)
	if got := tm.Remote(shared, now); got.Out || got.Suspect {
		t.Errorf("Remote() once both expired = %+v; want nothing", got)
	}

	// An older or own row changes nothing; a newer ok clears its node.
	ev.fold("a", report(2, "b", StatusBreakerOpen, time.Minute), 0, now)
	ev.fold("a", report(1, "b", StatusOK, 0), 0, now)
	ev.fold("a", report(9, "a", StatusBreakerOpen, time.Minute), 0, now)
	if got := tm.Remote(shared, now); !got.Suspect || strings.Contains(got.Reason, "node a") {
		t.Errorf("Remote() after a stale and an own row = %+v; want b's suspicion only", got)
	}
	ev.fold("a", report(3, "b", StatusOK, 0), 0, now)
	if got := tm.Remote(shared, now); got.Suspect {
		t.Errorf("Remote() after b's ok = %+v; want nothing", got)
	}

	// Reports that never held at the same time keep nothing out: each
	// makes the server suspect in its turn.
	ev.fold("a", report(4, "b", StatusBreakerOpen, 5*time.Second), 0, now)
	now = now.Add(6 * time.Second)
	ev.fold("a", report(2, "c", StatusBreakerOpen, 5*time.Second), 0, now)
	if got := tm.Remote(shared, now); got.Out || !got.Suspect || strings.Contains(got.Reason, "node b") {
		t.Errorf("Remote() after two reports one after the other = %+v; want c's suspicion only", got)
	}
}

func TestLocalSuccessOverridesRemote(t *testing.T) {
	now := t0
	tm := newTestTeam(t, "a", func() time.Time { return now })
	tm.ev.fold("a", report(1, "b", StatusBreakerOpen, time.Minute), 0, now)
	tm.ev.fold("a", report(1, "c", StatusBreakerOpen, time.Minute), 0, now)
	now = now.Add(time.Second)
	tm.Observe(fleet.Event{Type: fleet.EventAttempt, Attempt: &fleet.Attempt{Candidate: "big", Outcome: fleet.OutcomeSuccess}})
	if got := tm.Remote(shared, now); got.Out || got.Suspect {
		t.Errorf("Remote() after a local success = %+v; want nothing", got)
	}
	// The status says so too: the reports no longer count.
	current := func() map[string]bool {
		got := map[string]bool{}
		for _, r := range tm.Status().Servers[0].Reports {
			if r.Node != "a" {
				got[r.Node] = r.Current
			}
		}
		return got
	}
	if got := current(); got["b"] || got["c"] {
		t.Errorf("reports current after a local success: %v; want neither", got)
	}
	// A report made after the success counts again.
	now = now.Add(time.Second)
	tm.ev.fold("a", report(2, "b", StatusBreakerOpen, time.Minute), 0, now)
	if got := tm.Remote(shared, now); !got.Suspect {
		t.Errorf("Remote() after a later report = %+v; want suspect", got)
	}
	if got := current(); !got["b"] || got["c"] {
		t.Errorf("reports current after b's later one: %v; want b's only", got)
	}
}

func TestInFlightJoinsAndExpires(t *testing.T) {
	now := t0
	tm := newTestTeam(t, "a", func() time.Time { return now })
	r := report(1, "b", StatusOK, 0)
	r.InFlight = 2
	tm.ev.fold("a", r, 0, now)
	r = report(1, "c", StatusOK, 0)
	r.InFlight = 3
	tm.ev.fold("a", r, 0, now)
	if got := tm.Remote(shared, now).InFlight; got != 5 {
		t.Errorf("Remote().InFlight = %d; want 5", got)
	}
	// A node that stops reporting (killed) stops counting.
	now = now.Add(DefaultInFlightFor)
	if got := tm.Remote(shared, now).InFlight; got != 0 {
		t.Errorf("Remote().InFlight after %v of silence = %d; want 0", DefaultInFlightFor, got)
	}
}

func TestServerKey(t *testing.T) {
	for _, tt := range []struct {
		c    fleet.Candidate
		want string
	}{
		{fleet.Candidate{URL: "http://GPU1.invalid:11434/v1"}, "http://gpu1.invalid:11434"},
		{fleet.Candidate{URL: "http://127.0.0.1:11434", Local: true}, ""},
		{fleet.Candidate{URL: "http://127.0.0.1:11434", Local: true, ServerKey: "box"}, "box"},
	} {
		if got := ServerKey(tt.c); got != tt.want {
			t.Errorf("ServerKey(%+v) = %q; want %q", tt.c, got, tt.want)
		}
	}
}

func TestObserveMarksEvidence(t *testing.T) {
	now := t0
	tm := newTestTeam(t, "a", func() time.Time { return now })
	tm.Update([]fleet.Candidate{shared, {ID: "mine", URL: "http://127.0.0.1:1", Local: true}})
	tm.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "big", To: fleet.BreakerOpen, Cause: "2 failures"}})
	tm.Observe(fleet.Event{Type: fleet.EventAttempt, Attempt: &fleet.Attempt{Candidate: "big", Fault: fleet.FaultServer, Outcome: fleet.OutcomeError}})
	tm.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "mine", To: fleet.BreakerOpen}})
	st := tm.Status()
	if len(st.Servers) != 1 || st.Servers[0].Reports[0].Status != StatusBreakerOpen {
		t.Fatalf("Status().Servers = %+v; want gpu1 with this node's open breaker (a failed probe does not weaken it; a loopback server is not shared)", st.Servers)
	}
	// A breaker that opens again (its half-open probe failed) is said
	// again, to restart the others' cool-down.
	m := tm.ev.local[target{"gpu1", "qwen3:8b"}]
	m.sentGen = m.gen
	tm.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: "big", To: fleet.BreakerOpen, Cause: "probe failed"}})
	if !m.dirty() {
		t.Error("a reopened breaker is not published again")
	}
	if st.Link != LinkOffline {
		t.Errorf("Status().Link before connecting = %q; want offline", st.Link)
	}
}

// A connection string pgx can't read, or a JDBC URL, is refused without
// repeating it: it may hold a password.
func TestNewRefusesWhatItCannotRead(t *testing.T) {
	for _, url := range []string{
		"postgres://u:S3cret@PW@127.0.0.1:notaport/x",
		"127.0.0.1:5432:team:postgres:S3cretPW",
		"jdbc:postgresql://127.0.0.1:5432/team?user=u&password=S3cret",
	} {
		_, err := New(Options{URL: url, Node: "a"})
		if err == nil || strings.Contains(err.Error(), "S3cret") || !strings.Contains(err.Error(), "postgres://user:password@host:port/database") {
			t.Errorf("New(%q) = %v; want an error that shows the form and not the string", url, err)
		}
	}
}

// The nodes list ages by this node's clock: a node not heard of for three
// heartbeats is not shown online, and this node's own row shows its own
// link, though the database's last word was older.
func TestNodesAgeWhileOffline(t *testing.T) {
	now := t0
	tm := newTestTeam(t, "a", func() time.Time { return now })
	tm.nodes = []Node{{Name: "a", LastSeen: t0, Link: LinkOnline}, {Name: "b", LastSeen: t0, Link: LinkOnline}}
	var logged []string
	tm.o.Logf = func(f string, args ...any) { logged = append(logged, fmt.Sprintf(f, args...)) }
	tm.setLink(0, false, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
	tm.setLink(0, false, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
	now = t0.Add(3*DefaultHeartbeat + time.Second)
	st := tm.Status()
	for _, n := range st.Nodes {
		if n.Link != LinkOffline {
			t.Errorf("node %s = %s after %v unheard, this node offline; want offline", n.Name, n.Link, now.Sub(n.LastSeen))
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "not linked yet: dial tcp") {
		t.Errorf("log = %q; want one line saying why the link is not up", logged)
	}
	// A role that can't migrate: the status says why, not the waiting
	// listener's "not connected yet".
	tm.setLink(0, false, errors.New("team migrate: ERROR: permission denied for schema public (SQLSTATE 42501)"))
	if st := tm.Status(); st.Link != LinkOffline || !strings.Contains(st.LinkError, "permission denied") {
		t.Errorf("status = %s %q; want offline with the migration's error", st.Link, st.LinkError)
	}
	// One connection up while the other is refused is no link: nothing
	// more is said.
	tm.setLink(1, true, nil)
	tm.setLink(0, false, errors.New("team migrate: ERROR: permission denied for schema public (SQLSTATE 42501)"))
	if len(logged) != 1 {
		t.Errorf("log = %q; want still the one line", logged)
	}
	tm.setLink(0, true, nil)
	if last := logged[len(logged)-1]; len(logged) != 2 || !strings.Contains(last, "linked to the team database as node a") {
		t.Errorf("log = %q; want the first link said once both connections are up, as a first link", logged)
	}
	tm.setLink(1, false, errors.New("listen: conn closed"))
	tm.setLink(1, true, nil)
	if want := []string{"team: team link offline: listen: conn closed", "team: link to the team database back"}; !slices.Equal(logged[2:], want) {
		t.Errorf("log after the listener's drop = %q; want %q", logged[2:], want)
	}
}
