package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchyard/switchyard/backend/fleet"
)

// A history that can't be written is never silent and loses nothing it can
// keep (docs/DESIGN.md, "History"): the writer keeps what it could not
// write in a bounded backlog, tries again with a growing pause, says what
// is wrong through Health and the log, and writes the backlog, oldest
// first, as soon as the file can be written again.

// MaxBacklog is how many request records are kept in memory while the file
// can't be written; beyond it the oldest are lost (and counted).
const MaxBacklog = 10000

// Pauses between two tries of a file that can't be written.
const (
	minPause = time.Second
	maxPause = 5 * time.Second
)

// Health says whether the history can be written now. The zero value is a
// healthy history.
type Health struct {
	// Err is why the file can't be written now; nil when it can.
	Err error
	// Since is when writes began to fail; zero when they don't.
	Since time.Time
	// Pending is how many request records wait in memory to be written.
	Pending int
	// Lost counts request records lost for good since Open: the backlog
	// overflowed, or Switchyard stopped before they could be written.
	Lost int64
	// WriteErrors counts the write transactions that failed since Open.
	WriteErrors int64
}

// Health reports whether the history can be written now. It is safe to call
// at any time; it does no I/O.
func (s *Store) Health() Health {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	h := s.health
	if s.damage != nil {
		// What to do comes first, and stays: writes that work again do
		// not mend the file.
		h.Err, h.Since = s.damage, s.damageSince
	}
	return h
}

// failing reports whether writes are failing: new records join the
// backlog. Writer goroutine only.
func (s *Store) failing() bool { return len(s.w.backlog)+len(s.w.evBacklog) > 0 }

// fail notes a failed write: the first of a run is logged at once, later
// ones at most once a minute.
func (s *Store) fail(err error) {
	err = s.noteDamage(err)
	now := s.cfg.now()
	s.healthMu.Lock()
	first := s.health.Err == nil
	s.health.Err = err
	s.health.WriteErrors++
	if first {
		s.health.Since = now
	}
	s.healthMu.Unlock()
	switch {
	case first && errors.Is(err, ErrDamaged):
		s.w.lastLog = now // noteDamage said it, with what to do
	case first:
		s.cfg.logf("history: can't write %s (%v): keeping up to %d records in memory until it can; free disk space or move the file aside", s.path, err, s.cfg.maxBacklog)
		s.w.lastLog = now
	case now.Sub(s.w.lastLog) >= time.Minute:
		s.cfg.logf("history: still can't write %s (%v): %d records wait", s.path, err, len(s.w.backlog))
		s.w.lastLog = now
	}
}

// readErr is err, a query's, saying what to do when the query found the
// file damaged (noteDamage).
func (s *Store) readErr(err error) error { return s.noteDamage(err) }

// noteDamage is err saying what to do when it says the file is damaged:
// Open checks the whole file only after an unclean shutdown, so damage
// done while Switchyard was stopped is found by the first query, write or
// sweep that reads it. The history is then shown as damaged, with the
// same advice as at start, for as long as Switchyard runs on the file,
// and the log says it once. Any other err is returned as it is.
func (s *Store) noteDamage(err error) error {
	var se *sqlite.Error
	if errors.Is(err, ErrDamaged) || !errors.As(err, &se) || (se.Code()&0xff != sqlite3.SQLITE_CORRUPT && se.Code()&0xff != sqlite3.SQLITE_NOTADB) {
		return err
	}
	err = fmt.Errorf("%w (%w): stop Switchyard, move it aside (mv %s %s.damaged) and start it again; it then makes a new one", ErrDamaged, err, s.path, s.path)
	s.healthMu.Lock()
	first := s.damage == nil
	if first {
		s.damage, s.damageSince = err, s.cfg.now()
	}
	s.healthMu.Unlock()
	if first {
		s.cfg.logf("history: %v", err)
	}
	return err
}

// lastErr is the error of the last failed write, nil when writes work.
func (s *Store) lastErr() error {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	return s.health.Err
}

// keep puts records and breaker changes that could not be written in the
// backlog, and tells each waiting Record that its record is not durable
// yet. Writer goroutine only.
func (s *Store) keep(recs []*pending, evs []fleet.BreakerChange) {
	err := fmt.Errorf("%w: %w", ErrNotDurable, s.lastErr())
	for _, p := range recs {
		p.done <- err // the backlog never reports again
		s.w.backlog = append(s.w.backlog, p)
	}
	s.w.evBacklog = append(s.w.evBacklog, evs...)
	lost := 0
	if over := len(s.w.backlog) - s.cfg.maxBacklog; over > 0 {
		s.w.backlog = append(s.w.backlog[:0], s.w.backlog[over:]...)
		lost = over
	}
	if over := len(s.w.evBacklog) - s.cfg.maxBacklog; over > 0 {
		s.w.evBacklog = append(s.w.evBacklog[:0], s.w.evBacklog[over:]...)
		s.dropped.Add(int64(over))
	}
	s.healthMu.Lock()
	s.health.Pending = len(s.w.backlog)
	s.health.Lost += int64(lost)
	s.healthMu.Unlock()
}

