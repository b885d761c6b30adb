package history

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Roll-ups (docs/DESIGN.md, "Growth and bounds"). The charts ask for TTFT
// percentiles and request counts per bucket over a window; reading the
// window's rows made that linear in the requests in it (half a second for
// a week at 1M requests). The rollups table keeps, per minute, 5 minutes,
// 30 minutes, hour and 3 hours and per candidate, the request counts and every
// TTFT (as value and count, so percentiles stay exact), written in the
// transaction that writes the rows they count (moveIn, Import). A query
// reads each bucket from the widest roll-up that divides it: whole hours
// from the hour rows, the whole half hours before the first of them from
// the 30-minute rows, and so on down to the rows themselves for the part
// of a minute the window starts in. Its cost grows with the window over
// the bucket and the candidates, not with the requests. A bucket that is
// not a whole number of minutes is read from the rows, as before.

const minuteMs = int64(60_000)

// rollupWidths are the widths kept, narrowest first, each a multiple of
// the one before, so that the rows of one tile the time between two rows
// of the next; the UI's buckets are 1, 5 and 30 minutes and 3 hours.
var rollupWidths = [...]int64{minuteMs, 5 * minuteMs, 30 * minuteMs, 60 * minuteMs, 180 * minuteMs}

type rollupKey struct {
	width, at int64
	candidate string
}

// rollup is what one roll-up row counts, or the sum of several.
type rollup struct {
	requests, fallbacks, errors int64
	ttft                        hist
	// runs are sorted hists that window has yet to merge into ttft.
	runs []hist
}

// hist is a multiset of TTFTs in milliseconds: each value once, with how
// many times it was seen, ascending.
type hist []histBin

type histBin struct{ v, n int64 }

// add counts v once more.
func (h hist) add(v, n int64) hist {
	i, found := slices.BinarySearchFunc(h, v, func(b histBin, v int64) int { return cmp.Compare(b.v, v) })
	if found {
		h[i].n += n
		return h
	}
	return slices.Insert(h, i, histBin{v, n})
}

// merge returns the union of h and o.
func (h hist) merge(o hist) hist {
	if len(h) == 0 {
		return slices.Clone(o)
	}
	out := make(hist, 0, len(h)+len(o))
	i, j := 0, 0
	for i < len(h) && j < len(o) {
		switch {
		case h[i].v < o[j].v:
			out = append(out, h[i])
			i++
		case h[i].v > o[j].v:
			out = append(out, o[j])
			j++
		default:
			out = append(out, histBin{h[i].v, h[i].n + o[j].n})
			i, j = i+1, j+1
		}
	}
	out = append(out, h[i:]...)
	return append(out, o[j:]...)
}

func (h hist) count() int64 {
	var n int64
	for _, b := range h {
		n += b.n
	}
	return n
}

// percentile is the nearest-rank p-th percentile of h, which must not be
// empty: the one percentile does on the sorted values.
func (h hist) percentile(p float64, count int64) int64 {
	rank := int64(math.Ceil(p * float64(count) / 100))
	rank = min(max(rank, 1), count)
	var seen int64
	for _, b := range h {
		seen += b.n
		if seen >= rank {
			return b.v
		}
	}
	return h[len(h)-1].v
}

// encode is h as the ttft column keeps it: uvarint pairs of the value's
// distance from the previous one (from 0 for the first) and its count.
// TTFTs are never negative.
func (h hist) encode() []byte {
	b := make([]byte, 0, 3*len(h))
	var prev int64
	for _, bin := range h {
		b = binary.AppendUvarint(b, uint64(bin.v-prev))
		b = binary.AppendUvarint(b, uint64(bin.n))
		prev = bin.v
	}
	return b
}

var errBadRollup = errors.New("malformed roll-up")

func decodeHist(b []byte, into hist) (hist, error) {
	var prev int64
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return into, errBadRollup
		}
		b = b[n:]
		c, n := binary.Uvarint(b)
		if n <= 0 {
			return into, errBadRollup
		}
		b = b[n:]
		prev += int64(d)
		into = append(into, histBin{prev, int64(c)})
	}
	return into, nil
}

// rollups is what the rows one transaction writes add to the roll-ups.
type rollups map[rollupKey]*rollup

func (r rollups) at(width, t int64, candidate string) *rollup {
	k := rollupKey{width, t - t%width, candidate}
	u := r[k]
	if u == nil {
		u = &rollup{}
		r[k] = u
	}
	return u
}

// addRequest counts a request that started at started, served by
// candidate ("" for none).
func (r rollups) addRequest(started int64, candidate string, fallback bool, status string) {
	for _, w := range rollupWidths {
		r.at(w, started, candidate).countRequest(fallback, status)
	}
}

func (u *rollup) countRequest(fallback bool, status string) {
	u.requests++
	if fallback {
		u.fallbacks++
	}
	if failed(status) {
		u.errors++
	}
}

