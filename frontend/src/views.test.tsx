// @vitest-environment happy-dom
// The screens' components rendered into a DOM (happy-dom): what they show,
// and that every fetch they start is aborted when they go away.

import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Client } from './api';
import { Answer } from './chat/Answer';
import { ChatScreen } from './chat/ChatScreen';
import { CHAT_KEY, ChatSession, type AnswerTurn, type TurnStore } from './chat/session';
import { FaultPanel } from './demo/FaultPanel';
import { CandidateCard } from './fleet/CandidateCard';
import { GpuPanel } from './fleet/GpuPanel';
import { HistoryScreen } from './history/HistoryScreen';
import { Timeline } from './history/Timeline';
import { SettingsScreen } from './settings/SettingsScreen';
import { LiveStore } from './store';
import type { Attempt, CandidateStatus, ConfigDoc, DemoState, GPUStatus, LiveEvent, RequestRecord, Status } from './types';

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
    order: 0, candidate: 'a', outcome: 'error', fault: '', reason: '', error: '', http_status: 0, started_at: '', deadline_ms: 0,
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
    route: null, startedAt: 0, liveMark: 0, ttftMs: null, thoughtMs: null, record: null, error: null, truncated: false, ...p,
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

  it('brings a request opened from a link into sight, once, when its row has come', async () => {
    const f = fakeClient();
    const live = new LiveStore(f.client);
    const scrolled: string[] = [];
    const had = Element.prototype.scrollIntoView;
    Element.prototype.scrollIntoView = function (this: Element) {
      scrolled.push(this.getAttribute('data-request-id') ?? this.className);
    };
    try {
      await show(<HistoryScreen client={f.client} live={live} selected="r30" onSelect={() => {}} />);
      await settle();
      expect(scrolled).toEqual([]);
      await act(async () => f.requests.calls[0]!.resolve(Array.from({ length: 50 }, (_, i) => rec({ id: `r${i}`, status: 'ok' }))));
      await settle();
      // The timeline under the row, then the row itself, as little as needed.
      expect(scrolled).toEqual(['detail-row', 'r30']);
      // A live update re-renders the list: the reader's scrolling is left alone.
      await act(() => live.apply({ type: 'request_done', data: { request_id: 'r99', request: rec({ id: 'r99', status: 'ok' }) } } as LiveEvent, 1));
      await settle();
      expect(root.querySelectorAll('[data-testid=history-row]')).toHaveLength(51);
      expect(scrolled).toHaveLength(2);
    } finally {
      Element.prototype.scrollIntoView = had;
    }
  });

  it('keeps the rows the reader paged in when live requests come', async () => {
    const f = fakeClient();
    const live = new LiveStore(f.client);
    await show(<HistoryScreen client={f.client} live={live} selected={null} onSelect={() => {}} />);
    await settle();
    const at = (i: number) => new Date(Date.UTC(2026, 0, 1) - i * 1000).toISOString();
    const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => rec({ id: `r${String(from + i).padStart(5, '0')}`, status: 'ok', started_at: at(from + i) }));
    await act(async () => f.requests.calls[0]!.resolve(rows(0, 50)));
    await settle();
    // Paged in to 600 rows.
    for (let k = 1; k < 12; k++) {
      (root.querySelector('.load-more') as HTMLButtonElement).click();
      await settle();
      await act(async () => f.requests.calls[k]!.resolve(rows(k * 50, 50)));
      await settle();
    }
    const shown = () => root.querySelectorAll('[data-testid=history-row]').length;
    expect(shown()).toBe(600);
    // Thirty new requests: the 600 stay 600, the oldest going as the new come.
    for (let i = 0; i < 30; i++) {
      const r = rec({ id: `n${i}`, status: 'ok', started_at: new Date(Date.UTC(2026, 0, 2) + i * 1000).toISOString() });
      await act(() => live.apply({ type: 'request_done', data: { request_id: r.id, request: r } } as LiveEvent, i));
    }
    await settle();
    expect(shown()).toBe(600);
    expect(root.querySelector('[data-testid=history-row]')!.getAttribute('data-request-id')).toBe('n29');
    expect(root.querySelector('.load-more')).not.toBeNull();
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
    expect(lines).toEqual(attempts.map((a) => `${a.candidate}: ${a.error}`));
  });

  it('leads a failover notice with the plain reason, GPU demotion included, and keeps the raw error inside', async () => {
    const served = att({ order: 0, candidate: 'llama3.2-3b', outcome: 'success', fault: '' });
    const demoted = att({
      order: 1, candidate: 'qwen3-8b', outcome: 'demoted', fault: '', demoted: true,
      error: 'GPU 0 had 0.6 GiB free (below 1 GiB) (simulated)', reason: 'qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried last',
    });
    const record = rec({ status: 'ok', served_candidate: 'llama3.2-3b', is_fallback: true, attempts: [served, demoted] });
    await show(<Answer turn={turn({ content: 'hi', record })} />);
    const notice = root.querySelector('[data-testid=failover-notice]') as HTMLDetailsElement;
    expect(notice.tagName).toBe('DETAILS');
    expect(notice.querySelector('summary')!.textContent).toBe('↪ qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried last → served by llama3.2-3b');
    expect(notice.querySelector('[data-testid=failover-raw]')!.textContent).toBe('qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB) (simulated)');
  });

  it("shows the server's message until the record is there", async () => {
    await show(<Answer turn={turn({ phase: 'failed', error: message, record: null })} />);
    expect(count(root.textContent ?? '', 'simulated HTTP 500')).toBe(3);
  });

  it('names the time to first token and explains both measurements on hover', async () => {
    const served = att({ order: 1, candidate: 'llama3.2-3b', outcome: 'success', fault: '', ttft_ms: 98 });
    const record = rec({ status: 'ok', served_candidate: 'llama3.2-3b', is_fallback: true, ttft_ms: 251, attempts: [attempts[0]!, served] });
    await show(<Answer turn={turn({ content: 'hi', ttftMs: 300, record })} />);
    const ttft = root.querySelector('[data-testid=ttft]') as HTMLElement;
    expect(ttft.textContent).toBe('time to first token 300 ms (model 98 ms, failover 153 ms)');
    expect(ttft.textContent).not.toContain('router');
    expect(ttft.title).toContain('measured in this browser');
    expect(ttft.title).toContain('Switchyard measured 251 ms');
    expect(ttft.title).toContain('98 ms was the model’s own time');
  });

  it('sets apart the candidates that cannot do this kind of request', async () => {
    const embed = att({ order: 3, candidate: 'qwen3-embedding-0.6b', fault: 'capability', error: 'skipped: the model does not support completion (it makes embeddings only)' });
    await show(<Answer turn={turn({ phase: 'failed', error: message, record: rec({ attempts: [...attempts, embed] }) })} />);
    const box = root.querySelector('[data-testid=answer-error]')!;
    expect(box.querySelector('strong')!.textContent).toBe('None of the 3 candidates could answer:');
    expect(box.querySelector('[data-testid=attempt-unfit]')!.textContent).toContain('qwen3-embedding-0.6b');
    expect(count(box.textContent ?? '', 'qwen3-embedding-0.6b')).toBe(1);
  });

  it('lists the attempts the live events told while the record is on its way', async () => {
    const progress = { requestId: 'r1', seq: 1, seenAt: 0, waits: [], failed: attempts, committed: null };
    await show(<Answer turn={turn({ phase: 'failed', error: message, record: null })} progress={progress} />);
    const box = root.querySelector('[data-testid=answer-error]')!;
    expect([...box.querySelectorAll('li')].map((li) => li.textContent)).toEqual(attempts.map((a) => `${a.candidate}: ${a.error}`));
    expect(box.textContent).not.toContain('all candidates failed:');
  });
});

