// The one pattern every fetch of the screens goes through, without Preact
// in it (hooks.ts wraps it): each run gets its own AbortController, a new
// run aborts the one before it, and stopping aborts the one in flight. An
// aborted run never reports, so a late answer cannot land on a view that
// moved on or went away.

/** A slot holds at most one run; see taskSlot. */
export interface TaskSlot {
  /**
   * run starts task, aborting the run before it. ok or fail is called once,
   * unless this run is aborted first (by the next run or by abort()).
   */
  run<T>(task: (signal: AbortSignal) => Promise<T>, ok: (value: T) => void, fail?: (error: Error) => void): void;
  /** abort aborts the run in flight, if any; its callbacks are never called. */
  abort(): void;
}

export function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export function taskSlot(): TaskSlot {
  let current: AbortController | null = null;
  return {
    run(task, ok, fail) {
      current?.abort();
      const ctl = new AbortController();
      current = ctl;
      let p: Promise<unknown>;
      try {
        p = task(ctl.signal);
      } catch (err) {
        p = Promise.reject(err);
      }
      p.then(
        (value) => {
          if (ctl.signal.aborted) return;
          if (current === ctl) current = null;
          ok(value as never);
        },
        (err: unknown) => {
          if (ctl.signal.aborted) return;
          if (current === ctl) current = null;
          fail?.(toError(err));
        },
      );
    },
    abort() {
      current?.abort();
      current = null;
    },
  };
}

export type LoadResult<T> = { ok: true; value: T } | { ok: false; error: Error };

/**
 * startLoad runs load now and, when everyMs is set, again everyMs after
 * each answer (or failure), so two runs never overlap. It returns stop,
 * which aborts the run in flight and cancels the next one; after stop,
 * report is never called.
 */
export function startLoad<T>(
  load: (signal: AbortSignal) => Promise<T>,
  report: (r: LoadResult<T>) => void,
  everyMs?: number,
): () => void {
  const slot = taskSlot();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const next = () => {
    if (!stopped && everyMs && everyMs > 0) timer = setTimeout(go, everyMs);
  };
  const go = () => {
    timer = undefined;
    slot.run(
      load,
      (value) => {
        report({ ok: true, value });
        next();
      },
      (error) => {
        report({ ok: false, error });
        next();
      },
    );
  };
  go();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    slot.abort();
  };
}