// addTTFT counts a successful attempt of candidate that started at
// started.
func (r rollups) addTTFT(started int64, candidate string, ttft int64) {
	for _, w := range rollupWidths {
		u := r.at(w, started, candidate)
		u.ttft = u.ttft.add(ttft, 1)
	}
}

// failed says whether a request status counts as an error in the charts.
func failed(status string) bool {
	return status == string(fleet.StatusFailed) || status == string(fleet.StatusUpstreamErrorAfterCommit)
}

// addRows counts one record's rows, as decodeRecord returns them.
func (r rollups) addRows(rows [][]driver.Value) { counted(rows, r.addRequest, r.addTTFT) }

// counted calls request for the request of one record's rows, as
// decodeRecord returns them, and attempt for each of its successful
// attempts with a start and a TTFT: what the roll-ups count, and what
// scanRows reads from the tables.
func counted(rows [][]driver.Value, request func(started int64, served string, fallback bool, status string),
	attempt func(started int64, candidate string, ttft int64)) {
	req := rows[0]
	started, _ := req[1].(int64)
	served, _ := req[6].(string)
	fallback, _ := req[8].(int64)
	status, _ := req[9].(string)
	request(started, served, fallback == 1, status)
	for _, a := range rows[1:] {
		outcome, _ := a[3].(string)
		start, ok := a[6].(int64)
		ttft, ok2 := a[8].(int64)
		if outcome != string(fleet.OutcomeSuccess) || !ok || !ok2 {
			continue
		}
		c, _ := a[2].(string)
		attempt(start, c, ttft)
	}
}

const (
	selectRollup = `SELECT requests, fallbacks, errors, ttft FROM rollups WHERE width = ? AND at = ? AND candidate = ?`
	upsertRollup = `INSERT OR REPLACE INTO rollups (width, at, candidate, requests, fallbacks, errors, ttft)
VALUES (?, ?, ?, ?, ?, ?, ?)`
)

// write adds r to the rollups table through w, in the transaction w is in.
func (r rollups) write(w *conn) error {
	for k, d := range r {
		rows, err := w.query(selectRollup, k.width, k.at, k.candidate)
		if err != nil {
			return fmt.Errorf("roll-ups: %w", err)
		}
		if len(rows) == 1 {
			old, err := decodeHist(asBytes(rows[0][3]), nil)
			if err != nil {
				return err
			}
			d.ttft = old.merge(d.ttft)
			d.requests += rows[0][0].(int64)
			d.fallbacks += rows[0][1].(int64)
			d.errors += rows[0][2].(int64)
		}
		if _, err := w.exec(upsertRollup, k.width, k.at, k.candidate, d.requests, d.fallbacks, d.errors, d.ttft.encode()); err != nil {
			return fmt.Errorf("roll-ups: %w", err)
		}
	}
	return nil
}

func asBytes(v driver.Value) []byte {
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	return nil
}

// backfillRollups is migration 4's code: the roll-ups of the rows already
// there.
func backfillRollups(ctx context.Context, tx *sql.Tx) error {
	r := rollups{}
	if err := scanRows(ctx, tx, math.MinInt64, math.MaxInt64, r.addRequest, r.addTTFT); err != nil {
		return err
	}
	for k, u := range r {
		if _, err := tx.ExecContext(ctx, upsertRollup, k.width, k.at, k.candidate, u.requests, u.fallbacks, u.errors, u.ttft.encode()); err != nil {
			return err
		}
	}
	return nil
}

// cell is one bucket of one candidate in a query's answer.
type cell struct {
	at        int64
	candidate string
}

