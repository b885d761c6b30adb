package history

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// A query's view (docs/DESIGN.md, "Durability"). A query reads the tables
// in a read transaction and, beside them, the records that have not
// reached them yet: those queued for this Store's writer or being
// committed by it, and those the inbox holds (this Store's, or another's
// on the same file). It decodes those and applies its filter to them in
// Go. So a query sees every record Record acknowledged without waiting
// for the writer, which may be in a step of a sweep that the disk stalls,
// or committing. Only when the inbox holds more than viewMax records
// (the writer has fallen far behind) does a query first ask the writer to
// move them (settle).

// viewMax is the most inbox records a query reads beside the tables.
const viewMax = 1024

// view is one query's consistent reading of the history.
type view struct {
	c  *sql.Conn // in a read transaction: one snapshot of the file
	of *views
	// recs are the records not in requests and attempts yet, newest
	// first as the list orders them (started_at, then id).
	recs []*unmoved
	// events are the breaker changes queued and not committed yet,
	// oldest first.
	events []fleet.BreakerChange
}

// unmoved is one record that the tables do not hold yet: its rows as
// decodeRecord returns them, and the record as a query returns it.
type unmoved struct {
	at   int64 // started_at
	rows [][]driver.Value
	rec  fleet.RequestRecord // shared: a query returns a copy (own)
	// refused: left out, a queued record whose id requests holds
	// already, or one that can't be read.
	refused bool
}

// view opens a query's view. Its caller closes it.
func (s *Store) view(ctx context.Context) (*view, error) {
	limit := s.cfg.viewMax
	for {
		v, err := s.openView(ctx, limit)
		if !errors.Is(err, errViewFull) {
			return v, err
		}
		// The writer is far behind: have it move what waits, then read
		// whatever still does.
		s.settle(ctx)
		limit = -1
	}
}

var errViewFull = errors.New("more records wait in the inbox than a query reads")

