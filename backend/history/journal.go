package history

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// The journal (docs/DESIGN.md, "Durability"). Record appends a request's
// record to a plain file beside the history, with one write(2), and
// returns: what write(2) has returned is in the kernel's page cache, and
// a kill -9 of Switchyard cannot take it back, which is the guarantee the
// history gives (synchronous=NORMAL: an OS crash or a power loss may roll
// back the last commits, the journal's last writes alike). The writer
// goroutine commits the records into requests and attempts off the
// answer's path, many at a time (commitAt, commitDelay in writer.go); Open
// replays what a crash left in the journal. One Store at a time owns a
// journal, by an advisory lock on it; a second Store on the same file
// works without one, committing each record before Record returns.
//
// A frame is the payload's length (4 bytes, little endian), its CRC-32C (4
// bytes, little endian) and the payload: the record as the inbox keeps it
// (encodeRecord). A frame cut short by a crash, or damaged, ends the
// replay: nothing after it was acknowledged by a write that completed.

// journalSuffix names the journal beside the history file. (SQLite's own
// files are -wal, -shm and -journal.)
const journalSuffix = "-records"

// journalTruncateAt: once every record in the journal is committed, the
// writer empties the file when it has grown past this size, rather than
// after each commit, to spend one ftruncate per few thousand records.
// Open replays the rest; the inbox and requests refuse what they hold.
const journalTruncateAt = 1 << 20

const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errJournalHeld: another Store holds the journal (see lockFile).
var errJournalHeld = errors.New("journal held by another Store")

// journal is an open, locked journal file. mu guards everything in it.
type journal struct {
	mu      sync.Mutex
	f       *os.File
	size    int64 // the end of the last whole frame
	limit   int64 // journalTruncateAt, or a test's own
	pending int   // records appended and not yet committed
	buf     []byte
	failing atomic.Bool // the last append failed (said once, in the log)
}

// openJournal opens, creating it when missing, and locks the journal of
// the history file at path. It fails with errJournalHeld when another
// Store holds it, and with errors.ErrUnsupported where files can't be
// locked.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path+journalSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return &journal{f: f, limit: journalTruncateAt}, nil
}

// contents reads the whole journal: the payloads of its whole frames, in
// order, and how many bytes follow the last of them (a torn frame).
func (j *journal) contents() (recs [][]byte, torn int64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	b, err := io.ReadAll(j.f)
	if err != nil {
		return nil, 0, err
	}
	recs, rest := frames(b)
	return recs, int64(len(rest)), nil
}

// frames splits b into the payloads of its whole, intact frames, and
// returns what is left from the first frame that is not.
func frames(b []byte) (recs [][]byte, rest []byte) {
	for len(b) >= frameHeader {
		n := binary.LittleEndian.Uint32(b)
		sum := binary.LittleEndian.Uint32(b[4:])
		if uint64(n) > uint64(len(b)-frameHeader) {
			break
		}
		payload := b[frameHeader : frameHeader+int(n)]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		recs = append(recs, payload)
		b = b[frameHeader+int(n):]
	}
	return recs, b
}

// appendFrame writes rec as one frame, with one write. A write that fails
// part way is cut off again, so that the frames after it can be read.
// j.mu held.
func (j *journal) appendFrame(rec []byte) error {
	b := binary.LittleEndian.AppendUint32(j.buf[:0], uint32(len(rec)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(rec, castagnoli))
	b = append(b, rec...)
	j.buf = b[:0]
	n, err := j.f.WriteAt(b, j.size)
	if err != nil {
		if n > 0 {
			j.f.Truncate(j.size)
		}
		return fmt.Errorf("journal: %w", err)
	}
	j.size += int64(n)
	j.pending++
	return nil
}

// committed says that n appended records are committed, and empties the
// file when none is left to commit and it has grown past
// journalTruncateAt.
func (j *journal) committed(n int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending -= n
	if j.pending > 0 || j.size < j.limit {
		return nil
	}
	return j.truncate()
}

// truncate empties the file. j.mu held.
func (j *journal) truncate() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.size = 0
	return nil
}

// unsettled reports whether records appended here wait to be committed.
func (j *journal) unsettled() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending > 0
}

// close empties the file when every record in it is committed, and closes
// it, which lets go of the lock; records not committed stay, for the next
// Open to replay.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.pending == 0 {
		err = j.truncate()
	}
	return errors.Join(err, j.f.Close())
}

// replayInbox puts a journaled record in the inbox unless the inbox or
// requests hold its id: a record committed before the crash, or before
// the journal was last emptied.
const replayInbox = `INSERT OR IGNORE INTO inbox (id, rec) SELECT ?1, ?2
WHERE NOT EXISTS (SELECT 1 FROM requests WHERE id = ?1)`

// openJournal opens the Store's journal and commits into the inbox what a
// crash left in it. It returns nil when the Store is to work without one:
// another Store holds it, the system can't lock files, or it can't be
// read or replayed (then it stays as it is, for the next Open to try).
// Before the writer goroutine starts.
func (s *Store) openJournal(limit int64) *journal {
	j, err := openJournal(s.path)
	switch {
	case errors.Is(err, errJournalHeld):
		s.cfg.logf("history: another Switchyard records into %s: this one commits each record before answering", s.path)
		return nil
	case errors.Is(err, errors.ErrUnsupported):
		return nil
	case err != nil:
		s.cfg.logf("history: open journal: %v; committing each record before answering", err)
		return nil
	}
	n, err := s.replay(j)
	if err != nil {
		s.cfg.logf("history: replay journal %s: %v; committing each record before answering", j.f.Name(), err)
		j.f.Close()
		return nil
	}
	j.limit = cmp.Or(limit, j.limit)
	if n > 0 {
		s.cfg.logf("history: replayed the journal: %d records, each kept unless already stored", n)
	}
	return j
}

// replay commits the journal's records into the inbox, in one
// transaction, empties it and returns how many it held.
func (s *Store) replay(j *journal) (int, error) {
	recs, torn, err := j.contents()
	if err != nil {
		return 0, err
	}
	if torn > 0 {
		s.cfg.logf("history: the journal ends in %d bytes of a record cut short by a crash, never acknowledged: dropped", torn)
	}
	if len(recs) > 0 {
		w := s.w.c
		if err := w.begin(); err != nil {
			return 0, err
		}
		for _, rec := range recs {
			var id string
			rows, err := decodeRecord(rec)
			if err == nil {
				id, _ = rows[0][0].(string)
			}
			if id == "" {
				// The frame's checksum held: written so by this code.
				s.cfg.logf("history: lost a journaled record that can't be read: %v", err)
				continue
			}
			if _, err := w.exec(replayInbox, id, rec); err != nil {
				w.rollback()
				return 0, err
			}
		}
		if err := w.commit(); err != nil {
			w.rollback()
			return 0, err
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(recs), j.truncate()
}
