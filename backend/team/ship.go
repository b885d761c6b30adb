package team

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
)

// Shipping: the node's history, batch by batch in the order it was
// written, into the team tables. Each batch and the cursor past it commit
// in one transaction, and every row is inserted with ON CONFLICT DO
// NOTHING on its (node, ...) key: a batch whose commit was lost in a
// failure is shipped again and doubles nothing.

// cursor reads where this node's shipping stands: the database's cursor,
// as far as it counts in this node's history file.
func (t *Team) cursor(ctx context.Context, conn *pgx.Conn) (history.Cursor, error) {
	octx, cancel := t.op(ctx)
	defer cancel()
	var c history.Cursor
	err := conn.QueryRow(octx, "SELECT request_rowid, breaker_id FROM team_cursors WHERE node = $1", t.o.Node).Scan(&c.Request, &c.Breaker)
	if err == pgx.ErrNoRows {
		err = nil
	}
	if err != nil {
		return c, fmt.Errorf("shipping cursor: %w", err)
	}
	if t.o.History == nil {
		return c, nil
	}
	// The database's cursor may count in another file than this one.
	c, err = t.o.History.ShipFrom(octx, t.o.Node, c)
	if err != nil {
		// The local file is not the link: ship from its beginning, which
		// doubles nothing.
		t.o.Logf("team: read where shipping stands: %v", err)
		return history.Cursor{}, nil
	}
	return c, nil
}

// ship ships one batch past *cur and moves *cur past it. more reports that
// the batch was full, so more may wait.
func (t *Team) ship(ctx context.Context, conn *pgx.Conn, parts partitions, cur *history.Cursor) (more bool, err error) {
	octx, cancel := t.op(ctx)
	defer cancel()
	b, err := t.o.History.After(octx, *cur, t.o.ShipBatch)
	if err != nil {
		// The local file is not the link: say so and try later.
		t.o.Logf("team: read history to ship: %v", err)
		return false, nil
	}
	if b.Next == *cur {
		return false, nil
	}
	err = pgx.BeginFunc(octx, conn, func(tx pgx.Tx) error {
		var times []time.Time
		for _, r := range b.Requests {
			times = append(times, r.StartedAt)
		}
		for _, e := range b.Breakers {
			times = append(times, e.At)
		}
		if err := parts.ensure(octx, tx, times...); err != nil {
			return err
		}
		if err := insertRequests(octx, tx, t.o.Node, b.Requests); err != nil {
			return err
		}
		if err := insertBreakers(octx, tx, t.o.Node, b.Breakers); err != nil {
			return err
		}
		_, err := tx.Exec(octx, `INSERT INTO team_cursors (node, request_rowid, breaker_id) VALUES ($1, $2, $3)
			ON CONFLICT (node) DO UPDATE SET request_rowid = $2, breaker_id = $3`, t.o.Node, b.Next.Request, b.Next.Breaker)
		return err
	})
	if err != nil {
		parts.forget()
		return false, fmt.Errorf("ship history: %w", err)
	}
	*cur = b.Next
	t.shipped.Add(int64(len(b.Requests)))
	if err := t.o.History.Shipped(octx, t.o.Node, b.Next); err != nil {
		t.o.Logf("team: note what was shipped: %v", err) // the next start ships again from further back
	}
	return len(b.Requests) == t.o.ShipBatch || len(b.Breakers) == t.o.ShipBatch, nil
}

