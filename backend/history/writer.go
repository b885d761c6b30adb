package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// pending is one queued request record, already turned into the arguments
// of its rows, and the channel its commit is reported on.
type pending struct {
	id       string
	request  []any
	attempts [][]any
	done     chan error // buffered: the writer never waits on it
}

// Record writes rec with its attempts and returns once the transaction
// holding it has committed, so a caller that answers only after Record
// returns never answers a request that history could lose to a crash.
// Concurrent calls share one transaction. Attempts are stored in slice
// order: an attempt's Order and RequestID are taken from its position and
// rec.ID. An id already recorded is an error.
//
// When the queue is full Record waits for room. ctx bounds the wait, both
// for room and for the commit; a record already queued when ctx ends is
// still written.
//
// When the file can't be written (a full disk, a damaged or read-only
// file) the record is kept in memory, with up to MaxBacklog others, and
// written as soon as the file can be written again; Record then returns an
// error matching ErrNotDurable at once, and Health says what is wrong. A request's own context is usually done by the time it is
// recorded (the client went away), so callers pass one that outlives it,
// such as context.WithoutCancel(r.Context()).
func (s *Store) Record(ctx context.Context, rec fleet.RequestRecord) error {
	p, err := newPending(rec)
	if err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	if err := s.enqueue(ctx, p); err != nil {
		return fmt.Errorf("record request %s: %w", rec.ID, err)
	}
	if s.afterEnqueue != nil {
		s.afterEnqueue()
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("record request %s: %w", rec.ID, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("record request %s: %w", rec.ID, context.Cause(ctx))
	}
}

func (s *Store) enqueue(ctx context.Context, p pending) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.queue <- p:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// RecordBreaker queues a breaker transition and returns at once. When the
// queue is full or the Store is closed the change is dropped and counted
// (see Dropped). Close writes whatever is queued.
func (s *Store) RecordBreaker(ch fleet.BreakerChange) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.breakers <- ch:
	default:
		s.dropped.Add(1)
		s.logf("history: queue full, dropped breaker change %s %s->%s", ch.Candidate, ch.From, ch.To)
	}
}

func newPending(r fleet.RequestRecord) (pending, error) {
	if r.ID == "" {
		return pending{}, fmt.Errorf("empty request id")
	}
	p := pending{
		id: r.ID,
		request: []any{
			r.ID, r.StartedAt.UnixMilli(), string(r.Protocol), flag(r.Stream), flag(r.Thinking),
			r.RequestedModel, orNull(r.ServedCandidate), orNull(r.ServedModel), flag(r.IsFallback),
			string(r.Status), orNull(r.HTTPStatus), orNull(r.Error), millisOrNull(r.TTFT),
			r.Latency.Milliseconds(), orNull(r.PromptTokens), orNull(r.CompletionTokens), orNull(string(r.Failure)),
		},
		attempts: make([][]any, len(r.Attempts)),
		done:     make(chan error, 1),
	}
	for i, a := range r.Attempts {
		var started, reading any
		if !a.StartedAt.IsZero() {
			started = a.StartedAt.UnixMilli()
		}
		if a.Reading != nil {
			b, err := json.Marshal(storedReading(*a.Reading))
			if err != nil {
				return pending{}, fmt.Errorf("attempt %d reading: %w", i, err)
			}
			reading = string(b)
		}
		p.attempts[i] = []any{
			r.ID, i, a.Candidate, string(a.Outcome), orNull(a.Error), orNull(a.HTTPStatus),
			started, a.Deadline.Milliseconds(), millisOrNull(a.TTFT), a.Duration.Milliseconds(),
			flag(a.Cold), flag(a.Demoted), reading, orNull(string(a.Fault)),
		}
	}
	return p, nil
}

