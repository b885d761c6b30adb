package history

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Writing (docs/DESIGN.md, "Durability"). One goroutine, the writer
// (run), owns the connection that writes, and everything kept beside it
// (Store.w); nothing else touches them. Other goroutines reach it in
// three ways: Record and RecordBreaker queue what is to be committed
// (Store.q) and wake it (Store.sig.commit); a query that must see what
// waits, and Import, hand it a job (Store.do); Prune asks it for a sweep
// (sweep.go), which it runs a small step at a time between the rest.
// Journaled records go straight into the tables, the others to the inbox
// (inbox.go), which the writer moves on; it prunes, checkpoints beside
// itself (checkpoint.go) and tries again while the file can't be written
// (backlog.go).

// pending is one queued request record, encoded as the inbox keeps it,
// and the channel its commit is reported on.
type pending struct {
	id   string
	rec  []byte
	err  error      // the record's own failure in the last commit (a repeated id)
	done chan error // buffered: a commit never waits on it
	// journaled: in the journal, and its Record has returned.
	journaled bool
	// view is the record as queries read it while it waits (view.go).
	view atomic.Pointer[unmoved]
}

// errRepeated: the id of a record is recorded already.
var errRepeated = errors.New("request id already recorded")

// Committing what the journal holds: when commitAt records wait, or
// commitDelay after the first of them; and on every query (settle). The
// journal has made them durable already, so the writer takes its time to
// commit many in one transaction: a commit per record cost the client
// and the upstreams, on the same cores, more than the record itself, and
// a record in a commit of 64 costs about half the CPU of one in a commit
// of 16 (the index pages every commit writes). At 128 requests a second
// or more, commitDelay lets commitAt fill.
const (
	commitAt    = 64
	commitDelay = 500 * time.Millisecond
)

// Moving the inbox: when it holds moveAt records, or moveDelay after the
// first record that waits there; and on every query (settle).
const (
	moveAt    = 64
	moveDelay = 100 * time.Millisecond
)

// queue is what waits for the writer: request records and breaker
// changes. mu guards it all, so that nothing is queued after Close.
type queue struct {
	mu      sync.Mutex
	closed  bool
	records []*pending
	events  []fleet.BreakerChange
	room    chan struct{} // one token per queued record: four batches
	// taken and takenEvents are what the writer has taken from records
	// and events and is committing: a query reads them beside the tables
	// until the commit is done (view.go). What the file refuses goes to
	// the backlog, which queries don't see.
	taken       []*pending
	takenEvents []fleet.BreakerChange
}

// signals are how other goroutines reach the writer goroutine.
type signals struct {
	commit      chan struct{} // something queued is to be committed now
	commitTimer *time.Timer   // commitDelay after the first journaled record waits
	commitArmed atomic.Bool   // commitTimer will fire
	jobs        chan job      // work to do on the writer's connection; one waits
	prunes      chan chan pruned
	quit        chan struct{} // closed by Close
	stopped     chan struct{} // closed when the writer goroutine has exited
}

// writer is what the writer goroutine owns: its connection, and what it
// keeps between two wake-ups.
type writer struct {
	c         *conn                 // the connection that writes
	recs      []*pending            // reused by commitBatch
	evs       []fleet.BreakerChange // reused by commitBatch
	unmoved   int                   // records this Store put in the inbox and has not moved
	moveTimer *time.Timer           // moveDelay after the first record waits in the inbox
	moveArmed bool                  // moveTimer will fire
	ckpt      checkpointer          // checkpoint.go
	sweep     *sweep                // the sweep under way, nil when none (sweep.go)
	reSweep   bool                  // a shorter retention came during the sweep: sweep again after it
	yield     *time.Timer           // how long the sweep's next step waits for queries to end
	yielding  bool                  // yield runs
	// What could not be written, oldest first, and how trying again
	// goes (backlog.go).
	backlog    []*pending
	evBacklog  []fleet.BreakerChange
	retry      *time.Timer // the file can't be written: try again
	retryArmed bool        // retry will fire
	pauses     int         // failed tries in a row
	flushed    int         // backlog records written since the last failure
	lastLog    time.Time   // when a failure was last logged
	jobsRun    int         // jobs done, for tests
	closeErr   error       // closing the connections, for Close
}