// armRetry makes the writer try again after a pause, unless it will
// already. Writer goroutine only.
func (s *Store) armRetry() {
	if !s.w.retryArmed {
		s.w.retryArmed = true
		s.w.retry.Reset(s.pause())
	}
}

// retryWrites writes the backlog and moves the inbox; when both worked the
// history is healthy again, else it tries again after a longer pause.
// Writer goroutine only.
func (s *Store) retryWrites() {
	s.w.retryArmed = false
	s.roomFromWAL()
	if !s.flush() {
		s.w.pauses++
		s.armRetry()
		return
	}
	if err := s.moveAll(); err != nil {
		s.fail(err)
		s.w.pauses++
		s.armRetry()
		return
	}
	s.checkpointWhenDue()
	s.w.pauses = 0
	s.healthMu.Lock()
	was := s.health.Err
	s.health.Err, s.health.Since = nil, time.Time{}
	s.healthMu.Unlock()
	if was != nil {
		s.cfg.logf("history: writing %s again; %d records that waited are written", s.path, s.w.flushed)
	}
	s.w.flushed = 0
}

// roomFromWAL copies the WAL into the file and cuts it to nothing before
// a write is tried again after a full disk: the WAL holds what was
// written until then, and a user who freed a few MB on a small disk saw
// the WAL keep them, the history never coming back (8 to 10 MB freed,
// 5.6 MB of WAL). A checkpoint that can't run now (no room for what it
// copies, a reader in the way) is tried at the next retry. Writer
// goroutine only.
func (s *Store) roomFromWAL() {
	var se *sqlite.Error
	if s.w.ckpt.running || !errors.As(s.lastErr(), &se) || se.Code()&0xff != sqlite3.SQLITE_FULL {
		return
	}
	s.w.ckpt.c.query("PRAGMA wal_checkpoint(TRUNCATE)")
}

// flush writes the backlog, oldest first, in batches, and reports whether
// it is empty now. A record the database refuses (not for want of space or
// a sound file) is lost and counted. Writer goroutine only.
func (s *Store) flush() bool {
	for s.failing() {
		n, m := min(len(s.w.backlog), s.cfg.batchSize), min(len(s.w.evBacklog), s.cfg.batchSize)
		recs := s.w.backlog[:n]
		if err := s.commit(recs, s.w.evBacklog[:m]); err != nil {
			s.fail(err)
			return false
		}
		for _, p := range recs {
			if p.err != nil {
				s.cfg.logf("history: lost request %s: %v", p.id, p.err)
				s.healthMu.Lock()
				s.health.Lost++
				s.healthMu.Unlock()
			}
		}
		clear(recs)
		s.w.backlog, s.w.evBacklog = s.w.backlog[n:], s.w.evBacklog[m:]
		s.w.flushed += n
		s.healthMu.Lock()
		s.health.Pending = len(s.w.backlog)
		s.healthMu.Unlock()
		s.checkpointBetween()
	}
	s.w.backlog, s.w.evBacklog = nil, nil
	return true
}

// pause is how long to wait before the next try: a second, doubling with
// each failed try, at most maxPause.
func (s *Store) pause() time.Duration {
	if s.cfg.retryPause > 0 {
		return s.cfg.retryPause
	}
	return min(minPause<<min(s.w.pauses, 5), maxPause)
}

// dropBacklog loses what waits, counting it, and returns how many records
// and breaker changes that was.
func (s *Store) dropBacklog() (records, breakerChanges int) {
	records, breakerChanges = len(s.w.backlog), len(s.w.evBacklog)
	s.w.backlog, s.w.evBacklog = nil, nil
	s.dropped.Add(int64(breakerChanges))
	s.healthMu.Lock()
	s.health.Lost += int64(records)
	s.health.Pending = 0
	s.healthMu.Unlock()
	return records, breakerChanges
}

// storageError reports whether err says the file can't be written (a full
// disk, an I/O error, a damaged or read-only file, a lock held too long)
// rather than that one record is refused (a repeated id).
func storageError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE, sqlite3.SQLITE_TOOBIG:
			return false
		}
	}
	return true
}
