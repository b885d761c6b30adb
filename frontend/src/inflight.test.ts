import { describe, expect, it } from 'vitest';
import type { Client, EventHandlers } from './api';
import { InFlight, MAX_REQUESTS, STALE_WAIT_MS } from './inflight';
import type { Attempt, LiveEvent, Status } from './types';

function att(p: Partial<Attempt>): Attempt {
  return {
    order: 0, candidate: 'a', outcome: 'error', fault: 'server', reason: '', error: '', http_status: 0, started_at: '',
    deadline_ms: 8000, ttft_ms: 0, duration_ms: 0, cold: false, demoted: false, reading: null, ...p,
  };
}

const started = (request_id: string): LiveEvent => ({ type: 'request_started', data: { request_id } });
const waitOn = (request_id: string, candidate: string, order: number, deadline_ms = 8000): LiveEvent => ({
  type: 'attempt_started',
  data: { request_id, candidate, order, started_at: '2026-05-14T19:36:00Z', deadline_ms, cold: false },
});
const ended = (request_id: string, a: Partial<Attempt>): LiveEvent => ({ type: 'attempt', data: { request_id, attempt: att(a) } });
const commit = (request_id: string, candidate: string, order: number): LiveEvent => ({
  type: 'commit',
  data: { request_id, attempt: att({ candidate, order, outcome: 'success', fault: '' }) },
});
const status: LiveEvent = { type: 'status', data: {} as Status };

describe('InFlight', () => {
  it('follows a stall: the wait, its deadline, the next candidate, the commit', () => {
    const f = new InFlight();
    f.apply(started('r1'), 1000);
    f.apply(waitOn('r1', 'qwen3-8b', 0), 1010);
    expect(f.get('r1')!.waits).toEqual([
      { requestId: 'r1', candidate: 'qwen3-8b', order: 0, cold: false, deadlineMs: 8000, endsAt: 9010 },
    ]);
    expect(f.waitsOn('qwen3-8b')).toHaveLength(1);
    expect(f.waiting()).toBe(true);

    // The deadline passes: the attempt ends, the next candidate's wait starts.
    f.apply(ended('r1', { candidate: 'qwen3-8b', order: 0, outcome: 'timeout', error: 'no first token in 8s' }), 9012);
    f.apply(waitOn('r1', 'llama3.2-3b', 1), 9013);
    const p = f.get('r1')!;
    expect(p.waits.map((w) => [w.candidate, w.endsAt])).toEqual([['llama3.2-3b', 17013]]);
    expect(p.failed.map((a) => a.error)).toEqual(['no first token in 8s']);
    expect(f.waitsOn('qwen3-8b')).toEqual([]);

    // The commit ends every wait; the successful attempt after it is no failure.
    f.apply(commit('r1', 'llama3.2-3b', 1), 9200);
    f.apply(ended('r1', { candidate: 'llama3.2-3b', order: 1, outcome: 'success', fault: '' }), 9800);
    expect(f.get('r1')!.waits).toEqual([]);
    expect(f.get('r1')!.committed).toBe('llama3.2-3b');
    expect(f.get('r1')!.failed).toHaveLength(1);
    expect(f.waiting()).toBe(false);

    f.apply({ type: 'request_done', data: { request_id: 'r1', request: {} as never } }, 9900);
    expect(f.get('r1')).toBeUndefined();
  });

  it('replaces the object it changes, so views that compare by identity see it', () => {
    const f = new InFlight();
    f.apply(started('r1'), 0);
    const before = f.get('r1');
    f.apply(waitOn('r1', 'a', 0), 1);
    expect(f.get('r1')).not.toBe(before);
    const after = f.get('r1');
    expect(f.apply(ended('r9', { order: 0 }), 2)).toBe(false);
    expect(f.get('r1')).toBe(after);
  });

  it('keeps hedged waits side by side and lists waits on a candidate soonest first', () => {
    const f = new InFlight();
    f.apply(waitOn('r1', 'a', 0, 8000), 0);
    f.apply(waitOn('r1', 'b', 1, 8000), 100);
    f.apply(waitOn('r2', 'a', 0, 2000), 200);
    expect(f.get('r1')!.waits.map((w) => w.candidate)).toEqual(['a', 'b']);
    expect(f.waitsOn('a').map((w) => w.requestId)).toEqual(['r2', 'r1']);
    f.apply(ended('r1', { candidate: 'b', order: 1, outcome: 'hedge_lost', fault: '' }), 300);
    expect(f.get('r1')!.waits.map((w) => w.candidate)).toEqual(['a']);
    expect(f.get('r1')!.failed).toEqual([]);
  });

  it('finds the first request seen after a mark', () => {
    const f = new InFlight();
    f.apply(started('other'), 0);
    const m = f.mark();
    expect(f.startedAfter(m)).toBeUndefined();
    f.apply(status, 1);
    f.apply(started('mine'), 2);
    f.apply(started('later'), 3);
    expect(f.startedAfter(m)!.requestId).toBe('mine');
    // An attempt_started whose request_started was missed counts too.
    const m2 = f.mark();
    f.apply(waitOn('r3', 'a', 0), 4);
    expect(f.startedAfter(m2)!.requestId).toBe('r3');
  });

  it('drops waits long past their deadline and forgets all on clear', () => {
    const f = new InFlight();
    f.apply(waitOn('r1', 'a', 0, 1000), 0);
    expect(f.apply(status, 1000 + STALE_WAIT_MS - 1)).toBe(false);
    expect(f.get('r1')!.waits).toHaveLength(1);
    expect(f.apply(status, 1000 + STALE_WAIT_MS)).toBe(true);
    expect(f.get('r1')!.waits).toEqual([]);
    expect(f.clear()).toBe(true);
    expect(f.get('r1')).toBeUndefined();
  });

  it('remembers at most MAX_REQUESTS, dropping the oldest', () => {
    const f = new InFlight();
    for (let i = 0; i <= MAX_REQUESTS; i++) f.apply(started(`r${i}`), i);
    expect(f.get('r0')).toBeUndefined();
    expect(f.get(`r${MAX_REQUESTS}`)).toBeDefined();
  });
});

describe('LiveStore', () => {
  it('tracks waits and breaker causes, and forgets the waits when the link drops', async () => {
    const { LiveStore } = await import('./store');
    let handlers: EventHandlers | null = null;
    const client = { events: (h: EventHandlers) => ((handlers = h), { close() {}, retryNow() {} }) } as unknown as Client;
    const live = new LiveStore(client);
    live.start();
    handlers!.onEvent(waitOn('r1', 'qwen3-8b', 0));
    handlers!.onEvent({ type: 'breaker', data: { breaker: { candidate: 'b', from: 'closed', to: 'open', at: '', cause: 'HTTP 500' } } });
    expect(live.inflight.waitsOn('qwen3-8b')).toHaveLength(1);
    expect(live.breakerChanges.get('b')!.cause).toBe('HTTP 500');
    handlers!.onState({ kind: 'reconnecting', retryAt: 0, attempt: 1, reason: 'gone' });
    expect(live.inflight.waiting()).toBe(false);
    expect(live.conn.kind).toBe('reconnecting');
  });
});