// job is work another goroutine hands the writer: f runs on the writer
// goroutine, after what is queued is committed, and done gets its error.
type job struct {
	f    func() error
	done chan error
}

// do runs f on the writer goroutine and returns its error, or ErrClosed
// once the writer has stopped. The writer takes a job between two steps
// of whatever else it does (a commit, a move, a step of a sweep), and
// while a checkpoint runs. ctx bounds the wait; a job queued is done
// even when ctx ends first.
func (s *Store) do(ctx context.Context, f func() error) error {
	j := job{f: f, done: make(chan error, 1)}
	select {
	case s.sig.jobs <- j:
	case <-s.sig.stopped:
		return ErrClosed
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if s.cfg.jobQueued != nil {
		s.cfg.jobQueued()
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.sig.stopped:
		// The writer answers a job before it stops, if it took it.
		select {
		case err := <-j.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// Record writes rec with its attempts and returns once it is durable, so
// a caller that answers only after Record returns never answers a request
// that history could lose to a crash of Switchyard. It is durable once it
// is in the journal (journal.go): Record appends it there, queues it for
// the writer and returns. A Store without a journal (another Store on the
// same file holds it) hands rec to the writer and returns once it is
// committed: at once when the writer is idle; records that arrive while a
// commit runs share the next transaction. Attempts are stored in slice
// order: an attempt's Order and RequestID are taken from its position and
// rec.ID. An id already recorded is refused: without a journal Record
// fails with an error; with one, the writer logs it and keeps the first
// record.
//
// When the queue is full Record waits for room. ctx bounds the wait, both
// for room and for the commit; a record already queued when ctx ends is
// still written.
//
// When the file can't be written (a full disk, a damaged or read-only
// file) the record is kept in memory, with up to MaxBacklog others, and
// written as soon as the file can be written again; Record then returns an
// error matching ErrNotDurable at once, and Health says what is wrong. A
// request's own context is usually done by the time it is recorded (the
// client went away), so callers pass one that outlives it, such as
// context.WithoutCancel(r.Context()).
func (s *Store) Record(ctx context.Context, rec fleet.RequestRecord) error {
	if rec.ID == "" {
		return errors.New("record request: empty request id")
	}
	b, err := encodeRecord(rec)
	if err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	p := &pending{id: rec.ID, rec: b, done: make(chan error, 1)}
	if s.journal != nil {
		switch err := s.journalRecord(ctx, p); {
		case err == nil:
			return nil
		case !errors.Is(err, errJournalWrite):
			return fmt.Errorf("record request %s: %w", rec.ID, err)
		}
		// The journal can't be written (a full disk): commit instead,
		// which says what is wrong.
	}
	if err := s.commitRecord(ctx, p); err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	return nil
}

// errJournalWrite: appending to the journal failed.
var errJournalWrite = errors.New("journal write failed")

// journalRecord appends p to the journal and queues it for the writer
// goroutine, once the queue has room; it wakes the writer when commitAt
// records wait, else makes sure it wakes within commitDelay.
func (s *Store) journalRecord(ctx context.Context, p *pending) error {
	if err := s.takeRoom(ctx); err != nil {
		return err
	}
	j := s.journal
	j.mu.Lock()
	s.q.mu.Lock()
	err := ErrClosed
	queued := 0
	if !s.q.closed {
		if err = j.appendFrame(p.rec); err == nil {
			p.journaled = true
			s.q.records = append(s.q.records, p)
			queued = len(s.q.records)
		}
	}
	s.q.mu.Unlock()
	j.mu.Unlock()
	if err != nil {
		<-s.q.room
		if err != ErrClosed {
			if !j.failing.Swap(true) {
				s.cfg.logf("history: %v; committing records before answering until it can be written again", err)
			}
			err = errJournalWrite
		}
		return err
	}
	if j.failing.Swap(false) {
		s.cfg.logf("history: the journal can be written again")
	}
	if s.cfg.afterEnqueue != nil {
		s.cfg.afterEnqueue()
	}
	switch {
	case queued >= commitAt:
		wake(s.sig.commit)
	case s.sig.commitArmed.CompareAndSwap(false, true):
		s.sig.commitTimer.Reset(commitDelay)
	}
	return nil
}

// takeRoom waits for room in the queue for one record, while ctx lasts.
func (s *Store) takeRoom(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	select {
	case s.q.room <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// commitRecord queues p, once there is room, wakes the writer and waits
// for p's commit. When ctx ends first, p stays queued and is written.
func (s *Store) commitRecord(ctx context.Context, p *pending) error {
	if err := s.takeRoom(ctx); err != nil {
		return err
	}
	s.q.mu.Lock()
	if s.q.closed {
		s.q.mu.Unlock()
		<-s.q.room
		return ErrClosed
	}
	s.q.records = append(s.q.records, p)
	s.q.mu.Unlock()
	if s.cfg.afterEnqueue != nil {
		s.cfg.afterEnqueue()
	}
	wake(s.sig.commit)
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		select {
		case err := <-p.done:
			return err
		default:
			return context.Cause(ctx)
		}
	}
}

func (s *Store) isClosed() bool {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	return s.q.closed
}

// wake sends on c, a channel of one slot, unless a wake-up waits there
// already.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// commitBatch commits up to batchSize queued records and as many queued
// breaker changes in one transaction, and reports whether more wait.
// Writer goroutine only.
func (s *Store) commitBatch() (more bool) {
	s.q.mu.Lock()
	n, m := min(len(s.q.records), s.cfg.batchSize), min(len(s.q.events), s.cfg.batchSize)
	recs := append(s.w.recs[:0], s.q.records[:n]...)
	evs := append(s.w.evs[:0], s.q.events[:m]...)
	s.q.records = shift(s.q.records, n)
	s.q.events = shift(s.q.events, m)
	s.q.taken, s.q.takenEvents = recs, evs
	more = len(s.q.records)+len(s.q.events) > 0
	s.q.mu.Unlock()
	for range n {
		<-s.q.room
	}
	if n+m > 0 {
		s.write(recs, evs)
	}
	s.q.mu.Lock()
	s.q.taken, s.q.takenEvents = nil, nil
	s.q.mu.Unlock()
	clear(recs)
	s.w.recs, s.w.evs = recs, evs
	return more
}

// shift drops the first n elements of q, keeping its array.
func shift[T any](q []T, n int) []T {
	rest := copy(q, q[n:])
	clear(q[rest:])
	return q[:rest]
}

// commitQueued commits everything queued, a batch at a time. Writer
// goroutine only.
func (s *Store) commitQueued() {
	for s.commitBatch() {
	}
}

// write commits recs and evs and reports to each Record. While the file
// can't be written they join the backlog instead. Writer goroutine only.
func (s *Store) write(recs []*pending, evs []fleet.BreakerChange) {
	if s.failing() {
		// Keep the order: what waits is written first.
		s.keep(recs, evs)
		return
	}
	if err := s.commit(recs, evs); err != nil {
		s.fail(err)
		s.keep(recs, evs)
		s.armRetry()
		return
	}
	for _, p := range recs {
		if p.err != nil {
			s.cfg.logf("history: refused request %s: %v", p.id, p.err)
		}
		p.done <- p.err
	}
}

const insertBreaker = `INSERT INTO breaker_events (candidate, from_state, to_state, at, cause)
VALUES (?, ?, ?, ?, ?)`

// commit writes recs and evs (to breaker_events) in one transaction. A
// record refused (a repeated id) gets its own error in p.err, and the
// others are written; a breaker change the table refuses is lost and
// counted. An error returned is the file's, and then nothing was written.
//
// Journaled records go straight into requests and attempts
// (toTables): the journal has made them durable, so nothing waits
// for this commit, and a trip through the inbox would write every record
// twice more (into the inbox, then out of it). Records whose Record waits
// for the commit (no journal) go to the inbox, whose one B-tree commits
// faster, and so does a batch that the tables refuse a record of (a
// repeated id, one that can't be read): the inbox tells which record it
// was, as it always has. Writer goroutine only.
func (s *Store) commit(recs []*pending, evs []fleet.BreakerChange) error {
	if s.cfg.beforeCommit != nil {
		s.cfg.beforeCommit(len(recs), len(evs))
	}
	if s.direct(recs) {
		switch err := s.commitWith(recs, evs, s.toTables); {
		case err == nil:
			return nil
		case !errors.Is(err, errNotDirect):
			return err
		}
	}
	return s.commitWith(recs, evs, s.toInbox)
}

// direct reports whether recs can skip the inbox: they are all in the
// journal. Writer goroutine only.
func (s *Store) direct(recs []*pending) bool {
	if len(recs) == 0 || s.journal == nil || s.cfg.viaInbox {
		return false
	}
	for _, p := range recs {
		if !p.journaled {
			return false
		}
	}
	return true
}

// anyInbox has a row when the inbox holds a record.
const anyInbox = `SELECT 1 FROM inbox LIMIT 1`

// errNotDirect: the tables refused a record that was to skip the inbox.
var errNotDirect = errors.New("record refused by the tables")

// commitWith is commit with recs written by put, in the transaction it
// begins. Writer goroutine only.
func (s *Store) commitWith(recs []*pending, evs []fleet.BreakerChange, put func(*conn, []*pending) error) error {
	w := s.w.c
	if err := w.begin(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := put(w, recs); err != nil {
		w.rollback()
		return err
	}
	for _, ev := range evs {
		_, err := w.exec(insertBreaker, ev.Candidate, string(ev.From), string(ev.To), ev.At.UnixMilli(), ev.Cause)
		switch {
		case storageError(err):
			w.rollback()
			return fmt.Errorf("write breaker change of %s: %w", ev.Candidate, err)
		case err != nil:
			s.dropped.Add(1)
			s.cfg.logf("history: lost breaker change %s %s->%s: %v", ev.Candidate, ev.From, ev.To, err)
		}
	}
	if s.cfg.committing != nil {
		s.cfg.committing()
	}
	if err := w.commit(); err != nil {
		w.rollback()
		return fmt.Errorf("commit: %w", err)
	}
	s.commits.Add(1)
	if s.journal != nil {
		n := 0
		for _, p := range recs {
			if p.journaled {
				p.journaled = false
				n++
			}
		}
		if err := s.journal.committed(n); err != nil {
			s.cfg.logf("history: %v", err)
		}
	}
	return nil
}

// toInbox writes recs to the inbox, in the transaction w is in; a record
// the inbox refuses gets its error in p.err. Writer goroutine only.
func (s *Store) toInbox(w *conn, recs []*pending) error {
	written := 0
	for _, p := range recs {
		n, err := w.exec(insertInbox, p.id, p.rec)
		switch {
		case storageError(err):
			return fmt.Errorf("write request %s: %w", p.id, err)
		case err != nil:
			p.err = err
		case n == 0:
			p.err = errRepeated
		default:
			p.err = nil
			written++
		}
	}
	// Counted before the commit: after a rollback the next move finds
	// fewer than counted, which is harmless; a count too low would leave
	// records waiting.
	s.w.unmoved += written
	s.w.ckpt.since += written
	return nil
}

// toTables writes recs into requests and attempts and adds them to the
// roll-ups, as the move would, in the transaction w is in; errNotDirect
// when the tables refuse one, or when the inbox holds records (this
// Store's or another's), whose ids the tables don't know yet, and then
// the caller rolls back. Queries that open a view meanwhile look for recs
// in requests, as during a move (view.go). Writer goroutine only.
func (s *Store) toTables(w *conn, recs []*pending) error {
	switch waiting, err := w.query(anyInbox); {
	case err != nil:
		return fmt.Errorf("read the inbox: %w", err)
	case len(waiting) > 0:
		return errNotDirect
	}
	s.views.moves.Add(1)
	r := rollups{}
	for _, p := range recs {
		var rows [][]driver.Value
		if u := p.view.Load(); u != nil && u.rows != nil {
			rows = u.rows
		} else {
			var err error
			if rows, err = decodeRecord(p.rec); err != nil {
				return errNotDirect
			}
		}
		switch err := insertRows(w, rows, r); {
		case storageError(err):
			return fmt.Errorf("write request %s: %w", p.id, err)
		case err != nil:
			return errNotDirect
		}
		p.err = nil
	}
	if err := r.write(w); err != nil {
		return fmt.Errorf("write roll-ups: %w", err)
	}
	// A record here is two rows written and moved through the inbox, as
	// checkpointAt counts them.
	s.w.ckpt.since += 2 * len(recs)
	return nil
}

// RecordBreaker queues a breaker transition and returns at once. When the
// queue is full or the Store is closed the change is dropped and counted
// (see Dropped). Close writes whatever is queued.
func (s *Store) RecordBreaker(ch fleet.BreakerChange) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if s.q.closed || len(s.q.events) >= 4*s.cfg.batchSize {
		s.dropped.Add(1)
		if !s.q.closed {
			s.cfg.logf("history: queue full, dropped breaker change %s %s->%s", ch.Candidate, ch.From, ch.To)
		}
		return
	}
	s.q.events = append(s.q.events, ch)
	wake(s.sig.commit)
}

// run is the writer goroutine. It commits what is queued, does the jobs
// handed to it, moves the inbox, sweeps once at start, every pruneEvery
// (if positive) and when Prune asks, checkpoints, tries again while the
// file can't be written, and on Close writes what is left and exits.
//
// While a checkpoint runs (checkpoint.go) it commits nothing that can
// wait: a journaled record is durable already, and a WAL that commits
// keep growing is never copied whole, so the checkpoint would never catch
// up. What can't wait goes on: a job (a query waits for it) and a record
// whose Record waits for its commit (no journal).
func (s *Store) run() {
	defer close(s.sig.stopped)
	var tick <-chan time.Time
	if s.cfg.pruneEvery > 0 {
		t := time.NewTicker(s.cfg.pruneEvery)
		defer t.Stop()
		tick = t.C
	}
	// What expired while Switchyard was not running, now that Open has
	// returned.
	s.beginSweep(nil, true)
	for {
		var commit chan struct{}
		var commitTimer, moveTimer, retry, yielded <-chan time.Time
		var step, idle <-chan struct{}
		switch {
		case !s.w.ckpt.running:
			commit = s.sig.commit
			commitTimer, moveTimer, retry = s.sig.commitTimer.C, s.w.moveTimer.C, s.w.retry.C
			if s.w.sweep != nil {
				step, idle, yielded = s.nextStep()
			}
		case s.journal == nil:
			commit = s.sig.commit
		}
		select {
		case j := <-s.sig.jobs:
			s.runJob(j)
		case <-commit:
			s.commitQueued()
			s.moveWhenDue()
		case <-commitTimer:
			s.sig.commitArmed.Store(false)
			s.commitQueued()
			s.moveWhenDue()
		case <-moveTimer:
			s.w.moveArmed = false
			s.commitQueued()
			s.move()
		case <-retry:
			s.commitQueued()
			s.retryWrites()
		case <-tick:
			s.beginSweep(nil, false)
		case done := <-s.sig.prunes:
			s.beginSweep(done, false)
		case err := <-s.w.ckpt.done:
			s.checkpointed(err)
		case <-idle:
			// The queries have ended: the next turn takes the step.
		case <-yielded:
			s.w.yielding = false
			s.stepOrJob()
		case <-step:
			s.stepOrJob()
		case <-s.sig.quit:
			s.stop()
			return
		}
	}
}

// stepOrJob takes the sweep's next step, unless a job waits: a query
// that needs the writer waits for one step of a sweep at most. Writer
// goroutine only.
func (s *Store) stepOrJob() {
	select {
	case j := <-s.sig.jobs:
		s.runJob(j)
	default:
		s.sweepStep()
	}
}

// ready is always ready to receive from.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// runJob commits what is queued and does j; records it committed and
// left in the inbox are moved as after any commit.
func (s *Store) runJob(j job) {
	var err error
	if s.w.c == nil {
		err = ErrClosed
	} else {
		s.commitQueued()
		err = j.f()
	}
	s.w.jobsRun++
	j.done <- err
	if s.w.c != nil {
		s.moveWhenDue()
	}
}

// moveWhenDue moves the inbox when moveAt records wait there, or makes
// sure it is moved within moveDelay; with nothing to move, it checkpoints
// when one is due, as after a move (records that skip the inbox are
// written by the commit). Writer goroutine only.
func (s *Store) moveWhenDue() {
	switch {
	case s.w.unmoved == 0:
		s.checkpointWhenDue()
	case s.cfg.moveAt > 0 && s.w.unmoved >= s.cfg.moveAt:
		s.move()
	case s.cfg.moveDelay > 0 && !s.w.moveArmed:
		s.w.moveArmed = true
		s.w.moveTimer.Reset(s.cfg.moveDelay)
	}
}

// move empties the inbox, and checkpoints when one is due; when it
// can't, it says so and tries again later. Writer goroutine only.
func (s *Store) move() {
	if err := s.moveAll(); err != nil {
		s.fail(err)
		s.armRetry()
	}
	s.checkpointWhenDue()
}

// stop ends the writer on Close: it lets a running checkpoint finish and
// a sweep under way stop (the next one finishes it), writes what is
// queued, the backlog (one last try), moves the inbox and closes the
// connections. What still can't be written is lost, and said so; records
// that stay in the inbox are moved at the next Open.
func (s *Store) stop() {
	if s.w.ckpt.running {
		s.checkpointed(<-s.w.ckpt.done)
	}
	s.endSweep(nil)
	s.commitQueued()
	if !s.flush() {
		n, m := s.dropBacklog()
		s.cfg.logf("history: stopping with %d records and %d breaker changes that could not be written: they are lost (%v)", n, m, s.lastErr())
	}
	if err := s.moveAll(); err != nil {
		s.cfg.logf("history: stopping with records not yet moved out of the inbox; the next start moves them: %v", err)
	}
	if _, err := s.w.c.exec("PRAGMA optimize"); err != nil {
		s.cfg.logf("history: optimize: %v", err)
	}
	if s.journal != nil {
		if err := s.journal.close(); err != nil {
			s.cfg.logf("history: %v", err)
		}
	}
	s.w.closeErr = errors.Join(s.w.c.close(), s.w.ckpt.c.close())
	s.w.c = nil
}

// settle commits what waits in the journal and moves what waits in the
// inbox into requests and attempts before a query reads them, so that it
// sees every record Record acknowledged: this Store's, and another's on
// the same file once that one's writer has committed it. When the move fails the query
// reads what the tables hold, and Health says why.
func (s *Store) settle(ctx context.Context) {
	if s.journal == nil || !s.journal.unsettled() {
		var waiting bool
		if err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM inbox)").Scan(&waiting); err != nil || !waiting {
			return
		}
	}
	s.do(ctx, func() error {
		s.move()
		return nil
	})
}

// flag is a bool as SQLite stores it.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