describe('Timeline', () => {
  const attempts = ['qwen3-8b', 'llama3.2-3b'].map((c, i) =>
    att({ order: i, candidate: c, error: `upstream HTTP 503: simulated HTTP 503 (server ${c})`, http_status: 503, started_at: '2026-05-14T19:36:00Z', duration_ms: 2 }),
  );
  const error = `all candidates failed: ${attempts.map((a) => `${a.candidate}: ${a.error}`).join('; ')}`;

  it("says an all-candidates-failed error once: each reason on its attempt's row", async () => {
    await show(<Timeline r={rec({ error, failure: 'unavailable', attempts })} onClose={() => {}} />);
    const text = root.textContent ?? '';
    for (const a of attempts) expect(count(text, a.error)).toBe(1);
    expect(root.querySelector('[data-testid=timeline-error]')!.textContent).toBe('None of the 2 candidates could answer; each one’s reason is on its row.');
  });

  it('says a skipped attempt once, and lets the keyboard reach a cut-off error', async () => {
    const skipped = att({ order: 0, candidate: 'a', outcome: 'skipped_open', error: 'breaker open' });
    const long = att({ order: 1, candidate: 'b', error: 'upstream HTTP 500: ' + 'x'.repeat(300), started_at: '2026-05-14T19:36:00Z', duration_ms: 5 });
    await show(<Timeline r={rec({ attempts: [skipped, long] })} onClose={() => {}} />);
    const texts = [...root.querySelectorAll('.tl-text')] as HTMLElement[];
    expect(texts[0]!.textContent).toBe('skipped (breaker open) · 0 ms');
    expect(texts[1]!.tabIndex).toBe(0);
    expect(texts[1]!.title).toContain('x'.repeat(300));
  });

  it('keeps an error that says more than the attempts', async () => {
    await show(<Timeline r={rec({ error: 'model "x" not found', failure: 'unknown_model', attempts: [] })} onClose={() => {}} />);
    expect(root.querySelector('[data-testid=timeline-error]')!.textContent).toBe('model "x" not found');
  });
});

