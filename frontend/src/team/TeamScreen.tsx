import { useState } from 'preact/hooks';
import type { Client } from '../api';
import { formatClock, formatDateTime, formatMs, humanStatus } from '../format';
import { statusTone } from '../history/tones';
import { useAsync, useObservable } from '../hooks';
import type { LiveStore } from '../store';
import type { TeamDoc, TeamReport } from '../types';
import { Badge, type BadgeTone } from '../ui/Badge';
import { Empty, ErrorBox, Loading } from '../ui/States';

interface Props {
  client: Client;
  live: LiveStore;
}

const STATUS_WORDS: Record<string, string> = {
  ok: 'ok',
  breaker_open: 'breaker open',
  probe_failed: 'probe failed',
  busy: 'busy',
  loading: 'loading',
  model_missing: 'model missing',
};

/** reportTone: a failing report that still counts is bad; one that ran out is muted. */
export function reportTone(r: TeamReport): BadgeTone {
  if (r.status === 'ok') return 'ok';
  if (!r.current) return 'muted';
  return r.status === 'busy' || r.status === 'loading' ? 'warn' : 'bad';
}

/**
 * TeamScreen shows the team this Switchyard is a node of (docs/DESIGN.md,
 * "Teams"): its link, the nodes, and what each node reports of each
 * shared server. It refetches with every status event.
 */
export function TeamScreen({ client, live }: Props) {
  useObservable(live);
  // A node that is not in a team (the status says so) has nothing to fetch.
  const solo = live.status !== null && !live.status.team;
  const [res, reload] = useAsync((signal) => (solo ? Promise.resolve(null) : client.team(signal)), [client, live.status, solo]);
  const doc = res.value;
  return (
    <section class="screen team-screen" aria-labelledby="team-title">
      <header class="screen-head">
        <h1 id="team-title">Team</h1>
        <span class="muted small">Evidence only: every routing decision stays this node's own.</span>
      </header>
      {solo ? (
        <Empty title="This Switchyard is not in a team">
          Several Switchyards in front of the same servers can share what they see through one PostgreSQL database: set{' '}
          <code>team.database_env</code> in the config to the name of an environment variable that holds its connection string, and
          restart.
        </Empty>
      ) : res.state === 'loading' && !doc ? (
        <Loading what="the team" />
      ) : res.state === 'error' && !doc ? (
        <ErrorBox title="Could not load the team" message={res.error.message} onRetry={reload} />
      ) : doc ? (
        <>
          <section class="card" aria-labelledby="team-nodes">
            <div class="card-head">
              <h2 id="team-nodes">Nodes</h2>
              <span class="small" data-testid="team-link">
                This node, <strong>{doc.node}</strong>:{' '}
                {doc.link === 'online' ? (
                  <Badge tone="ok">team link online</Badge>
                ) : (
                  <Badge tone="bad" title={doc.link_error}>
                    team link offline
                  </Badge>
                )}{' '}
                <span class="muted">{doc.shipped} records shipped</span>
              </span>
            </div>
            <table class="table">
              <thead>
                <tr>
                  <th>Node</th>
                  <th>Version</th>
                  <th>Config</th>
                  <th>Last seen</th>
                  <th>Link</th>
                </tr>
              </thead>
              <tbody>
                {doc.nodes.map((n) => (
                  <tr key={n.name} data-testid={`team-node-${n.name}`}>
                    <td>{n.name}</td>
                    <td class="mono">{n.version}</td>
                    <td class="mono">{n.config_hash}</td>
                    <td>{formatClock(n.last_seen)}</td>
                    <td>
                      <Badge tone={n.link === 'online' ? 'ok' : 'muted'}>{n.link}</Badge>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <section class="card" aria-labelledby="team-servers">
            <div class="card-head">
              <h2 id="team-servers">Shared servers</h2>
            </div>
            {doc.servers.length === 0 ? (
              <Empty title="No shared servers">
                A candidate is shared when its URL names another machine, or it has a <span class="mono">server_key</span>.
              </Empty>
            ) : (
              <table class="table">
                <thead>
                  <tr>
                    <th>Server</th>
                    <th>Model</th>
                    <th>Who saw what</th>
                  </tr>
                </thead>
                <tbody>
                  {doc.servers.map((s) => (
                    <tr key={`${s.server} ${s.model}`} data-testid={`team-server-${s.server}`}>
                      <td class="mono">{s.server}</td>
                      <td class="mono">{s.model}</td>
                      <td>
                        {s.reports.map((r) => (
                          <div key={r.node} class="small">
                            <strong>{r.node}</strong>{' '}
                            <Badge tone={reportTone(r)} title={r.detail}>
                              {STATUS_WORDS[r.status] ?? r.status}
                            </Badge>
                            {r.at && <span class="muted"> at {formatClock(r.at)}</span>}
                            {r.until && r.current && <span class="muted">, counts until {formatClock(r.until)}</span>}
                            {r.in_flight > 0 && <span class="muted">, {r.in_flight} in flight</span>}
                          </div>
                        ))}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
          <TeamHistory client={client} doc={doc} />
        </>
      ) : null}
    </section>
  );
}

/** TeamHistory lists the team's newest shipped requests, all nodes' or one node's. */
function TeamHistory({ client, doc }: { client: Client; doc: TeamDoc }) {
  const [node, setNode] = useState('');
  const [res, reload] = useAsync((signal) => client.teamRequests(node, 50, signal), [client, node]);
  return (
    <section class="card" aria-labelledby="team-history">
      <div class="card-head">
        <h2 id="team-history">Team history</h2>
        <span class="head-actions">
          <label class="small">
            Node{' '}
            <select value={node} onChange={(e) => setNode((e.target as HTMLSelectElement).value)} data-testid="team-node-filter">
              <option value="">all nodes</option>
              {doc.nodes.map((n) => (
                <option key={n.name} value={n.name}>
                  {n.name}
                </option>
              ))}
            </select>
          </label>{' '}
          <button type="button" class="btn btn-ghost btn-small" onClick={reload}>
            Refresh
          </button>
        </span>
      </div>
      {res.state === 'error' ? (
        <ErrorBox title="Could not read the team's history" message={res.error.message} onRetry={reload} />
      ) : !res.value ? (
        <Loading what="the team's history" />
      ) : res.value.requests.length === 0 ? (
        <Empty title="Nothing shipped yet">Each node ships what it served within a second or two of answering.</Empty>
      ) : (
        <div class="table-wrap">
          <table class="table" data-testid="team-history">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Node</th>
                <th scope="col">Requested → served</th>
                <th scope="col">Status</th>
                <th scope="col" class="num">
                  Latency
                </th>
              </tr>
            </thead>
            <tbody>
              {res.value.requests.map((r) => (
                <tr key={`${r.node} ${r.id}`}>
                  <td>{formatDateTime(r.started_at)}</td>
                  <td>{r.node}</td>
                  <td class="mono">
                    {r.requested_model} → {r.served_candidate || '—'}
                    {r.is_fallback && <span class="muted"> (fallback)</span>}
                  </td>
                  <td>
                    <Badge tone={statusTone(r.status)}>{humanStatus(r.status)}</Badge>
                  </td>
                  <td class="num">{formatMs(r.latency_ms)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
