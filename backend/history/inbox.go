package history

import (
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The inbox (docs/DESIGN.md, "Durability"). A record whose Record waits
// for its commit (no journal: a second Store on the file, or a journal
// that can't be written) is committed as one row of the inbox table, a
// single B-tree: a commit writes one or two pages to the WAL, where the
// rows of requests and attempts with their six indexes take eight or
// more, at two write syscalls a page. So does a batch of journaled records
// that the tables refused one of (commit, in writer.go). The writer moves
// the inbox into requests and attempts off the request path, in batches
// (move); Open moves what a crash left, and what it replays from the
// journal; a query reads what waits there beside the tables (view.go),
// so it sees every record Record acknowledged, this Store's or another's
// on the same file.

const (
	// insertInbox stores one record, unless its id is in requests
	// already; the inbox's own key refuses an id waiting there.
	insertInbox = `INSERT INTO inbox (id, rec) SELECT ?1, ?2
WHERE NOT EXISTS (SELECT 1 FROM requests WHERE id = ?1)`
	selectInbox = `SELECT id, rec FROM inbox ORDER BY id LIMIT ?`
	deleteInbox = `DELETE FROM inbox WHERE id <= ?`

	// The columns of these two INSERTs are the order in which
	// encodeRecord writes a record's values.
	insertRequest = `INSERT INTO requests (id, started_at, protocol, stream, thinking,
	requested_model, served_candidate, served_model, is_fallback, status, http_status,
	error, ttft_ms, latency_ms, prompt_tokens, completion_tokens, failure)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertAttempt = `INSERT INTO attempts (request_id, ord, candidate, outcome, error,
	http_status, started_at, deadline_ms, ttft_ms, duration_ms, cold, demoted, reading, fault, warm)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	requestValues, attemptValues = 17, 15
	// attemptValues1 is an attempt's values in format 1, which had no
	// warm: its rows are read with NULL there.
	attemptValues1 = 14
)

// A record in the inbox (its rec column) is a format byte, the number of
// rows, and the rows: the request's, then its attempts' in order. A row is
// the number of its values and the values, each a kind byte and, for an
// integer, a zig-zag varint, for a text, a uvarint length and the bytes.
// A change to the columns of requests or attempts needs a new format, and
// the move must still read the ones before (a crash may leave records in
// them). Format 2 added the attempt's warm flag.
const inboxFormat = 2

const (
	kindNull = iota
	kindInt
	kindText
)

// encodeRecord is r as the inbox keeps it. Attempts are stored in slice
// order: an attempt's Order and RequestID are taken from its position and
// r.ID. Times and durations are truncated to the millisecond.
func encodeRecord(r fleet.RequestRecord) ([]byte, error) {
	e := encoder{b: make([]byte, 0, 128+96*len(r.Attempts))}
	e.b = append(e.b, inboxFormat)
	e.b = binary.AppendUvarint(e.b, uint64(1+len(r.Attempts)))

	e.row(requestValues)
	e.text(r.ID)
	e.int(r.StartedAt.UnixMilli())
	e.text(string(r.Protocol))
	e.flag(r.Stream)
	e.flag(r.Thinking)
	e.text(r.RequestedModel)
	e.textOrNull(r.ServedCandidate)
	e.textOrNull(r.ServedModel)
	e.flag(r.IsFallback)
	e.text(string(r.Status))
	e.intOrNull(int64(r.HTTPStatus))
	e.textOrNull(r.Error)
	e.millisOrNull(r.TTFT)
	e.int(r.Latency.Milliseconds())
	e.intOrNull(int64(r.PromptTokens))
	e.intOrNull(int64(r.CompletionTokens))
	e.textOrNull(string(r.Failure))

	for i, a := range r.Attempts {
		e.row(attemptValues)
		e.text(r.ID)
		e.int(int64(i))
		e.text(a.Candidate)
		e.text(string(a.Outcome))
		e.textOrNull(a.Error)
		e.intOrNull(int64(a.HTTPStatus))
		if a.StartedAt.IsZero() {
			e.null()
		} else {
			e.int(a.StartedAt.UnixMilli())
		}
		e.int(a.Deadline.Milliseconds())
		e.millisOrNull(a.TTFT)
		e.int(a.Duration.Milliseconds())
		e.flag(a.Cold)
		e.flag(a.Demoted)
		if a.Reading == nil {
			e.null()
		} else {
			b, err := json.Marshal(storedReading(*a.Reading))
			if err != nil {
				return nil, fmt.Errorf("attempt %d reading: %w", i, err)
			}
			e.text(string(b))
		}
		e.textOrNull(string(a.Fault))
		e.flag(a.Warm)
	}
	return e.b, nil
}

// encoder appends values in the inbox's format.
type encoder struct{ b []byte }

func (e *encoder) row(values int) { e.b = binary.AppendUvarint(e.b, uint64(values)) }
func (e *encoder) null()          { e.b = append(e.b, kindNull) }

func (e *encoder) int(v int64) {
	e.b = append(e.b, kindInt)
	e.b = binary.AppendVarint(e.b, v)
}

func (e *encoder) text(s string) {
	e.b = append(e.b, kindText)
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

// flag is a bool as SQLite stores it.
func (e *encoder) flag(b bool) {
	var v int64
	if b {
		v = 1
	}
	e.int(v)
}

// intOrNull and textOrNull store a zero value as NULL.
func (e *encoder) intOrNull(v int64) {
	if v == 0 {
		e.null()
		return
	}
	e.int(v)
}

// millisOrNull stores d in whole milliseconds, and NULL only for zero: a
// TTFT under a millisecond is 0, not none.
func (e *encoder) millisOrNull(d time.Duration) {
	if d == 0 {
		e.null()
		return
	}
	e.int(d.Milliseconds())
}

func (e *encoder) textOrNull(s string) {
	if s == "" {
		e.null()
		return
	}
	e.text(s)
}

var errMalformed = errors.New("malformed inbox record")

// decodeRecord returns the rows of an inbox record: the request's values,
// then each attempt's, as insertRequest and insertAttempt take them.
func decodeRecord(b []byte) ([][]driver.Value, error) {
	if len(b) == 0 || b[0] != inboxFormat && b[0] != 1 {
		return nil, fmt.Errorf("%w: unknown format", errMalformed)
	}
	sent := uint64(attemptValues)
	if b[0] == 1 {
		sent = attemptValues1
	}
	d := decoder{b: b[1:]}
	n := d.uvarint()
	if n < 1 || n > uint64(len(d.b)) {
		return nil, errMalformed
	}
	rows := make([][]driver.Value, n)
	for i := range rows {
		want, size := sent, uint64(attemptValues)
		if i == 0 {
			want, size = requestValues, requestValues
		}
		if d.uvarint() != want {
			return nil, fmt.Errorf("%w: row %d has the wrong number of values", errMalformed, i)
		}
		row := make([]driver.Value, size) // an older format's missing values are NULL
		for j := range want {
			row[j] = d.value()
		}
		rows[i] = row
	}
	if d.err != nil || len(d.b) > 0 {
		return nil, errMalformed
	}
	return rows, nil
}

// decoder reads values in the inbox's format; the first problem sticks in
// err and later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errMalformed
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) value() driver.Value {
	if len(d.b) == 0 {
		d.err = errMalformed
		return nil
	}
	kind := d.b[0]
	d.b = d.b[1:]
	switch kind {
	case kindNull:
		return nil
	case kindInt:
		v, n := binary.Varint(d.b)
		if n <= 0 {
			d.err = errMalformed
			d.b = nil
			return nil
		}
		d.b = d.b[n:]
		return v
	case kindText:
		l := d.uvarint()
		if l > uint64(len(d.b)) {
			d.err = errMalformed
			d.b = nil
			return nil
		}
		s := string(d.b[:l])
		d.b = d.b[l:]
		return s
	}
	d.err = errMalformed
	d.b = nil
	return nil
}

// moveChunk is the most records one move transaction takes, so that a
// Record arriving meanwhile waits for a short transaction at most.
const moveChunk = 32

// moveSome moves up to moveChunk records from the inbox into requests and
// attempts in one transaction, and reports whether the inbox is empty now.
// A record the tables refuse or that can't be read (neither should
// happen: the inbox checked its id, and wrote it) is taken out alone,
// logged and counted lost, so that it never holds up the others. Writer
// goroutine only.
func (s *Store) moveSome() (empty bool, err error) {
	s.views.moves.Add(1)
	w := s.w.c
	if err := w.begin(); err != nil {
		return false, fmt.Errorf("move: begin: %w", err)
	}
	n, err := moveIn(w)
	var bad *refusedError
	switch {
	case errors.As(err, &bad):
		w.rollback()
		s.cfg.logf("history: lost request %s, which the inbox held: %v", bad.id, bad.err)
		s.healthMu.Lock()
		s.health.Lost++
		s.healthMu.Unlock()
		if _, err := w.exec(deleteInboxRecord, bad.id); err != nil {
			return false, fmt.Errorf("move: %w", err)
		}
		return false, nil
	case err != nil:
		w.rollback()
		return false, fmt.Errorf("move: %w", err)
	case n == 0:
		w.rollback()
		return true, nil
	}
	if err := w.commit(); err != nil {
		w.rollback()
		return false, fmt.Errorf("move: commit: %w", err)
	}
	s.w.unmoved = max(s.w.unmoved-n, 0)
	s.w.ckpt.since += n
	return n < moveChunk, nil
}

const deleteInboxRecord = `DELETE FROM inbox WHERE id = ?`

// refusedError is a record the move could not write for a reason of its
// own rather than of the file.
type refusedError struct {
	id  string
	err error
}

func (e *refusedError) Error() string { return e.id + ": " + e.err.Error() }

// moveIn writes the oldest inbox records into requests and attempts, adds
// them to the roll-ups and deletes them from the inbox, in the transaction
// w is in, and returns how many.
func moveIn(w *conn) (int, error) {
	rows, err := w.query(selectInbox, int64(moveChunk))
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	r := rollups{}
	for _, row := range rows {
		id, _ := row[0].(string)
		blob, _ := row[1].([]byte)
		if err := moveOne(w, blob, r); err != nil {
			if storageError(err) && !errors.Is(err, errMalformed) {
				return 0, err
			}
			return 0, &refusedError{id: id, err: err}
		}
	}
	if err := r.write(w); err != nil {
		return 0, err
	}
	last, _ := rows[len(rows)-1][0].(string)
	if _, err := w.exec(deleteInbox, last); err != nil {
		return 0, err
	}
	return len(rows), nil
}

// moveOne writes one inbox record's rows into requests and attempts, and
// counts them in r, which the caller writes in the same transaction.
func moveOne(w *conn, blob []byte, r rollups) error {
	rows, err := decodeRecord(blob)
	if err != nil {
		return err
	}
	return insertRows(w, rows, r)
}

// insertRows writes a record's rows, as decodeRecord returns them, into
// requests and attempts, and counts them in r. Each INSERT writes one row
// from its VALUES: one that may write more (INSERT … SELECT) makes SQLite
// keep a statement journal of every page it changes, which took a fifth
// of a commit's CPU.
func insertRows(w *conn, rows [][]driver.Value, r rollups) error {
	if _, err := w.exec(insertRequest, rows[0]...); err != nil {
		return err
	}
	for _, a := range rows[1:] {
		if _, err := w.exec(insertAttempt, a...); err != nil {
			return err
		}
	}
	r.addRows(rows)
	return nil
}

// moveAll empties the inbox a chunk at a time, and writes the records
// that queue meanwhile between two chunks. Writer goroutine only.
func (s *Store) moveAll() error {
	for {
		s.commitQueued()
		empty, err := s.moveSome()
		if err != nil {
			return err
		}
		if empty {
			s.w.unmoved = 0
			return nil
		}
		s.checkpointBetween()
	}
}