// run is the writer: it takes everything queued, up to batchSize, writes it
// in one transaction and reports the outcome to every waiting Record. While
// the file can't be written it keeps what arrives in the backlog and tries
// again with a growing pause. It prunes every pruneEvery (if positive) and
// exits once Close has closed both queues and they are drained.
func (s *Store) run(pruneEvery time.Duration) {
	defer close(s.stopped)
	var tick <-chan time.Time
	if pruneEvery > 0 {
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		tick = t.C
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	armed := false // retry will fire
	queue, breakers := s.queue, s.breakers
	var recs []pending
	var evs []fleet.BreakerChange
	for queue != nil || breakers != nil {
		clear(recs)
		recs, evs = recs[:0], evs[:0]
		select {
		case p, ok := <-queue:
			if !ok {
				queue = nil
				continue
			}
			recs = append(recs, p)
		case ev, ok := <-breakers:
			if !ok {
				breakers = nil
				continue
			}
			evs = append(evs, ev)
		case <-tick:
			if _, err := s.pruneWith(context.Background(), s.writer); err != nil {
				s.logf("history: %v", err)
			}
			continue
		case <-retry.C:
			armed = false
			if !s.flush() {
				retry.Reset(s.pause())
				armed = true
			}
			continue
		}
	fill:
		for len(recs)+len(evs) < s.batchSize {
			select {
			case p, ok := <-queue:
				if !ok {
					queue = nil
					continue fill
				}
				recs = append(recs, p)
			case ev, ok := <-breakers:
				if !ok {
					breakers = nil
					continue fill
				}
				evs = append(evs, ev)
			default:
				break fill
			}
		}
		if s.write(recs, evs) && !armed {
			retry.Reset(s.pause())
			armed = true
		}
	}
	// Closing: one last try for what waits; what still can't be written
	// is lost, and said so.
	if !s.flush() {
		n, m := s.dropBacklog()
		s.logf("history: stopping with %d records and %d breaker changes that could not be written: they are lost (%v)", n, m, s.lastErr())
	}
	if _, err := s.writer.ExecContext(context.Background(), "PRAGMA optimize"); err != nil {
		s.logf("history: optimize: %v", err)
	}
}

// write commits recs and evs together, and reports whether they went to
// the backlog because the file can't be written. When the commit fails for
// another reason it writes them one by one, so that one bad record (a
// repeated id) fails only its own Record.
func (s *Store) write(recs []pending, evs []fleet.BreakerChange) (kept bool) {
	if s.failing() {
		// Keep the order: what waits is written first.
		s.keep(recs, evs)
		return true
	}
	err := s.commit(recs, evs)
	switch {
	case err == nil:
		for _, p := range recs {
			p.done <- nil
		}
		return false
	case storageError(err):
		s.fail(err)
		s.keep(recs, evs)
		return true
	case len(recs)+len(evs) > 1:
		s.logf("history: batch of %d records and %d breaker changes failed, retrying one by one: %v", len(recs), len(evs), err)
		for i, p := range recs {
			err := s.commit([]pending{p}, nil)
			if storageError(err) {
				s.fail(err)
				s.keep(recs[i:], evs)
				return true
			}
			p.done <- err
		}
		for j, ev := range evs {
			err := s.commit(nil, []fleet.BreakerChange{ev})
			switch {
			case storageError(err):
				s.fail(err)
				s.keep(nil, evs[j:])
				return true
			case err != nil:
				s.dropped.Add(1)
				s.logf("history: lost breaker change %s %s->%s: %v", ev.Candidate, ev.From, ev.To, err)
			}
		}
		return false
	}
	for _, p := range recs {
		p.done <- err
	}
	if len(evs) > 0 {
		s.dropped.Add(int64(len(evs)))
		s.logf("history: lost %d breaker changes: %v", len(evs), err)
	}
	return false
}

const (
	insertRequest = `INSERT INTO requests (id, started_at, protocol, stream, thinking,
	requested_model, served_candidate, served_model, is_fallback, status, http_status,
	error, ttft_ms, latency_ms, prompt_tokens, completion_tokens, failure)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertAttempt = `INSERT INTO attempts (request_id, ord, candidate, outcome, error,
	http_status, started_at, deadline_ms, ttft_ms, duration_ms, cold, demoted, reading, fault)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertBreaker = `INSERT INTO breaker_events (candidate, from_state, to_state, at, cause)
VALUES (?, ?, ?, ?, ?)`
)

// commit writes recs and evs in one transaction.
func (s *Store) commit(recs []pending, evs []fleet.BreakerChange) (err error) {
	if s.beforeCommit != nil {
		s.beforeCommit(len(recs), len(evs))
	}
	ctx := context.Background()
	tx, err := s.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if len(recs) > 0 {
		// database/sql prepares each statement on the writer's connection
		// the first time and reuses it in every later transaction.
		reqStmt, attStmt := tx.StmtContext(ctx, s.insertRequest), tx.StmtContext(ctx, s.insertAttempt)
		for _, p := range recs {
			if _, err := reqStmt.ExecContext(ctx, p.request...); err != nil {
				return fmt.Errorf("write request %s: %w", p.id, err)
			}
			for _, a := range p.attempts {
				if _, err := attStmt.ExecContext(ctx, a...); err != nil {
					return fmt.Errorf("write attempt of %s: %w", p.id, err)
				}
			}
		}
	}
	if len(evs) > 0 {
		stmt := tx.StmtContext(ctx, s.insertBreaker)
		for _, ev := range evs {
			if _, err := stmt.ExecContext(ctx, ev.Candidate, string(ev.From), string(ev.To), ev.At.UnixMilli(), ev.Cause); err != nil {
				return fmt.Errorf("write breaker change of %s: %w", ev.Candidate, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.commits.Add(1)
	return nil
}

// Prune deletes the requests (their attempts go with them) and breaker
// events that started more than Retention before Now, in one transaction,
// and reports how many requests and breaker events it deleted. The writer
// calls it at Open and every PruneEvery; calling it directly is safe too.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	return s.pruneWith(ctx, s.db)
}

// beginner is what prune writes through: the pool, or the writer's own
// connection.
type beginner interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}

func (s *Store) pruneWith(ctx context.Context, b beginner) (int64, error) {
	if s.retention < 0 {
		return 0, nil
	}
	n, err := prune(ctx, b, s.now().Add(-s.retention).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("prune history: %w", err)
	}
	return n, nil
}

func prune(ctx context.Context, b beginner, cutoff int64) (_ int64, err error) {
	tx, err := b.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var total int64
	for _, q := range []string{
		"DELETE FROM requests WHERE started_at < ?",
		"DELETE FROM breaker_events WHERE at < ?",
	} {
		res, err := tx.ExecContext(ctx, q, cutoff)
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		total += n
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return total, nil
}

// flag is a bool as SQLite stores it.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// orNull is v, or NULL for its zero value.
func orNull[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// millisOrNull is d in whole milliseconds, or NULL for zero.
func millisOrNull(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.Milliseconds()
}
