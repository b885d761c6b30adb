import { describe, expect, it } from 'vitest';
import { describeEvent } from './activity';
import { failoverSummary, firstTokenTime, rawErrors } from './chat/failover';
import { modelOptions } from './chat/models';
import { failoverColumns, ttftColumns } from './history/chartData';
import { NO_FILTERS, matches, mergeInOrder, toQuery } from './history/filters';
import { listenWords } from './listen';
import { parseRoute, routeHash } from './route';
import type { Attempt, CandidateStatus, RequestRecord, Status } from './types';

function att(p: Partial<Attempt>): Attempt {
  return {
    order: 0,
    candidate: 'a',
    outcome: 'success',
    fault: '',
    reason: '',
    error: '',
    http_status: 0,
    started_at: '',
    deadline_ms: 0,
    ttft_ms: 0,
    duration_ms: 0,
    cold: false,
    demoted: false,
    reading: null,
    ...p,
  };
}

function req(p: Partial<RequestRecord>): RequestRecord {
  return {
    id: 'r1',
    started_at: '2026-01-01T00:00:00Z',
    protocol: 'ui',
    stream: true,
    thinking: false,
    requested_model: 'auto',
    served_candidate: 'llama3-vllm',
    served_model: 'llama3',
    is_fallback: false,
    status: 'ok',
    http_status: 200,
    error: '',
    failure: '',
    ttft_ms: 0,
    latency_ms: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    attempts: [],
    ...p,
  };
}

function cand(id: string, p: Partial<CandidateStatus> = {}): CandidateStatus {
  return {
    id,
    provider: 'ollama',
    url: '',
    model: id,
    priority: 1,
    enabled: true,
    supports_thinking: true,
    embeds: false,
    embed_only: false,
    breaker: { state: 'closed', failures: 0, remaining_ms: 0, probing: false, since: '' },
    busy_ms: 0,
    loading: false,
    config_error: '',
    auth_error: '',
    unreachable: '',
    unreachable_since: null,
    gpus: [],
    all_gpus: false,
    server_queue: null,
    busy_with_others: '',
    busy_since: null,
    in_flight: 0,
    slots: 0,
    deadline_ms: 60000,
    cold: false,
    ttft: { n: 0, p50_ms: 0, p95_ms: 0, p99_ms: 0 },
    demoted: false,
    pressure: null,
    kept_out: null,
    ...p,
  };
}

