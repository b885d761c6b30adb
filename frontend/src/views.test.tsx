// @vitest-environment happy-dom
// The screens' components rendered into a DOM (happy-dom): what they show,
// and that every fetch they start is aborted when they go away.

import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Client } from './api';
import { Answer } from './chat/Answer';
import type { AnswerTurn } from './chat/session';
import { FaultPanel } from './demo/FaultPanel';
import { CandidateCard } from './fleet/CandidateCard';
import { HistoryScreen } from './history/HistoryScreen';
import { LiveStore } from './store';
import type { Attempt, CandidateStatus, DemoState, RequestRecord } from './types';

let root: HTMLElement;
beforeEach(() => {
  root = document.createElement('div');
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
  vi.useRealTimers();
});

const show = (el: preact.ComponentChild) => act(() => render(el, root));
const unmount = () => act(() => render(null, root));
/** Lets pending promises settle and effects run. */
const settle = () => act(async () => {});

/** A call of a fake client method that the test answers by hand. */
interface Call<T> {
  args: unknown[];
  signal: AbortSignal | undefined;
  resolve(v: T): void;
}

function method<T>() {
  const calls: Call<T>[] = [];
  const fn = (...args: unknown[]) =>
    new Promise<T>((resolve) => {
      const last = args[args.length - 1];
      calls.push({ args, signal: last instanceof AbortSignal ? last : undefined, resolve });
    });
  return { fn, calls };
}

function att(p: Partial<Attempt>): Attempt {
  return {
    order: 0, candidate: 'a', outcome: 'error', fault: '', error: '', http_status: 0, started_at: '', deadline_ms: 0,
    ttft_ms: 0, duration_ms: 0, cold: false, demoted: false, reading: null, ...p,
  };
}

function rec(p: Partial<RequestRecord>): RequestRecord {
  return {
    id: 'r1', started_at: '2026-05-14T19:36:00Z', protocol: 'ui', stream: true, thinking: false,
    requested_model: 'auto', served_candidate: '', served_model: '', is_fallback: false, status: 'error',
    http_status: 503, error: '', failure: '', ttft_ms: 0, latency_ms: 10, prompt_tokens: 0, completion_tokens: 0, attempts: [], ...p,
  };
}

function turn(p: Partial<AnswerTurn>): AnswerTurn {
  return {
    kind: 'answer', key: 1, model: 'auto', thinking: false, phase: 'done', content: '', reasoning: '',
    route: null, startedAt: 0, ttftMs: null, thoughtMs: null, record: null, error: null, truncated: false, ...p,
  };
}

const count = (text: string, part: string) => text.split(part).length - 1;

