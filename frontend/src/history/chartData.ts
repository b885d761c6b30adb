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
  { id: '1h', label: 'Last hour', since: '1h', bucket: '1m', bucketSec: 60 },
  { id: '6h', label: 'Last 6 hours', since: '6h', bucket: '5m', bucketSec: 300 },
  { id: '24h', label: 'Last 24 hours', since: '24h', bucket: '30m', bucketSec: 1800 },
  { id: '7d', label: 'Last 7 days', since: '168h', bucket: '3h', bucketSec: 3 * 3600 },
] as const;

/**
 * xRange is the stretch of time a chart shows, in unix seconds: from half a
 * bucket before its first point to now (or half a bucket past its last), and
 * at least two buckets wide. So a server that has run for three minutes
 * gets a three-minute axis, not an hour of nothing or, for a single point,
 * uPlot's own guess of a span of years.
 */
export function xRange(xs: readonly number[], bucketSec: number, nowSec: number): [number, number] {
  const first = (xs[0] ?? nowSec) - bucketSec / 2;
  const max = Math.max(nowSec, (xs[xs.length - 1] ?? nowSec) + bucketSec / 2);
  return [Math.min(first, max - 2 * bucketSec), max];
}

const pad2 = (n: number) => String(n).padStart(2, '0');
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const hm = (d: Date) => `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
const hms = (d: Date) => `${hm(d)}:${pad2(d.getSeconds())}`;
const day = (d: Date) => `${MONTHS[d.getMonth()]} ${d.getDate()}`;
const sameDay = (a: Date, b: Date) => a.toDateString() === b.toDateString();

/**
 * timeTickLabels labels the ticks of a time axis (unix seconds, local
 * time, 24-hour clock) by the step between them, so that no two read the
 * same: seconds when ticks are under a minute apart, hours and minutes
 * under a day, the date from a day. When the ticks cross midnight the
 * first tick and the first of each new day carry the date too.
 */
export function timeTickLabels(splits: readonly number[], stepSec: number): string[] {
  const dates = splits.map((s) => new Date(s * 1000));
  if (stepSec >= 86400) return dates.map((d) => day(d));
  const clock = stepSec < 60 ? hms : hm;
  const first = dates[0];
  const last = dates[dates.length - 1];
  const acrossDays = first !== undefined && last !== undefined && !sameDay(first, last);
  return dates.map((d, i) => {
    const prev = dates[i - 1];
    const newDay = acrossDays && (prev === undefined || !sameDay(prev, d));
    return newDay ? `${day(d)} ${clock(d)}` : clock(d);
  });
}

/**
 * timeAt names the bucket that starts at sec, for the legend: "20:53–20:54",
 * to the second for buckets under a minute, with the date when it is not
 * today.
 */
export function timeAt(sec: number, bucketSec: number, now = new Date()): string {
  const from = new Date(sec * 1000);
  const to = new Date((sec + bucketSec) * 1000);
  const clock = bucketSec < 60 ? hms : hm;
  const range = `${clock(from)}–${sameDay(from, to) ? clock(to) : `${day(to)} ${clock(to)}`}`;
  return sameDay(from, now) ? range : `${day(from)} ${range}`;
}

/**
 * legendValue is the value a legend shows for a series: the one under the
 * cursor, or, when the cursor is off the chart (idx null), the latest
 * value the series has.
 */
export function legendValue(ys: ArrayLike<number | null | undefined>, idx: number | null | undefined): number | null {
  if (idx != null) return ys[idx] ?? null;
  for (let i = ys.length - 1; i >= 0; i--) {
    const y = ys[i];
    if (y != null) return y;
  }
  return null;
}
