package history

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Limits of Filter.Limit.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Filter selects requests for Requests. The zero value selects the newest
// DefaultLimit requests.
type Filter struct {
	// Limit is the most requests returned: zero means DefaultLimit, and
	// it is capped at MaxLimit.
	Limit int
	// Before is a paging cursor: the id of the last request of the
	// previous page. Only requests older than it are returned (ties on
	// started_at are broken by id). An id that is not stored gives an
	// empty page.
	Before string
	// ServedCandidate, when set, keeps the requests that candidate served.
	ServedCandidate string
	// Fallback, when set, keeps the requests whose is_fallback equals it.
	Fallback *bool
	// Status, when set, keeps the requests that ended with it.
	Status fleet.Status
	// Since and Until, when set, keep the requests that started at or
	// after Since and before Until.
	Since, Until time.Time
}

// storedReading is a fleet.GPUReading as the attempts.reading column keeps
// it, as JSON.
type storedReading struct {
	GPU        int    `json:"gpu"`
	Source     string `json:"source"`
	FreeBytes  uint64 `json:"free_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	Reason     string `json:"reason"`
}

const requestColumns = `id, started_at, protocol, stream, thinking, requested_model,
	served_candidate, served_model, is_fallback, status, http_status, error, ttft_ms,
	latency_ms, prompt_tokens, completion_tokens, failure`

const attemptColumns = `request_id, ord, candidate, outcome, error, http_status,
	started_at, deadline_ms, ttft_ms, duration_ms, cold, demoted, reading, fault, coalesce(warm, 0)`

// Requests returns the requests f selects, newest first, each with its
// attempts. It reads the tables with two queries whatever the page size
// (one for the requests, one for all their attempts), and the records that
// have not reached them yet (view.go).
func (s *Store) Requests(ctx context.Context, f Filter) ([]fleet.RequestRecord, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("list requests: %w", err))
	}
	defer v.close()
	var before int64
	if f.Before != "" {
		var ok bool
		if before, ok, err = v.startOf(ctx, f.Before); err != nil {
			return nil, s.readErr(fmt.Errorf("list requests: %w", err))
		} else if !ok {
			return nil, nil
		}
	}
	q, args := listQuery(f, before)
	recs, err := requests(ctx, v.c, q, args...)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("list requests: %w", err))
	}
	if err := attachAttempts(ctx, v.c, recs); err != nil {
		return nil, s.readErr(fmt.Errorf("list requests: %w", err))
	}
	return v.list(recs, f, before), nil
}

// limitOf is the page size f asks for.
func limitOf(f Filter) int {
	if f.Limit <= 0 {
		return DefaultLimit
	}
	return min(f.Limit, MaxLimit)
}

// listQuery is the query of Requests; before is the started_at of
// f.Before. Each filter has an index that ends in the list's order
// (migration 0004), so that a page reads what it shows, however little of
// the history a filter matches (query_test.go, TestQueriesUseTheirIndexes).
func listQuery(f Filter, before int64) (string, []any) {
	var where []string
	var args []any
	if f.Before != "" {
		where = append(where, "(started_at, id) < (?, ?)")
		args = append(args, before, f.Before)
	}
	// Of several filters, the one likely to match least reads its index
	// and the others are tested on what it finds ("+" keeps SQLite off
	// their indexes): without statistics it would take the larger one,
	// and a pair that matches nothing would read the whole of it.
	lead := leadFilter(f)
	on := func(column, name string) string {
		if name == lead {
			return column + " = ?"
		}
		return "+" + column + " = ?"
	}
	if f.ServedCandidate != "" {
		where = append(where, on("served_candidate", "served"))
		args = append(args, f.ServedCandidate)
	}
	if f.Fallback != nil {
		where = append(where, on("is_fallback", "fallback"))
		args = append(args, flag(*f.Fallback))
	}
	if f.Status != "" {
		where = append(where, on("status", "status"))
		args = append(args, string(f.Status))
	}
	if !f.Since.IsZero() {
		where = append(where, "started_at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where = append(where, "started_at < ?")
		args = append(args, f.Until.UnixMilli())
	}
	q := "SELECT " + requestColumns + " FROM requests"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, id DESC LIMIT ?"
	return q, append(args, limitOf(f))
}

// leadFilter names the filter of f whose index a list reads: a status
// other than ok (failures are few), then fallbacks (a few in ten), then a
// served candidate (one of several), then the common values, ok and not a
// fallback. "" when f has none.
func leadFilter(f Filter) string {
	switch {
	case f.Status != "" && f.Status != fleet.StatusOK:
		return "status"
	case f.Fallback != nil && *f.Fallback:
		return "fallback"
	case f.ServedCandidate != "":
		return "served"
	case f.Status != "":
		return "status"
	case f.Fallback != nil:
		return "fallback"
	}
	return ""
}

// Request returns the request with id and its attempts, or an error
// matching ErrNotFound.
func (s *Store) Request(ctx context.Context, id string) (fleet.RequestRecord, error) {
	v, err := s.view(ctx)
	if err != nil {
		return fleet.RequestRecord{}, s.readErr(fmt.Errorf("request %s: %w", id, err))
	}
	defer v.close()
	if r, ok := v.byID(id); ok {
		return r, nil
	}
	recs, err := requests(ctx, v.c, "SELECT "+requestColumns+" FROM requests WHERE id = ?", id)
	if err == nil && len(recs) == 0 {
		err = ErrNotFound
	}
	if err == nil {
		err = attachAttempts(ctx, v.c, recs)
	}
	if err != nil {
		return fleet.RequestRecord{}, s.readErr(fmt.Errorf("request %s: %w", id, err))
	}
	return recs[0], nil
}

func requests(ctx context.Context, db queryer, q string, args ...any) ([]fleet.RequestRecord, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []fleet.RequestRecord
	for rows.Next() {
		var (
			r                                fleet.RequestRecord
			started, latency                 int64
			served, servedModel, errText     sql.Null[string]
			failure                          sql.Null[string]
			httpStatus, ttft, prompt, answer sql.Null[int64]
		)
		err := rows.Scan(&r.ID, &started, &r.Protocol, &r.Stream, &r.Thinking, &r.RequestedModel,
			&served, &servedModel, &r.IsFallback, &r.Status, &httpStatus, &errText, &ttft,
			&latency, &prompt, &answer, &failure)
		if err != nil {
			return nil, err
		}
		r.StartedAt = fromMillis(started)
		r.ServedCandidate = served.V
		r.ServedModel = servedModel.V
		r.HTTPStatus = int(httpStatus.V)
		r.Error = errText.V
		r.Failure = fleet.Failure(failure.V)
		r.TTFT = millis(ttft.V)
		r.Latency = millis(latency)
		r.PromptTokens = int(prompt.V)
		r.CompletionTokens = int(answer.V)
		r.Attempts = []fleet.Attempt{}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// attachAttempts fills in the attempts of recs with one query.
func attachAttempts(ctx context.Context, db queryer, recs []fleet.RequestRecord) error {
	if len(recs) == 0 {
		return nil
	}
	index := make(map[string]int, len(recs))
	args := make([]any, len(recs))
	for i, r := range recs {
		index[r.ID] = i
		args[i] = r.ID
	}
	q := "SELECT " + attemptColumns + " FROM attempts WHERE request_id IN (?" +
		strings.Repeat(", ?", len(recs)-1) + ") ORDER BY request_id, ord"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			a                         fleet.Attempt
			deadline, duration        int64
			errText, reading, fault   sql.Null[string]
			httpStatus, started, ttft sql.Null[int64]
		)
		err := rows.Scan(&a.RequestID, &a.Order, &a.Candidate, &a.Outcome, &errText, &httpStatus,
			&started, &deadline, &ttft, &duration, &a.Cold, &a.Demoted, &reading, &fault, &a.Warm)
		if err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
		a.Error = errText.V
		a.Fault = fleet.Fault(fault.V)
		a.HTTPStatus = int(httpStatus.V)
		if started.Valid {
			a.StartedAt = fromMillis(started.V)
		}
		a.Deadline = millis(deadline)
		a.TTFT = millis(ttft.V)
		a.Duration = millis(duration)
		if reading.Valid {
			if a.Reading, err = readingOf(reading.V); err != nil {
				return fmt.Errorf("attempt %d of %s: reading: %w", a.Order, a.RequestID, err)
			}
		}
		i := index[a.RequestID]
		recs[i].Attempts = append(recs[i].Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	return nil
}

// TTFTStats summarises the time to first token of one candidate's
// successful attempts.
type TTFTStats struct {
	N             int
	P50, P95, P99 time.Duration
}

// TTFTStats returns, per candidate, the TTFT percentiles of the successful
// attempts that started at or after since. Percentiles are nearest-rank.
// Candidates without such attempts are absent. It reads the roll-ups
// (rollup.go).
func (s *Store) TTFTStats(ctx context.Context, since time.Time) (map[string]TTFTStats, error) {
	w, err := s.window(ctx, since.UnixMilli(), 0, true)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("ttft stats: %w", err))
	}
	stats := make(map[string]TTFTStats, len(w))
	for c, u := range w {
		if n := u.ttft.count(); n > 0 {
			stats[c.candidate] = TTFTStats{
				N:   int(n),
				P50: millis(u.ttft.percentile(50, n)),
				P95: millis(u.ttft.percentile(95, n)),
				P99: millis(u.ttft.percentile(99, n)),
			}
		}
	}
	return stats, nil
}

// WarmTTFTs returns the TTFTs of candidate's newest successful attempts that
// were warm samples (fleet.Attempt.Warm; rows written before schema 7 do
// not say, and a queued wait among them must not be learned), newest first, at most limit of them (limit <= 0
// means DefaultLimit).
func (s *Store) WarmTTFTs(ctx context.Context, candidate string, limit int) ([]time.Duration, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("warm ttfts of %s: %w", candidate, err))
	}
	defer v.close()
	rows, err := v.c.QueryContext(ctx, warmTTFTs, candidate, limit)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("warm ttfts of %s: %w", candidate, err))
	}
	defer rows.Close()
	var ts []startedTTFT
	for rows.Next() {
		var t startedTTFT
		var at sql.Null[int64]
		var ttft int64
		if err := rows.Scan(&at, &ttft); err != nil {
			return nil, s.readErr(fmt.Errorf("warm ttfts of %s: %w", candidate, err))
		}
		t.at, t.ttft = at.V, millis(ttft)
		if !at.Valid {
			t.at = math.MinInt64
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(fmt.Errorf("warm ttfts of %s: %w", candidate, err))
	}
	ts = v.warm(candidate, ts, limit)
	var ds []time.Duration
	for _, t := range ts {
		ds = append(ds, t.ttft)
	}
	return ds, nil
}

const warmTTFTs = `SELECT started_at, ttft_ms FROM attempts
	WHERE candidate = ? AND outcome = 'success' AND warm = 1 AND ttft_ms IS NOT NULL
	ORDER BY started_at DESC LIMIT ?`

// SeriesPoint is one candidate's TTFT over one time bucket.
type SeriesPoint struct {
	At        time.Time // start of the bucket
	Candidate string
	P50, P95  time.Duration
	N         int
}

// TTFTSeries returns the TTFT percentiles of successful attempts that
// started at or after since, per candidate and per bucket. Buckets are
// aligned to multiples of bucket since the Unix epoch; points are ordered by
// At, then Candidate; buckets without attempts are absent. bucket must be
// at least a millisecond. A bucket of whole minutes is read from the
// roll-ups (rollup.go), any other from the attempts themselves.
func (s *Store) TTFTSeries(ctx context.Context, since time.Time, bucket time.Duration) ([]SeriesPoint, error) {
	width := bucket.Milliseconds()
	if width <= 0 {
		return nil, fmt.Errorf("ttft series: bucket %v is under a millisecond", bucket)
	}
	w, err := s.window(ctx, since.UnixMilli(), width, true)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("ttft series: %w", err))
	}
	var points []SeriesPoint
	for _, c := range sortedCells(w) {
		h := w[c].ttft
		if n := h.count(); n > 0 {
			points = append(points, SeriesPoint{At: fromMillis(c.at), Candidate: c.candidate,
				P50: millis(h.percentile(50, n)), P95: millis(h.percentile(95, n)), N: int(n)})
		}
	}
	return points, nil
}

// RatePoint counts the requests that started in one time bucket.
type RatePoint struct {
	At        time.Time // start of the bucket
	Requests  int
	Fallbacks int // served by a candidate other than the first choice
	// Errors counts requests that failed (status error or
	// upstream_error_after_commit); client aborts are not errors.
	Errors int
}

// FailoverRate returns per bucket the requests that started at or after
// since, how many were fallbacks and how many failed. Buckets are aligned as
// in TTFTSeries, ordered by At; buckets without requests are absent. It
// reads the roll-ups as TTFTSeries does.
func (s *Store) FailoverRate(ctx context.Context, since time.Time, bucket time.Duration) ([]RatePoint, error) {
	width := bucket.Milliseconds()
	if width <= 0 {
		return nil, fmt.Errorf("failover rate: bucket %v is under a millisecond", bucket)
	}
	w, err := s.window(ctx, since.UnixMilli(), width, false)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("failover rate: %w", err))
	}
	var points []RatePoint
	for _, c := range sortedCells(w) {
		u := w[c]
		if u.requests == 0 {
			continue
		}
		if len(points) > 0 && points[len(points)-1].At.Equal(fromMillis(c.at)) {
			p := &points[len(points)-1]
			p.Requests += int(u.requests)
			p.Fallbacks += int(u.fallbacks)
			p.Errors += int(u.errors)
			continue
		}
		points = append(points, RatePoint{At: fromMillis(c.at), Requests: int(u.requests), Fallbacks: int(u.fallbacks), Errors: int(u.errors)})
	}
	return points, nil
}

// LastBreakerStates returns each candidate's latest breaker transition, from
// which the router rebuilds its breakers after a restart. A candidate whose
// transitions were all pruned, or that never had one, is absent.
func (s *Store) LastBreakerStates(ctx context.Context) (map[string]fleet.BreakerChange, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("last breaker states: %w", err))
	}
	defer v.close()
	chs, err := breakerChanges(ctx, v.c, `SELECT candidate, from_state, to_state, at, cause FROM (
		SELECT *, row_number() OVER (PARTITION BY candidate ORDER BY at DESC, id DESC) AS n
		FROM breaker_events) WHERE n = 1`)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("last breaker states: %w", err))
	}
	last := make(map[string]fleet.BreakerChange, len(chs))
	for _, ch := range chs {
		last[ch.Candidate] = ch
	}
	v.lastBreakers(last)
	return last, nil
}

func breakerChanges(ctx context.Context, db queryer, q string, args ...any) ([]fleet.BreakerChange, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var chs []fleet.BreakerChange
	for rows.Next() {
		var ch fleet.BreakerChange
		var at int64
		if err := rows.Scan(&ch.Candidate, &ch.From, &ch.To, &at, &ch.Cause); err != nil {
			return nil, err
		}
		ch.At = fromMillis(at)
		chs = append(chs, ch)
	}
	return chs, rows.Err()
}

// percentile is the nearest-rank p-th percentile of sorted, which must not
// be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
