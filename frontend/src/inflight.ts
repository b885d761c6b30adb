// What the live events say about the requests in flight (docs/API.md, GET
// events): which candidate each one waits on for its first token and until
// when (`attempt_started`), and the attempts that failed so far (`attempt`).
// A later `attempt` of the same order ends that wait, `commit` ends every
// wait of its request, `request_done` forgets the request.
//
// Deadlines count on this browser's clock from when `attempt_started`
// arrived, not from its `started_at`: the event is sent as the attempt
// starts, and a browser clock that differs from the server's (another
// machine) would shift a countdown by the difference.

import type { Attempt, LiveEvent } from './types';

/** A candidate a request waits on for its first token. */
export interface Wait {
  requestId: string;
  candidate: string;
  order: number;
  /** The model was not resident: its deadline includes the load. */
  cold: boolean;
  deadlineMs: number;
  /** Date.now() at which the deadline passes. */
  endsAt: number;
}

/** One request in flight, as far as the events told. */
export interface Progress {
  requestId: string;
  /** The tracker's count of events when the request was first seen; see startedAfter. */
  seq: number;
  /** Date.now() when the request was first seen. */
  seenAt: number;
  /** The candidates waited on now, by order (more than one while hedging). */
  waits: Wait[];
  /** The attempts that ended without serving, in the order they ended. */
  failed: Attempt[];
  /** The candidate the request committed to, once it has. */
  committed: string | null;
}

/** How long a wait stays after its deadline without the `attempt` that ends it (an event lost). */
export const STALE_WAIT_MS = 10_000;
/** How long a request stays without `request_done` (an event lost, or a long stream). */
export const STALE_REQUEST_MS = 30 * 60_000;
/** The most requests remembered at once: the oldest go first. */
export const MAX_REQUESTS = 200;

/** Attempts that did not stand in the way of an answer (see chat/failover.ts: failedAttempts). */
const NOT_FAILED = new Set<Attempt['outcome']>(['success', 'hedge_lost']);

/**
 * InFlight keeps the progress of requests in flight. Every change replaces
 * the Progress object it touches (and the waits array), so views that
 * compare by identity see it. Not safe for concurrent use (there is none in
 * a page).
 */
export class InFlight {
  private byId = new Map<string, Progress>();
  private seq = 0;

  /** mark is the count of events applied so far: a request first seen after mark is startedAfter(mark). */
  mark(): number {
    return this.seq;
  }

  /** apply folds one event in and reports whether anything changed. */
  apply(e: LiveEvent, now: number): boolean {
    this.seq++;
    switch (e.type) {
      case 'status':
        return this.prune(now);
      case 'request_started':
        if (this.byId.has(e.data.request_id)) return false;
        this.touch(e.data.request_id, now);
        return true;
      case 'attempt_started': {
        const d = e.data;
        const p = this.touch(d.request_id, now);
        const wait: Wait = {
          requestId: d.request_id,
          candidate: d.candidate,
          order: d.order,
          cold: d.cold,
          deadlineMs: d.deadline_ms,
          endsAt: now + d.deadline_ms,
        };
        const waits = [...p.waits.filter((w) => w.order !== d.order), wait].sort((a, b) => a.order - b.order);
        this.set({ ...p, waits });
        return true;
      }
      case 'attempt': {
        const a = e.data.attempt;
        const p = this.byId.get(e.data.request_id);
        if (!p) return false;
        const waits = p.waits.filter((w) => w.order !== a.order);
        const failed = NOT_FAILED.has(a.outcome) ? p.failed : [...p.failed, a];
        if (waits.length === p.waits.length && failed === p.failed) return false;
        this.set({ ...p, waits, failed });
        return true;
      }
      case 'commit': {
        const p = this.byId.get(e.data.request_id);
        if (!p) return false;
        this.set({ ...p, waits: [], committed: e.data.attempt.candidate });
        return true;
      }
      case 'request_done':
        return this.byId.delete(e.data.request_id);
      default:
        return false;
    }
  }

  /** clear forgets everything: after a gap in the events nothing known is sure. */
  clear(): boolean {
    if (this.byId.size === 0) return false;
    this.byId.clear();
    return true;
  }

  get(requestId: string): Progress | undefined {
    return this.byId.get(requestId);
  }

  /**
   * startedAfter is the first request seen after mark() returned m. The chat
   * uses it to find its own request before the answer's headers name it
   * (they come with the first token): in a window that is the only client it
   * is exact; another client's request that starts in the same moment can
   * be taken for it until the headers arrive.
   */
  startedAfter(m: number): Progress | undefined {
    let first: Progress | undefined;
    for (const p of this.byId.values()) if (p.seq > m && (!first || p.seq < first.seq)) first = p;
    return first;
  }

  /** waitsOn lists the waits on one candidate, the soonest deadline first. */
  waitsOn(candidate: string): Wait[] {
    const out: Wait[] = [];
    for (const p of this.byId.values()) for (const w of p.waits) if (w.candidate === candidate) out.push(w);
    return out.sort((a, b) => a.endsAt - b.endsAt);
  }

  /** waiting reports whether any request waits on a first token. */
  waiting(): boolean {
    for (const p of this.byId.values()) if (p.waits.length) return true;
    return false;
  }

  /** prune drops waits long past their deadline and requests never finished. */
  prune(now: number): boolean {
    let changed = false;
    for (const p of [...this.byId.values()]) {
      if (now - p.seenAt > STALE_REQUEST_MS) {
        this.byId.delete(p.requestId);
        changed = true;
        continue;
      }
      const waits = p.waits.filter((w) => now - w.endsAt < STALE_WAIT_MS);
      if (waits.length !== p.waits.length) {
        this.set({ ...p, waits });
        changed = true;
      }
    }
    return changed;
  }

  private touch(requestId: string, now: number): Progress {
    const known = this.byId.get(requestId);
    if (known) return known;
    const p: Progress = { requestId, seq: this.seq, seenAt: now, waits: [], failed: [], committed: null };
    this.byId.set(requestId, p);
    while (this.byId.size > MAX_REQUESTS) {
      const oldest = this.byId.keys().next().value;
      if (oldest === undefined) break;
      this.byId.delete(oldest);
    }
    return p;
  }

  private set(p: Progress): void {
    this.byId.set(p.requestId, p);
  }
}
