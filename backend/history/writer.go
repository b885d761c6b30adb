package history

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Writing (docs/DESIGN.md, "Durability"). One connection writes; whoever
// holds the writer's lock (Store.wlock) uses it: a Record that found
// nobody writing, or the writer goroutine (run). A Record that finds nobody
// writing commits its own record at once, on its own goroutine: no
// hand-off to another goroutine, no wait for a batch to fill or a tick.
// Records and breaker changes that arrive while a commit runs queue, and
// the next commit takes them together (group commit): the first Record to
// queue leads it, once the running commit ends. A Record commits one batch
// at most; a queue longer than a batch goes to the writer goroutine.
// Records go to the inbox (inbox.go); the writer goroutine moves them on,
// prunes, and tries again while the file can't be written (backlog.go).

// pending is one queued request record, encoded as the inbox keeps it,
// and the channel its commit is reported on.
type pending struct {
	id   string
	rec  []byte
	err  error      // the record's own failure in the last commit (a repeated id)
	done chan error // buffered: a commit never waits on it
	// journaled: in the journal, and its Record has returned.
	journaled bool
}

// errRepeated: the id of a record is recorded already.
var errRepeated = errors.New("request id already recorded")

// Committing what the journal holds: when commitAt records wait, or
// commitDelay after the first of them; and on every query (settle). The
// journal has made them durable already, so the writer takes its time to
// commit many in one transaction: a commit per record cost the client
// and the upstreams, on the same cores, more than the record itself.
const (
	commitAt    = 64
	commitDelay = 50 * time.Millisecond
)

// Moving the inbox: when it holds moveAt records, or moveDelay after the
// first record that waits there; and on every query (settle).
const (
	moveAt    = 64
	moveDelay = 100 * time.Millisecond
	// checkpointAt: once this many rows have been written to the inbox or
	// moved out of it since the last checkpoint, the writer goroutine
	// checkpoints after its next move: about SQLite's own 1000 pages.
	checkpointAt = 1000
)

// Record writes rec with its attempts and returns once it is durable, so
// a caller that answers only after Record returns never answers a request
// that history could lose to a crash of Switchyard. It is durable once it
// is in the journal (journal.go): Record appends it there, hands it to
// the writer goroutine and returns. A Store without a journal (another
// Store on the same file holds it) commits rec before returning: at once,
// itself, when no commit is running; records that arrive while one runs
// share the next transaction. Attempts are stored in slice order: an
// attempt's Order and RequestID are taken from its position and rec.ID.
// An id already recorded is refused: without a journal Record fails with
// an error; with one, the writer logs it and keeps the first record.
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
	lead, err := s.enqueue(ctx, p)
	if err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	if s.afterEnqueue != nil {
		s.afterEnqueue()
	}
	if err := s.wait(ctx, p, lead); err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	return nil
}

// errJournalWrite: appending to the journal failed.
var errJournalWrite = errors.New("journal write failed")

// journalRecord appends p to the journal and queues it for the writer
// goroutine, which it wakes, once the queue has room.
func (s *Store) journalRecord(ctx context.Context, p *pending) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	select {
	case s.room <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	j := s.journal
	j.mu.Lock()
	s.qmu.Lock()
	err := ErrClosed
	queued := 0
	if !s.closed {
		if err = j.appendFrame(p.rec); err == nil {
			p.journaled = true
			s.queue = append(s.queue, p)
			queued = len(s.queue)
		}
	}
	s.qmu.Unlock()
	j.mu.Unlock()
	if err != nil {
		<-s.room
		if err != ErrClosed {
			if !j.failing.Swap(true) {
				s.logf("history: %v; committing records before answering until it can be written again", err)
			}
			err = errJournalWrite
		}
		return err
	}
	if j.failing.Swap(false) {
		s.logf("history: the journal can be written again")
	}
	if s.afterEnqueue != nil {
		s.afterEnqueue()
	}
	switch {
	case queued >= commitAt:
		s.wake(s.takeOver)
	case s.commitArmed.CompareAndSwap(false, true):
		s.commitTimer.Reset(commitDelay)
	}
	return nil
}

