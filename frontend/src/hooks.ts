// Small hooks shared by the screens.

import { useEffect, useRef, useState } from 'preact/hooks';

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

/**
 * useAsync runs load whenever deps change (and when reload() is called),
 * aborting the previous run. A reload keeps the last value visible while it
 * loads, so refreshes do not flash an empty state.
 */
export function useAsync<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
): [Async<T>, () => void] {
  const [tick, setTick] = useState(0);
  const [res, setRes] = useState<Async<T>>({ state: 'loading' });
  const last = useRef<T | undefined>(undefined);
  useEffect(() => {
    const ctl = new AbortController();
    setRes(last.current === undefined ? { state: 'loading' } : { state: 'loading', value: last.current });
    load(ctl.signal).then(
      (value) => {
        if (ctl.signal.aborted) return;
        last.current = value;
        setRes({ state: 'ok', value });
      },
      (err: unknown) => {
        if (ctl.signal.aborted) return;
        const error = err instanceof Error ? err : new Error(String(err));
        setRes(last.current === undefined ? { state: 'error', error } : { state: 'error', error, value: last.current });
      },
    );
    return () => ctl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return [res, () => setTick((n) => n + 1)];
}