// window sums what the charts count over the window that starts at since,
// per bucket of width milliseconds (aligned as SQL's
// started_at - started_at % width) and per candidate; width 0 is one
// bucket, at 0. ttft says whether TTFTs are wanted, or only counts.
func (s *Store) window(ctx context.Context, since, width int64, ttft bool) (map[cell]*rollup, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.close()
	bucket := func(t int64) int64 {
		if width == 0 {
			return 0
		}
		return t - t%width
	}
	out := map[cell]*rollup{}
	get := func(t int64, c string) *rollup {
		k := cell{bucket(t), c}
		u := out[k]
		if u == nil {
			u = &rollup{}
			out[k] = u
		}
		return u
	}
	// The widths that divide a bucket (all for one bucket), narrowest
	// first: the rows up to the first minute boundary, then each width's
	// rows up to the first boundary of the next, the widest's to the end.
	var ws []int64
	for _, w := range rollupWidths {
		if since >= 0 && (width == 0 || width%w == 0) {
			ws = append(ws, w)
		}
	}
	end := int64(math.MaxInt64)
	if len(ws) > 0 {
		end = ceilTo(since, ws[0])
	}
	// Each cell's TTFTs are gathered as sorted runs (a roll-up row's; the
	// rows', sorted), merged once. The records waiting to reach the
	// tables are in no roll-up yet, and count like the rows.
	request := func(at int64, c string, fallback bool, status string) {
		get(at, c).countRequest(fallback, status)
	}
	var attempt func(int64, string, int64)
	if ttft {
		attempt = func(at int64, c string, v int64) {
			u := get(at, c)
			u.ttft = append(u.ttft, histBin{v, 1})
		}
	}
	v.count(since, request, attempt)
	err = nil
	if since < end {
		err = scanRows(ctx, v.c, since, end, request, attempt)
	}
	for i, w := range ws {
		from := end
		end = int64(math.MaxInt64)
		if i+1 < len(ws) {
			end = ceilTo(since, ws[i+1])
		}
		if err == nil {
			err = rollupWindow(ctx, v.c, w, from, end, ttft, get)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, u := range out {
		if len(u.ttft) > 0 {
			u.runs = append(u.runs, u.ttft.compact())
		}
		u.ttft = mergeRuns(u.runs)
		u.runs = nil
	}
	return out, nil
}

// mergeRuns merges sorted hists pairwise, a round at a time: the values
// of k runs are each copied about log2(k) times.
func mergeRuns(runs []hist) hist {
	for len(runs) > 1 {
		next := runs[:0]
		for i := 0; i < len(runs); i += 2 {
			if i+1 == len(runs) {
				next = append(next, runs[i])
				break
			}
			next = append(next, runs[i].merge(runs[i+1]))
		}
		runs = next
	}
	if len(runs) == 0 {
		return nil
	}
	return runs[0]
}

// compact sorts h by value and sums the counts of equal values.
func (h hist) compact() hist {
	slices.SortFunc(h, func(a, b histBin) int { return cmp.Compare(a.v, b.v) })
	out := h[:0]
	for _, b := range h {
		if len(out) > 0 && out[len(out)-1].v == b.v {
			out[len(out)-1].n += b.n
			continue
		}
		out = append(out, b)
	}
	return out
}

func ceilTo(t, w int64) int64 {
	if r := t % w; r != 0 {
		return t - r + w
	}
	return t
}

// What scanRows and rollupWindow read.
const (
	windowRequests = `SELECT started_at, served_candidate, is_fallback, status
	FROM requests WHERE started_at >= ? AND started_at < ?`
	windowTTFTs = `SELECT started_at, candidate, ttft_ms FROM attempts
	WHERE outcome = 'success' AND ttft_ms IS NOT NULL AND started_at >= ? AND started_at < ?`
	windowRollups = `SELECT at, candidate, requests, fallbacks, errors, ttft
	FROM rollups WHERE width = ? AND at >= ? AND at < ?`
	windowCounts = `SELECT at, candidate, requests, fallbacks, errors, x''
	FROM rollups WHERE width = ? AND at >= ? AND at < ?`
)

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanRows calls request for each request that started in [from, to) and,
// unless attempt is nil, attempt for each successful attempt with a TTFT
// that started then: what the roll-ups count.
func scanRows(ctx context.Context, db queryer, from, to int64,
	request func(started int64, served string, fallback bool, status string),
	attempt func(started int64, candidate string, ttft int64)) error {
	rows, err := db.QueryContext(ctx, windowRequests, from, to)
	if err != nil {
		return err
	}
	for rows.Next() {
		var at int64
		var c sql.Null[string]
		var fallback bool
		var status string
		if err := rows.Scan(&at, &c, &fallback, &status); err != nil {
			rows.Close()
			return err
		}
		request(at, c.V, fallback, status)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || attempt == nil {
		return err
	}
	rows, err = db.QueryContext(ctx, windowTTFTs, from, to)
	if err != nil {
		return err
	}
	for rows.Next() {
		var at, v int64
		var c string
		if err := rows.Scan(&at, &c, &v); err != nil {
			rows.Close()
			return err
		}
		attempt(at, c, v)
	}
	return errors.Join(rows.Err(), rows.Close())
}

// rollupWindow adds the roll-ups of width that start in [from, to).
func rollupWindow(ctx context.Context, db queryer, width, from, to int64, ttft bool, get func(int64, string) *rollup) error {
	if from >= to {
		return nil
	}
	q := windowCounts
	if ttft {
		q = windowRollups
	}
	rows, err := db.QueryContext(ctx, q, width, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var at, n, f, e int64
		var c string
		var b sql.RawBytes
		if err := rows.Scan(&at, &c, &n, &f, &e, &b); err != nil {
			return err
		}
		u := get(at, c)
		u.requests += n
		u.fallbacks += f
		u.errors += e
		if len(b) > 0 {
			h, err := decodeHist(b, make(hist, 0, len(b)/2))
			if err != nil {
				return err
			}
			u.runs = append(u.runs, h)
		}
	}
	return rows.Err()
}

// sortedCells returns the cells of w in order of at, then candidate.
func sortedCells(w map[cell]*rollup) []cell {
	cells := make([]cell, 0, len(w))
	for c := range w {
		cells = append(cells, c)
	}
	sort.Slice(cells, func(i, j int) bool {
		if cells[i].at != cells[j].at {
			return cells[i].at < cells[j].at
		}
		return cells[i].candidate < cells[j].candidate
	})
	return cells
}