// insertRequests inserts recs and their attempts as two multi-row
// inserts (unnest of one array per column).
func insertRequests(ctx context.Context, tx pgx.Tx, node string, recs []fleet.RequestRecord) error {
	if len(recs) == 0 {
		return nil
	}
	var (
		ids, protocols, requested, statuses  []string
		served, servedModels, errs, failures []*string
		started                              []time.Time
		streams, thinking, fallback          []bool
		httpStatus, prompt, answer           []*int32
		ttft                                 []*int64
		latency                              []int64
		aReq, aCand, aOutcome                []string
		aFault, aErr, aReading               []*string
		aReqStart                            []time.Time
		aStart                               []*time.Time
		aOrd                                 []int32
		aHTTP                                []*int32
		aDeadline, aDuration                 []int64
		aTTFT                                []*int64
		aCold, aDemoted                      []bool
	)
	for _, r := range recs {
		ids = append(ids, r.ID)
		started = append(started, r.StartedAt)
		protocols = append(protocols, string(r.Protocol))
		streams = append(streams, r.Stream)
		thinking = append(thinking, r.Thinking)
		requested = append(requested, r.RequestedModel)
		served = append(served, orNull(r.ServedCandidate))
		servedModels = append(servedModels, orNull(r.ServedModel))
		fallback = append(fallback, r.IsFallback)
		statuses = append(statuses, string(r.Status))
		httpStatus = append(httpStatus, intOrNull(r.HTTPStatus))
		errs = append(errs, orNull(r.Error))
		failures = append(failures, orNull(string(r.Failure)))
		ttft = append(ttft, msOrNull(r.TTFT))
		latency = append(latency, r.Latency.Milliseconds())
		prompt = append(prompt, intOrNull(r.PromptTokens))
		answer = append(answer, intOrNull(r.CompletionTokens))
		for i, a := range r.Attempts {
			aReq = append(aReq, r.ID)
			aReqStart = append(aReqStart, r.StartedAt)
			aOrd = append(aOrd, int32(i))
			aCand = append(aCand, a.Candidate)
			aOutcome = append(aOutcome, string(a.Outcome))
			aFault = append(aFault, orNull(string(a.Fault)))
			aErr = append(aErr, orNull(a.Error))
			aHTTP = append(aHTTP, intOrNull(a.HTTPStatus))
			var st *time.Time
			if !a.StartedAt.IsZero() {
				st = &a.StartedAt
			}
			aStart = append(aStart, st)
			aDeadline = append(aDeadline, a.Deadline.Milliseconds())
			aTTFT = append(aTTFT, msOrNull(a.TTFT))
			aDuration = append(aDuration, a.Duration.Milliseconds())
			aCold = append(aCold, a.Cold)
			aDemoted = append(aDemoted, a.Demoted)
			aReading = append(aReading, readingJSON(a.Reading))
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO team_requests (node, id, started_at, protocol, stream, thinking,
		requested_model, served_candidate, served_model, is_fallback, status, http_status, error, failure,
		ttft_ms, latency_ms, prompt_tokens, completion_tokens)
		SELECT $1, * FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::boolean[], $6::boolean[],
			$7::text[], $8::text[], $9::text[], $10::boolean[], $11::text[], $12::integer[], $13::text[], $14::text[],
			$15::bigint[], $16::bigint[], $17::integer[], $18::integer[])
		ON CONFLICT DO NOTHING`,
		node, ids, started, protocols, streams, thinking, requested, served, servedModels, fallback, statuses,
		httpStatus, errs, failures, ttft, latency, prompt, answer)
	if err != nil {
		return fmt.Errorf("requests: %w", err)
	}
	if len(aReq) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, `INSERT INTO team_attempts (node, request_id, request_started_at, ord, candidate,
		outcome, fault, error, http_status, started_at, deadline_ms, ttft_ms, duration_ms, cold, demoted, reading)
		SELECT $1, * FROM unnest($2::text[], $3::timestamptz[], $4::integer[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::integer[], $10::timestamptz[], $11::bigint[], $12::bigint[], $13::bigint[],
			$14::boolean[], $15::boolean[], $16::jsonb[])
		ON CONFLICT DO NOTHING`,
		node, aReq, aReqStart, aOrd, aCand, aOutcome, aFault, aErr, aHTTP, aStart, aDeadline, aTTFT, aDuration,
		aCold, aDemoted, aReading)
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	return nil
}

func insertBreakers(ctx context.Context, tx pgx.Tx, node string, evs []fleet.BreakerChange) error {
	if len(evs) == 0 {
		return nil
	}
	var cand, from, to, cause []string
	var at []time.Time
	for _, e := range evs {
		cand = append(cand, e.Candidate)
		from = append(from, string(e.From))
		to = append(to, string(e.To))
		at = append(at, e.At)
		cause = append(cause, e.Cause)
	}
	_, err := tx.Exec(ctx, `INSERT INTO team_breaker_events (node, candidate, from_state, to_state, at, cause)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
		ON CONFLICT DO NOTHING`, node, cand, from, to, at, cause)
	if err != nil {
		return fmt.Errorf("breaker events: %w", err)
	}
	return nil
}

// readingJSON is an attempt's reading as team_attempts keeps it: JSON,
// nil when it has none.
func readingJSON(r *fleet.GPUReading) *string {
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r)
	s := string(b)
	return &s
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func intOrNull(n int) *int32 {
	if n == 0 {
		return nil
	}
	v := int32(n)
	return &v
}

func msOrNull(d time.Duration) *int64 {
	if d == 0 {
		return nil
	}
	v := d.Milliseconds()
	return &v
}
