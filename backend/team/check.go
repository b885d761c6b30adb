package team

import (
	"context"
	"fmt"
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
	if err := conn.QueryRow(ctx, "SELECT to_regclass('team_schema') IS NOT NULL").Scan(&migrated); err != nil || !migrated {
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