// wait waits for p's commit. A Record that leads the queue commits it
// itself as soon as it holds the writer's lock (at once when nobody
// writes), unless someone else's commit takes its record first: then it
// stops waiting for the lock, and whoever took the record sees to what
// queued after it. Its commit is one batch, its own record in it; what is
// left goes to the writer goroutine, as does the queue of a Record whose
// ctx ends first.
func (s *Store) wait(ctx context.Context, p *pending, lead bool) error {
	var lock chan struct{} // nil: not leading, so never sent to
	if lead {
		lock = s.wlock
	}
	for {
		select {
		case err := <-p.done:
			return err
		case lock <- struct{}{}:
			lock = nil
			more := s.commitBatch()
			<-s.wlock
			if more {
				s.wake(s.takeOver)
			}
		case <-ctx.Done():
			// The record stays queued, and is written.
			if lock != nil {
				s.wake(s.takeOver)
			}
			select {
			case err := <-p.done:
				return err
			default:
				return context.Cause(ctx)
			}
		}
	}
}

// enqueue queues p, once there is room, and reports whether the caller is
// to write the queue: nobody is writing it.
func (s *Store) enqueue(ctx context.Context, p *pending) (lead bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, context.Cause(ctx)
	}
	if s.isClosed() {
		return false, ErrClosed
	}
	select {
	case s.room <- struct{}{}:
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		<-s.room
		return false, ErrClosed
	}
	s.queue = append(s.queue, p)
	lead = !s.leading
	s.leading = true
	return lead, nil
}

func (s *Store) isClosed() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.closed
}

// wake sends on c, a channel of one slot, unless a wake-up waits there
// already.
func (s *Store) wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// commitBatch commits up to batchSize queued records and as many queued
// breaker changes in one transaction, and reports whether more wait. When
// no record is left, nobody leads the queue: the next Record to queue does.
// Writer lock only.
func (s *Store) commitBatch() (more bool) {
	s.qmu.Lock()
	n, m := min(len(s.queue), s.batchSize), min(len(s.events), s.batchSize)
	recs := append(s.recs[:0], s.queue[:n]...)
	evs := append(s.evs[:0], s.events[:m]...)
	s.queue = shift(s.queue, n)
	s.events = shift(s.events, m)
	more = len(s.queue)+len(s.events) > 0
	if len(s.queue) == 0 {
		s.leading = false
	}
	s.qmu.Unlock()
	for range n {
		<-s.room
	}
	if n+m > 0 {
		s.write(recs, evs)
	}
	clear(recs)
	s.recs, s.evs = recs, evs
	return more
}

// shift drops the first n elements of q, keeping its array.
func shift[T any](q []T, n int) []T {
	rest := copy(q, q[n:])
	clear(q[rest:])
	return q[:rest]
}

// commitQueued commits everything queued, a batch at a time. Writer lock
// only.
func (s *Store) commitQueued() {
	for s.commitBatch() {
	}
}

// write commits recs and evs and reports to each Record. While the file
// can't be written they join the backlog instead. Writer lock only.
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
			s.logf("history: refused request %s: %v", p.id, p.err)
		}
		p.done <- p.err
	}
}

const insertBreaker = `INSERT INTO breaker_events (candidate, from_state, to_state, at, cause)
VALUES (?, ?, ?, ?, ?)`

