package team

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// Evidence is what each node saw of each shared server, as append-only
// rows of team_evidence that only the node writes: the latest status of a
// (server, model) pair on that node, how long the status holds, and how
// many of its requests run there. A node writes a row when its view
// changes, at most one per pair per MinGap (changes in between merge into
// the next row), and sends it to the others with NOTIFY in the same
// statement; a listener that reconnects reads the rows of the last
// MaxReport again. Every report is bounded in time by the receiver's clock,
// so nodes with skewed clocks agree on nothing but durations.

// Statuses of an evidence row.
const (
	StatusOK           = "ok"
	StatusBreakerOpen  = "breaker_open"
	StatusProbeFailed  = "probe_failed"
	StatusBusy         = "busy"
	StatusLoading      = "loading"
	StatusModelMissing = "model_missing"
)

// notifyChannel is the LISTEN/NOTIFY channel of evidence rows.
const notifyChannel = "switchyard_team_evidence"

// target is a (server, model) pair as the team names it.
type target struct{ server, model string }

// ServerKey is the name of c's server across the team: its server_key, else
// its URL's scheme://host:port, else "" (a loopback URL without a key is
// never shared: on each node it is another machine).
func ServerKey(c fleet.Candidate) string {
	if c.ServerKey != "" {
		return c.ServerKey
	}
	if c.Local {
		return ""
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// row is one evidence row, as written and as NOTIFY carries it.
type row struct {
	Seq      int64  `json:"seq"`
	Node     string `json:"node"`
	Server   string `json:"server"`
	Model    string `json:"model"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
	ForMS    int64  `json:"for_ms"`
	InFlight int    `json:"inflight"`
}

// mine is this node's view of one target, and what it last published.
type mine struct {
	status, detail string
	holdFor        time.Duration
	inflight       int
	gen, sentGen   uint64    // changes made, and the change the last row showed
	sent           time.Time // when the last row was written; zero: never
	okAt           time.Time // this node's last success there
}

// heard is another node's latest row about a target, aged by this node's
// clock.
type heard struct {
	seq            int64
	status, detail string
	at             time.Time // when it was written, by this node's clock
	until          time.Time // the status holds until then
	inflight       int
	inflightUntil  time.Time
}

// evidence holds both sides in memory, behind one lock held only for map
// work.
type evidence struct {
	o Options

	mu       sync.Mutex
	byID     map[string]target
	local    map[target]*mine
	remote   map[target]map[string]*heard // by node
	lastSeq  map[string]int64             // by node: the newest row folded
	rowsSent int64
}

func newEvidence(o Options) *evidence {
	return &evidence{
		o:       o,
		byID:    map[string]target{},
		local:   map[target]*mine{},
		remote:  map[target]map[string]*heard{},
		lastSeq: map[string]int64{},
	}
}

// Update tells the team which candidates the node routes to, and so
// which servers it shares.
func (t *Team) Update(cands []fleet.Candidate) {
	e := t.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.byID)
	for _, c := range cands {
		if k := ServerKey(c); k != "" {
			e.byID[c.ID] = target{k, c.Model}
		}
	}
}

// Observe takes the router's events (router.Observer): breaker changes
// and ended attempts of shared servers become this node's evidence. It
// does not block.
func (t *Team) Observe(ev fleet.Event) {
	var id, status, detail string
	var holdFor time.Duration
	ok := false
	switch {
	case ev.Type == fleet.EventBreaker && ev.Breaker != nil:
		id = ev.Breaker.Candidate
		switch ev.Breaker.To {
		case fleet.BreakerOpen:
			tn := t.tuned.Load()
			status, detail, holdFor = StatusBreakerOpen, "breaker open: "+ev.Breaker.Cause, tn.openFor+tn.probeFor
		case fleet.BreakerClosed:
			status = StatusOK
		default:
			return
		}
	case ev.Type == fleet.EventAttempt && ev.Attempt != nil:
		a := ev.Attempt
		id = a.Candidate
		switch {
		case a.Outcome == fleet.OutcomeSuccess:
			status, ok = StatusOK, true
		case a.Fault == fleet.FaultServer:
			status, detail, holdFor = StatusProbeFailed, "probe failed: "+a.Error, t.o.ReportFor
		case a.Fault == fleet.FaultBusy:
			status, detail, holdFor = StatusBusy, "busy", t.o.ReportFor
		case a.Fault == fleet.FaultLoading:
			status, detail, holdFor = StatusLoading, "loading the model", t.o.ReportFor
		case a.Fault == fleet.FaultConfig && a.HTTPStatus == 404:
			status, detail, holdFor = StatusModelMissing, "model missing: "+a.Error, DefaultMaxReport
		default:
			return
		}
	default:
		return
	}
	e := t.ev
	e.mu.Lock()
	tg, shared := e.byID[id]
	if !shared {
		e.mu.Unlock()
		return
	}
	m := e.mine(tg)
	now := t.o.Now()
	if ok {
		m.okAt = now
	}
	// An open breaker is the strongest word: a failed probe of another
	// candidate on the same server does not weaken it. A failure said
	// again is said again (a breaker that reopens after its half-open
	// probe starts a new cool-down), within the rate limit.
	changed := !(status == StatusProbeFailed && m.status == StatusBreakerOpen) &&
		(m.status != status || m.detail != detail || status != StatusOK)
	if changed {
		m.status, m.detail, m.holdFor = status, detail, holdFor
		m.change()
	}
	e.mu.Unlock()
	if changed {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// change marks m for publishing.
func (m *mine) change() { m.gen++ }

func (m *mine) dirty() bool { return m.gen != m.sentGen }

func (e *evidence) mine(tg target) *mine {
	m, ok := e.local[tg]
	if !ok {
		m = &mine{status: StatusOK}
		e.local[tg] = m
	}
	return m
}

// refresh sets this node's in-flight counts (by candidate id), marking
// the targets whose count changed; with republish also those with requests
// running, before the others forget them (DefaultInFlightFor).
func (e *evidence) refresh(byID map[string]int, republish bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sum := map[target]int{}
	for id, n := range byID {
		if tg, ok := e.byID[id]; ok {
			sum[tg] += n
		}
	}
	for tg, m := range e.local {
		if n := sum[tg]; m.inflight != n || (republish && n > 0) {
			m.inflight = n
			m.change()
		}
		delete(sum, tg)
	}
	for tg, n := range sum {
		if n > 0 {
			m := e.mine(tg)
			m.inflight = n
			m.change()
		}
	}
}

// publish writes the rows that are due: changed since the last row, and
// at least MinGap after it.
func (t *Team) publish(ctx context.Context, conn *pgx.Conn, parts partitions) error {
	if t.o.InFlight != nil {
		t.ev.refresh(t.o.InFlight(), false)
	}
	now := t.o.Now()
	e := t.ev
	e.mu.Lock()
	var due []row
	var marks []*mine
	var gens []uint64
	for tg, m := range e.local {
		if !m.dirty() || (!m.sent.IsZero() && now.Sub(m.sent) < t.o.MinGap) {
			continue
		}
		due = append(due, row{Node: t.o.Node, Server: tg.server, Model: tg.model, Status: m.status, Detail: m.detail,
			ForMS: m.holdFor.Milliseconds(), InFlight: m.inflight})
		marks = append(marks, m)
		gens = append(gens, m.gen)
	}
	e.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	octx, cancel := t.op(ctx)
	defer cancel()
	err := pgx.BeginFunc(octx, conn, func(tx pgx.Tx) error {
		// The database's clock decides the partition; a node's own may be
		// a day off.
		if err := parts.ensure(octx, tx, now.Add(-24*time.Hour), now, now.Add(24*time.Hour)); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, r := range due {
			b.Queue(`WITH r AS (INSERT INTO team_evidence (node, server, model, status, detail, for_ms, inflight)
				VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *)
				SELECT pg_notify($8, json_build_object('seq', seq, 'node', node, 'server', server, 'model', model,
					'status', status, 'detail', detail, 'for_ms', for_ms, 'inflight', inflight)::text) FROM r`,
				r.Node, r.Server, r.Model, r.Status, r.Detail, r.ForMS, r.InFlight, notifyChannel)
		}
		return tx.SendBatch(octx, b).Close()
	})
	if err != nil {
		parts.forget()
		return fmt.Errorf("publish evidence: %w", err)
	}
	e.mu.Lock()
	for i, m := range marks {
		m.sentGen, m.sent = gens[i], now
	}
	e.rowsSent += int64(len(due))
	e.mu.Unlock()
	return nil
}

// RowsSent is how many evidence rows this node has written.
func (t *Team) RowsSent() int64 {
	t.ev.mu.Lock()
	defer t.ev.mu.Unlock()
	return t.ev.rowsSent
}

// listen replays the other nodes' rows of the last MaxReport, then folds
// each row NOTIFY brings, until the connection fails.
func (t *Team) listen(ctx context.Context, conn *pgx.Conn) error {
	select { // the replay reads tables the migration makes
	case <-t.migrated:
	case <-ctx.Done():
		return ctx.Err()
	}
	octx, cancel := t.op(ctx)
	_, err := conn.Exec(octx, "LISTEN "+notifyChannel)
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := t.replay(ctx, conn); err != nil {
		return err
	}
	t.setLink(1, true, nil)
	for {
		// A frozen database sends nothing, as an idle one does: a ping
		// every heartbeat tells them apart.
		wctx, cancel := context.WithTimeout(ctx, t.o.Heartbeat)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && wctx.Err() != nil:
			pctx, cancel := t.op(ctx)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			continue
		case err != nil:
			return fmt.Errorf("listen: %w", err)
		}
		var r row
		if err := json.Unmarshal([]byte(n.Payload), &r); err != nil {
			t.o.Logf("team: evidence notification %q: %v", n.Payload, err)
			continue
		}
		t.ev.fold(t.o.Node, r, 0, t.o.Now())
	}
}

// replay folds the other nodes' rows young enough to matter (the last
// DefaultMaxReport), each aged by the database's clock.
func (t *Team) replay(ctx context.Context, conn *pgx.Conn) error {
	octx, cancel := t.op(ctx)
	defer cancel()
	rows, err := conn.Query(octx, `SELECT seq, node, server, model, status, detail, for_ms, inflight,
		(extract(epoch FROM now() - at) * 1000)::bigint
		FROM team_evidence WHERE node <> $1 AND at > now() - $2::interval ORDER BY seq`,
		t.o.Node, fmt.Sprintf("%d milliseconds", DefaultMaxReport.Milliseconds()))
	if err != nil {
		return fmt.Errorf("replay evidence: %w", err)
	}
	defer rows.Close()
	now := t.o.Now()
	// The rows come in order: folding them all again ends at each node's
	// latest, even when the database was made anew and its numbering
	// started over.
	t.ev.mu.Lock()
	clear(t.ev.lastSeq)
	t.ev.mu.Unlock()
	for rows.Next() {
		var r row
		var ageMS int64
		if err := rows.Scan(&r.Seq, &r.Node, &r.Server, &r.Model, &r.Status, &r.Detail, &r.ForMS, &r.InFlight, &ageMS); err != nil {
			return fmt.Errorf("replay evidence: %w", err)
		}
		t.ev.fold(t.o.Node, r, time.Duration(ageMS)*time.Millisecond, now)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replay evidence: %w", err)
	}
	return nil
}

// fold keeps r, written age ago, as its node's latest word on its target,
// unless it is this node's own or older than what is held. A node's rows
// commit in the order of their seq (one writer), so seq orders them.
func (e *evidence) fold(self string, r row, age time.Duration, now time.Time) {
	if r.Node == self {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.Seq <= e.lastSeq[r.Node] {
		return
	}
	e.lastSeq[r.Node] = r.Seq
	tg := target{r.Server, r.Model}
	byNode := e.remote[tg]
	if byNode == nil {
		byNode = map[string]*heard{}
		e.remote[tg] = byNode
	}
	at := now.Add(-age)
	hold := min(time.Duration(r.ForMS)*time.Millisecond, DefaultMaxReport)
	byNode[r.Node] = &heard{
		seq: r.Seq, status: r.Status, detail: r.Detail, at: at, until: at.Add(hold),
		inflight: r.InFlight, inflightUntil: at.Add(DefaultInFlightFor),
	}
}

// Remote is the other nodes' evidence about c's server (router.Evidence).
// A report holds until its own time is up, by this node's clock, and not
// past a success this node saw there after it. One node's report makes the
// server suspect; reports of two nodes or more that held at the same time
// keep it out until the longest of them runs out (SPEC 6.6), even when
// the shorter ones ran out first.
func (t *Team) Remote(c fleet.Candidate, now time.Time) router.Remote {
	e := t.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	tg, ok := e.byID[c.ID]
	if !ok {
		return router.Remote{}
	}
	var okAt time.Time
	if m := e.local[tg]; m != nil {
		okAt = m.okAt
	}
	var rm router.Remote
	var failing []string // nodes whose latest word is a failure after okAt
	for node, h := range e.remote[tg] {
		if now.Before(h.inflightUntil) {
			rm.InFlight += h.inflight
		}
		if h.status != StatusOK && h.at.After(okAt) {
			failing = append(failing, node)
		}
	}
	slices.Sort(failing)
	byNode := e.remote[tg]
	var current, out []string
	for _, n := range failing {
		h := byNode[n]
		if !now.Before(h.until) {
			continue
		}
		current = append(current, n)
		for _, m := range failing { // another report that held while this one did
			if g := byNode[m]; m != n && g.at.Before(h.until) && h.at.Before(g.until) && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	reasons := func(nodes []string) string {
		var rs []string
		for _, n := range nodes {
			h := byNode[n]
			rs = append(rs, fmt.Sprintf("node %s: %s since %s", n, strings.ReplaceAll(h.status, "_", " "), h.at.Local().Format("15:04:05")))
			if h.until.After(rm.Until) {
				rm.Until = h.until
			}
		}
		return strings.Join(rs, "; ")
	}
	switch {
	case len(out) > 0:
		for _, n := range current {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		rm.Out, rm.Reason = true, reasons(out)
	case len(current) == 1:
		rm.Suspect, rm.Reason = true, reasons(current)
		rm.Until = time.Time{}
	}
	return rm
}
