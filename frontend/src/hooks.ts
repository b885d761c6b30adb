// Small hooks shared by the screens.

import { useCallback, useEffect, useState } from 'preact/hooks';
import { startLoad, taskSlot, type TaskSlot } from './async';

/** Anything with a subscribe(fn) → unsubscribe. */
export interface Observable {
  subscribe(fn: () => void): () => void;
}

/** useObservable re-renders the component whenever o notifies. */
export function useObservable(o: Observable): void {
  const [, bump] = useState(0);
  useEffect(() => o.subscribe(() => bump((n) => n + 1)), [o]);
}

/** useNow returns Date.now(), refreshed every `everyMs` while `active`. */
export function useNow(everyMs: number, active = true): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs, active]);
  return now;
}

export type Async<T> =
  | { state: 'loading'; value?: T }
  | { state: 'ok'; value: T }
  | { state: 'error'; error: Error; value?: T };

export interface AsyncOptions {
  /** Load again this long after each answer, for views that must stay fresh. */
  pollMs?: number;
}

/**
 * useAsync is how a screen reads from the API. It runs load whenever deps
 * change, when reload() is called, and every pollMs when asked; each run
 * gets an AbortSignal that is aborted when the next run starts and when
 * the component unmounts (async.ts: startLoad). The last value stays
 * visible while a new run loads, so refreshes do not flash an empty state;
 * update(fn) changes it in place (live additions between loads).
 */
export function useAsync<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: readonly unknown[],
  { pollMs }: AsyncOptions = {},
): [Async<T>, () => void, (fn: (value: T) => T) => void] {
  const [tick, setTick] = useState(0);
  const [res, setRes] = useState<Async<T>>({ state: 'loading' });
  useEffect(
    () => {
      setRes((r) => (r.state === 'loading' ? r : { state: 'loading', value: r.value }));
      return startLoad(
        load,
        (r) => setRes((prev) => (r.ok ? { state: 'ok', value: r.value } : { state: 'error', error: r.error, value: prev.value })),
        pollMs,
      );
    },
    // The caller's deps decide when load changes, as they would for useEffect.
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [...deps, tick, pollMs],
  );
  const reload = useCallback(() => setTick((n) => n + 1), []);
  const update = useCallback(
    (fn: (value: T) => T) => setRes((r) => (r.value === undefined ? r : ({ ...r, value: fn(r.value) } as Async<T>))),
    [],
  );
  return [res, reload, update];
}

export interface Action {
  /** run starts task, aborting the one before it; see TaskSlot.run. */
  run: TaskSlot['run'];
  /** abort abandons the task in flight. */
  abort(): void;
  /** pending is true while a task runs. */
  pending: boolean;
}

/**
 * useAction is useAsync's twin for what the user starts (a button's
 * request): one task at a time, the next aborts the one before, and
 * unmounting aborts the last. run and abort keep their identity across
 * renders.
 */
export function useAction(): Action {
  const [slot] = useState(taskSlot);
  const [pending, setPending] = useState(false);
  useEffect(() => () => slot.abort(), [slot]);
  const run = useCallback<TaskSlot['run']>(
    (task, ok, fail) => {
      setPending(true);
      slot.run(
        task,
        (v) => {
          setPending(false);
          ok(v);
        },
        (e) => {
          setPending(false);
          fail?.(e);
        },
      );
    },
    [slot],
  );
  const abort = useCallback(() => {
    slot.abort();
    setPending(false);
  }, [slot]);
  return { run, abort, pending };
}
