import { useEffect, useRef, useState } from 'preact/hooks';
import { APIError, type Client } from '../api';
import { useObservable } from '../hooks';
import type { LiveStore } from '../store';
import { Empty, ErrorBox, Loading } from '../ui/States';
import type { RequestRecord } from '../types';
import { Charts } from './Charts';
import { NO_FILTERS, PAGE, STATUSES, TIME_RANGES, matches, mergeNewest, toQuery, type Filters } from './filters';
import { RequestsTable } from './RequestsTable';
import { Timeline } from './Timeline';

interface Props {
  client: Client;
  live: LiveStore;
  /** The request whose timeline is open (from the URL), or null. */
  selected: string | null;
  onSelect(id: string | null): void;
}

type Detail = { kind: 'ok'; r: RequestRecord } | { kind: 'error'; message: string };

type Load = { state: 'loading' } | { state: 'ok' } | { state: 'error'; message: string };

export function HistoryScreen({ client, live, selected, onSelect }: Props) {
  useObservable(live);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [rows, setRows] = useState<RequestRecord[]>([]);
  const [load, setLoad] = useState<Load>({ state: 'loading' });
  const [more, setMore] = useState(false);
  const [loadingMore, setLoadingMore] = useState(false);
  const [tick, setTick] = useState(0);
  const [detail, setDetail] = useState<Detail | null>(null);
  const [chartKey, setChartKey] = useState(0);
  const lastChartBump = useRef(0);

  // The first page, again whenever the filters change.
  useEffect(() => {
    const ctl = new AbortController();
    setLoad({ state: 'loading' });
    client.requests(toQuery(filters, Date.now()), ctl.signal).then(
      (rs) => {
        setRows(rs);
        setMore(rs.length >= PAGE);
        setLoad({ state: 'ok' });
      },
      (e: Error) => {
        if (!ctl.signal.aborted) setLoad({ state: 'error', message: e.message });
      },
    );
    return () => ctl.abort();
  }, [client, filters, tick]);

  // Back online after an outage: reload what failed, and the charts.
  const outage = useRef(false);
  useEffect(() => {
    if (live.conn.kind === 'reconnecting') outage.current = true;
    else if (live.conn.kind === 'open' && outage.current) {
      outage.current = false;
      setTick((t) => t + 1);
      setChartKey((k) => k + 1);
    }
  }, [live.conn.kind]);

  // Finished requests arrive live; the charts refresh at most every 10 s.
  useEffect(
    () =>
      live.onRequestDone((r) => {
        if (matches(r, filters)) setRows((rs) => mergeNewest(rs, r));
        setDetail((d) => (d?.kind === 'ok' && d.r.id === r.id ? { kind: 'ok', r } : d));
        const now = Date.now();
        if (now - lastChartBump.current > 10000) {
          lastChartBump.current = now;
          setChartKey((k) => k + 1);
        }
      }),
    [live, filters],
  );

  // The open timeline: from the rows when there, else fetched.
  useEffect(() => {
    if (!selected) {
      setDetail(null);
      return;
    }
    const have = rows.find((r) => r.id === selected) ?? live.recentRequest(selected);
    if (have) {
      setDetail({ kind: 'ok', r: have });
      return;
    }
    setDetail(null);
    let gone = false;
    client.request(selected).then(
      (r) => !gone && setDetail({ kind: 'ok', r }),
      (e: Error) =>
        !gone &&
        setDetail({
          kind: 'error',
          message: e instanceof APIError && e.status === 404 ? 'No request with this id in the history.' : e.message,
        }),
    );
    return () => {
      gone = true;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, selected, rows.length === 0]);

  const loadMore = () => {
    const last = rows[rows.length - 1];
    if (!last) return;
    setLoadingMore(true);
    client.requests(toQuery(filters, Date.now(), last.id)).then(
      (rs) => {
        setRows((cur) => [...cur, ...rs.filter((r) => !cur.some((c) => c.id === r.id))]);
        setMore(rs.length >= PAGE);
        setLoadingMore(false);
      },
      () => setLoadingMore(false),
    );
  };

  const set = (patch: Partial<Filters>) => setFilters((f) => ({ ...f, ...patch }));
  const filtered = filters.served || filters.fallback || filters.status || filters.range !== 'all';
  const candidates = (live.status?.candidates ?? []).map((c) => c.id);
  const detailView = !selected ? null : detail === null ? (
    <Loading what="the request" />
  ) : detail.kind === 'error' ? (
    <ErrorBox title="Could not open this request" message={detail.message} />
  ) : (
    <Timeline r={detail.r} onClose={() => onSelect(null)} />
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

      {selected && !rows.some((r) => r.id === selected) && load.state !== 'loading' && detailView}
      <div class="history-list">
        {load.state === 'loading' && rows.length === 0 ? (
          <Loading what="requests" />
        ) : load.state === 'error' ? (
          <ErrorBox title="Could not load the history" message={load.message} onRetry={() => setTick((t) => t + 1)} />
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
            {more && (
              <button type="button" class="btn btn-ghost load-more" onClick={loadMore} disabled={loadingMore}>
                {loadingMore ? 'Loading…' : 'Load older requests'}
              </button>
            )}
          </>
        )}
      </div>

      <Charts client={client} refreshKey={chartKey} />
    </section>
  );
}
