package history

import (
	"cmp"
	"os"
)

// Checkpoints (docs/DESIGN.md, "History"). The writer's connection never
// checkpoints in a commit (wal_autocheckpoint is off on it): SQLite would
// do it, fsyncs and all, in whichever commit filled the WAL past 1000
// pages. The writer goroutine asks for one instead, once checkpointAt rows
// have been written since the last, and a goroutine of the checkpoint's
// own runs it on a connection of its own, so that the writer goes on
// doing the jobs queries hand it: a checkpoint's fsyncs take from 100 ms
// to over a second on a slow disk, and a sweep at 10M requests asks for
// one every few hundred rows. Meanwhile the writer commits nothing that
// can wait (see run), so the checkpoint copies the whole WAL (unless a
// reader holds an older snapshot) and the next commit starts the WAL again
// from its beginning, where SQLite cuts its file back to walLimit
// (journal_size_limit). (A checkpoint beside a stream of commits never
// caught up with them: the WAL grew without end.)

// checkpointAt: once this many rows have been written to the inbox or
// moved out of it since the last checkpoint (a record committed straight
// into the tables counts as both), the writer checkpoints after its next
// move or commit: about SQLite's own 1000 pages.
const checkpointAt = 1000

// checkpointer is the writer's side of checkpointing.
type checkpointer struct {
	c       *conn      // the checkpoint's own connection
	since   int        // rows written since the last checkpoint began
	running bool       // a checkpoint runs
	done    chan error // its result
}

// checkpointWhenDue starts a checkpoint once checkpointAt rows have been
// written since the last one. Writer goroutine only.
func (s *Store) checkpointWhenDue() {
	if s.w.ckpt.since >= checkpointAt {
		s.startCheckpoint()
	}
}

// startCheckpoint starts a checkpoint unless one runs. Writer goroutine
// only.
func (s *Store) startCheckpoint() {
	ck := &s.w.ckpt
	if ck.running {
		return
	}
	ck.since, ck.running = 0, true
	c, done, hook := ck.c, ck.done, s.cfg.checkpointing
	go func() {
		if hook != nil {
			hook()
		}
		_, err := c.query("PRAGMA wal_checkpoint(PASSIVE)")
		done <- err
	}()
}

// checkpointNow checkpoints on the writer goroutine, after the
// checkpoint that runs, if any: for Import, whose transactions come back
// to back, so that a checkpoint beside them would never catch up.
// Writer goroutine only.
func (s *Store) checkpointNow() {
	ck := &s.w.ckpt
	if ck.running {
		s.checkpointed(<-ck.done)
	}
	ck.since = 0
	if _, err := ck.c.query("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		s.cfg.logf("history: checkpoint: %v", err)
	}
}

// checkpointBetween checkpoints, when one is due, between two of the
// back-to-back transactions of a backlog written or an inbox moved after
// a full disk: a checkpoint beside them would never catch up, and the
// WAL took 73 MB for 10,000 records, more than the room a user had just
// made. Writer goroutine only.
func (s *Store) checkpointBetween() {
	if s.w.ckpt.since >= checkpointAt {
		s.checkpointNow()
	}
}

// checkpointed takes the end of a checkpoint. Without the journal the
// writer went on committing beside it (see run), so it did not copy the
// whole WAL, and the WAL would never start again: it grew by some 25 KB a
// request without end. The writer copies what was committed meanwhile
// itself, a few pages, so that its next commit starts the WAL again.
// Writer goroutine only.
func (s *Store) checkpointed(err error) {
	s.w.ckpt.running = false
	if err == nil && s.journal == nil {
		_, err = s.w.ckpt.c.query("PRAGMA wal_checkpoint(PASSIVE)")
	}
	if err == nil {
		err = s.cutWAL()
	}
	if err != nil {
		s.cfg.logf("history: checkpoint: %v", err)
	}
}

// cutWAL copies the whole WAL and cuts it to nothing once it has grown
// past walLimit: a checkpoint that copies it all restarts it, but another
// Switchyard committing on the same file (each commits beside the other's
// checkpoints) kept it from ever being all copied, and it grew to 246 MB
// under load before one did. TRUNCATE waits for the file's other writer
// and readers (busy_timeout), which a WAL this long is worth.
// Writer goroutine only.
func (s *Store) cutWAL() error {
	limit := cmp.Or(s.cfg.walMax, walLimit)
	if fi, err := os.Stat(s.path + "-wal"); err != nil || fi.Size() <= limit {
		return nil
	}
	_, err := s.w.ckpt.c.query("PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}
