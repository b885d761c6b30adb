package history

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sweeping (docs/DESIGN.md, "Retention"). A sweep deletes what Retention
// has expired, a small transaction at a time, on the writer goroutine,
// which takes a job (a query waiting) and what else is due between two
// steps: a query waits for one step at most, never for the whole sweep.
// A step is sized to take about sweepStepTime (pace): the rows a
// transaction can delete in that time vary a hundredfold with the file's
// size and the disk. Then it gives the freed pages back to the file
// system (incremental_vacuum, paced the same way). It asks
// for a checkpoint every sweepCheckpointAt rows or pages, so that the WAL
// stays short, and takes its next step once the checkpoint is done
// (checkpoint.go).
const (
	sweepBatch        = 64 // rows a step deletes at first
	minSweepBatch     = 8
	maxSweepBatch     = 64
	sweepStepTime     = 10 * time.Millisecond
	sweepCheckpointAt = 256 // rows deleted (or pages given back) between two checkpoints
	vacuumStep        = 8   // pages a step gives back at first: 32 KiB at SQLite's 4 KiB
	maxVacuumStep     = 32
	walLimit          = 64 << 20
	// sweepYield is the longest a step waits for the queries reading to
	// end (nextStep).
	sweepYield = 20 * time.Millisecond
)

const (
	sweepRequests = `DELETE FROM requests WHERE id IN
	(SELECT id FROM requests WHERE started_at < ?1 ORDER BY started_at LIMIT ?2)`
	sweepBreakers = `DELETE FROM breaker_events WHERE id IN
	(SELECT id FROM breaker_events WHERE at < ?1 ORDER BY at LIMIT ?2)`
	sweepRollups = `DELETE FROM rollups WHERE (width, at, candidate) IN
	(SELECT width, at, candidate FROM rollups WHERE width = ?3 AND at <= ?1 - ?3 LIMIT ?2)`
	// A table the sweep emptied numbers its next rows from 1 again: the
	// team's shipping of it starts over (ship.go, ShipFrom).
	sweepShipped = `UPDATE team_shipped SET
	request_rowid = CASE WHEN EXISTS (SELECT 1 FROM requests) THEN request_rowid ELSE 0 END,
	breaker_id = CASE WHEN EXISTS (SELECT 1 FROM breaker_events) THEN breaker_id ELSE 0 END`
)

// sweep is a sweep under way.
type sweep struct {
	cutoff   int64       // what started before it expires (Unix ms)
	deletes  []sweepStmt // the statements still to run, the current first
	batch    int         // rows the next step deletes
	pages    int         // pages the next step gives back
	total    int64       // requests and breaker events deleted
	vacuumed bool        // no free page left to give back
	last     bool        // the last checkpoint is asked for
	atStart  bool        // the sweep after Open: startSwept closes when it ends
	waiters  []chan pruned
}

// sweepStmt is a DELETE of a sweep, with its arguments beyond the cutoff
// and the batch; counted: its rows count in Prune's total. once: a
// statement without the cutoff and the batch, run once.
type sweepStmt struct {
	q       string
	args    []driver.Value
	counted bool
	once    bool
}

// pruned is what a sweep reports to the Prune calls that waited for it.
type pruned struct {
	n   int64
	err error
}

