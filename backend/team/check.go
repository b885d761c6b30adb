package team

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Found is what Probe found in a team database.
type Found struct {
	Server string // PostgreSQL's version, as it says it
	// Schema is the team schema's version there (0: not migrated yet);
	// Known the version this binary migrates to.
	Schema, Known int
	Nodes         []Node // the nodes that have joined, by name
}

// Probe connects to url once, within timeout, and reads what `switchyard
// check` says of the team: the server, the schema, the nodes. It changes
// nothing.
func Probe(ctx context.Context, url string, timeout time.Duration) (Found, error) {
	var f Found
	ms, err := migrations()
	if err != nil {
		return f, err
	}
	f.Known = len(ms)
	cfg, err := parseURL(url)
	if err != nil {
		return f, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return f, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&f.Server); err != nil {
		return f, err
	}
	var migrated bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('team_schema') IS NOT NULL").Scan(&migrated); err != nil {
		return f, err
	}
	if err := canWrite(ctx, conn, migrated); err != nil || !migrated {
		return f, err
	}
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM team_schema").Scan(&f.Schema); err != nil {
		return f, err
	}
	if f.Schema > f.Known {
		// serve refuses it (Migrate): so does check.
		return f, fmt.Errorf("%w (schema %d, this binary knows %d): update this Switchyard", ErrSchemaTooNew, f.Schema, f.Known)
	}
	rows, err := conn.Query(ctx, `SELECT node, version, config_hash, (extract(epoch FROM now() - last_seen) * 1000)::bigint
		FROM team_nodes ORDER BY node`)
	if err != nil {
		return f, err
	}
	defer rows.Close()
	now := time.Now()
	for rows.Next() {
		var n Node
		var ageMS int64
		if err := rows.Scan(&n.Name, &n.Version, &n.ConfigHash, &ageMS); err != nil {
			return f, err
		}
		n.LastSeen = now.Add(-time.Duration(ageMS) * time.Millisecond)
		n.Link = LinkOnline
		if time.Duration(ageMS)*time.Millisecond > 3*DefaultHeartbeat {
			n.Link = LinkOffline
		}
		f.Nodes = append(f.Nodes, n)
	}
	return f, rows.Err()
}

// written are the tables a node writes, and how.
var written = map[string]string{
	"team_nodes": "INSERT, UPDATE", "team_cursors": "INSERT, UPDATE", "team_requests": "INSERT",
	"team_attempts": "INSERT", "team_breaker_events": "INSERT", "team_evidence": "INSERT",
}

// canWrite fails with ErrCannotWrite, naming what is missing, when the
// role may not do what a node does: make tables and each day's partitions
// in its schema, and write the tables once they are there.
func canWrite(ctx context.Context, conn *pgx.Conn, migrated bool) error {
	var missing []string
	var create bool
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema(), has_schema_privilege(current_schema(), 'CREATE')").Scan(&schema, &create); err != nil {
		return err
	}
	if !create {
		missing = append(missing, "CREATE on schema "+schema)
	}
	if migrated {
		for _, table := range slices.Sorted(maps.Keys(written)) {
			var ok bool
			if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1, $2)", table, written[table]).Scan(&ok); err != nil {
				return err
			}
			if !ok {
				missing = append(missing, written[table]+" on "+table)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: it lacks %s", ErrCannotWrite, strings.Join(missing, "; "))
	}
	return nil
}
