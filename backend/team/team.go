// Package team lets several Switchyards share one fleet through PostgreSQL
// (SPEC 6.6, docs/DESIGN.md "Teams"). Each node ships its committed history
// to the team database (ship.go) and publishes what it saw of each shared
// server as append-only evidence rows only it writes (evidence.go); it reads
// the other nodes' rows through LISTEN/NOTIFY, replays them after every
// reconnect, and folds them into memory, where the router reads them
// (router.Evidence) without waiting on the network.
//
// A Team works on its own goroutines, each with its own connection: Start
// starts them, Close stops them. When the database is down, frozen or
// unreachable the node routes on its own state, Status says the link is
// offline, and shipping resumes from its stored cursor once it is back.
package team

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/history"
)

// ErrSchemaTooNew: the team database was migrated by a newer Switchyard.
var ErrSchemaTooNew = errors.New("team database is newer than this binary")

// ErrCannotWrite: the role of the connection string may not write what a
// node writes (Probe).
var ErrCannotWrite = errors.New("this node's role can't write the team database")

// ErrConnString: the connection string is not one PostgreSQL takes.
var ErrConnString = errors.New("not a PostgreSQL connection string")

// parseURL reads a connection string as pgx does, with an error that
// never repeats it: it may hold a password, and pgx's own error masks it
// only where it could parse it.
func parseURL(url string) (*pgx.ConnConfig, error) {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(url)), "jdbc:") {
		// pgx would read it as key=value pairs and connect to the local
		// socket as the user running Switchyard.
		return nil, fmt.Errorf("%w: a JDBC URL, which PostgreSQL's own clients do not take: write postgres://user:password@host:port/database", ErrConnString)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: write postgres://user:password@host:port/database, or host=... port=... dbname=... pairs", ErrConnString)
	}
	return cfg, nil
}

// Source is the node's own history, read for shipping; it keeps how far
// the team's database holds it (history.Store.ShipFrom).
type Source interface {
	After(ctx context.Context, c history.Cursor, limit int) (history.Batch, error)
	ShipFrom(ctx context.Context, node string, team history.Cursor) (history.Cursor, error)
	Shipped(ctx context.Context, node string, c history.Cursor) error
}

// Defaults of Options.
const (
	DefaultShipEvery   = time.Second
	DefaultShipBatch   = 500
	DefaultHeartbeat   = 5 * time.Second
	DefaultMinGap      = time.Second
	DefaultOpTimeout   = 5 * time.Second
	DefaultRetryPause  = time.Second
	DefaultRetention   = 30 * 24 * time.Hour
	DefaultOpenFor     = 30 * time.Second
	DefaultProbeFor    = 60 * time.Second
	DefaultReportFor   = 15 * time.Second
	DefaultMaxReport   = 5 * time.Minute
	DefaultInFlightFor = 15 * time.Second
)

