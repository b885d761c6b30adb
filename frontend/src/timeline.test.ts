import { describe, expect, it } from 'vitest';
import { formatTick, layoutTimeline, niceStep } from './timeline';
import type { Attempt } from './types';

const T0 = '2026-01-01T10:00:00.000Z';

function at(offsetMs: number): string {
  return new Date(Date.parse(T0) + offsetMs).toISOString();
}

function attempt(order: number, offset: number, duration: number, deadline: number, outcome: Attempt['outcome'] = 'success'): Attempt {
  return {
    order,
    candidate: `c${order}`,
    outcome,
    fault: '',
    reason: '',
    error: '',
    http_status: 0,
    started_at: at(offset),
    deadline_ms: deadline,
    ttft_ms: 0,
    duration_ms: duration,
    cold: false,
    demoted: false,
    reading: null,
  };
}

describe('niceStep', () => {
  it('picks 1-2-5 steps', () => {
    expect(niceStep(1000)).toBe(200);
    expect(niceStep(2100)).toBe(500);
    expect(niceStep(4500)).toBe(1000);
    expect(niceStep(9000)).toBe(2000);
    expect(niceStep(0)).toBe(1);
  });
});

describe('formatTick', () => {
  it('labels ticks', () => {
    expect(formatTick(0)).toBe('0');
    expect(formatTick(500)).toBe('500 ms');
    expect(formatTick(1500)).toBe('1.5 s');
    expect(formatTick(2000)).toBe('2 s');
    expect(formatTick(180000)).toBe('3 min');
  });
});

describe('layoutTimeline', () => {
  it('never splits a millisecond: a request over in 1 ms has one tick per label', () => {
    const l = layoutTimeline(T0, 1, [attempt(0, 0, 0, 8000, 'error'), attempt(1, 1, 0, 8000, 'error')]);
    const labels = l.ticks.map((t) => t.label);
    expect(labels).toEqual(['0', '1 ms']);
    expect(new Set(labels).size).toBe(labels.length);
  });

  it('places a timeout then a success on one axis', () => {
    // c0 times out at its 2 s deadline; c1 starts 5 ms later and takes 1.9 s.
    const l = layoutTimeline(T0, 3905, [attempt(0, 0, 2000, 2000, 'timeout'), attempt(1, 2005, 1900, 60000)]);
    expect(l.axisMs).toBe(4000); // span 3905 → step 1000 → 4 ticks
    expect(l.ticks.map((t) => t.ms)).toEqual([0, 1000, 2000, 3000, 4000]);
    expect(l.ticks.map((t) => t.pct)).toEqual([0, 25, 50, 75, 100]);
    const [a, b] = l.bars;
    expect(a!.leftPct).toBe(0);
    expect(a!.widthPct).toBe(50);
    expect(a!.deadlinePct).toBe(50); // deadline at the bar's end
    expect(b!.startMs).toBe(2005);
    expect(b!.leftPct).toBeCloseTo(50.125);
    expect(b!.widthPct).toBeCloseTo(47.5);
    expect(b!.deadlinePct).toBeNull(); // 60 s lies beyond the axis
  });

  it('widens instant failures to the minimum width', () => {
    const l = layoutTimeline(T0, 1000, [attempt(0, 0, 0, 2000, 'error'), attempt(1, 1, 999, 2000)], 1);
    expect(l.bars[0]!.widthPct).toBe(1);
    expect(l.bars[0]!.endMs).toBe(0);
  });

  it('never lets a bar run past the axis', () => {
    const l = layoutTimeline(T0, 1000, [attempt(0, 999, 1, 0)], 2);
    const b = l.bars[0]!;
    expect(b.leftPct + b.widthPct).toBeLessThanOrEqual(100);
    expect(b.deadlinePct).toBeNull(); // no deadline recorded
  });

  it('stretches the axis to the last attempt when latency is shorter', () => {
    const l = layoutTimeline(T0, 0, [attempt(0, 0, 2300, 0, 'client_abort')]);
    expect(l.axisMs).toBe(2500); // span 2300 → step 500 → rounded up to 2500
    expect(l.bars[0]!.widthPct).toBeCloseTo(92);
  });

  it('orders by attempt order and chains attempts with unparseable starts', () => {
    const bad = { ...attempt(1, 0, 300, 0), started_at: 'garbage' };
    const l = layoutTimeline(T0, 500, [bad, attempt(0, 0, 200, 0, 'error')]);
    expect(l.bars.map((b) => b.attempt.order)).toEqual([0, 1]);
    expect(l.bars[1]!.startMs).toBe(200);
  });

  it('clamps starts before the request start to zero', () => {
    const l = layoutTimeline(T0, 100, [attempt(0, -50, 100, 0)]);
    expect(l.bars[0]!.startMs).toBe(0);
  });

  it('has a usable axis for an empty request', () => {
    const l = layoutTimeline(T0, 0, []);
    expect(l.axisMs).toBeGreaterThan(0);
    expect(l.bars).toEqual([]);
    expect(l.ticks[0]!.ms).toBe(0);
  });
});