// openView opens a read transaction and reads what waits beside the
// tables: at most limit inbox records (negative: all), else errViewFull.
// What waits in memory is taken first, then the snapshot: a record
// committed in between is in both, and the snapshot's copy is kept.
//
// A record is decoded once: an inbox record is kept in s.views by id
// while the inbox holds it, a queued one on its pending. A queued
// record is looked for in requests the first time (a repeated id, which
// the commit refuses, is left out), and again when a move began while the
// view was opened: in between, a record may have been committed and moved
// both, and be in the snapshot's requests. One the writer is committing
// is looked for every time: a journaled record goes straight into
// requests (commit), and the commit may end between the two readings.
func (s *Store) openView(ctx context.Context, limit int) (_ *view, err error) {
	moves := s.views.moves.Load()
	s.q.mu.Lock()
	mine := make([]*pending, 0, len(s.q.taken)+len(s.q.records))
	mine = append(append(mine, s.q.taken...), s.q.records...)
	committing := len(s.q.taken)
	events := make([]fleet.BreakerChange, 0, len(s.q.takenEvents)+len(s.q.events))
	events = append(append(events, s.q.takenEvents...), s.q.events...)
	s.q.mu.Unlock()
	if s.cfg.viewing != nil {
		s.cfg.viewing()
	}

	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.views.open.Add(1)
	v := &view{c: c, of: &s.views, events: events}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	// A plain BEGIN is deferred (the pool's _txlock applies to BeginTx
	// only): the first SELECT takes the snapshot, and no lock is held
	// that the writer waits for.
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	q, args := "SELECT id, rec FROM inbox LIMIT ?", []any{int64(limit) + 1}
	if limit < 0 {
		q, args = "SELECT id, rec FROM inbox", nil
	}
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	s.views.mu.Lock()
	known := s.views.inbox
	s.views.mu.Unlock()
	// in: the inbox's records, which are known's as long as each was
	// known and none is gone.
	var in []*unmoved
	fresh := false
	for rows.Next() {
		var id, blob sql.RawBytes
		if err := rows.Scan(&id, &blob); err != nil {
			rows.Close()
			return nil, err
		}
		if limit >= 0 && len(in) == limit {
			rows.Close()
			return nil, errViewFull
		}
		u, ok := known[string(id)]
		if !ok {
			fresh = true
			// One the move can't read is lost there; a query leaves it
			// out too.
			if u = decoded(blob); u == nil {
				u = &unmoved{rec: fleet.RequestRecord{ID: string(id)}, refused: true}
			}
		}
		in = append(in, u)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	inbox := known
	if fresh || len(in) != len(known) {
		inbox = make(map[string]*unmoved, len(in))
		for _, u := range in {
			inbox[u.rec.ID] = u
		}
		s.views.mu.Lock()
		s.views.inbox = inbox
		s.views.mu.Unlock()
	}
	for _, u := range in {
		if !u.refused {
			v.recs = append(v.recs, u)
		}
	}
	moved := s.views.moves.Load() != moves

	var check []*pending
	var seen map[string]bool
	if len(mine) > 0 {
		seen = make(map[string]bool, len(mine))
	}
	for i, p := range mine {
		if _, ok := inbox[p.id]; ok || seen[p.id] {
			continue
		}
		seen[p.id] = true
		if u := p.view.Load(); u != nil && !moved && i >= committing {
			if !u.refused {
				v.recs = append(v.recs, u)
			}
			continue
		}
		check = append(check, p)
	}
	if len(check) > 0 {
		stored, err := v.stored(ctx, check)
		if err != nil {
			return nil, err
		}
		for _, p := range check {
			u := p.view.Load()
			if u == nil {
				if u = decoded(p.rec); u == nil {
					u = &unmoved{refused: true}
				}
			}
			if stored[p.id] && !u.refused {
				r := *u
				r.refused = true
				u = &r
			}
			p.view.Store(u)
			if !u.refused {
				v.recs = append(v.recs, u)
			}
		}
	}
	slices.SortFunc(v.recs, func(a, b *unmoved) int {
		return cmp.Or(cmp.Compare(b.at, a.at), strings.Compare(b.rec.ID, a.rec.ID))
	})
	return v, nil
}

// stored is which of ps's ids requests holds in v's snapshot.
func (v *view) stored(ctx context.Context, ps []*pending) (map[string]bool, error) {
	ids := make([]any, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	rows, err := v.c.QueryContext(ctx, "SELECT id FROM requests WHERE id IN (?"+strings.Repeat(", ?", len(ids)-1)+")", ids...)
	if err != nil {
		return nil, err
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		stored[id] = true
	}
	return stored, errors.Join(rows.Err(), rows.Close())
}

// decoded is a waiting record decoded, or nil when it can't be read, as
// the move leaves such a record out.
func decoded(blob []byte) *unmoved {
	rows, err := decodeRecord(blob)
	if err != nil {
		return nil
	}
	r, err := recordOf(rows)
	if err != nil {
		return nil
	}
	return &unmoved{at: r.StartedAt.UnixMilli(), rows: rows, rec: r}
}

// views is what queries keep of the records waiting beside the tables.
type views struct {
	// moves counts the moves begun: rows entering requests.
	moves atomic.Int64
	// open counts the views open; idle has a value once the last one
	// closed, for a sweep that waits for the queries to end (sweep.go).
	open atomic.Int32
	idle chan struct{}
	mu   sync.Mutex
	// inbox holds the inbox's records decoded, by id, as the last view
	// found them; it is replaced whole, never changed.
	inbox map[string]*unmoved
}

// close ends the read transaction and gives the connection back; one
// whose transaction can't be ended is closed instead.
func (v *view) close() {
	_, err := v.c.ExecContext(context.Background(), "ROLLBACK")
	if err != nil && !strings.Contains(err.Error(), "no transaction is active") {
		v.c.Raw(func(any) error { return driver.ErrBadConn })
	}
	v.c.Close()
	if v.of.open.Add(-1) == 0 {
		select {
		case v.of.idle <- struct{}{}:
		default:
		}
	}
}

// byID is the waiting record with id, if one is.
func (v *view) byID(id string) (fleet.RequestRecord, bool) {
	for _, u := range v.recs {
		if u.rec.ID == id {
			return own(u.rec), true
		}
	}
	return fleet.RequestRecord{}, false
}

// own is a copy of a waiting record, which queries share, that its
// caller may change.
func own(r fleet.RequestRecord) fleet.RequestRecord {
	r.Attempts = slices.Clone(r.Attempts)
	for i, a := range r.Attempts {
		if a.Reading != nil {
			reading := *a.Reading
			r.Attempts[i].Reading = &reading
		}
	}
	return r
}

// recordOf is the record whose rows decodeRecord returned, exactly as a
// query reads it back from requests and attempts.
func recordOf(rows [][]driver.Value) (fleet.RequestRecord, error) {
	q := rows[0]
	r := fleet.RequestRecord{
		ID:               text(q[0]),
		StartedAt:        fromMillis(integer(q[1])),
		Protocol:         fleet.Protocol(text(q[2])),
		Stream:           integer(q[3]) != 0,
		Thinking:         integer(q[4]) != 0,
		RequestedModel:   text(q[5]),
		ServedCandidate:  text(q[6]),
		ServedModel:      text(q[7]),
		IsFallback:       integer(q[8]) != 0,
		Status:           fleet.Status(text(q[9])),
		HTTPStatus:       int(integer(q[10])),
		Error:            text(q[11]),
		TTFT:             millis(integer(q[12])),
		Latency:          millis(integer(q[13])),
		PromptTokens:     int(integer(q[14])),
		CompletionTokens: int(integer(q[15])),
		Failure:          fleet.Failure(text(q[16])),
		Attempts:         make([]fleet.Attempt, 0, len(rows)-1),
	}
	for _, a := range rows[1:] {
		at := fleet.Attempt{
			RequestID:  text(a[0]),
			Order:      int(integer(a[1])),
			Candidate:  text(a[2]),
			Outcome:    fleet.Outcome(text(a[3])),
			Error:      text(a[4]),
			HTTPStatus: int(integer(a[5])),
			Deadline:   millis(integer(a[7])),
			TTFT:       millis(integer(a[8])),
			Duration:   millis(integer(a[9])),
			Cold:       integer(a[10]) != 0,
			Demoted:    integer(a[11]) != 0,
			Fault:      fleet.Fault(text(a[13])),
			Warm:       integer(a[14]) != 0,
		}
		if started, ok := a[6].(int64); ok {
			at.StartedAt = fromMillis(started)
		}
		if s, ok := a[12].(string); ok {
			reading, err := readingOf(s)
			if err != nil {
				return fleet.RequestRecord{}, fmt.Errorf("attempt %d of %s: reading: %w", at.Order, r.ID, err)
			}
			at.Reading = reading
		}
		r.Attempts = append(r.Attempts, at)
	}
	return r, nil
}

// readingOf is the reading the attempts.reading column keeps as JSON.
func readingOf(s string) (*fleet.GPUReading, error) {
	var r storedReading
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, err
	}
	return (*fleet.GPUReading)(&r), nil
}

// text and integer are a decoded value as a string and an int64; NULL is
// the zero value, as the queries' sql.Null scans make it.
func text(v driver.Value) string {
	s, _ := v.(string)
	return s
}

func integer(v driver.Value) int64 {
	i, _ := v.(int64)
	return i
}

// startOf is the started_at of the request with id, waiting or in the
// tables, and whether there is one.
func (v *view) startOf(ctx context.Context, id string) (int64, bool, error) {
	for _, u := range v.recs {
		if u.rec.ID == id {
			return u.at, true, nil
		}
	}
	var at int64
	err := v.c.QueryRowContext(ctx, "SELECT started_at FROM requests WHERE id = ?", id).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return at, err == nil, err
}

// list merges into page, what the tables gave for f, the waiting records
// f selects, and keeps the first of them in the list's order; before is
// the started_at of f.Before.
func (v *view) list(page []fleet.RequestRecord, f Filter, before int64) []fleet.RequestRecord {
	var out []fleet.RequestRecord
	i := 0
	for _, u := range v.recs {
		if !u.selected(f, before) {
			continue
		}
		if out == nil {
			out = make([]fleet.RequestRecord, 0, len(page)+1)
		}
		for i < len(page) && listsBefore(page[i].StartedAt.UnixMilli(), page[i].ID, u.at, u.rec.ID) {
			out = append(out, page[i])
			i++
		}
		out = append(out, own(u.rec))
	}
	if out == nil {
		return page
	}
	out = append(out, page[i:]...)
	return out[:min(len(out), limitOf(f))]
}

// listsBefore reports whether the request (at, id) comes before (at2, id2)
// in the list: it started later, or at the same millisecond with a greater
// id, as ORDER BY started_at DESC, id DESC orders them.
func listsBefore(at int64, id string, at2 int64, id2 string) bool {
	return at > at2 || at == at2 && id > id2
}

// selected reports whether f selects u, as listQuery's WHERE would.
func (u *unmoved) selected(f Filter, before int64) bool {
	r := &u.rec
	switch {
	case f.Before != "" && !listsBefore(before, f.Before, u.at, r.ID):
		return false
	case f.ServedCandidate != "" && r.ServedCandidate != f.ServedCandidate:
		return false
	case f.Fallback != nil && r.IsFallback != *f.Fallback:
		return false
	case f.Status != "" && r.Status != f.Status:
		return false
	case !f.Since.IsZero() && u.at < f.Since.UnixMilli():
		return false
	case !f.Until.IsZero() && u.at >= f.Until.UnixMilli():
		return false
	}
	return true
}

// count calls request and attempt (unless nil) for what the waiting
// records count in a window that starts at since, as scanRows does for
// the tables' rows.
func (v *view) count(since int64, request func(int64, string, bool, string), attempt func(int64, string, int64)) {
	for _, u := range v.recs {
		counted(u.rows, func(at int64, c string, fallback bool, status string) {
			if at >= since {
				request(at, c, fallback, status)
			}
		}, func(at int64, c string, ttft int64) {
			if attempt != nil && at >= since {
				attempt(at, c, ttft)
			}
		})
	}
}

// warm adds to ttfts, candidate's warm TTFTs from the tables newest first
// with their starts, the waiting ones, and keeps the first limit.
func (v *view) warm(candidate string, ttfts []startedTTFT, limit int) []startedTTFT {
	n := len(ttfts)
	for _, u := range v.recs {
		for _, a := range u.rows[1:] {
			if text(a[2]) != candidate || text(a[3]) != string(fleet.OutcomeSuccess) || !warmRow(a) || a[8] == nil {
				continue
			}
			start, ok := a[6].(int64)
			if !ok {
				start = math.MinInt64 // NULL sorts last, as in SQL
			}
			ttfts = append(ttfts, startedTTFT{start, millis(integer(a[8]))})
		}
	}
	if len(ttfts) == n {
		return ttfts
	}
	slices.SortStableFunc(ttfts, func(a, b startedTTFT) int { return cmp.Compare(b.at, a.at) })
	return ttfts[:min(len(ttfts), limit)]
}

// warmRow reports whether an attempt's row, as decodeRecord returns it,
// was a warm sample, as warmTTFTs reads the tables: its warm flag, which
// a row of format 1 does not have.
func warmRow(a []driver.Value) bool { return integer(a[14]) == 1 }

// startedTTFT is one attempt's TTFT and when it started.
type startedTTFT struct {
	at   int64
	ttft time.Duration
}

// lastBreakers puts in last the waiting breaker changes that are newer
// than a candidate's there: a waiting one was recorded after every
// committed one, so it wins a tie on at, as the id does in SQL.
func (v *view) lastBreakers(last map[string]fleet.BreakerChange) {
	for _, ch := range v.events {
		if old, ok := last[ch.Candidate]; !ok || !ch.At.Before(old.At) {
			last[ch.Candidate] = ch
		}
	}
}