describe('CandidateCard', () => {
  function cand(breaker: Partial<CandidateStatus['breaker']>): CandidateStatus {
    return {
      id: 'qwen3-8b', provider: 'ollama', url: 'http://127.0.0.1:1', model: 'qwen3:8b', priority: 1, enabled: true,
      supports_thinking: true, embeds: false, embed_only: false, busy_ms: 0, loading: false, config_error: '', auth_error: '', unreachable: '', unreachable_since: null, gpus: [], all_gpus: false, server_queue: null, busy_with_others: '', busy_since: null, in_flight: 0, slots: 0, deadline_ms: 60000, cold: false, ttft: { n: 0, p50_ms: 0, p95_ms: 0, p99_ms: 0 }, demoted: false, pressure: null, kept_out: null,
      breaker: { state: 'closed', failures: 0, remaining_ms: 0, probing: false, since: '2026-05-14T19:36:00Z', ...breaker },
    };
  }
  const card = (c: CandidateStatus) => <CandidateCard c={c} receivedAt={0} now={0} isDefault={false} isDeep={false} />;

  it('an open breaker says since when, not a failure count it reset on opening', async () => {
    await show(card(cand({ state: 'open', failures: 0, remaining_ms: 12000 })));
    const text = root.textContent ?? '';
    expect(text).not.toMatch(/Failures in a row/i);
    expect(text).toContain('Tripped since');
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('tripped, cooling down');
    const fact = root.querySelector('[data-testid=breaker-fact-qwen3-8b]') as HTMLElement;
    expect(fact.title).toMatch(/tripped/);
    expect(root.querySelector('[data-testid=countdown-qwen3-8b]')!.textContent).toBe('12s');
  });

  it('a closed breaker counts failures in a row; each state has plain words on hover', async () => {
    await show(card(cand({ state: 'closed', failures: 1 })));
    expect(root.querySelector('[data-testid=breaker-fact-qwen3-8b]')!.textContent).toBe('Failures in a row1');
    const badge = () => root.querySelector('[data-testid=breaker-qwen3-8b]') as HTMLElement;
    expect(badge().textContent).toBe('healthy');
    expect(badge().title).toBe('Healthy (circuit breaker closed): requests go through.');
    await show(card(cand({ state: 'open', remaining_ms: 1000 })));
    expect(badge().title).toBe('Tripped (circuit breaker open) after repeated failures: skipped until the cool-down ends.');
    await show(card(cand({ state: 'half_open' })));
    expect(badge().textContent).toBe('trying again');
    expect(badge().title).toBe('Trying again (circuit breaker half-open): the cool-down is over and the next request is a single trial.');
    expect(root.textContent).toContain('Trying again since');
  });

  it('an open breaker whose cool-down ran out reads as the half-open one: trying again', async () => {
    await show(card(cand({ state: 'open', remaining_ms: 0 })));
    const shown = () => ['.candidate-head', '.cooldown'].map((q) => root.querySelector(q)!.outerHTML).join('');
    const open = shown();
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('trying again');
    expect(root.querySelector('[data-testid=trying-again-qwen3-8b]')!.textContent).toBe('Cool-down over: the next request is a single trial.');
    expect(root.querySelector('[data-testid=countdown-qwen3-8b]')).toBeNull();
    await show(card(cand({ state: 'half_open', remaining_ms: 0 })));
    expect(shown()).toBe(open);
  });

  it('the team\'s word shows: kept out with its countdown and reasons, or demoted', async () => {
    const out = { ...cand({}), kept_out: { reason: 'node a: breaker open since 00:25:40; node b: breaker open since 00:25:58', until: new Date(12000).toISOString() } };
    await show(card(out));
    const note = root.querySelector('[data-testid=kept-out-qwen3-8b]')!;
    expect(note.textContent).toContain('Skipped for 12s');
    expect(note.textContent).toContain('node b: breaker open since 00:25:58');
    expect(root.textContent).toContain('kept out by the team');
    const suspect = { ...cand({}), demoted: true, pressure: { gpu: -1, source: 'team', free_bytes: 0, used_bytes: 0, total_bytes: 0, reason: 'another node of the team reports node b: breaker open since 00:25:58' } };
    await show(card(suspect));
    expect(root.querySelector('[data-testid=demoted-qwen3-8b]')!.textContent).toBe(
      'Demoted to the end of the chain: another node of the team reports node b: breaker open since 00:25:58',
    );
    expect(root.querySelector('[data-testid=kept-out-qwen3-8b]')).toBeNull();
  });

  it('a server busy with other clients\' work says so, apart from its breaker', async () => {
    await show(card(cand({ state: 'closed' })));
    expect(root.querySelector('[data-testid=server-busy-qwen3-8b]')).toBeNull();
    const busy = {
      ...cand({ state: 'closed' }),
      busy_with_others: 'no first token in 300ms (queued: alive: /api/ps answered in 1 ms; busy with work Switchyard did not send)',
      busy_since: '2026-05-14T18:41:00Z',
    };
    await show(card(busy));
    const note = root.querySelector('[data-testid=server-busy-qwen3-8b]') as HTMLElement;
    expect(note.textContent).toMatch(/^Busy with other clients' work \(\d\d:41:00\)\. Not counted as a failure\.$/);
    expect(note.title).toContain('/api/ps answered');
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('healthy');
    await show(card({ ...cand({ state: 'closed' }), server_queue: { running: 1, waiting: 2 }, in_flight: 0 }));
    expect(root.querySelector('[data-testid=server-busy-qwen3-8b]')!.textContent).toBe("Busy with other clients' work: 1 running, 2 waiting on its server, 0 of them Switchyard's.");
    await show(card({ ...cand({ state: 'closed' }), server_queue: { running: 1, waiting: 0 }, in_flight: 1 }));
    expect(root.querySelector('[data-testid=server-busy-qwen3-8b]')).toBeNull();
  });

  it('the deadline says "ceiling" until the status\'s min_samples are in', async () => {
    const c = { ...cand({ state: 'closed' }), ttft: { n: 5, p50_ms: 10, p95_ms: 20, p99_ms: 30 } };
    await show(<CandidateCard c={c} receivedAt={0} now={0} isDefault={false} isDeep={false} learnAfter={5} />);
    expect(root.textContent).not.toContain('ceiling');
    await show(<CandidateCard c={c} receivedAt={0} now={0} isDefault={false} isDeep={false} learnAfter={20} />);
    expect(root.textContent).toContain('ceiling');
    // A cold model's deadline adds its load to the ceiling: it is not the ceiling.
    await show(<CandidateCard c={{ ...c, cold: true, deadline_ms: 75000 }} receivedAt={0} now={0} isDefault={false} isDeep={false} learnAfter={20} />);
    expect(root.querySelector('[data-testid=deadline-qwen3-8b]')!.textContent).toBe('1m 15s with a model load');
    expect(root.textContent).not.toContain('ceiling');
  });

  it('a server that does not answer, lacks its model or refuses the key is not "healthy"', async () => {
    const dead = { ...cand({ state: 'closed' }), unreachable: 'connection refused', unreachable_since: '2026-05-14T18:41:00Z' };
    await show(card(dead));
    const badge = root.querySelector('[data-testid=breaker-qwen3-8b]') as HTMLElement;
    expect(badge.textContent).toBe('unreachable');
    expect(badge.title).toBe('Its server does not answer (connection refused). Circuit breaker: closed.');
    expect(root.querySelector('[data-testid=server-problem-qwen3-8b]')!.textContent).toMatch(/^Unreachable since \d\d:41:00 \(connection refused\)$/);
    const missing = { ...cand({ state: 'closed' }), config_error: 'http://127.0.0.1:1 does not serve model "qwen3:8b"' };
    await show(card(missing));
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('model missing');
    expect(root.querySelector('[data-testid=server-problem-qwen3-8b]')!.textContent).toBe('Model not found: http://127.0.0.1:1 does not serve model "qwen3:8b"');
    // A refused key is said loudly too (SPEC 2.2), not "healthy".
    const refused = { ...cand({ state: 'closed' }), auth_error: "http://127.0.0.1:1 refused Switchyard's credentials (upstream HTTP 401: bad key): check its api_key_env" };
    await show(card(refused));
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('key refused');
    expect(root.querySelector('[data-testid=server-problem-qwen3-8b]')!.textContent).toBe(
      "Key refused: http://127.0.0.1:1 refused Switchyard's credentials (upstream HTTP 401: bad key): check its api_key_env",
    );
  });
});

describe('CandidateCard while a request waits on it', () => {
  const c: CandidateStatus = {
    id: 'qwen3-8b', provider: 'ollama', url: 'http://127.0.0.1:1', model: 'qwen3:8b', priority: 1, enabled: true,
    supports_thinking: true, embeds: false, embed_only: false, busy_ms: 0, loading: false, config_error: '', auth_error: '', unreachable: '', unreachable_since: null, gpus: [], all_gpus: false, server_queue: null, busy_with_others: '', busy_since: null, in_flight: 1, slots: 0, deadline_ms: 8000, cold: false, ttft: { n: 0, p50_ms: 0, p95_ms: 0, p99_ms: 0 }, demoted: false, pressure: null, kept_out: null,
    breaker: { state: 'closed', failures: 0, remaining_ms: 0, probing: false, since: '2026-05-14T19:36:00Z' },
  };
  const wait = { requestId: 'r1', candidate: 'qwen3-8b', order: 0, cold: false, deadlineMs: 8000, endsAt: 8000 };

  it('counts down the first-token deadline of the request that waits', async () => {
    await show(<CandidateCard c={c} receivedAt={0} now={2500} isDefault isDeep={false} waits={[wait]} />);
    const box = root.querySelector('[data-testid=wait-qwen3-8b]') as HTMLElement;
    expect(box.textContent).toContain('Waiting for its first token');
    expect(root.querySelector('[data-testid=wait-countdown-qwen3-8b] .deadline-text')!.textContent).toBe('6s left');
    expect(box.title).toContain('8.0 s');
    await show(<CandidateCard c={c} receivedAt={0} now={2500} isDefault isDeep={false} />);
    expect(root.querySelector('[data-testid=wait-qwen3-8b]')).toBeNull();
  });

  it('says what tripped an open breaker when the page saw it open', async () => {
    const open = { ...c, breaker: { ...c.breaker, state: 'open' as const, remaining_ms: 30000 } };
    const change = { candidate: 'qwen3-8b', from: 'closed' as const, to: 'open' as const, at: '', cause: 'HTTP 500' };
    await show(<CandidateCard c={open} receivedAt={0} now={0} isDefault isDeep={false} change={change} />);
    expect(root.querySelector('[data-testid=breaker-cause-qwen3-8b]')!.textContent).toBe('last failure: HTTP 500');
    expect((root.querySelector('[data-testid=breaker-fact-qwen3-8b]') as HTMLElement).title).toContain('tripped after failures in a row');
    await show(<CandidateCard c={open} receivedAt={0} now={0} isDefault isDeep={false} change={{ ...change, from: 'half_open' }} />);
    expect(root.querySelector('[data-testid=breaker-cause-qwen3-8b]')!.textContent).toBe('trial failed: HTTP 500');
    const half = { ...c, breaker: { ...c.breaker, state: 'half_open' as const } };
    await show(<CandidateCard c={half} receivedAt={0} now={0} isDefault isDeep={false} />);
    expect(root.querySelector('[data-testid=breaker-qwen3-8b]')!.textContent).toBe('trying again');
  });
});

describe('ChatScreen while the answer waits for its first token', () => {
  const cand = (id: string, priority: number): CandidateStatus => ({
    id, provider: 'ollama', url: '', model: id, priority, enabled: true, supports_thinking: false, embeds: false, embed_only: false,
    busy_ms: 0, loading: false, config_error: '', auth_error: '', unreachable: '', unreachable_since: null, gpus: [], all_gpus: false, server_queue: null, busy_with_others: '', busy_since: null, in_flight: 0, slots: 0, deadline_ms: 8000, cold: false,
    ttft: { n: 0, p50_ms: 0, p95_ms: 0, p99_ms: 0 }, demoted: false, pressure: null, kept_out: null,
    breaker: { state: 'closed', failures: 0, remaining_ms: 0, probing: false, since: '' },
  });
  const status = { demo: false, default_model: 'qwen3-8b', deep_thinking_model: '', candidates: [cand('qwen3-8b', 1), cand('llama3.2-3b', 2)] } as unknown as Status;

  it("names the candidate waited on and counts its deadline down, then moves to the next", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const chats: AbortSignal[] = [];
    const client = {
      models: () => Promise.resolve({ object: 'list', data: [] }),
      chat: (_req: unknown, signal: AbortSignal) =>
        new Promise((_, reject) => {
          chats.push(signal);
          signal.addEventListener('abort', () => reject(new DOMException('stopped', 'AbortError')));
        }),
    } as unknown as Client;
    const live = new LiveStore(client);
    const session = new ChatSession(client, live, null);
    const event = (e: LiveEvent) => act(() => live.apply(e, Date.now()));
    await event({ type: 'status', data: status });
    // Another client's request, started before the question: not this answer's.
    await event({ type: 'request_started', data: { request_id: 'theirs' } });
    await show(<ChatScreen client={client} live={live} session={session} />);
    await act(() => void session.send('Hello', 'auto', false));
    expect(chats).toHaveLength(1);
    expect(root.querySelector('[data-testid=answer-waiting]')!.textContent).toContain('Routing to the best healthy model');

    await event({ type: 'request_started', data: { request_id: 'mine' } });
    await event({ type: 'attempt_started', data: { request_id: 'theirs', candidate: 'llama3.2-3b', order: 0, started_at: '', deadline_ms: 8000, cold: false } });
    await event({ type: 'attempt_started', data: { request_id: 'mine', candidate: 'qwen3-8b', order: 0, started_at: '', deadline_ms: 8000, cold: false } });
    const waits = () => [...root.querySelectorAll('[data-testid=wait]')] as HTMLElement[];
    const left = () => root.querySelector('[data-testid=wait-countdown] .deadline-text')!.textContent;
    expect(waits().map((w) => w.dataset.candidate)).toEqual(['qwen3-8b']);
    expect(waits()[0]!.textContent).toContain('Waiting for qwen3-8b’s first token');
    expect(left()).toBe('8s left');
    await act(async () => void (await vi.advanceTimersByTimeAsync(3000)));
    expect(left()).toBe('5s left');

    // The deadline passes: the wait moves to the next candidate; the first is named with why.
    await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
    expect(left()).toBe('deadline reached');
    await event({ type: 'attempt', data: { request_id: 'mine', attempt: att({ candidate: 'qwen3-8b', order: 0, outcome: 'timeout', fault: 'server', error: 'no first token in 8s' }) } });
    await event({ type: 'attempt_started', data: { request_id: 'mine', candidate: 'llama3.2-3b', order: 1, started_at: '', deadline_ms: 8000, cold: false } });
    expect(waits().map((w) => w.dataset.candidate)).toEqual(['llama3.2-3b']);
    expect(left()).toBe('8s left');
    expect([...root.querySelectorAll('[data-testid=wait-failed]')].map((li) => li.textContent)).toEqual(['qwen3-8b no first token in 8s']);

    // The commit ends the wait.
    await event({ type: 'commit', data: { request_id: 'mine', attempt: att({ candidate: 'llama3.2-3b', order: 1, outcome: 'success', fault: '' }) } });
    expect(waits()).toEqual([]);
    expect(root.querySelector('[data-testid=answer-waiting]')!.textContent).toContain('llama3.2-3b is answering…');
    session.stop();
    await settle();
  });
});

