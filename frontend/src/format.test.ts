import { describe, expect, it } from 'vitest';
import { formatBytes, formatCountdown, formatMs, remainingAt } from './format';

describe('formatCountdown', () => {
  it('rounds up to whole seconds so it never reads 0 too early', () => {
    expect(formatCountdown(30000)).toBe('30s');
    expect(formatCountdown(29001)).toBe('30s');
    expect(formatCountdown(1)).toBe('1s');
    expect(formatCountdown(999)).toBe('1s');
    expect(formatCountdown(1000)).toBe('1s');
  });

  it('is 0s at or below zero and for nonsense', () => {
    expect(formatCountdown(0)).toBe('0s');
    expect(formatCountdown(-500)).toBe('0s');
    expect(formatCountdown(Number.NaN)).toBe('0s');
  });

  it('switches to m:ss from a minute and h:mm:ss from an hour', () => {
    expect(formatCountdown(59000)).toBe('59s');
    expect(formatCountdown(59001)).toBe('1:00');
    expect(formatCountdown(60000)).toBe('1:00');
    expect(formatCountdown(65000)).toBe('1:05');
    expect(formatCountdown(600000)).toBe('10:00');
    expect(formatCountdown(3600000)).toBe('1:00:00');
    expect(formatCountdown(3725000)).toBe('1:02:05');
  });
});

describe('remainingAt', () => {
  it('counts down locally from when the value arrived, never below zero', () => {
    expect(remainingAt(30000, 1000, 1000)).toBe(30000);
    expect(remainingAt(30000, 1000, 11500)).toBe(19500);
    expect(remainingAt(30000, 1000, 40000)).toBe(0);
  });

  it('ticks the display one second at a time', () => {
    const shown = [0, 400, 1000, 1001, 2500, 29999, 30000].map((t) => formatCountdown(remainingAt(30000, 0, t)));
    expect(shown).toEqual(['30s', '30s', '29s', '29s', '28s', '1s', '0s']);
  });
});

describe('formatMs', () => {
  it('picks a readable unit', () => {
    expect(formatMs(412)).toBe('412 ms');
    expect(formatMs(2100)).toBe('2.1 s');
    expect(formatMs(2000)).toBe('2.0 s');
    expect(formatMs(12400)).toBe('12 s');
    expect(formatMs(185000)).toBe('3m 05s');
    expect(formatMs(null)).toBe('—');
  });
});

describe('formatBytes', () => {
  it('uses binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(141 * 1024 ** 3)).toBe('141 GiB');
    expect(formatBytes(0.6 * 1024 ** 3)).toBe('614 MiB');
  });
});