// Options configure a Team. The zero value of each field means its
// default.
type Options struct {
	// URL is the PostgreSQL connection string. Required.
	URL string
	// Node names this Switchyard in the team; required.
	Node string
	// Version and ConfigHash are what the node says of itself in the
	// nodes list.
	Version, ConfigHash string
	// History is the node's history to ship; nil ships nothing.
	History Source
	// InFlight returns how many of this node's own requests run on each
	// candidate (by id) now; nil publishes none. It must not block.
	InFlight func() map[string]int
	// ShipEvery is how often shipping looks for new records. Default 1s.
	ShipEvery time.Duration
	// ShipBatch is the most requests (and breaker events) in one shipping
	// transaction. Default 500.
	ShipBatch int
	// Heartbeat is how often the node refreshes its row, republishes
	// running in-flight counts and reads the nodes list. Default 5s.
	Heartbeat time.Duration
	// MinGap is the least time between two evidence rows of one server
	// from this node: changes in between are merged into the next row, so
	// a flapping server makes no storm. Default 1s.
	MinGap time.Duration
	// OpTimeout bounds every database operation; a frozen database
	// turns the link offline after it. Default 5s.
	OpTimeout time.Duration
	// RetryPause is the pause before reconnecting, doubled up to eight
	// times after each failure in a row. Default 1s.
	RetryPause time.Duration
	// Retention is how long shipped rows are kept: older partitions are
	// dropped whole. Default 30 days; negative keeps everything.
	Retention time.Duration
	// OpenFor and ProbeFor make how long a report of an open breaker
	// holds: the breaker's cool-down, then as long as its half-open probe
	// may take (the first-token ceiling); the breaker closing ends it
	// sooner. Defaults 30s and 60s.
	OpenFor, ProbeFor time.Duration
	// ReportFor is how long a report of a failed probe, a busy or loading
	// server holds. Default 15s.
	ReportFor time.Duration
	// Now is the node's clock. Default time.Now.
	Now func() time.Time
	// Logf receives link changes and failures. Nil discards them.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ShipEvery, DefaultShipEvery)
	def(&o.Heartbeat, DefaultHeartbeat)
	def(&o.MinGap, DefaultMinGap)
	def(&o.OpTimeout, DefaultOpTimeout)
	def(&o.RetryPause, DefaultRetryPause)
	def(&o.Retention, DefaultRetention)
	def(&o.OpenFor, DefaultOpenFor)
	def(&o.ProbeFor, DefaultProbeFor)
	def(&o.ReportFor, DefaultReportFor)
	if o.ShipBatch <= 0 {
		o.ShipBatch = DefaultShipBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Team is one node's membership of a team. Its methods are safe for
// concurrent use; Observe and Remote never block on the network.
type Team struct {
	o    Options
	cfg  *pgx.ConnConfig
	ev   *evidence
	wake chan struct{} // evidence to publish

	cancel context.CancelFunc
	done   sync.WaitGroup

	links   [2]link // 0: work (ship, publish, heartbeat), 1: listen
	shipped atomic.Int64
	// said is what the log said of the whole link (both connections up),
	// under its own lock, taken after a link's.
	saidMu sync.Mutex
	said   linkSaid
	// migrated is closed once the work connection has migrated the
	// schema: the listener waits for it, as its replay reads the tables.
	migrated     chan struct{}
	migratedOnce sync.Once

	nodesMu sync.Mutex
	nodes   []Node

	tuned  atomic.Pointer[tuning] // what Tune changes of o
	hash   atomic.Pointer[string] // the config's hash, as SetConfigHash changed it
	shrunk chan struct{}          // Tune shortened the retention: drop partitions now
}

// tuning are the Options a config reload changes (Tune).
type tuning struct{ openFor, probeFor, retention time.Duration }

// Tune sets Retention, OpenFor and ProbeFor (zero: the default), as a
// config reload changed history.retention and the breaker's cool-down and
// first-token ceiling. A shorter retention drops the partitions past it
// at once (while the link is up; else when it comes up).
func (t *Team) Tune(openFor, probeFor, retention time.Duration) {
	o := Options{OpenFor: openFor, ProbeFor: probeFor, Retention: retention}.withDefaults()
	was := t.tuned.Swap(&tuning{o.OpenFor, o.ProbeFor, o.Retention})
	if o.Retention >= 0 && (was.retention < 0 || o.Retention < was.retention) {
		select {
		case t.shrunk <- struct{}{}:
		default:
		}
	}
}

// SetConfigHash changes the config hash the node says of itself, as a
// config reload applied: at the next heartbeat.
func (t *Team) SetConfigHash(h string) { t.hash.Store(&h) }

// Link states.
const (
	LinkOnline  = "online"
	LinkOffline = "offline"
)

// link is the state of one of the node's connections.
type link struct {
	mu    sync.Mutex
	up    bool
	since time.Time
	err   string
}

// linkSaid is what the log said of the node's link as a whole.
type linkSaid struct {
	up     bool // both connections up, as last said
	everUp bool // it has been up since the start
	told   bool // the log said why it is not up yet
}

// New checks o and returns a Team that has not connected yet.
func New(o Options) (*Team, error) {
	o = o.withDefaults()
	if o.Node == "" {
		return nil, errors.New("team: no node name")
	}
	cfg, err := parseURL(o.URL)
	if err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > o.OpTimeout {
		cfg.ConnectTimeout = o.OpTimeout
	}
	// A node whose machine died holds its name's lock (claimName) for as
	// long as PostgreSQL keeps its connection: keepalives end that in
	// about half a minute, not the system's two hours, so that the node,
	// started again, links under its name. A connection string's own
	// settings win.
	for k, v := range keepalives {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	t := &Team{o: o, cfg: cfg, wake: make(chan struct{}, 1), shrunk: make(chan struct{}, 1), migrated: make(chan struct{})}
	t.tuned.Store(&tuning{o.OpenFor, o.ProbeFor, o.Retention})
	t.hash.Store(&o.ConfigHash)
	t.ev = newEvidence(o)
	now := o.Now()
	for i := range t.links {
		t.links[i].since = now
		t.links[i].err = "not connected yet"
	}
	return t, nil
}

// Start connects and runs the node's goroutines until Close.
func (t *Team) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.done.Add(2)
	go func() { defer t.done.Done(); t.session(ctx, 0, t.work) }()
	go func() { defer t.done.Done(); t.session(ctx, 1, t.listen) }()
}

// Close stops the goroutines and closes their connections. Records not
// shipped yet stay in the history, to be shipped at the next start.
func (t *Team) Close() {
	if t.cancel != nil {
		t.cancel()
	}
	t.done.Wait()
}

// Node is the name of this node.
func (t *Team) Node() string { return t.o.Node }

// Shipped is how many request records this node has shipped since it
// started (a record shipped twice, after a lost acknowledgement, counts
// twice here and once in the database).
func (t *Team) Shipped() int64 { return t.shipped.Load() }

// session runs fn on a fresh connection, again and again, pausing longer
// after each failure in a row, until ctx ends. Link i is up while fn runs
// after connecting.
func (t *Team) session(ctx context.Context, i int, fn func(context.Context, *pgx.Conn) error) {
	fails := 0
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, t.o.OpTimeout)
		conn, err := pgx.ConnectConfig(cctx, t.cfg)
		cancel()
		if err == nil {
			err = fn(ctx, conn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		if t.linkUp(i) {
			fails = 0 // it worked until now: try again soon
		}
		t.setLink(i, false, err)
		fails++
		pause := t.o.RetryPause << min(fails-1, 3)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// Online reports whether the node's link is up: both its connections.
func (t *Team) Online() bool { return t.linkUp(0) && t.linkUp(1) }

func (t *Team) linkUp(i int) bool {
	l := &t.links[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// setLink sets link i's state, and logs a change of the node's link as a
// whole: up while both connections are.
func (t *Team) setLink(i int, up bool, err error) {
	l := &t.links[i]
	l.mu.Lock()
	if l.up != up {
		l.since = t.o.Now()
	}
	l.up = up
	l.err = ""
	if err != nil {
		l.err = err.Error()
	}
	l.mu.Unlock()
	all := t.Online()

	t.saidMu.Lock()
	defer t.saidMu.Unlock()
	said := &t.said
	switch {
	case all && !said.up && said.everUp:
		t.o.Logf("team: link to the team database back")
	case all && !said.up:
		t.o.Logf("team: linked to the team database as node %s", t.o.Node)
	case !all && said.up && err != nil:
		t.o.Logf("team: team link offline: %v", err)
	case !all && !said.everUp && !said.told && err != nil:
		// Never up since the start: say once why, as a link that went
		// down says it.
		t.o.Logf("team: team link offline, not linked yet: %v", err)
		said.told = true
	}
	said.up = all
	said.everUp = said.everUp || all
}

// op is a context for one database operation.
func (t *Team) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.o.OpTimeout)
}

// work migrates, then ships, publishes evidence and beats until an
// operation fails.
func (t *Team) work(ctx context.Context, conn *pgx.Conn) error {
	octx, cancel := t.op(ctx)
	err := Migrate(octx, conn)
	cancel()
	if err != nil {
		return err
	}
	t.migratedOnce.Do(func() { close(t.migrated) })
	if err := t.claimName(ctx, conn); err != nil {
		return err
	}
	parts := partitions{}
	if err := t.beat(ctx, conn, parts); err != nil {
		return err
	}
	cur, err := t.cursor(ctx, conn)
	if err != nil {
		return err
	}
	t.setLink(0, true, nil)
	if err := t.retain(ctx, conn); err != nil {
		return err
	}
	retain := time.NewTicker(retainEvery)
	defer retain.Stop()

	ship := time.NewTicker(t.o.ShipEvery)
	defer ship.Stop()
	beat := time.NewTicker(t.o.Heartbeat)
	defer beat.Stop()
	gap := time.NewTicker(t.o.MinGap)
	defer gap.Stop()
	for {
		if err := t.publish(ctx, conn, parts); err != nil {
			return err
		}
		if t.o.History != nil {
			// Drain a backlog batch by batch, publishing between.
			more, err := t.ship(ctx, conn, parts, &cur)
			if err != nil {
				return err
			}
			if more {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.wake:
		case <-gap.C: // rate-limited evidence whose gap has passed
		case <-ship.C:
		case <-retain.C:
			if err := t.retain(ctx, conn); err != nil {
				return err
			}
		case <-t.shrunk:
			if err := t.retain(ctx, conn); err != nil {
				return err
			}
		case <-beat.C:
			if t.o.InFlight != nil {
				t.ev.refresh(t.o.InFlight(), true)
			}
			if err := t.beat(ctx, conn, parts); err != nil {
				return err
			}
		}
	}
}

// ErrNodeTaken: another Switchyard works in the team under this node's
// name. Two nodes of one name would take each other's shipping cursor and
// each ignore the other's evidence as its own.
var ErrNodeTaken = errors.New("another Switchyard is linked to the team under this node's name: give each node its own team.node")

// keepalives are the server's TCP keepalive settings for a node's
// connections: a dead peer is found within idle + interval × count.
var keepalives = map[string]string{"tcp_keepalives_idle": "15", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}

// nameLockSpace is the first key of the advisory lock a node holds on its
// name (pg_try_advisory_lock(int, int), apart from the migration's lock).
const nameLockSpace = 0x53777964 // "Swyd"

// claimName takes, for as long as conn lives, a lock on the node's name:
// while another node's connection holds it, this node does not work in
// the team, and tries again as after any failure.
func (t *Team) claimName(ctx context.Context, conn *pgx.Conn) error {
	h := fnv.New32a()
	h.Write([]byte(t.o.Node))
	octx, cancel := t.op(ctx)
	defer cancel()
	var got bool
	if err := conn.QueryRow(octx, "SELECT pg_try_advisory_lock($1, $2)", int32(nameLockSpace), int32(h.Sum32())).Scan(&got); err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	if !got {
		return fmt.Errorf("node %s: %w", t.o.Node, ErrNodeTaken)
	}
	return nil
}

// retainEvery is how often a node drops the partitions past retention
// (and once when it connects).
const retainEvery = time.Hour

// retain drops the partitions older than Retention.
func (t *Team) retain(ctx context.Context, conn *pgx.Conn) error {
	keep := t.tuned.Load().retention
	if keep < 0 {
		return nil
	}
	octx, cancel := t.op(ctx)
	defer cancel()
	if _, err := dropBefore(octx, conn, t.o.Now().Add(-keep)); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}

// beat refreshes this node's row and reads the nodes list.
func (t *Team) beat(ctx context.Context, conn *pgx.Conn, parts partitions) error {
	octx, cancel := t.op(ctx)
	defer cancel()
	_, err := conn.Exec(octx, `INSERT INTO team_nodes (node, version, config_hash, started_at, last_seen)
		VALUES ($1, $2, $3, now(), now())
		ON CONFLICT (node) DO UPDATE SET version = $2, config_hash = $3, last_seen = now()`,
		t.o.Node, t.o.Version, *t.hash.Load())
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	rows, err := conn.Query(octx, `SELECT node, version, config_hash,
		(extract(epoch FROM now() - last_seen) * 1000)::bigint FROM team_nodes ORDER BY node`)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	now := t.o.Now()
	var nodes []Node
	for rows.Next() {
		var n Node
		var ageMS int64
		if err := rows.Scan(&n.Name, &n.Version, &n.ConfigHash, &ageMS); err != nil {
			rows.Close()
			return fmt.Errorf("nodes: %w", err)
		}
		n.LastSeen = now.Add(-time.Duration(ageMS) * time.Millisecond) // Status says its link from it
		nodes = append(nodes, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	t.nodesMu.Lock()
	t.nodes = nodes
	t.nodesMu.Unlock()
	return nil
}
