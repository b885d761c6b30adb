import { useEffect, useRef, useState } from 'preact/hooks';
import { APIError, type Client } from '../api';
import { useAction, useAsync, useObservable } from '../hooks';
import type { LiveStore } from '../store';
import { Empty, ErrorBox, Loading } from '../ui/States';
import type { RequestRecord } from '../types';
import { Charts } from './Charts';
import { NO_FILTERS, PAGE, STATUSES, TIME_RANGES, matches, mergeInOrder, toQuery, type Filters } from './filters';
import { RequestsTable } from './RequestsTable';
import { Timeline } from './Timeline';

interface Props {
  client: Client;
  live: LiveStore;
  /** The request whose timeline is open (from the URL), or null. */
  selected: string | null;
  onSelect(id: string | null): void;
}

/**
 * The rows shown, whether older ones are left to load, and how many rows
 * live updates keep: the rows the reader paged in stay, the oldest go as
 * new ones come.
 */
interface Page {
  rows: RequestRecord[];
  more: boolean;
  keep: number;
}

/** How many rows live updates keep before the reader pages in more. */
const KEEP = 500;

const page = (rows: RequestRecord[]): Page => ({ rows, more: rows.length >= PAGE, keep: KEEP });

export function HistoryScreen({ client, live, selected, onSelect }: Props) {
  useObservable(live);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [chartKey, setChartKey] = useState(0);
  const lastChartBump = useRef(0);

  // The first page, again whenever the filters change.
  const [first, reload, update] = useAsync(
    (signal) => client.requests(toQuery(filters, Date.now()), signal).then(page),
    [client, filters],
  );
  const rows = first.value?.rows ?? [];

  // Older pages, on demand. A change of filters abandons one on its way.
  const older = useAction();
  const abortOlder = older.abort;
  useEffect(() => abortOlder, [abortOlder, filters]);
  const loadMore = () => {
    const last = rows[rows.length - 1];
    if (!last) return;
    older.run(
      (signal) => client.requests(toQuery(filters, Date.now(), last.id), signal),
      (rs) =>
        update((cur) => {
          const rows = [...cur.rows, ...rs.filter((r) => !cur.rows.some((c) => c.id === r.id))];
          return { rows, more: page(rs).more, keep: Math.max(cur.keep, rows.length) };
        }),
    );
  };

  // Back online after an outage: reload what failed, and the charts.
  const outage = useRef(false);
  useEffect(() => {
    if (live.conn.kind === 'reconnecting') outage.current = true;
    else if (live.conn.kind === 'open' && outage.current) {
      outage.current = false;
      reload();
      setChartKey((k) => k + 1);
    }
  }, [live.conn.kind, reload]);

  // Finished requests arrive live; the charts refresh at most every 10 s.
  useEffect(
    () =>
      live.onRequestDone((r) => {
        if (matches(r, filters))
          update((p) => {
            const rows = mergeInOrder(p.rows, r, p.keep);
            const grown = p.rows.some((x) => x.id === r.id) ? 0 : 1;
            // A row that went at the bottom can be paged in again.
            return { ...p, rows, more: p.more || rows.length < p.rows.length + grown };
          });
        const now = Date.now();
        if (now - lastChartBump.current > 10000) {
          lastChartBump.current = now;
          setChartKey((k) => k + 1);
        }
      }),
    [live, filters, update],
  );

  // The open timeline: from the rows or the live store when there, else fetched.
  const known = selected ? (rows.find((r) => r.id === selected) ?? live.recentRequest(selected) ?? null) : null;
  const mustFetch = selected !== null && known === null;
  const [fetched] = useAsync(
    (signal) => (selected && mustFetch ? client.request(selected, signal) : Promise.resolve(null)),
    [client, selected, mustFetch],
  );
  const detail = known ?? (fetched.value?.id === selected ? fetched.value : null);

  const set = (patch: Partial<Filters>) => setFilters((f) => ({ ...f, ...patch }));
  const filtered = filters.served || filters.fallback || filters.status || filters.range !== 'all';
  const candidates = (live.status?.candidates ?? []).map((c) => c.id);
  const detailView = !selected ? null : detail ? (
    <Timeline r={detail} onClose={() => onSelect(null)} />
  ) : fetched.state === 'error' ? (
    <ErrorBox
      title="Could not open this request"
      message={
        fetched.error instanceof APIError && fetched.error.status === 404
          ? 'No request with this id in the history.'
          : fetched.error.message
      }
    />
  ) : (
    <Loading what="the request" />
  );

  return (
    <section class="screen history-screen" aria-labelledby="history-title">
      <header class="screen-head">
        <h1 id="history-title">History</h1>
        <span class="muted small">updates live</span>
      </header>

      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter requests">
        <label class="inline-field">
          <span>Served by</span>
          <select value={filters.served} onChange={(e) => set({ served: (e.target as HTMLSelectElement).value })} data-testid="filter-served">
            <option value="">any model</option>
            {candidates.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </label>
        <label class="inline-field">
          <span>Fallback</span>
          <select
            value={filters.fallback}
            onChange={(e) => set({ fallback: (e.target as HTMLSelectElement).value as Filters['fallback'] })}
            data-testid="filter-fallback"
          >
            <option value="">any</option>
            <option value="yes">yes</option>
            <option value="no">no</option>
          </select>
        </label>
        <label class="inline-field">
          <span>Status</span>
          <select value={filters.status} onChange={(e) => set({ status: (e.target as HTMLSelectElement).value })} data-testid="filter-status">
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s.id} value={s.id}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <label class="inline-field">
          <span>Time</span>
          <select value={filters.range} onChange={(e) => set({ range: (e.target as HTMLSelectElement).value })} data-testid="filter-time">
            {TIME_RANGES.map((t) => (
              <option key={t.id} value={t.id}>
                {t.label}
              </option>
            ))}
          </select>
        </label>
        {filtered && (
          <button type="button" class="btn btn-ghost btn-small" onClick={() => setFilters(NO_FILTERS)}>
            Clear filters
          </button>
        )}
      </form>

      {selected && !rows.some((r) => r.id === selected) && first.state !== 'loading' && detailView}
      <div class="history-list">
        {first.state === 'loading' && rows.length === 0 ? (
          <Loading what="requests" />
        ) : first.state === 'error' ? (
          <ErrorBox title="Could not load the history" message={first.error.message} onRetry={reload} />
        ) : rows.length === 0 ? (
          <Empty title={filtered ? 'No requests match these filters' : 'No requests yet'}>
            {filtered
              ? 'Widen the filters, or wait: new requests appear here as they finish.'
              : 'Send a message on the Chat screen, or point any OpenAI- or Ollama-speaking app at this server. Each request shows up here with its attempts.'}
          </Empty>
        ) : (
          <>
            <RequestsTable
              rows={rows}
              selected={selected}
              onOpen={(id) => onSelect(id === selected ? null : id)}
              detail={detailView}
            />
            {first.value?.more && (
              <button type="button" class="btn btn-ghost load-more" onClick={loadMore} disabled={older.pending}>
                {older.pending ? 'Loading…' : 'Load older requests'}
              </button>
            )}
          </>
        )}
      </div>

      <Charts client={client} refreshKey={chartKey} />
    </section>
  );
}
