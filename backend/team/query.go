package team

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Record is one request of the team's history, with the node that served
// it.
type Record struct {
	Node string
	fleet.RequestRecord
}

// MaxRequests bounds the limit of Requests.
const MaxRequests = 500

// Requests reads the team's newest shipped requests, with their attempts:
// all nodes' when node is "", else that node's; at most limit (1 to
// MaxRequests). It opens a connection of its own for the query, bounded by
// OpTimeout: it is for the UI, never for routing.
func (t *Team) Requests(ctx context.Context, node string, limit int) ([]Record, error) {
	limit = min(max(limit, 1), MaxRequests)
	ctx, cancel := context.WithTimeout(ctx, t.o.OpTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, t.cfg)
	if err != nil {
		return nil, fmt.Errorf("team requests: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT node, id, started_at, protocol, stream, thinking, requested_model,
		coalesce(served_candidate, ''), coalesce(served_model, ''), is_fallback, status, coalesce(http_status, 0),
		coalesce(error, ''), coalesce(failure, ''), coalesce(ttft_ms, 0), latency_ms, coalesce(prompt_tokens, 0),
		coalesce(completion_tokens, 0)
		FROM team_requests WHERE ($1 = '' OR node = $1) ORDER BY started_at DESC, node, id LIMIT $2`, node, limit)
	if err != nil {
		return nil, fmt.Errorf("team requests: %w", err)
	}
	var out []Record
	index := map[[2]string]int{}
	var oldest time.Time
	for rows.Next() {
		var r Record
		var ttft, latency int64
		err := rows.Scan(&r.Node, &r.ID, &r.StartedAt, &r.Protocol, &r.Stream, &r.Thinking, &r.RequestedModel,
			&r.ServedCandidate, &r.ServedModel, &r.IsFallback, &r.Status, &r.HTTPStatus, &r.Error, &r.Failure,
			&ttft, &latency, &r.PromptTokens, &r.CompletionTokens)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("team requests: %w", err)
		}
		r.StartedAt = r.StartedAt.UTC()
		r.TTFT, r.Latency = time.Duration(ttft)*time.Millisecond, time.Duration(latency)*time.Millisecond
		r.Attempts = []fleet.Attempt{}
		index[[2]string{r.Node, r.ID}] = len(out)
		oldest = r.StartedAt
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("team requests: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	// The attempts of those requests: in their partitions from the
	// oldest one's day on.
	rows, err = conn.Query(ctx, `SELECT node, request_id, ord, candidate, outcome, coalesce(fault, ''), coalesce(error, ''),
		coalesce(http_status, 0), coalesce(started_at, 'epoch'), deadline_ms, coalesce(ttft_ms, 0), duration_ms, cold, demoted,
		coalesce(reading::text, '')
		FROM team_attempts WHERE request_started_at >= $1 AND ($2 = '' OR node = $2) ORDER BY node, request_id, ord`, oldest, node)
	if err != nil {
		return nil, fmt.Errorf("team attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var nodeName, id string
		var a fleet.Attempt
		var deadline, ttft, dur int64
		var reading string
		if err := rows.Scan(&nodeName, &id, &a.Order, &a.Candidate, &a.Outcome, &a.Fault, &a.Error, &a.HTTPStatus,
			&a.StartedAt, &deadline, &ttft, &dur, &a.Cold, &a.Demoted, &reading); err != nil {
			return nil, fmt.Errorf("team attempts: %w", err)
		}
		if reading != "" {
			a.Reading = new(fleet.GPUReading)
			if err := json.Unmarshal([]byte(reading), a.Reading); err != nil {
				return nil, fmt.Errorf("team attempts: reading of %s: %w", id, err)
			}
		}
		i, ok := index[[2]string{nodeName, id}]
		if !ok {
			continue
		}
		if a.StartedAt.Unix() == 0 {
			a.StartedAt = time.Time{}
		}
		a.RequestID = id
		a.StartedAt = a.StartedAt.UTC()
		a.Deadline, a.TTFT, a.Duration = time.Duration(deadline)*time.Millisecond, time.Duration(ttft)*time.Millisecond, time.Duration(dur)*time.Millisecond
		out[i].Attempts = append(out[i].Attempts, a)
	}
	return out, rows.Err()
}
