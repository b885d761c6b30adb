// History filters: what the form holds, the query it sends, and whether a
// live request belongs in the current view.

import type { RequestFilter } from '../api';
import type { RequestRecord } from '../types';

export interface Filters {
  served: string;
  fallback: '' | 'yes' | 'no';
  status: string;
  /** One of TIME_RANGES' ids. */
  range: string;
}

export const TIME_RANGES = [
  { id: '15m', label: 'Last 15 minutes', ms: 15 * 60e3 },
  { id: '1h', label: 'Last hour', ms: 60 * 60e3 },
  { id: '24h', label: 'Last 24 hours', ms: 24 * 60 * 60e3 },
  { id: '7d', label: 'Last 7 days', ms: 7 * 24 * 60 * 60e3 },
  { id: 'all', label: 'All time', ms: 0 },
] as const;

export const STATUSES = [
  { id: 'ok', label: 'ok' },
  { id: 'error', label: 'error' },
  { id: 'client_abort', label: 'stopped by client' },
  { id: 'upstream_error_after_commit', label: 'failed mid-stream' },
] as const;

export const NO_FILTERS: Filters = { served: '', fallback: '', status: '', range: 'all' };

export const PAGE = 50;

/** sinceOf is the RFC 3339 lower bound of the range at `now`, or undefined for all time. */
export function sinceOf(range: string, now: number): string | undefined {
  const r = TIME_RANGES.find((t) => t.id === range);
  return r && r.ms > 0 ? new Date(now - r.ms).toISOString() : undefined;
}

export function toQuery(f: Filters, now: number, before?: string): RequestFilter {
  const q: RequestFilter = { limit: PAGE };
  if (f.served) q.served = f.served;
  if (f.fallback) q.fallback = f.fallback === 'yes';
  if (f.status) q.status = f.status;
  const since = sinceOf(f.range, now);
  if (since) q.since = since;
  if (before) q.before = before;
  return q;
}

/** matches reports whether a request that just finished belongs in the filtered view. */
export function matches(r: RequestRecord, f: Filters): boolean {
  if (f.served && r.served_candidate !== f.served) return false;
  if (f.fallback && r.is_fallback !== (f.fallback === 'yes')) return false;
  if (f.status && r.status !== f.status) return false;
  return true;
}

/** Whether a comes before b in the list: newest first, as the server orders (start, then id). */
function listedBefore(a: RequestRecord, b: RequestRecord): boolean {
  const ta = Date.parse(a.started_at);
  const tb = Date.parse(b.started_at);
  return ta !== tb ? ta > tb : a.id > b.id;
}

/**
 * mergeInOrder puts a finished request in its place among rows, newest
 * first by when it started, replacing an older copy of it: a long answer
 * ends after requests that started later, and goes below them.
 */
export function mergeInOrder(rows: RequestRecord[], r: RequestRecord, max = 500): RequestRecord[] {
  const rest = rows.filter((x) => x.id !== r.id);
  const at = rest.findIndex((x) => listedBefore(r, x));
  if (at < 0) rest.push(r);
  else rest.splice(at, 0, r);
  return rest.slice(0, max);
}
