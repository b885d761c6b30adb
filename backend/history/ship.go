package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
)

// This file is the read side for shipping history elsewhere (a team's
// PostgreSQL, docs/DESIGN.md, "Teams"): what was written after a cursor,
// in the order it was written.

// Cursor is a place in the order records and breaker events were written
// to the file: the last request row (its rowid) and breaker event (its id)
// already taken. The zero Cursor is before everything.
type Cursor struct {
	Request int64
	Breaker int64
}

// Batch is what After found past a cursor.
type Batch struct {
	Requests []fleet.RequestRecord // with their attempts, in the order written
	Breakers []fleet.BreakerChange
	// Next is the cursor past this batch; pass it to the next After.
	Next Cursor
}

// After returns up to limit requests and up to limit breaker events written
// after c, oldest first. It reads what has been moved out of the inbox (a
// record reaches the tables within moments of its commit) and never waits
// for the writer. When rows past c were removed and numbering started over
// (pruning emptied a table), it starts again from the beginning: a shipper
// must take each row idempotently.
func (s *Store) After(ctx context.Context, c Cursor, limit int) (Batch, error) {
	b := Batch{Next: c}
	var topReq, topBrk int64
	err := s.db.QueryRowContext(ctx, `SELECT
		coalesce((SELECT max(rowid) FROM requests), 0),
		coalesce((SELECT max(id) FROM breaker_events), 0)`).Scan(&topReq, &topBrk)
	if err != nil {
		return b, fmt.Errorf("history after cursor: %w", err)
	}
	if c.Request > topReq {
		c.Request, b.Next.Request = 0, 0
	}
	if c.Breaker > topBrk {
		c.Breaker, b.Next.Breaker = 0, 0
	}

	rows, err := s.db.QueryContext(ctx, "SELECT rowid, id FROM requests WHERE rowid > ? ORDER BY rowid LIMIT ?", c.Request, limit)
	if err != nil {
		return b, fmt.Errorf("history after cursor: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&b.Next.Request, &id); err != nil {
			rows.Close()
			return b, fmt.Errorf("history after cursor: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("history after cursor: %w", err)
	}
	if len(ids) > 0 {
		q := "SELECT " + requestColumns + " FROM requests WHERE id IN (?" + strings.Repeat(",?", len(ids)-1) + ") ORDER BY rowid"
		if b.Requests, err = requests(ctx, s.db, q, ids...); err != nil {
			return b, fmt.Errorf("history after cursor: %w", err)
		}
		if err := attachAttempts(ctx, s.db, b.Requests); err != nil {
			return b, fmt.Errorf("history after cursor: %w", err)
		}
	}

	rows, err = s.db.QueryContext(ctx, "SELECT id, candidate, from_state, to_state, at, cause FROM breaker_events WHERE id > ? ORDER BY id LIMIT ?", c.Breaker, limit)
	if err != nil {
		return b, fmt.Errorf("history after cursor: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e fleet.BreakerChange
		var at int64
		if err := rows.Scan(&b.Next.Breaker, &e.Candidate, &e.From, &e.To, &at, &e.Cause); err != nil {
			return b, fmt.Errorf("history after cursor: %w", err)
		}
		e.At = fromMillis(at)
		b.Breakers = append(b.Breakers, e)
	}
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("history after cursor: %w", err)
	}
	return b, nil
}

// ShipFrom returns where node's shipping of this file starts, given the
// cursor the team's database holds for node (team): the lower of the two
// where this file has shipped under that name before (the database may
// have lost a batch, or hold another file's cursor), and this file's
// beginning where it has not (a new file, or a table a sweep emptied, whose
// numbering started over). A file shipped from before it could say so
// trusts team. Shipping takes every row idempotently, so a start too
// early doubles nothing.
func (s *Store) ShipFrom(ctx context.Context, node string, team Cursor) (Cursor, error) {
	var l Cursor
	err := s.db.QueryRowContext(ctx, `SELECT request_rowid, breaker_id FROM team_shipped
		WHERE node IN (?, '*') ORDER BY node = '*' LIMIT 1`, node).Scan(&l.Request, &l.Breaker)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Cursor{}, nil
	case err != nil:
		return Cursor{}, fmt.Errorf("history shipped cursor: %w", err)
	}
	return Cursor{Request: min(l.Request, team.Request), Breaker: min(l.Breaker, team.Breaker)}, nil
}

// Shipped notes that node's records of this file up to c are in the
// team's database (ShipFrom).
func (s *Store) Shipped(ctx context.Context, node string, c Cursor) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO team_shipped (node, request_rowid, breaker_id) VALUES (?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET request_rowid = excluded.request_rowid, breaker_id = excluded.breaker_id`,
		node, c.Request, c.Breaker)
	if err != nil {
		return fmt.Errorf("history shipped cursor: %w", err)
	}
	return nil
}