describe('ChatScreen while a failed-over answer streams', () => {
  it('gives the failover its reasons from the live events, before the record comes', async () => {
    let h: { onOpen(i: unknown): void; onContent(c: string): void } | null = null;
    const client = {
      models: () => Promise.resolve({ object: 'list', data: [] }),
      requestWhenRecorded: () => new Promise(() => {}),
      chat: (_req: unknown, _signal: AbortSignal, handlers: typeof h) => {
        h = handlers;
        return new Promise(() => {});
      },
    } as unknown as Client;
    const live = new LiveStore(client);
    const session = new ChatSession(client, live, null);
    await show(<ChatScreen client={client} live={live} session={session} />);
    await act(() => void session.send('Hello', 'auto', false));
    const event = (e: LiveEvent) => act(() => live.apply(e, Date.now()));
    await event({ type: 'request_started', data: { request_id: 'mine' } });
    await event({ type: 'attempt', data: { request_id: 'mine', attempt: att({ candidate: 'qwen3-8b', order: 0, outcome: 'error', fault: 'server', error: 'upstream HTTP 503: busy' }) } });
    await event({ type: 'commit', data: { request_id: 'mine', attempt: att({ candidate: 'llama3.2-3b', order: 1, outcome: 'success' }) } });
    await act(() => {
      h!.onOpen({ requestId: 'mine', servedModel: 'llama3.2-3b', fallback: true });
      h!.onContent('llama3.2-3b here');
    });
    const notice = root.querySelector('[data-testid=failover-notice]')!;
    expect(notice.querySelector('summary')!.textContent).toBe('↪ qwen3-8b: upstream HTTP 503: busy → served by llama3.2-3b');
    expect(root.querySelector('[data-testid=failover-raw]')!.textContent).toBe('qwen3-8b: upstream HTTP 503: busy');
    session.stop();
    await settle();
  });
});