// commit writes recs to the inbox and evs to breaker_events in one
// transaction. A record the inbox refuses (a repeated id) gets its own
// error in err, and the others are written; a breaker change the table
// refuses is lost and counted. An error returned is the file's, and then
// nothing was written. Writer lock only.
func (s *Store) commit(recs []*pending, evs []fleet.BreakerChange) error {
	if s.beforeCommit != nil {
		s.beforeCommit(len(recs), len(evs))
	}
	w := s.w
	if err := w.begin(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	written := 0
	for _, p := range recs {
		n, err := w.exec(insertInbox, p.id, p.rec)
		switch {
		case storageError(err):
			w.rollback()
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
	for _, ev := range evs {
		_, err := w.exec(insertBreaker, ev.Candidate, string(ev.From), string(ev.To), ev.At.UnixMilli(), ev.Cause)
		switch {
		case storageError(err):
			w.rollback()
			return fmt.Errorf("write breaker change of %s: %w", ev.Candidate, err)
		case err != nil:
			s.dropped.Add(1)
			s.logf("history: lost breaker change %s %s->%s: %v", ev.Candidate, ev.From, ev.To, err)
		}
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
			s.logf("history: %v", err)
		}
	}
	if written > 0 {
		s.unmoved += written
		s.sinceCheckpoint += written
		switch {
		case s.moveAt > 0 && s.unmoved >= s.moveAt:
			s.wake(s.moveNow)
		case s.moveDelay > 0 && !s.moveArmed:
			s.moveArmed = true
			s.moveTimer.Reset(s.moveDelay)
		}
	}
	return nil
}

// RecordBreaker queues a breaker transition and returns at once. When the
// queue is full or the Store is closed the change is dropped and counted
// (see Dropped). The transaction of any Record that queues after it writes
// it too, if the writer goroutine has not yet; Close writes whatever is
// queued.
func (s *Store) RecordBreaker(ch fleet.BreakerChange) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed || len(s.events) >= 4*s.batchSize {
		s.dropped.Add(1)
		if !s.closed {
			s.logf("history: queue full, dropped breaker change %s %s->%s", ch.Candidate, ch.From, ch.To)
		}
		return
	}
	s.events = append(s.events, ch)
	s.wake(s.eventsQueued)
}

// run is the writer goroutine. It writes what a Record left queued and
// breaker changes, moves the inbox, prunes once at start and every
// pruneEvery (if positive),
// tries again while the file can't be written, and on Close writes what is
// left and exits.
func (s *Store) run(pruneEvery time.Duration) {
	defer close(s.stopped)
	var tick <-chan time.Time
	if pruneEvery > 0 {
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		tick = t.C
	}
	// What expired while Switchyard was not running, now that Open has
	// returned.
	if _, err := s.sweep(context.Background(), s.quit); err != nil && !errors.Is(err, ErrClosed) {
		s.logf("history: %v", err)
	}
	close(s.startSwept)
	for {
		select {
		case <-s.takeOver:
			s.locked(func() {})
		case <-s.eventsQueued:
			s.locked(func() {})
		case <-s.moveNow:
			s.locked(s.move)
		case <-s.commitTimer.C:
			s.commitArmed.Store(false)
			s.locked(func() {})
		case <-s.moveTimer.C:
			s.locked(func() {
				s.moveArmed = false
				s.move()
			})
		case <-s.retry.C:
			s.locked(s.retryWrites)
		case <-tick:
			if _, err := s.sweep(context.Background(), s.quit); err != nil && !errors.Is(err, ErrClosed) {
				s.logf("history: %v", err)
			}
		case <-s.quit:
			s.locked(s.shutdown)
			return
		}
	}
}

// locked runs f holding the writer's lock, after writing what is queued.
func (s *Store) locked(f func()) {
	s.wlock <- struct{}{}
	defer func() { <-s.wlock }()
	s.commitQueued()
	f()
}

// move empties the inbox, and checkpoints when one is due; when it
// can't, it says so and tries again later. Writer lock only.
func (s *Store) move() {
	if err := s.moveAll(); err != nil {
		s.fail(err)
		s.armRetry()
	}
	s.checkpoint()
}

// checkpoint copies the WAL into the database file once checkpointAt rows
// have been written since the last time. The writer's connection never
// checkpoints on its own (wal_autocheckpoint is off on it): SQLite would
// do it, fsyncs and all, in whichever commit filled the WAL past 1000
// pages, often a Record's. Here it runs after a move, off the request
// path; and as it runs on the writer's connection, holding the writer's
// lock, no commit lands meanwhile, so it copies the whole WAL (unless a
// reader holds an older snapshot) and the next commit starts the WAL
// again from its beginning. (A checkpoint on another connection, beside
// the commits, never caught up with them: the WAL grew without end.)
// Writer lock only.
func (s *Store) checkpoint() {
	if s.sinceCheckpoint < checkpointAt {
		return
	}
	s.sinceCheckpoint = 0
	if _, err := s.w.query("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		s.logf("history: checkpoint: %v", err)
	}
}

// shutdown writes what Close left queued (locked did), the backlog (one
// last try) and moves the inbox. What still can't be written is lost, and
// said so; records that stay in the inbox are moved at the next Open.
// Writer lock only.
func (s *Store) shutdown() {
	if !s.flush() {
		n, m := s.dropBacklog()
		s.logf("history: stopping with %d records and %d breaker changes that could not be written: they are lost (%v)", n, m, s.lastErr())
	}
	if err := s.moveAll(); err != nil {
		s.logf("history: stopping with records not yet moved out of the inbox; the next start moves them: %v", err)
	}
	if _, err := s.w.exec("PRAGMA optimize"); err != nil {
		s.logf("history: optimize: %v", err)
	}
	if s.journal != nil {
		if err := s.journal.close(); err != nil {
			s.logf("history: %v", err)
		}
	}
}

// Sweeping (docs/DESIGN.md, "Retention"): a sweep deletes sweepBatch rows a
// transaction and gives the writer's lock back between two, so that a
// Record or a query that needs the lock waits for one batch at most, never
// for the whole sweep; then it gives the freed pages back to the file
// system (incremental_vacuum, vacuumStep pages at a time, the same way).
// It checkpoints every sweepCheckpointAt rows or pages, a step of its own,
// so that the WAL stays short; when the WAL starts over SQLite cuts its
// file back to walLimit (journal_size_limit).
const (
	sweepBatch        = 64
	sweepCheckpointAt = 256 // rows deleted (or pages given back) between two checkpoints
	vacuumStep        = 32  // pages: 128 KiB at SQLite's 4 KiB
	walLimit          = 64 << 20
)

const (
	sweepRequests = `DELETE FROM requests WHERE id IN
	(SELECT id FROM requests WHERE started_at < ?1 ORDER BY started_at LIMIT ?2)`
	sweepBreakers = `DELETE FROM breaker_events WHERE id IN
	(SELECT id FROM breaker_events WHERE at < ?1 ORDER BY at LIMIT ?2)`
	sweepRollups = `DELETE FROM rollups WHERE (width, at, candidate) IN
	(SELECT width, at, candidate FROM rollups WHERE width = ?3 AND at <= ?1 - ?3 LIMIT ?2)`
)

// Prune deletes the requests (their attempts go with them) and breaker
// events that started more than Retention before Now (to the minute), a
// small batch at a time, and reports how many requests and breaker events
// it deleted. Records still in the inbox wait for the next one. The
// writer does it after Open and every PruneEvery; calling it directly is
// safe too.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	return s.sweep(ctx, nil)
}

