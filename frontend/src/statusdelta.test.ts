import { describe, expect, it } from 'vitest';
import type { Client } from './api';
import { LiveStore, applyStatusDelta } from './store';
import type { CandidateStatus, Status } from './types';

const cand = (id: string, inFlight = 0) => ({ id, in_flight: inFlight }) as unknown as CandidateStatus;
const status = (...ids: string[]) => ({ version: 'v', default_model: 'a', candidates: ids.map((id) => cand(id)) }) as unknown as Status;

describe('status_delta', () => {
  it('replaces the candidates that changed, drops the removed, follows a new order, keeps the rest', () => {
    const st = status('a', 'b', 'c');
    const next = applyStatusDelta(st, { rest: null, candidates: [cand('b', 2)], removed: [], order: [] });
    expect(next.candidates.map((c) => [c.id, c.in_flight])).toEqual([['a', 0], ['b', 2], ['c', 0]]);
    expect(next.version).toBe('v');
    const moved = applyStatusDelta(next, {
      rest: { ...st, default_model: 'c', candidates: null } as unknown as Status,
      candidates: [cand('d')], removed: ['a'], order: ['d', 'c', 'b'],
    });
    expect(moved.candidates.map((c) => c.id)).toEqual(['d', 'c', 'b']);
    expect(moved.default_model).toBe('c');
    expect(moved.candidates[2]!.in_flight).toBe(2);
  });

  it('the live store folds a delta into the status it holds, and ignores one before any status', () => {
    const live = new LiveStore({} as Client);
    live.apply({ type: 'status_delta', data: { rest: null, candidates: [cand('a', 1)], removed: [], order: [] } }, 0);
    expect(live.status).toBeNull();
    live.apply({ type: 'status', data: status('a', 'b') }, 1);
    live.apply({ type: 'status_delta', data: { rest: null, candidates: [cand('a', 1)], removed: [], order: [] } }, 2);
    expect(live.status!.candidates.map((c) => c.in_flight)).toEqual([1, 0]);
    expect(live.statusAt).toBe(2);
  });
});