describe('failoverSummary', () => {
  it('reads like the spec example', () => {
    const r = req({
      is_fallback: true,
      attempts: [
        att({ order: 1, candidate: 'llama3-vllm', outcome: 'success' }),
        att({ order: 0, candidate: 'qwen3-8b', outcome: 'timeout', error: 'no first token in 2.1s' }),
      ],
    });
    expect(failoverSummary(r)).toBe('qwen3-8b: no first token in 2.1s → served by llama3-vllm');
  });

  it('falls back to the outcome when an attempt has no error text, and joins several', () => {
    const r = req({
      attempts: [
        att({ order: 0, candidate: 'a', outcome: 'skipped_open' }),
        att({ order: 1, candidate: 'b', outcome: 'error', error: 'connection refused' }),
        att({ order: 2, candidate: 'c', outcome: 'success' }),
      ],
      served_candidate: 'c',
    });
    expect(failoverSummary(r)).toBe('a: skipped (breaker open); b: connection refused → served by c');
  });

  it('leaves out candidates recorded after the one that served, but for those demoted ahead of it', () => {
    const r = req({
      is_fallback: true,
      attempts: [
        att({ order: 0, candidate: 'a', outcome: 'error', error: 'connection refused' }),
        att({ order: 1, candidate: 'b', outcome: 'success' }),
        att({ order: 2, candidate: 'c', outcome: 'skipped_open' }),
        att({ order: 3, candidate: 'd', outcome: 'demoted', error: 'GPU 0 had 0.6 GiB free (below 1 GiB)' }),
      ],
      served_candidate: 'b',
    });
    expect(failoverSummary(r)).toBe('a: connection refused; d: GPU 0 had 0.6 GiB free (below 1 GiB) → served by b');
  });

  it("leads with the server's plain reason, and keeps the raw errors apart", () => {
    const r = req({
      is_fallback: true,
      attempts: [
        att({ order: 0, candidate: 'llama3.2-3b', outcome: 'success' }),
        att({
          order: 1, candidate: 'qwen3-8b', outcome: 'demoted', error: 'GPU 0 had 0.6 GiB free (below 1 GiB) (simulated)',
          reason: 'qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried last',
        }),
      ],
      served_candidate: 'llama3.2-3b',
    });
    expect(failoverSummary(r)).toBe('qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried last → served by llama3.2-3b');
    expect(rawErrors(r)).toEqual(['qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB) (simulated)']);
  });

  it('firstTokenTime names both measurements and says when failover is inside', () => {
    expect(firstTokenTime(null, null)).toBeNull();
    expect(firstTokenTime(420, null)).toEqual({
      text: 'time to first token 420 ms',
      title: 'Time to first token: 420 ms from Send to the first token, measured in this browser.',
    });
    const direct = firstTokenTime(420, req({ ttft_ms: 398 }))!;
    expect(direct.text).toBe('time to first token 420 ms (398 ms at Switchyard)');
    expect(direct.text).not.toMatch(/router/);
    expect(direct.title).toContain('Switchyard measured 398 ms from receiving the request to the first token of llama3-vllm.');
    expect(direct.title).toContain('The other 22 ms is the trip between this browser and Switchyard.');
    const failover = firstTokenTime(700, req({ ttft_ms: 251, is_fallback: true }))!;
    expect(failover.text).toBe('time to first token 700 ms (251 ms at Switchyard, includes failover)');
    expect(failover.title).toContain('the time spent on the candidates that failed before it');
    expect(firstTokenTime(null, req({ ttft_ms: 2100 }))!.text).toBe('time to first token 2.1 s');
  });

  it("firstTokenTime splits Switchyard's time into the model's own and what came before it", () => {
    const served = att({ order: 1, candidate: 'llama3-vllm', outcome: 'success', ttft_ms: 153 });
    const stalled = att({ order: 0, candidate: 'qwen3-8b', outcome: 'timeout', error: 'no first token in 8s' });
    const fo = firstTokenTime(8210, req({ ttft_ms: 8155, is_fallback: true, attempts: [stalled, served] }))!;
    expect(fo.text).toBe('time to first token 8.2 s (model 153 ms, failover 8.0 s)');
    expect(fo.title).toContain("Of that, 153 ms was the model’s own time (from being asked to its first token) and 8.0 s came before it was asked: the candidates that failed first");
    const direct = firstTokenTime(300, req({ ttft_ms: 251, attempts: [att({ candidate: 'llama3-vllm', ttft_ms: 248 })] }))!;
    expect(direct.text).toBe('time to first token 300 ms (model 248 ms)');
    expect(direct.title).toContain('3 ms came before it was asked: Switchyard’s routing.');
    expect(direct.title).toContain('The other 49 ms is the trip between this browser and Switchyard.');
  });
});