describe("ChatScreen's model picker", () => {
  const cand = (id: string): CandidateStatus =>
    ({ id, enabled: true, embed_only: false, supports_thinking: false, unreachable: '', config_error: '', breaker: { state: 'closed' } }) as unknown as CandidateStatus;
  const fleet = (...ids: string[]) => ({ demo: false, default_model: ids[0], deep_thinking_model: '', candidates: ids.map(cand) }) as unknown as Status;

  it('follows a reload that renames a candidate, and a chosen id that is gone falls back to auto', async () => {
    let served = ['fake', 'other'];
    const models = vi.fn(() => Promise.resolve({ object: 'list', data: served.map((id) => ({ id })) }));
    const client = { models } as unknown as Client;
    const live = new LiveStore(client);
    await act(() => live.apply({ type: 'status', data: fleet('fake', 'other') }, 0));
    localStorage.setItem('switchyard.chat.model', 'fake');
    await show(<ChatScreen client={client} live={live} session={new ChatSession(client, live, null)} />);
    await settle();
    const picker = () => root.querySelector('[data-testid=model-select]') as HTMLSelectElement;
    const options = () => [...picker().options].map((o) => o.value);
    expect(options()).toEqual(['auto', 'fake', 'other']);
    expect(picker().value).toBe('fake');

    // The same number of candidates, one of them renamed.
    served = ['fake-renamed', 'other'];
    await act(() => live.apply({ type: 'status', data: fleet('fake-renamed', 'other') }, 1));
    await settle();
    expect(models).toHaveBeenCalledTimes(2);
    expect(options()).toEqual(['auto', 'fake-renamed', 'other']);
    expect(picker().value).toBe('auto');
    localStorage.removeItem('switchyard.chat.model');
  });
});

