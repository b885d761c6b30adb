// Turns /switchyard/v1/stats answers into the column arrays uPlot draws:
// one shared x axis (unix seconds) and one y array per series, with null
// where a series has no point at that x.

import type { FailoverPoint, TTFTPoint } from '../types';

export interface TTFTColumns {
  xs: number[];
  candidates: string[];
  /** p50[i][j]: candidate i at xs[j]. */
  p50: (number | null)[][];
  p95: (number | null)[][];
}

function toSec(iso: string): number {
  return Math.round(Date.parse(iso) / 1000);
}

export function ttftColumns(points: readonly TTFTPoint[]): TTFTColumns {
  const valid = points.filter((p) => Number.isFinite(Date.parse(p.at)));
  const xs = [...new Set(valid.map((p) => toSec(p.at)))].sort((a, b) => a - b);
  const candidates = [...new Set(valid.map((p) => p.candidate))].sort();
  const xi = new Map(xs.map((x, i) => [x, i]));
  const ci = new Map(candidates.map((c, i) => [c, i]));
  const p50 = candidates.map(() => xs.map((): number | null => null));
  const p95 = candidates.map(() => xs.map((): number | null => null));
  for (const p of valid) {
    const i = ci.get(p.candidate)!;
    const j = xi.get(toSec(p.at))!;
    if (p.n > 0) {
      p50[i]![j] = p.p50_ms;
      p95[i]![j] = p.p95_ms;
    }
  }
  return { xs, candidates, p50, p95 };
}

export interface FailoverColumns {
  xs: number[];
  /** Share of requests that needed a fallback, percent; null in empty buckets. */
  fallbackPct: (number | null)[];
  /** Share of requests that failed, percent; null in empty buckets. */
  errorPct: (number | null)[];
  requests: number[];
}

export function failoverColumns(points: readonly FailoverPoint[]): FailoverColumns {
  const sorted = points.filter((p) => Number.isFinite(Date.parse(p.at))).sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  return {
    xs: sorted.map((p) => toSec(p.at)),
    fallbackPct: sorted.map((p) => (p.requests > 0 ? (100 * p.fallbacks) / p.requests : null)),
    errorPct: sorted.map((p) => (p.requests > 0 ? (100 * p.errors) / p.requests : null)),
    requests: sorted.map((p) => p.requests),
  };
}

/** The chart ranges offered, each with a bucket that gives about 60 points. */
export const RANGES = [
  { id: '1h', label: 'Last hour', since: '1h', bucket: '1m' },
  { id: '6h', label: 'Last 6 hours', since: '6h', bucket: '5m' },
  { id: '24h', label: 'Last 24 hours', since: '24h', bucket: '30m' },
  { id: '7d', label: 'Last 7 days', since: '168h', bucket: '3h' },
] as const;
