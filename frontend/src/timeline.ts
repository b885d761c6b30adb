// Layout maths of the attempt timeline: every attempt of one request as a bar
// on a shared time axis that starts at the request's start.

import type { Attempt } from './types';

export interface TimelineBar {
  attempt: Attempt;
  /** Offset of the attempt's start from the request's start, ms. */
  startMs: number;
  endMs: number;
  /** Position and length on the axis, in percent of its width. */
  leftPct: number;
  widthPct: number;
  /** Where the attempt's first-token deadline falls, or null when it lies beyond the axis or is unknown. */
  deadlinePct: number | null;
}

export interface TimelineTick {
  ms: number;
  pct: number;
  label: string;
}

export interface TimelineLayout {
  /** The axis length, ms: the span of the request rounded up to a whole tick step. */
  axisMs: number;
  bars: TimelineBar[];
  ticks: TimelineTick[];
}

/** niceStep is the 1-2-5 step that splits span into at most about `target` parts. */
export function niceStep(span: number, target = 5): number {
  if (!(span > 0)) return 1;
  const raw = span / target;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

/** formatTick renders an axis label: "0", "250 ms", "1 s", "1.5 s", "2 min". */
export function formatTick(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120000) return `${Number((ms / 1000).toFixed(2))} s`;
  return `${Number((ms / 60000).toFixed(1))} min`;
}

/**
 * layoutTimeline places each attempt on an axis from the request's start to
 * the later of its latency and the last attempt's end. Bars shorter than
 * minWidthPct are widened so that instant failures (a refused connection)
 * stay visible; a bar never runs past the axis. Attempts whose start cannot
 * be parsed follow the previous attempt's end.
 */
export function layoutTimeline(
  requestStart: string,
  latencyMs: number,
  attempts: readonly Attempt[],
  minWidthPct = 0.8,
): TimelineLayout {
  const t0 = Date.parse(requestStart);
  const placed: { attempt: Attempt; startMs: number; endMs: number; deadlineMs: number | null }[] = [];
  let cursor = 0;
  const sorted = [...attempts].sort((a, b) => a.order - b.order);
  for (const a of sorted) {
    const at = Date.parse(a.started_at);
    let start = Number.isFinite(at) && Number.isFinite(t0) ? at - t0 : cursor;
    if (start < 0) start = 0;
    const dur = Math.max(0, a.duration_ms || 0);
    const end = start + dur;
    placed.push({ attempt: a, startMs: start, endMs: end, deadlineMs: a.deadline_ms > 0 ? start + a.deadline_ms : null });
    cursor = end;
  }
  const span = Math.max(latencyMs || 0, ...placed.map((p) => p.endMs), 0);
  // Times are whole milliseconds: a finer step would only repeat its labels.
  const step = Math.max(1, niceStep(span > 0 ? span : 100));
  const axisMs = Math.max(step, Math.ceil((span > 0 ? span : 100) / step) * step);
  const pct = (ms: number) => (ms / axisMs) * 100;

  const bars = placed.map((p): TimelineBar => {
    const leftPct = Math.min(pct(p.startMs), 100 - minWidthPct);
    const widthPct = Math.min(Math.max(pct(p.endMs - p.startMs), minWidthPct), 100 - leftPct);
    const deadlinePct = p.deadlineMs !== null && p.deadlineMs <= axisMs ? pct(p.deadlineMs) : null;
    return { attempt: p.attempt, startMs: p.startMs, endMs: p.endMs, leftPct, widthPct, deadlinePct };
  });

  const ticks: TimelineTick[] = [];
  for (let ms = 0; ms <= axisMs + step / 1000; ms += step) {
    ticks.push({ ms, pct: pct(ms), label: formatTick(ms) });
  }
  return { axisMs, bars, ticks };
}
