import { describe, expect, it } from 'vitest';
import { legendValue, timeAt, timeTickLabels, xRange } from './history/chartData';

// Times are built in local time, as the axis shows them, so the tests hold in any time zone.
const at = (h: number, m: number, s = 0, day = 14) => new Date(2026, 4, day, h, m, s).getTime() / 1000;

describe('time axis', () => {
  it('labels ticks under a minute apart with seconds, each one distinct', () => {
    // What uPlot hands the axis for a short span: a tick every 10 s within 19:36.
    const splits = [0, 10, 20, 30, 40, 50, 60].map((s) => at(19, 36) + s);
    const labels = timeTickLabels(splits, 10);
    expect(labels).toEqual(['19:36:00', '19:36:10', '19:36:20', '19:36:30', '19:36:40', '19:36:50', '19:37:00']);
    expect(new Set(labels).size).toBe(splits.length);
  });

  it('labels minute ticks as hours and minutes, and adds the date where the ticks cross midnight', () => {
    expect(timeTickLabels([at(19, 30), at(19, 40), at(19, 50)], 600)).toEqual(['19:30', '19:40', '19:50']);
    expect(timeTickLabels([at(22, 0), at(23, 0), at(0, 0, 0, 15), at(1, 0, 0, 15)], 3600)).toEqual([
      'May 14 22:00',
      '23:00',
      'May 15 00:00',
      '01:00',
    ]);
    expect(timeTickLabels([at(0, 0, 0, 14), at(0, 0, 0, 15)], 86400)).toEqual(['May 14', 'May 15']);
  });

  it('spans from just before the first bucket to now, at least two buckets wide', () => {
    const now = at(19, 37, 50);
    // One point: two buckets wide, not years.
    expect(xRange([at(19, 37)], 60, now)).toEqual([now - 120, now]);
    // The newest bucket's point keeps half a bucket from the right edge.
    expect(xRange([at(19, 37)], 60, at(19, 37, 10))).toEqual([at(19, 37, 30) - 120, at(19, 37, 30)]);
    // A few minutes of data in the last hour: from the first bucket, not the whole hour.
    expect(xRange([at(19, 30), at(19, 37)], 60, now)).toEqual([at(19, 30) - 30, now]);
    expect(xRange([at(18, 40), at(19, 37)], 60, now)).toEqual([at(18, 40) - 30, now]);
  });

  it('names the bucket under the cursor, with the date when not today', () => {
    const today = new Date(2026, 4, 14, 20, 0);
    expect(timeAt(at(19, 36), 60, today)).toBe('19:36–19:37');
    expect(timeAt(at(19, 36, 10), 10, today)).toBe('19:36:10–19:36:20');
    expect(timeAt(at(21, 0, 0, 13), 3 * 3600, today)).toBe('May 13 21:00–May 14 00:00');
  });
});

describe('legendValue', () => {
  it('shows the value under the cursor, else the latest the series has', () => {
    const ys = [100, null, 250, null];
    expect(legendValue(ys, 0)).toBe(100);
    expect(legendValue(ys, 1)).toBeNull();
    expect(legendValue(ys, null)).toBe(250);
    expect(legendValue(ys, undefined)).toBe(250);
    expect(legendValue([null, null], null)).toBeNull();
  });
});