describe('GpuPanel', () => {
  const dev = (index: number, usedGiB: number) => ({
    index, name: `Simulated GPU ${index} (24 GiB)`, uuid: `GPU-simulated-${index}`,
    memory_total_bytes: 24 * 2 ** 30, memory_used_bytes: usedGiB * 2 ** 30, memory_free_bytes: (24 - usedGiB) * 2 ** 30,
    utilization_pct: usedGiB > 20 ? 97 : 0, processes: [{ pid: 4000 + index, name: 'simulated model server', used_bytes: 9 * 2 ** 30 }],
  });
  const gpu = (simulated: boolean, full = -1): GPUStatus => ({
    available: true, message: '', simulated, sampled_at: null, devices: [0, 1, 2, 3].map((i) => dev(i, i === full ? 23.4 : 9)),
  });

  it('shows simulated GPUs with the gauges of real ones, labelled simulated', async () => {
    await show(<GpuPanel gpu={gpu(true)} />);
    expect(root.querySelector('[data-testid=gpu-simulated]')!.textContent).toBe('simulated');
    expect(root.querySelector('[data-testid=gpu-simulated-note]')).not.toBeNull();
    const meters = [...root.querySelectorAll('[data-testid^=gpu-memory-] [role=meter]')];
    expect(meters.map((m) => m.getAttribute('aria-valuenow'))).toEqual(['38', '38', '38', '38']);
    expect(root.textContent).toContain('9.0 GiB / 24.0 GiB');
    await show(<GpuPanel gpu={gpu(false)} />);
    expect(root.querySelector('[data-testid=gpu-simulated]')).toBeNull();
    expect(root.querySelectorAll('[data-testid^=gpu-memory-]')).toHaveLength(4);
  });

  it('fills the gauge of a GPU under memory pressure and names the candidate demoted for it', async () => {
    const c = {
      id: 'qwen3-8b', demoted: true,
      pressure: { gpu: 0, source: 'simulated', free_bytes: 0.6 * 2 ** 30, used_bytes: 23.4 * 2 ** 30, total_bytes: 24 * 2 ** 30, reason: 'free 0.6 GiB < 1 GiB (simulated)' },
    } as CandidateStatus;
    await show(<GpuPanel gpu={gpu(true, 0)} candidates={[c]} />);
    const g0 = root.querySelector('[data-testid=gpu-memory-0]') as HTMLElement;
    expect(g0.dataset.tone).toBe('bad');
    expect(g0.querySelector('[role=meter]')!.getAttribute('aria-valuenow')).toBe('98');
    expect((root.querySelector('[data-testid=gpu-memory-1]') as HTMLElement).dataset.tone).toBe('ok');
    expect(root.querySelector('[data-testid=gpu-demoted-qwen3-8b]')!.textContent).toContain('free 0.6 GiB < 1 GiB');
  });
});

describe('SettingsScreen', () => {
  it('says where the API listens and, when the address wanted was taken, why it moved', async () => {
    const config = method<ConfigDoc>();
    const client = { config: config.fn } as unknown as Client;
    const live = new LiveStore(client);
    const st = { listen: '127.0.0.1:39421', listen_taken: '127.0.0.1:8484', version: '0.1.0', config: { error: '' } } as unknown as Status;
    live.apply({ type: 'status', data: st }, 0);
    await show(<SettingsScreen client={client} live={live} />);
    await act(async () => config.calls[0]!.resolve({ path: '/x/config.yaml', source: 'file', yaml: 'listen: 127.0.0.1:8484', error: '', error_at: null }));
    expect(root.querySelector('[data-testid=settings-listen]')!.textContent).toContain('127.0.0.1:39421');
    expect(root.querySelector('[data-testid=settings-listen-why]')!.textContent).toContain(
      '127.0.0.1:8484 was in use (another Switchyard?), so the API is on 127.0.0.1:39421.',
    );
    await act(() => live.apply({ type: 'status', data: { ...st, listen: '127.0.0.1:8484', listen_taken: '' } }, 1));
    expect(root.querySelector('[data-testid=settings-listen-why]')).toBeNull();
  });
});