describe('FaultPanel', () => {
  const state: DemoState = { servers: [{ candidate: 'qwen3-8b', provider: 'ollama', url: '', fault: 'healthy' }], faults: [
    { name: 'healthy', label: 'Healthy', description: 'Answers normally.', arg: '' },
    { name: 'refuse', label: 'Refuse connections', description: 'Nothing listens.', arg: '' },
  ] };

  it('polls with a signal, one load at a time, and aborts the load in flight on unmount', async () => {
    vi.useFakeTimers();
    const demo = method<DemoState>();
    const client = { demo: demo.fn, setFault: vi.fn() } as unknown as Client;
    await show(<FaultPanel client={client} status={null} />);
    expect(demo.calls).toHaveLength(1);
    expect(demo.calls[0]!.signal).toBeInstanceOf(AbortSignal);
    await act(async () => demo.calls[0]!.resolve(state));
    expect(root.textContent).toContain('qwen3-8b');

    await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
    expect(demo.calls).toHaveLength(2);
    // The poll is still out when the panel goes: it is aborted, and no other follows.
    await unmount();
    expect(demo.calls[1]!.signal!.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(20000);
    expect(demo.calls).toHaveLength(2);
  });

  it('a fault applied aborts the poll on its way, so old faults do not come back', async () => {
    vi.useFakeTimers();
    const demo = method<DemoState>();
    const setFault = method<DemoState['servers'][number]>();
    const client = { demo: demo.fn, setFault: setFault.fn } as unknown as Client;
    await show(<FaultPanel client={client} status={null} />);
    await act(async () => demo.calls[0]!.resolve(state));
    await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
    expect(demo.calls).toHaveLength(2);
    (root.querySelector('[data-testid=fault-apply-qwen3-8b]') as HTMLButtonElement).click();
    await settle();
    expect(setFault.calls[0]!.signal).toBeInstanceOf(AbortSignal);
    await act(async () => setFault.calls[0]!.resolve({ ...state.servers[0]!, fault: 'healthy' }));
    await settle();
    expect(demo.calls[1]!.signal!.aborted).toBe(true);
    expect(demo.calls).toHaveLength(3);
    expect(root.textContent).toContain('done');
  });
});

describe('HistoryScreen', () => {
  function fakeClient() {
    const requests = method<RequestRecord[]>();
    const request = method<RequestRecord>();
    const stats = method<unknown>();
    const client = { requests: requests.fn, request: request.fn, stats: stats.fn } as unknown as Client;
    return { client, requests, request, stats };
  }

  it('aborts the page, the open request and the stats it fetches when it goes away', async () => {
    const f = fakeClient();
    const live = new LiveStore(f.client);
    await show(<HistoryScreen client={f.client} live={live} selected="gone" onSelect={() => {}} />);
    await settle();
    expect(f.requests.calls).toHaveLength(1);
    expect(f.request.calls).toHaveLength(1);
    const signals = [f.requests.calls[0]!.signal, f.request.calls[0]!.signal, f.stats.calls[0]!.signal];
    for (const s of signals) expect(s).toBeInstanceOf(AbortSignal);
    await unmount();
    for (const s of signals) expect(s!.aborted).toBe(true);
  });

  it('a change of filters aborts the older page on its way', async () => {
    const f = fakeClient();
    const live = new LiveStore(f.client);
    await show(<HistoryScreen client={f.client} live={live} selected={null} onSelect={() => {}} />);
    await settle();
    const page = Array.from({ length: 50 }, (_, i) => rec({ id: `r${i}`, status: 'ok' }));
    await act(async () => f.requests.calls[0]!.resolve(page));
    await settle();
    (root.querySelector('.load-more') as HTMLButtonElement).click();
    await settle();
    expect(f.requests.calls).toHaveLength(2);
    const older = f.requests.calls[1]!;
    expect(older.args[0]).toMatchObject({ before: 'r49' });
    const status = root.querySelector('[data-testid=filter-status]') as HTMLSelectElement;
    status.value = 'error';
    await act(() => {
      status.dispatchEvent(new Event('change', { bubbles: true }));
    });
    await settle();
    expect(older.signal!.aborted).toBe(true);
    expect(f.requests.calls[0]!.signal!.aborted).toBe(false);
  });
});

describe('Answer', () => {
  const attempts = ['qwen3-8b', 'llama3.2-3b', 'qwen3-32b-vllm'].map((c, i) =>
    att({ order: i, candidate: c, error: `upstream HTTP 500: ${c}: simulated HTTP 500`, http_status: 500 }),
  );
  const message = `all candidates failed: ${attempts.map((a) => `${a.candidate}: ${a.error}`).join('; ')}`;

  it('says once why every candidate failed, one line each', async () => {
    await show(<Answer turn={turn({ phase: 'failed', error: message, record: rec({ attempts }) })} />);
    const box = root.querySelector('[data-testid=answer-error]')!;
    const text = box.textContent ?? '';
    for (const a of attempts) expect(count(text, a.error)).toBe(1);
    expect(text).not.toContain('all candidates failed:');
    const lines = [...box.querySelectorAll('li')].map((li) => li.textContent);
    expect(lines).toEqual(attempts.map((a) => `${a.candidate} ${a.error}`));
  });

  it("shows the server's message until the record is there", async () => {
    await show(<Answer turn={turn({ phase: 'failed', error: message, record: null })} />);
    expect(count(root.textContent ?? '', 'simulated HTTP 500')).toBe(3);
  });

  it('names the time to first token and explains both measurements on hover', async () => {
    const record = rec({ status: 'ok', served_candidate: 'llama3.2-3b', is_fallback: true, ttft_ms: 251 });
    await show(<Answer turn={turn({ content: 'hi', ttftMs: 300, record })} />);
    const ttft = root.querySelector('[data-testid=ttft]') as HTMLElement;
    expect(ttft.textContent).toBe('time to first token 300 ms (251 ms in Switchyard, includes failover)');
    expect(ttft.textContent).not.toContain('router');
    expect(ttft.title).toContain('measured in this browser');
    expect(ttft.title).toContain('Switchyard measured 251 ms');
  });
});

describe('CandidateCard', () => {
  function cand(breaker: Partial<CandidateStatus['breaker']>): CandidateStatus {
    return {
      id: 'qwen3-8b', provider: 'ollama', url: 'http://127.0.0.1:1', model: 'qwen3:8b', priority: 1, enabled: true,
      supports_thinking: true, embeds: false, embed_only: false, busy_ms: 0, loading: false, config_error: '', in_flight: 0, slots: 0, deadline_ms: 60000, cold: false, ttft: { n: 0, p50_ms: 0, p95_ms: 0, p99_ms: 0 }, demoted: false, pressure: null,
      breaker: { state: 'closed', failures: 0, remaining_ms: 0, probing: false, since: '2026-05-14T19:36:00Z', ...breaker },
    };
  }
  const card = (c: CandidateStatus) => <CandidateCard c={c} receivedAt={0} now={0} isDefault={false} isDeep={false} />;

  it('an open breaker says since when, not a failure count it reset on opening', async () => {
    await show(card(cand({ state: 'open', failures: 0, remaining_ms: 12000 })));
    const text = root.textContent ?? '';
    expect(text).not.toMatch(/Failures in a row/i);
    expect(text).toContain('Open since');
    const fact = root.querySelector('[data-testid=breaker-fact-qwen3-8b]') as HTMLElement;
    expect(fact.title).toMatch(/tripped/);
    expect(root.querySelector('[data-testid=countdown-qwen3-8b]')!.textContent).toBe('12s');
  });

  it('a closed breaker counts failures in a row; each state has plain words on hover', async () => {
    await show(card(cand({ state: 'closed', failures: 1 })));
    expect(root.querySelector('[data-testid=breaker-fact-qwen3-8b]')!.textContent).toBe('Failures in a row1');
    const badge = () => root.querySelector('[data-testid=breaker-qwen3-8b]') as HTMLElement;
    expect(badge().title).toBe('Closed — healthy: requests go through.');
    await show(card(cand({ state: 'open', remaining_ms: 1000 })));
    expect(badge().title).toBe('Open — tripped after repeated failures: skipped until the cool-down ends.');
    await show(card(cand({ state: 'half_open' })));
    expect(badge().title).toBe('Half-open — cool-down over: the next request is a single trial.');
    expect(root.textContent).toContain('Half-open since');
  });
});
