// LiveStore keeps what the live event stream says: the latest status (with
// when it arrived, for local countdowns), the connection state, a short
// activity feed, the requests in flight (inflight.ts), the last breaker
// change of each candidate and the last few finished requests.

import { describeEvent, type ActivityItem } from './activity';
import type { Client, ConnState, Subscription } from './api';
import { InFlight } from './inflight';
import type { BreakerChange, LiveEvent, RequestRecord, Status } from './types';

const FEED_MAX = 60;
const RECENT_MAX = 50;

type Listener<T> = (v: T) => void;

export class LiveStore {
  status: Status | null = null;
  /** Date.now() when status arrived; remaining_ms values count down from here. */
  statusAt = 0;
  conn: ConnState = { kind: 'connecting' };
  feed: ActivityItem[] = [];
  /** Bumped on each `config` event so the Settings screen refetches. */
  configVersion = 0;
  /** The requests in flight: first-token waits and the attempts failed so far. */
  readonly inflight = new InFlight();
  /** The last breaker change seen of each candidate, with its cause; only those since the page opened. */
  breakerChanges = new Map<string, BreakerChange>();

  private listeners = new Set<() => void>();
  private doneListeners = new Set<Listener<RequestRecord>>();
  private recent = new Map<string, RequestRecord>();
  private seq = 0;
  private sub: Subscription | null = null;

  constructor(private readonly client: Client) {}

  start(): void {
    if (this.sub) return;
    this.sub = this.client.events({
      onEvent: (e) => this.apply(e, Date.now()),
      onState: (s) => {
        this.conn = s;
        // Events may have been lost while the link was down: waits could
        // count down for attempts long over.
        if (s.kind !== 'open') this.inflight.clear();
        this.notify();
      },
    });
  }

  stop(): void {
    this.sub?.close();
    this.sub = null;
  }

  retryNow(): void {
    this.sub?.retryNow();
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** onRequestDone calls fn with every finished request; returns the unregister func. */
  onRequestDone(fn: Listener<RequestRecord>): () => void {
    this.doneListeners.add(fn);
    return () => this.doneListeners.delete(fn);
  }

  /** recentRequest is a request finished since the UI opened, if still remembered. */
  recentRequest(id: string): RequestRecord | undefined {
    return this.recent.get(id);
  }

  /** apply folds one event into the store. Exported behaviour for tests and the mock. */
  apply(e: LiveEvent, now: number): void {
    this.inflight.apply(e, now);
    if (e.type === 'status') {
      this.status = e.data;
      this.statusAt = now;
    } else {
      if (e.type === 'request_done') {
        const r = e.data.request;
        this.recent.set(r.id, r);
        if (this.recent.size > RECENT_MAX) {
          const first = this.recent.keys().next().value;
          if (first !== undefined) this.recent.delete(first);
        }
        for (const fn of this.doneListeners) fn(r);
      }
      if (e.type === 'config') this.configVersion++;
      if (e.type === 'breaker') {
        const b = e.data.breaker;
        this.breakerChanges = new Map(this.breakerChanges).set(b.candidate, b);
      }
      const item = describeEvent(e, ++this.seq, now);
      if (item) this.feed = [item, ...this.feed].slice(0, FEED_MAX);
    }
    this.notify();
  }

  private notify(): void {
    for (const fn of this.listeners) fn();
  }
}
