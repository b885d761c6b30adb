package team

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/pgtest"
)

func breakerOpen(tm *Team) {
	tm.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: shared.ID, From: fleet.BreakerClosed, To: fleet.BreakerOpen, Cause: "2 failures"}})
}

func breakerClosed(tm *Team) {
	tm.Observe(fleet.Event{Type: fleet.EventBreaker, Breaker: &fleet.BreakerChange{Candidate: shared.ID, From: fleet.BreakerHalfOpen, To: fleet.BreakerClosed}})
}

// TestEvidenceAcrossThreeNodes: one node's open breaker makes the server
// suspect on the others, two keep it out, and a node killed without a
// word (kill -9: nothing in memory survives) catches up from the rows at
// its next start.
func TestEvidenceAcrossThreeNodes(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	a, b := start(t, fast(url, "a")), start(t, fast(url, "b"))
	c := start(t, fast(url, "c"))
	for _, tm := range []*Team{a, b, c} {
		eventually(t, tm.Node()+" online", func() bool { return tm.Status().Link == LinkOnline })
	}
	breakerOpen(a)
	eventually(t, "b and c suspect the server", func() bool {
		return b.Remote(shared, time.Now()).Suspect && c.Remote(shared, time.Now()).Suspect
	})
	if rm := a.Remote(shared, time.Now()); rm.Suspect || rm.Out {
		t.Errorf("a.Remote() = %+v; want nothing: its own word is its breaker", rm)
	}
	breakerOpen(c)
	eventually(t, "b keeps the server out", func() bool { return b.Remote(shared, time.Now()).Out })

	// b dies; a new b starts and replays the rows.
	b.Close()
	b2 := start(t, fast(url, "b"))
	eventually(t, "the restarted b keeps the server out", func() bool { return b2.Remote(shared, time.Now()).Out })

	// a's breaker closes: only c still reports.
	breakerClosed(a)
	eventually(t, "b2 back to suspect", func() bool {
		rm := b2.Remote(shared, time.Now())
		return rm.Suspect && !rm.Out
	})

	// In-flight counts reach the others.
	var n atomic.Int64
	n.Store(3)
	o := fast(url, "d")
	o.InFlight = func() map[string]int { return map[string]int{shared.ID: int(n.Load())} }
	start(t, o)
	eventually(t, "b2 sees d's 3 requests", func() bool { return b2.Remote(shared, time.Now()).InFlight == 3 })
	n.Store(0)
	eventually(t, "b2 sees d's requests end", func() bool { return b2.Remote(shared, time.Now()).InFlight == 0 })

	eventually(t, "b2 lists 4 nodes", func() bool { return len(b2.Status().Nodes) == 4 })
	st := b2.Status()
	if len(st.Servers) != 1 || len(st.Servers[0].Reports) != 3 {
		t.Errorf("b2.Status().Servers = %+v; want gpu1 with the reports of a, c and d", st.Servers)
	}
}

// TestFlappingServerMakesNoStorm: a breaker that opens and closes a
// thousand times within one MinGap writes at most one row in it; the next
// row, once the gap has passed, has the last state.
func TestFlappingServerMakesNoStorm(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	var now atomic.Pointer[time.Time]
	t1 := time.Now()
	now.Store(&t1)
	o := fast(url, "a")
	o.MinGap = time.Hour // by the clock below, which moves only when told
	o.Now = func() time.Time { return *now.Load() }
	a := start(t, o)
	eventually(t, "online", func() bool { return a.Status().Link == LinkOnline })
	for range 1000 {
		breakerOpen(a)
		breakerClosed(a)
	}
	eventually(t, "the first row", func() bool { return a.RowsSent() >= 1 })
	for range 1000 {
		breakerClosed(a)
		breakerOpen(a)
	}
	t2 := t1.Add(time.Hour)
	now.Store(&t2)
	eventually(t, "the second row", func() bool { return a.RowsSent() >= 2 })
	a.Close()
	if n := count(url, "SELECT count(*) FROM team_evidence"); n != 2 {
		t.Errorf("evidence rows = %d; want 2", n)
	}
	if n := count(url, "SELECT count(*) FROM team_evidence WHERE seq = (SELECT max(seq) FROM team_evidence) AND status = 'breaker_open'"); n != 1 {
		t.Error("the last row is not the last state (breaker open)")
	}
}

// TestSkewedClocks: a node whose clock runs two hours ahead, and one two
// hours behind, are heard for as long as they report, by the hearer's
// clock, live and replayed.
func TestSkewedClocks(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		o := fast(url, "skewed")
		o.Now = func() time.Time { return time.Now().Add(skew) }
		s := start(t, o)
		b := start(t, fast(url, "b"))
		eventually(t, "online", func() bool { return s.Status().Link == LinkOnline && b.Status().Link == LinkOnline })
		breakerOpen(s)
		eventually(t, "b suspects the server", func() bool { return b.Remote(shared, time.Now()).Suspect })
		late := start(t, fast(url, "late"))
		eventually(t, "a node started later suspects it too", func() bool { return late.Remote(shared, time.Now()).Suspect })
		for _, tm := range []*Team{b, late} {
			if rm := tm.Remote(shared, time.Now().Add(DefaultOpenFor+DefaultProbeFor+time.Second)); rm.Suspect {
				t.Errorf("skew %v: %s.Remote() after the cool-down = %+v; want nothing", skew, tm.Node(), rm)
			}
		}
		breakerClosed(s)
		eventually(t, "b clears", func() bool { return !b.Remote(shared, time.Now()).Suspect })
		for _, tm := range []*Team{s, b, late} {
			tm.Close()
		}
	}
}

// TestFrozenDatabaseLeavesTheRequestPathAlone: while PostgreSQL is frozen
// the router's calls (Observe, Remote) take no longer than without a team.
func TestFrozenDatabaseLeavesTheRequestPathAlone(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase()
	a := start(t, fast(url, "a"))
	eventually(t, "online", func() bool { return a.Status().Link == LinkOnline })
	pg.Freeze()
	defer pg.Thaw()
	begin := time.Now()
	for range 10000 {
		breakerOpen(a)
		a.Remote(shared, time.Now())
		breakerClosed(a)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("10000 Observe and Remote calls while frozen took %v; want well under 2s (no network)", d)
	}
	eventually(t, "team link offline", func() bool { return a.Status().Link == LinkOffline })
}

// TestTuneChangesTheHold: a reload's shorter cool-down and first-token
// ceiling shorten how long a report of an open breaker holds.
func TestTuneChangesTheHold(t *testing.T) {
	url := pgtest.Start(t).NewDatabase()
	a, b := start(t, fast(url, "a")), start(t, fast(url, "b"))
	eventually(t, "online", func() bool { return a.Status().Link == LinkOnline && b.Status().Link == LinkOnline })
	a.Tune(5*time.Second, 10*time.Second, 0)
	breakerOpen(a)
	eventually(t, "b suspects the server", func() bool { return b.Remote(shared, time.Now()).Suspect })
	if rm := b.Remote(shared, time.Now().Add(16*time.Second)); rm.Suspect {
		t.Errorf("Remote() 16s on, past the tuned 5s cool-down and 10s probe = %+v; want nothing", rm)
	}
	a.Close()
	b.Close()
}