describe('chart columns', () => {
  it('aligns TTFT points per candidate on a shared x axis', () => {
    const c = ttftColumns([
      { at: '2026-01-01T00:01:00Z', candidate: 'b', p50_ms: 300, p95_ms: 500, n: 2 },
      { at: '2026-01-01T00:00:00Z', candidate: 'a', p50_ms: 100, p95_ms: 150, n: 4 },
      { at: '2026-01-01T00:01:00Z', candidate: 'a', p50_ms: 110, p95_ms: 170, n: 1 },
      { at: '2026-01-01T00:02:00Z', candidate: 'a', p50_ms: 0, p95_ms: 0, n: 0 },
    ]);
    const t0 = Date.parse('2026-01-01T00:00:00Z') / 1000;
    expect(c.xs).toEqual([t0, t0 + 60, t0 + 120]);
    expect(c.candidates).toEqual(['a', 'b']);
    expect(c.p50).toEqual([
      [100, 110, null],
      [null, 300, null],
    ]);
    expect(c.p95[1]).toEqual([null, 500, null]);
  });

  it('turns failover counts into percentages, null in empty buckets', () => {
    const f = failoverColumns([
      { at: '2026-01-01T00:01:00Z', requests: 0, fallbacks: 0, errors: 0 },
      { at: '2026-01-01T00:00:00Z', requests: 10, fallbacks: 2, errors: 1 },
    ]);
    expect(f.fallbackPct).toEqual([20, null]);
    expect(f.errorPct).toEqual([10, null]);
    expect(f.requests).toEqual([10, 0]);
  });
});

describe('history filters', () => {
  it('builds the query', () => {
    const now = Date.parse('2026-01-01T01:00:00Z');
    expect(toQuery(NO_FILTERS, now)).toEqual({ limit: 50 });
    expect(toQuery({ served: 'a', fallback: 'no', status: 'error', range: '1h' }, now, 'r5')).toEqual({
      limit: 50,
      served: 'a',
      fallback: false,
      status: 'error',
      since: '2026-01-01T00:00:00.000Z',
      before: 'r5',
    });
  });

  it('matches live requests against the filters and merges them on top', () => {
    const r = req({ id: 'r2', is_fallback: true, served_candidate: 'b' });
    expect(matches(r, NO_FILTERS)).toBe(true);
    expect(matches(r, { ...NO_FILTERS, fallback: 'no' })).toBe(false);
    expect(matches(r, { ...NO_FILTERS, served: 'a' })).toBe(false);
    expect(matches(r, { ...NO_FILTERS, status: 'ok', fallback: 'yes', served: 'b' })).toBe(true);
    const rows = mergeInOrder([req({ id: 'r1' }), req({ id: 'r2', status: 'error' })], r);
    expect(rows.map((x) => [x.id, x.status])).toEqual([
      ['r2', 'ok'],
      ['r1', 'ok'],
    ]);
  });

  it('puts a request that ends after later ones below them, newest start first', () => {
    const at = (id: string, t: string) => req({ id, started_at: `2026-01-01T00:00:${t}Z` });
    const rows = [at('r3', '09.5'), at('r2', '09.5'), at('r1', '05')];
    // r0 started first and ended last (a long answer); r4 started before r3 and r2.
    expect(mergeInOrder(rows, at('r0', '04.999')).map((x) => x.id)).toEqual(['r3', 'r2', 'r1', 'r0']);
    expect(mergeInOrder(rows, at('r4', '09')).map((x) => x.id)).toEqual(['r3', 'r2', 'r4', 'r1']);
    // The same start: by id, as the server breaks ties.
    expect(mergeInOrder(rows, at('r25', '09.5')).map((x) => x.id)).toEqual(['r3', 'r25', 'r2', 'r1']);
    expect(mergeInOrder(rows, at('r9', '10')).map((x) => x.id)).toEqual(['r9', 'r3', 'r2', 'r1']);
  });
});

