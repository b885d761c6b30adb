package history

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Import writes recs straight into the requests and attempts tables, in
// one transaction, through the same code that moves a record out of the
// inbox (moveOne): the rows, and what is kept beside them, are those that
// Record would leave once moved. It skips the journal and the inbox, so it
// is for filling a history in bulk (benchmarks, imports): nothing of recs
// is durable until Import returns, and a crash during it loses them all.
// A repeated id fails the whole call. Pass a few thousand records a call:
// every query meanwhile waits for the transaction. When ctx ends
// once the writer has taken recs, they are written all the same.
func (s *Store) Import(ctx context.Context, recs []fleet.RequestRecord) error {
	return s.do(ctx, func() error {
		s.views.moves.Add(1)
		w := s.w.c
		if err := w.begin(); err != nil {
			return fmt.Errorf("import: begin: %w", err)
		}
		r := rollups{}
		for _, rec := range recs {
			b, err := encodeRecord(rec)
			if err == nil {
				err = moveOne(w, b, r)
			}
			if err != nil {
				w.rollback()
				return fmt.Errorf("import request %s: %w", rec.ID, err)
			}
		}
		if err := r.write(w); err != nil {
			w.rollback()
			return fmt.Errorf("import: %w", err)
		}
		if err := w.commit(); err != nil {
			w.rollback()
			return fmt.Errorf("import: commit: %w", err)
		}
		s.w.ckpt.since += len(recs)
		s.checkpointBetween()
		return nil
	})
}