// Prune deletes the requests (their attempts go with them) and breaker
// events that started more than Retention before Now (to the minute), a
// small batch at a time, and reports how many requests and breaker events
// it deleted. Records still in the inbox wait for the next one. The
// writer does it after Open and every PruneEvery; calling it directly is
// safe too: a Prune that finds a sweep under way waits for it. When ctx
// ends first the sweep goes on without it; one that Close stops is
// finished by the next.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	if s.isClosed() {
		return 0, ErrClosed
	}
	done := make(chan pruned, 1)
	select {
	case s.sig.prunes <- done:
	case <-s.sig.stopped:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	select {
	case r := <-done:
		return r.n, wrapPrune(r.err)
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// SetRetention changes Retention, as a config reload does (zero: the
// default; negative keeps everything). A shorter one sweeps at once, so
// that lowering the retention gives the disk back without waiting for the
// hourly sweep; the sweep runs in the background, as every sweep does.
func (s *Store) SetRetention(ctx context.Context, d time.Duration) error {
	if d == 0 {
		d = DefaultRetention
	}
	return s.do(ctx, func() error {
		was := s.cfg.retention
		s.cfg.retention = d
		switch {
		case d < 0 || (was >= 0 && d >= was):
		case s.w.sweep != nil:
			s.w.reSweep = true // its cutoff is the old retention's
		default:
			s.beginSweep(nil, false)
		}
		return nil
	})
}

func wrapPrune(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("prune history: %w", err)
}

// beginSweep starts a sweep, or has done wait for the one under way.
// Writer goroutine only.
func (s *Store) beginSweep(done chan pruned, atStart bool) {
	if sw := s.w.sweep; sw != nil {
		if done != nil {
			sw.waiters = append(sw.waiters, done)
		}
		return
	}
	sw := &sweep{batch: cmp.Or(s.cfg.sweepBatch, sweepBatch), pages: vacuumStep, atStart: atStart}
	if done != nil {
		sw.waiters = append(sw.waiters, done)
	}
	s.w.sweep = sw
	if s.cfg.retention < 0 {
		s.endSweep(nil)
		return
	}
	sw.cutoff = s.cfg.now().Add(-s.cfg.retention).UnixMilli()
	sw.cutoff -= sw.cutoff % minuteMs // the roll-ups count whole minutes
	// Most sweeps find nothing to do, and say so at once.
	var expired bool
	if err := s.db.QueryRow(`SELECT EXISTS (SELECT 1 FROM requests WHERE started_at < ?1)
		OR EXISTS (SELECT 1 FROM breaker_events WHERE at < ?1)`, sw.cutoff).Scan(&expired); err != nil || !expired {
		s.endSweep(err)
		return
	}
	sw.deletes = []sweepStmt{{q: sweepRequests, counted: true}, {q: sweepBreakers, counted: true}, {q: sweepShipped, once: true}}
	for _, w := range rollupWidths {
		sw.deletes = append(sw.deletes, sweepStmt{q: sweepRollups, args: []driver.Value{w}})
	}
}

// sweepStep takes the sweep under way one step further: a checkpoint
// when one is due, else a batch of deletes, else a few pages given back,
// else the last checkpoint; and then it is done. Writer goroutine only,
// and not while a checkpoint runs.
func (s *Store) sweepStep() {
	sw := s.w.sweep
	if s.w.c == nil {
		s.endSweep(ErrClosed)
		return
	}
	if s.w.ckpt.since >= sweepCheckpointAt {
		// A checkpoint comes often during a sweep: the WAL stays short,
		// and with it each checkpoint and every reader's lookups.
		s.startCheckpoint()
		return
	}
	switch {
	case len(sw.deletes) > 0:
		d := sw.deletes[0]
		args := append([]driver.Value{sw.cutoff, int64(sw.batch)}, d.args...)
		if d.once {
			args = nil
		}
		began := time.Now()
		n, err := s.inTx(d.q, args...)
		if err != nil {
			s.endSweep(err)
			return
		}
		if d.once {
			sw.deletes = sw.deletes[1:]
			break
		}
		if s.cfg.swept != nil {
			s.cfg.swept(n)
		}
		if d.counted {
			sw.total += n
		}
		if n < int64(sw.batch) {
			sw.deletes = sw.deletes[1:]
		}
		if s.cfg.sweepBatch == 0 { // a test's own size stays
			sw.batch = pace(sw.batch, time.Since(began), minSweepBatch, maxSweepBatch)
		}
		if len(sw.deletes) == 0 && sw.total == 0 {
			s.endSweep(nil) // nothing deleted: no page to give back
		}
	case !sw.vacuumed:
		began := time.Now()
		n, err := s.vacuumStep(sw.pages)
		if err != nil {
			s.endSweep(err)
			return
		}
		sw.vacuumed = n == 0
		sw.pages = pace(sw.pages, time.Since(began), 1, maxVacuumStep)
	case !sw.last:
		sw.last = true
		s.startCheckpoint()
	default:
		s.endSweep(nil)
	}
}

// nextStep says when the sweep under way takes its next step: now
// (step), or once no query reads (idle), or sweepYield after it began to
// wait for that (yielded), so that queries asked back to back don't stop
// the sweep. A step beside a query makes it wait: not for a lock (a
// query reads its snapshot) but for the CPU and for SQLite's mutexes,
// its page cache's above all, which every connection of the process
// shares: beside the steps of a week's sweep at 1M requests, a first
// page took up to 12 ms instead of 0.5 (docs/DESIGN.md, "Retention").
// Writer goroutine only.
func (s *Store) nextStep() (step, idle <-chan struct{}, yielded <-chan time.Time) {
	if s.views.open.Load() == 0 {
		s.stopYield()
		return ready, nil, nil
	}
	if !s.w.yielding {
		s.w.yielding = true
		s.w.yield.Reset(sweepYield)
	}
	return nil, s.views.idle, s.w.yield.C
}

// stopYield stops waiting for the queries to end. Writer goroutine only.
func (s *Store) stopYield() {
	if s.w.yielding {
		s.w.yield.Stop()
		s.w.yielding = false
	}
}

// pace is how much the next step of a sweep does (rows, or pages), after
// one that did n took took: twice as much after a step under half of
// sweepStepTime, as much as would have taken sweepStepTime after one
// over twice that, within lo and hi.
func pace(n int, took time.Duration, lo, hi int) int {
	switch {
	case took < sweepStepTime/2:
		return min(2*n, hi)
	case took > 2*sweepStepTime:
		return max(int(int64(n)*int64(sweepStepTime)/int64(took)), lo)
	}
	return n
}

// endSweep ends the sweep under way, if any, and tells whoever waited for
// it; an error nobody waited for is logged. Writer goroutine only.
func (s *Store) endSweep(err error) {
	sw := s.w.sweep
	if sw == nil {
		return
	}
	s.w.sweep = nil
	s.stopYield()
	err = s.noteDamage(err)
	if err != nil && len(sw.waiters) == 0 && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrDamaged) {
		s.cfg.logf("history: %v", wrapPrune(err))
	}
	for _, done := range sw.waiters {
		done <- pruned{sw.total, err}
	}
	if sw.atStart {
		close(s.startSwept)
	}
	if s.w.reSweep && !errors.Is(err, ErrClosed) {
		s.w.reSweep = false
		s.beginSweep(nil, false)
	}
}

// inTx runs q with args in a transaction of its own and reports how many
// rows it changed. Writer goroutine only.
func (s *Store) inTx(q string, args ...driver.Value) (int64, error) {
	w := s.w.c
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
	s.w.ckpt.since += int(n)
	return n, nil
}

// vacuumStep gives up to pages free pages back to the file system and
// reports how many it gave back. Writer goroutine only.
func (s *Store) vacuumStep(pages int) (int64, error) {
	before, err := s.freePages()
	if err != nil || before == 0 {
		return 0, err
	}
	if _, err := s.w.c.query("PRAGMA incremental_vacuum(" + strconv.Itoa(pages) + ")"); err != nil {
		return 0, err
	}
	after, err := s.freePages()
	s.w.ckpt.since += int(before - after)
	return before - after, err
}

// freePages is how many pages of the file are free. Writer goroutine only.
func (s *Store) freePages() (int64, error) {
	rows, err := s.w.c.query("PRAGMA freelist_count")
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, _ := rows[0][0].(int64)
	return n, nil
}