describe('activity feed', () => {
  it('describes breaker changes, failures and finished requests; skips status', () => {
    expect(describeEvent({ type: 'status', data: {} as Status }, 1, 0)).toBeNull();
    expect(
      describeEvent({ type: 'breaker', data: { breaker: { candidate: 'a', from: 'closed', to: 'open', at: '', cause: '2 failures' } } }, 1, 0),
    ).toMatchObject({ tone: 'bad', text: 'a: healthy → tripped (2 failures)', title: expect.stringContaining('Tripped (circuit breaker open) after repeated failures') });
    expect(
      describeEvent({ type: 'breaker', data: { breaker: { candidate: 'a', from: 'open', to: 'half_open', at: '', cause: 'cool-down over' } } }, 1, 0),
    ).toMatchObject({ tone: 'warn', text: 'a: tripped → trying again (cool-down over)', title: 'a’s circuit breaker: Trying again (circuit breaker half-open): the cool-down is over and the next request is a single trial.' });
    expect(
      describeEvent({ type: 'attempt', data: { request_id: 'r', attempt: att({ candidate: 'a', outcome: 'timeout', error: 'no first token in 2s' }) } }, 2, 0),
    ).toMatchObject({ tone: 'bad', text: 'a timeout: no first token in 2s', requestId: 'r' });
    expect(describeEvent({ type: 'attempt', data: { request_id: 'r', attempt: att({}) } }, 3, 0)).toBeNull();
    expect(
      describeEvent({ type: 'request_done', data: { request_id: 'abcdefghij', request: req({ id: 'abcdefghij', is_fallback: true, latency_ms: 2100 }) } }, 4, 0),
    ).toMatchObject({ tone: 'warn', text: 'request …efghij ok by llama3-vllm after failover in 2.1 s' });
  });
});

describe('listenWords', () => {
  it('says where the API is and, when the address wanted was taken, why not there', () => {
    expect(listenWords({ listen: '127.0.0.1:8484', listen_taken: '' })).toEqual({ address: '127.0.0.1:8484', taken: '', why: '' });
    expect(listenWords({ listen: '127.0.0.1:39421', listen_taken: '127.0.0.1:8484' }).why).toBe(
      '127.0.0.1:8484 was in use (another Switchyard?), so the API is on 127.0.0.1:39421.',
    );
  });
});

describe('modelOptions', () => {
  it('lists auto, enabled chat candidates with their state, then extra served ids', () => {
    const status = {
      default_model: 'a',
      deep_thinking_model: 'b',
      candidates: [
        cand('a'),
        cand('b', { breaker: { state: 'open', failures: 2, remaining_ms: 1, probing: false, since: '' } }),
        cand('c', { enabled: false }),
        cand('d', { supports_thinking: false }),
        cand('e', { embeds: true, embed_only: true }),
      ],
    } as unknown as Status;
    expect(modelOptions(status, ['auto', 'a', 'e', 'alias'], false).map((o) => o.label)).toEqual([
      'auto — a first, then fallbacks',
      'a',
      'b (tripped)',
      'd',
      'alias',
    ]);
    expect(modelOptions(status, [], true).map((o) => o.label)).toEqual([
      'auto — b first, then fallbacks',
      'a',
      'b (tripped)',
      'd (no thinking)',
    ]);
    const b = modelOptions(status, [], false).find((o) => o.id === 'b')!;
    expect(b.title).toBe('Tripped (circuit breaker open) after repeated failures: skipped until the cool-down ends.');
    expect(modelOptions(status, [], false).find((o) => o.id === 'a')!.title).toBeUndefined();
  });
});

describe('routes', () => {
  it('round-trips', () => {
    expect(parseRoute('')).toEqual({ screen: 'chat', arg: null });
    expect(parseRoute('#/history/01jd%2Fx')).toEqual({ screen: 'history', arg: '01jd/x' });
    expect(parseRoute('#/nope')).toEqual({ screen: 'chat', arg: null });
    expect(routeHash({ screen: 'history', arg: 'a b' })).toBe('#/history/a%20b');
  });
});

import { validLanguage } from './locale';

describe('validLanguage', () => {
  it('rejects the POSIX locale names WebKitGTK reports under LANG=C', () => {
    expect(validLanguage('C')).toBe(false);
    expect(validLanguage('')).toBe(false);
    expect(validLanguage(undefined)).toBe(false);
  });
  it('accepts real language tags', () => {
    expect(validLanguage('en-US')).toBe(true);
    expect(validLanguage('de')).toBe(true);
  });
});