describe('Chat across reloads and while an answer streams', () => {
  /** A Storage that lives in the test. */
  function memoryStore(): TurnStore & { data: Map<string, string> } {
    const data = new Map<string, string>();
    return { data, getItem: (k) => data.get(k) ?? null, setItem: (k, v) => void data.set(k, v), removeItem: (k) => void data.delete(k) };
  }
  /** A client whose chats stream until the test ends them, or answer at once. */
  function chatClient() {
    const ends: Array<() => void> = [];
    const prompts: string[] = [];
    const client = {
      models: () => Promise.resolve({ object: 'list', data: [] }),
      requestWhenRecorded: () => new Promise(() => {}),
      chat: (req: { messages: { content: string }[] }, _signal: AbortSignal, h: { onContent(c: string): void }) =>
        new Promise((resolve) => {
          prompts.push(req.messages.at(-1)!.content);
          h.onContent('Hi there.');
          ends.push(() => resolve({ finished: true }));
        }),
    } as unknown as Client;
    return { client, ends, prompts };
  }

  it('keeps the conversation, and an answer cut by the reload reads as stopped', async () => {
    const store = memoryStore();
    const { client, ends } = chatClient();
    const live = new LiveStore(client);
    const first = new ChatSession(client, live, store);
    const done = first.send('Hello', 'auto', false);
    await settle();
    ends[0]!();
    await done;
    void first.send('Tell me more', 'auto', false);
    await settle();
    // The page goes away while the second answer streams.
    const again = new ChatSession(client, live, store);
    expect(again.turns.map((t) => (t.kind === 'user' ? t.text : `${t.phase}: ${t.content}`))).toEqual([
      'Hello', 'done: Hi there.', 'Tell me more', 'stopped: Hi there.',
    ]);
    await show(<ChatScreen client={client} live={live} session={again} />);
    expect([...root.querySelectorAll('[data-testid=question]')].map((q) => q.textContent)).toEqual(['YouHello', 'YouTell me more']);
    again.clear();
    expect(store.data.has(CHAT_KEY)).toBe(false);
  });

  it('keeps what streamed up to the moment the page goes away', async () => {
    const store = memoryStore();
    let h: { onContent(c: string): void } | null = null;
    const client = {
      models: () => Promise.resolve({ object: 'list', data: [] }),
      requestWhenRecorded: () => new Promise(() => {}),
      chat: (_req: unknown, _signal: AbortSignal, handlers: { onContent(c: string): void }) => {
        h = handlers;
        handlers.onContent('llama3.2-3b here:');
        return new Promise(() => {});
      },
    } as unknown as Client;
    const live = new LiveStore(client);
    const first = new ChatSession(client, live, store);
    void first.send('reload mid stream', 'auto', false);
    await settle();
    h!.onContent(' Switchyard sent your request my way');
    window.dispatchEvent(new Event('pagehide'));
    const again = new ChatSession(client, live, store);
    expect(again.turns.map((t) => (t.kind === 'user' ? t.text : `${t.phase}: ${t.content}`))).toEqual([
      'reload mid stream', 'stopped: llama3.2-3b here: Switchyard sent your request my way',
    ]);
  });

  it('counts thinking from the first reasoning token, not from the question', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance', 'requestAnimationFrame'] });
    let h: { onReasoning(r: string): void; onContent(c: string): void } | null = null;
    let end: (() => void) | null = null;
    const client = {
      models: () => Promise.resolve({ object: 'list', data: [] }),
      requestWhenRecorded: () => new Promise(() => {}),
      chat: (_req: unknown, _signal: AbortSignal, handlers: { onReasoning(r: string): void; onContent(c: string): void }) => {
        h = handlers;
        return new Promise((resolve) => (end = () => resolve({ finished: true })));
      },
    } as unknown as Client;
    const session = new ChatSession(client, new LiveStore(client), null);
    const done = session.send('Think first', 'auto', true);
    vi.advanceTimersByTime(8000); // a failover before the first token
    h!.onReasoning('Let me see.');
    vi.advanceTimersByTime(300);
    h!.onContent('Yes.');
    end!();
    await done;
    const answer = session.turns.at(-1) as AnswerTurn;
    expect(answer.ttftMs).toBe(8000);
    expect(answer.thoughtMs).toBe(300);
  });

  it('says why Enter sends nothing while an answer streams, and sends a suggestion as it is', async () => {
    const { client, ends, prompts } = chatClient();
    const live = new LiveStore(client);
    live.apply({ type: 'status', data: { demo: false, default_model: 'a', candidates: [] } as unknown as Status }, 0);
    const session = new ChatSession(client, live, null);
    await show(<ChatScreen client={client} live={live} session={session} />);
    (root.querySelector('.suggestion') as HTMLButtonElement).click();
    await settle();
    expect(prompts).toEqual(['Explain a circuit breaker in two sentences.']);
    const box = root.querySelector('[data-testid=prompt]') as HTMLTextAreaElement;
    await act(() => {
      box.value = 'And another thing';
      box.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await act(() => void box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })));
    expect(root.querySelector('[data-testid=busy-hint]')!.textContent).toMatch(/^An answer is still coming: your message waits in the box/);
    expect(prompts).toHaveLength(1);
    expect(box.value).toBe('And another thing');
    await act(async () => ends[0]!());
    await settle();
    expect(root.querySelector('[data-testid=busy-hint]')).toBeNull();
  });
});

