package team

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// partitioned are the tables partitioned by day, each a partition per UTC
// day named <table>_YYYYMMDD.
var partitioned = []string{"team_requests", "team_attempts", "team_breaker_events", "team_evidence"}

// partitionLock serialises the creation and dropping of partitions across
// nodes: CREATE TABLE IF NOT EXISTS is not safe against a concurrent one.
const partitionLock = 0x5377_7964_0002

const dayLayout = "20060102"

func day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// partitions keeps the days whose partitions exist, so that a batch
// creates only what is missing.
type partitions map[string]bool

// ensure creates, inside tx, the partitions of every table for the days
// of times that this node has not seen created.
func (p partitions) ensure(ctx context.Context, tx pgx.Tx, times ...time.Time) error {
	var missing []time.Time
	for _, t := range times {
		d := day(t)
		if k := d.Format(dayLayout); !p[k] {
			p[k] = true
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(partitionLock)); err != nil {
		return err
	}
	for _, d := range missing {
		for _, table := range partitioned {
			q := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s_%s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
				table, d.Format(dayLayout), table, d.Format(time.RFC3339), d.AddDate(0, 0, 1).Format(time.RFC3339))
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("create partition: %w", err)
			}
		}
	}
	return nil
}

// forget makes ensure check every day again, after a transaction that
// created partitions rolled back or the connection was replaced.
func (p partitions) forget() { clear(p) }

// dropBefore drops the partitions of every table whose day ends at or
// before cutoff (retention), whole: no DELETE, nothing left to vacuum.
// It returns how many it dropped.
func dropBefore(ctx context.Context, conn *pgx.Conn, cutoff time.Time) (int, error) {
	dropped := 0
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(partitionLock)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
			WHERE p.relname = ANY($1)`, partitioned)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			i := strings.LastIndexByte(name, '_')
			d, err := time.Parse(dayLayout, name[i+1:])
			if err != nil || d.AddDate(0, 0, 1).After(cutoff) {
				continue
			}
			if _, err := tx.Exec(ctx, "DROP TABLE "+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
			dropped++
		}
		return nil
	})
	return dropped, err
}
