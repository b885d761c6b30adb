import { afterEach, describe, expect, it, vi } from 'vitest';
import { startLoad, taskSlot, type LoadResult } from './async';

/** A load whose answers the test hands out, one per call, and whose signals it keeps. */
function scripted<T>() {
  const calls: { signal: AbortSignal; resolve: (v: T) => void; reject: (e: Error) => void }[] = [];
  const load = (signal: AbortSignal) =>
    new Promise<T>((resolve, reject) => {
      calls.push({ signal, resolve, reject });
    });
  return { load, calls };
}

const flush = () => new Promise<void>((r) => setTimeout(r, 0));

afterEach(() => vi.useRealTimers());

describe('taskSlot', () => {
  it('aborts the run before when a new one starts, and drops its late answer', async () => {
    const { load, calls } = scripted<string>();
    const slot = taskSlot();
    const got: string[] = [];
    slot.run(load, (v) => got.push(v));
    slot.run(load, (v) => got.push(v));
    expect(calls[0]!.signal.aborted).toBe(true);
    expect(calls[1]!.signal.aborted).toBe(false);
    calls[0]!.resolve('stale');
    calls[1]!.resolve('fresh');
    await flush();
    expect(got).toEqual(['fresh']);
  });

  it('abort() aborts the run in flight; neither callback runs', async () => {
    const { load, calls } = scripted<string>();
    const slot = taskSlot();
    const ok = vi.fn();
    const fail = vi.fn();
    slot.run(load, ok, fail);
    slot.abort();
    expect(calls[0]!.signal.aborted).toBe(true);
    calls[0]!.reject(new DOMException('aborted', 'AbortError') as unknown as Error);
    await flush();
    expect(ok).not.toHaveBeenCalled();
    expect(fail).not.toHaveBeenCalled();
  });

  it('reports a failure, also one thrown before the promise', async () => {
    const slot = taskSlot();
    const fail = vi.fn();
    slot.run(() => {
      throw new Error('boom');
    }, vi.fn(), fail);
    await flush();
    expect(fail).toHaveBeenCalledWith(new Error('boom'));
  });
});

describe('startLoad', () => {
  it('polls after each answer with a fresh signal, never two at once, and stop() aborts and ends it', async () => {
    vi.useFakeTimers();
    const { load, calls } = scripted<number>();
    const seen: LoadResult<number>[] = [];
    const stop = startLoad(load, (r) => seen.push(r), 5000);
    expect(calls).toHaveLength(1);
    // No second run while the first is in flight, however long it takes.
    await vi.advanceTimersByTimeAsync(12000);
    expect(calls).toHaveLength(1);
    calls[0]!.resolve(1);
    await vi.advanceTimersByTimeAsync(4999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2);
    expect(calls[1]!.signal).not.toBe(calls[0]!.signal);
    calls[1]!.reject(new Error('down'));
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toHaveLength(3);
    expect(seen).toEqual([{ ok: true, value: 1 }, { ok: false, error: new Error('down') }]);

    stop();
    expect(calls[2]!.signal.aborted).toBe(true);
    calls[2]!.resolve(3);
    await vi.advanceTimersByTimeAsync(20000);
    expect(calls).toHaveLength(3);
    expect(seen).toHaveLength(2);
  });

  it('stop() between polls cancels the next one', async () => {
    vi.useFakeTimers();
    const { load, calls } = scripted<number>();
    const stop = startLoad(load, () => {}, 1000);
    calls[0]!.resolve(1);
    await vi.advanceTimersByTimeAsync(10);
    stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toHaveLength(1);
  });

  it('loads once without everyMs', async () => {
    vi.useFakeTimers();
    const { load, calls } = scripted<number>();
    startLoad(load, () => {});
    calls[0]!.resolve(1);
    await vi.advanceTimersByTimeAsync(60000);
    expect(calls).toHaveLength(1);
  });
});
