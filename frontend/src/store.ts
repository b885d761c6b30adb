// LiveStore keeps what the live event stream says: the latest status (with
// when it arrived, for local countdowns), the connection state, a short
// activity feed, the requests in flight (inflight.ts), the last breaker
// change of each candidate and the last few finished requests.

import { describeEvent, type ActivityItem } from './activity';
import type { Client, ConnState, Subscription } from './api';
import { InFlight } from './inflight';
import type { BreakerChange, GPUStatus, LiveEvent, RequestRecord, Status, StatusDelta } from './types';

const FEED_MAX = 60;
const RECENT_MAX = 50;
/** How far back a GPU's memory history goes, and how often it takes a point. */
export const GPU_HISTORY_MS = 60 * 60_000;
export const GPU_POINT_MS = 5_000;

/** One reading of a GPU's memory. */
export interface MemoryPoint {
  at: number;
  used: number;
  total: number;
}

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
  /** Each GPU's memory use over the last hour (GPU_HISTORY_MS) this page saw, oldest first, by index. */
  gpuMemory = new Map<number, MemoryPoint[]>();

  private listeners = new Set<() => void>();
  private doneListeners = new Set<Listener<RequestRecord>>();
  private recent = new Map<string, RequestRecord>();
  private seq = 0;
  private sub: Subscription | null = null;

  constructor(private readonly client: Client) {}

  start(): void {
    if (this.sub) return;
    // The feed starts from the recent history; live events go above it.
    Promise.resolve()
      .then(() => this.client.requests({ limit: 20 }))
      .then(
      (rs) => this.seedFeed(rs),
      () => {}, // the feed says "quiet so far" until something happens
    );
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

  /**
   * seedFeed fills the activity feed with requests from the history,
   * newest first, below what the live events already told: the feed is
   * not empty on every load.
   */
  seedFeed(records: RequestRecord[]): void {
    const told = new Set(this.feed.map((i) => i.requestId));
    const older: ActivityItem[] = [];
    for (const r of records) {
      if (told.has(r.id)) continue;
      const at = Date.parse(r.started_at) + r.latency_ms;
      const item = describeEvent({ type: 'request_done', data: { request_id: r.id, request: r } }, ++this.seq, Number.isNaN(at) ? 0 : at);
      if (item) older.push(item);
    }
    if (older.length === 0) return;
    this.feed = [...this.feed, ...older].slice(0, FEED_MAX);
    this.notify();
  }

  /** recordGPU adds a point to each GPU's memory history, at most one per GPU_POINT_MS, and forgets points older than GPU_HISTORY_MS. */
  private recordGPU(g: GPUStatus | undefined, now: number): void {
    if (!g?.available) return;
    const next = new Map(this.gpuMemory);
    for (const d of g.devices ?? []) {
      const pts = next.get(d.index) ?? [];
      const last = pts.at(-1);
      if (last && now - last.at < GPU_POINT_MS) continue;
      next.set(d.index, [...pts.filter((p) => now - p.at <= GPU_HISTORY_MS), { at: now, used: d.memory_used_bytes, total: d.memory_total_bytes }]);
    }
    this.gpuMemory = next;
  }

  /** apply folds one event into the store. Exported behaviour for tests and the mock. */
  apply(e: LiveEvent, now: number): void {
    this.inflight.apply(e, now);
    if (e.type === 'status_delta') {
      if (this.status) {
        this.status = applyStatusDelta(this.status, e.data);
        this.statusAt = now;
        this.recordGPU(this.status.gpu, now);
      }
      this.notify();
      return;
    }
    if (e.type === 'status' || e.type === 'gpu') this.recordGPU(e.data.gpu, now);
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

/**
 * applyStatusDelta is the status after a status_delta event: the rest of
 * the fields when they changed, the candidates that changed replaced by id,
 * those removed dropped, and the new order when it changed (an empty
 * order: unchanged).
 */
export function applyStatusDelta(st: Status, d: StatusDelta): Status {
  const byId = new Map(st.candidates.map((c) => [c.id, c]));
  for (const c of d.candidates) byId.set(c.id, c);
  for (const id of d.removed) byId.delete(id);
  const order = d.order.length > 0 ? d.order : st.candidates.map((c) => c.id);
  const candidates = order.flatMap((id) => {
    const c = byId.get(id);
    return c ? [c] : [];
  });
  return { ...(d.rest ?? st), candidates };
}