describe('Fleet: activity from history, models on each GPU, memory over time', () => {
  const dev = (index: number, used: number) => ({
    index, name: `GPU ${index}`, uuid: `u${index}`, memory_total_bytes: 24 * 2 ** 30, memory_used_bytes: used * 2 ** 30,
    memory_free_bytes: (24 - used) * 2 ** 30, utilization_pct: 0, processes: [],
  });
  const gpuOf = (...used: number[]) => ({ available: true, message: '', simulated: true, sampled_at: null, devices: used.map((u, i) => dev(i, u)) }) as unknown as GPUStatus;

  it('fills the feed from recent history below the live lines, once per request', () => {
    const live = new LiveStore({} as Client);
    live.apply({ type: 'request_done', data: { request_id: 'live1', request: rec({ id: 'live1', status: 'ok', served_candidate: 'a' }) } }, 1);
    live.seedFeed([rec({ id: 'live1', status: 'ok' }), rec({ id: 'old-request-1', status: 'ok', served_candidate: 'b', is_fallback: true })]);
    expect(live.feed.map((i) => i.requestId)).toEqual(['live1', 'old-request-1']);
    expect(live.feed[1]!.text).toBe('request …uest-1 ok by b after failover in 10 ms');
  });

  it('keeps one memory point per GPU every 5 s for an hour, and draws it with the models on each GPU', async () => {
    const live = new LiveStore({} as Client);
    const t0 = 1_000_000;
    for (let s = 0; s <= 3_700; s++) live.apply({ type: 'gpu', data: { at: '', gpu: gpuOf(9 + (s % 2), 9), host: {} } } as unknown as LiveEvent, t0 + s * 1000);
    const pts = live.gpuMemory.get(0)!;
    expect(pts.length).toBe(721); // an hour of points, 5 s apart, both ends included
    expect(pts[0]!.at).toBe(t0 + 100_000);
    const cands = [
      { id: 'qwen3-8b', model: 'qwen3:8b', enabled: true, gpus: [0], all_gpus: false },
      { id: 'nomic', model: 'nomic-embed-text:latest', enabled: true, gpus: [0], all_gpus: false },
      { id: 'local-all', model: 'llama3.2:3b', enabled: true, gpus: [], all_gpus: true },
      { id: 'off', model: 'off:1b', enabled: false, gpus: [1], all_gpus: false },
    ] as CandidateStatus[];
    await show(<GpuPanel gpu={gpuOf(9, 9)} candidates={cands} memory={live.gpuMemory} />);
    expect(root.querySelector('[data-testid=gpu-models-0]')!.textContent).toBe('Models on it: qwen3:8b, nomic-embed-text:latest, llama3.2:3b');
    expect(root.querySelector('[data-testid=gpu-models-1]')!.textContent).toBe('Models on it: llama3.2:3b');
    const h = root.querySelector('[data-testid=gpu-history-0]')!;
    expect(h.querySelector('polyline')!.getAttribute('points')!.split(' ')).toHaveLength(721);
    expect(h.textContent).toBe('Memory used, last 60 min · peak 10.0 GiB');
    // A few seconds of readings say seconds, not "1 min".
    const early = new Map([[0, [{ at: 0, used: 9 * 2 ** 30, total: 24 * 2 ** 30 }, { at: 6_000, used: 9 * 2 ** 30, total: 24 * 2 ** 30 }]]]);
    await show(<GpuPanel gpu={gpuOf(9, 9)} candidates={cands} memory={early} />);
    expect(root.querySelector('[data-testid=gpu-history-0]')!.textContent).toBe('Memory used, last 6 s · peak 9.0 GiB');
  });
});

describe('SettingsScreen: the config as a user can keep it', () => {
  const yaml = 'listen: 127.0.0.1:8484\nchat:\n  candidates:\n    - id: qwen3-8b\n      url: http://127.0.0.1:39999\n';
  it("marks the demo's server URLs demo only, and says where each key is explained", async () => {
    const config = method<ConfigDoc>();
    const client = { config: config.fn } as unknown as Client;
    await show(<SettingsScreen client={client} live={new LiveStore(client)} />);
    await act(async () => config.calls[0]!.resolve({ path: '/x/config.yaml', source: 'demo', yaml, error: '', error_at: null }));
    expect([...root.querySelectorAll('[data-testid=yaml-demo-line]')].map((l) => l.textContent)).toEqual(['      url: http://127.0.0.1:39999demo only\n']);
    expect(root.querySelector('[data-testid=config-yaml]')!.textContent).toBe(yaml.replace('39999', '39999demo only') + '\n');
    const keys = [...root.querySelectorAll('.yaml-key')].map((k) => `${k.textContent} ${(k as HTMLElement).title}`);
    expect(keys[0]).toBe('listen See docs/CONFIG.md, “Top level”');
    expect(keys[3]).toBe('id See docs/CONFIG.md, “chat.candidates items” and “chat”');
    expect(root.querySelector('[data-testid=write-config]')).toBeNull();
  });

  it('writes a discovered config as the config file, and says why not when one is there', async () => {
    const config = method<ConfigDoc>();
    const writes: Array<(v: unknown, fail?: boolean) => void> = [];
    const client = {
      config: config.fn,
      writeConfig: () => new Promise((resolve, reject) => writes.push((v, fail) => (fail ? reject(v) : resolve(v)))),
    } as unknown as Client;
    await show(<SettingsScreen client={client} live={new LiveStore(client)} />);
    await act(async () => config.calls[0]!.resolve({ path: '/x/config.yaml', source: 'discovered', yaml, error: '', error_at: null }));
    expect(root.querySelector('[data-testid=yaml-demo-line]')).toBeNull();
    const button = () => root.querySelector('[data-testid=write-config-button]') as HTMLButtonElement;
    await act(() => button().click());
    await act(async () => writes[0]!(new Error('/x/config.yaml exists already: Switchyard never overwrites it'), true));
    expect(root.querySelector('[data-testid=write-config] [role=alert]')!.textContent).toBe('/x/config.yaml exists already: Switchyard never overwrites it');
    await act(() => button().click());
    await act(async () => writes[1]!({ path: '/x/config.yaml' }));
    expect(root.querySelector('[data-testid=write-config]')!.textContent).toBe('Written to /x/config.yaml. Switchyard reads it now; edit it to change the fleet.');
  });
});