// sweep is Prune; it stops between two batches when quit closes (Close),
// and the next sweep finishes it.
func (s *Store) sweep(ctx context.Context, quit <-chan struct{}) (int64, error) {
	var total int64
	// lock takes the writer's lock and writes what is queued (the writer
	// goroutine, busy sweeping, does not meanwhile); step runs f holding
	// it, after a checkpoint of its own when one is due.
	lock := func() (stop bool, err error) {
		select {
		case s.wlock <- struct{}{}:
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-quit:
			return true, nil
		}
		if s.w == nil {
			<-s.wlock
			return true, ErrClosed
		}
		s.commitQueued()
		return false, nil
	}
	step := func(deletes bool, f func() (int64, error)) (n int64, stop bool, err error) {
		if stop, err := lock(); stop {
			return 0, true, err
		}
		if s.sinceCheckpoint >= sweepCheckpointAt {
			// A checkpoint is a step of its own, and comes often: the
			// WAL stays short, and with it each checkpoint and every
			// reader's lookups.
			s.sinceCheckpoint = checkpointAt
			s.checkpoint()
			<-s.wlock
			if stop, err := lock(); stop {
				return 0, true, err
			}
		}
		defer func() {
			<-s.wlock
			if s.swept != nil && deletes && err == nil {
				s.swept(n)
			}
		}()
		n, err = f()
		return n, false, err
	}
	if s.isClosed() {
		return 0, ErrClosed
	}
	if s.retention < 0 {
		return 0, nil
	}
	cutoff := s.now().Add(-s.retention).UnixMilli()
	cutoff -= cutoff % minuteMs // the roll-ups count whole minutes
	// Most sweeps find nothing to do: they say so without the lock.
	var expired bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM requests WHERE started_at < ?1)
		OR EXISTS (SELECT 1 FROM breaker_events WHERE at < ?1)`, cutoff).Scan(&expired); err != nil || !expired {
		return 0, wrapPrune(err)
	}
	type batch struct {
		q    string
		args []driver.Value
	}
	batches := []batch{{sweepRequests, nil}, {sweepBreakers, nil}}
	for _, w := range rollupWidths {
		batches = append(batches, batch{sweepRollups, []driver.Value{w}})
	}
	for _, b := range batches {
		args := append([]driver.Value{cutoff, int64(s.sweepBatch)}, b.args...)
		for {
			n, stop, err := step(true, func() (int64, error) { return s.inTx(b.q, args...) })
			if err != nil {
				return total, wrapPrune(err)
			}
			if b.q != sweepRollups {
				total += n
			}
			if stop {
				return total, nil
			}
			if n < int64(s.sweepBatch) {
				break
			}
		}
	}
	if total == 0 {
		return 0, nil
	}
	for {
		n, stop, err := step(false, s.vacuumStep)
		if err != nil {
			return total, wrapPrune(err)
		}
		if stop || n == 0 {
			break
		}
	}
	_, _, err := step(false, func() (int64, error) {
		s.sinceCheckpoint = checkpointAt
		s.checkpoint()
		return 0, nil
	})
	return total, wrapPrune(err)
}

func wrapPrune(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("prune history: %w", err)
}

// inTx runs q with args in a transaction of its own and reports how many
// rows it changed. Writer lock only.
func (s *Store) inTx(q string, args ...driver.Value) (int64, error) {
	w := s.w
	if err := w.begin(); err != nil {
		return 0, err
	}
	n, err := w.exec(q, args...)
	if err != nil {
		w.rollback()
		return 0, err
	}
	if err := w.commit(); err != nil {
		w.rollback()
		return 0, err
	}
	s.sinceCheckpoint += int(n)
	return n, nil
}

// vacuumStep gives up to vacuumStep free pages back to the file system and
// reports how many it gave back. Writer lock only.
func (s *Store) vacuumStep() (int64, error) {
	before, err := s.freePages()
	if err != nil || before == 0 {
		return 0, err
	}
	if _, err := s.w.query("PRAGMA incremental_vacuum(" + strconv.Itoa(vacuumStep) + ")"); err != nil {
		return 0, err
	}
	after, err := s.freePages()
	s.sinceCheckpoint += int(before - after)
	return before - after, err
}

// freePages is how many pages of the file are free. Writer lock only.
func (s *Store) freePages() (int64, error) {
	rows, err := s.w.query("PRAGMA freelist_count")
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, _ := rows[0][0].(int64)
	return n, nil
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
	select {
	case s.wlock <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-s.wlock }()
	if s.w != nil {
		s.move()
	}
}

// flag is a bool as SQLite stores it.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
