import { afterEach, describe, expect, it, vi } from 'vitest';
import { APIError, Client, type ConnState } from './api';
import type { LiveEvent } from './types';

function sse(text: string[], status = 200, headers: Record<string, string> = {}): Response {
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const t of text) c.enqueue(enc.encode(t));
      c.close();
    },
  });
  return new Response(body, { status, headers: { 'Content-Type': 'text/event-stream', ...headers } });
}

afterEach(() => vi.unstubAllGlobals());

describe('Client.chat', () => {
  it('sends the UI header and reasoning_effort, reads route headers and streams deltas', async () => {
    const fetchMock = vi.fn(async (_url: string, _init: RequestInit) =>
      sse(
        [
          'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n',
          'data: {"choices":[{"delta":{"reasoning":"hm"}}]}\n\n: ping\n\n',
          'data: {"choices":[{"delta":{"content":"Hel',
          'lo"}}]}\r\n\r\ndata: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
        ],
        200,
        { 'X-Switchyard-Request-Id': 'r1', 'X-Switchyard-Served-Model': 'llama3', 'X-Switchyard-Fallback': 'true' },
      ),
    );
    vi.stubGlobal('fetch', fetchMock);
    const c = new Client();
    const got = { content: '', reasoning: '', route: null as unknown };
    const res = await c.chat({ model: 'auto', messages: [{ role: 'user', content: 'hi' }], thinking: true }, new AbortController().signal, {
      onOpen: (r) => (got.route = r),
      onContent: (t) => (got.content += t),
      onReasoning: (t) => (got.reasoning += t),
      onStreamError: () => {},
    });
    expect(got).toEqual({ content: 'Hello', reasoning: 'hm', route: { requestId: 'r1', servedModel: 'llama3', fallback: true } });
    expect(res.finished).toBe(true);
    const [url, init] = fetchMock.mock.calls[0]!;
    expect(url).toBe('/v1/chat/completions');
    const headers = init.headers as Record<string, string>;
    expect(headers['X-Switchyard-Client']).toBe('ui');
    expect(headers['Authorization']).toBeUndefined();
    const body = JSON.parse(init.body as string);
    expect(body).toMatchObject({ model: 'auto', stream: true, reasoning_effort: 'medium' });
  });

  it('omits reasoning_effort when thinking is off and sends the bearer token once set', async () => {
    const fetchMock = vi.fn(async (_url: string, _init: RequestInit) => sse(['data: [DONE]\n\n']));
    vi.stubGlobal('fetch', fetchMock);
    const c = new Client();
    c.setToken(' secret ');
    await c.chat({ model: 'x', messages: [], thinking: false }, new AbortController().signal, {
      onOpen() {},
      onContent() {},
      onReasoning() {},
      onStreamError() {},
    });
    const init = fetchMock.mock.calls[0]![1];
    expect(JSON.parse(init.body as string).reasoning_effort).toBeUndefined();
    expect((init.headers as Record<string, string>)['Authorization']).toBe('Bearer secret');
  });

  it('rejects with the server message and request id when every candidate failed', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () =>
        new Response('{"error":{"message":"all candidates failed: a: refused; b: timeout","type":"server_error"}}', {
          status: 502,
          headers: { 'X-Switchyard-Request-Id': 'r9' },
        }),
      ),
    );
    const c = new Client();
    const err = await c
      .chat({ model: 'auto', messages: [], thinking: false }, new AbortController().signal, {
        onOpen() {},
        onContent() {},
        onReasoning() {},
        onStreamError() {},
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).message).toBe('all candidates failed: a: refused; b: timeout');
    expect((err as APIError).requestId).toBe('r9');
    expect((err as APIError).status).toBe(502);
  });

  it('tells 401 listeners', async () => {
    vi.stubGlobal('fetch', vi.fn(async () => new Response('{"error":"unauthorized"}', { status: 401 })));
    const c = new Client();
    let told = 0;
    c.onUnauthorized(() => told++);
    await expect(c.status()).rejects.toBeInstanceOf(APIError);
    expect(told).toBe(1);
  });
});

describe('Client.events', () => {
  it('opens, delivers typed events, and reconnects after the stream ends', async () => {
    let calls = 0;
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => {
        calls++;
        return sse([`event: status\ndata: {"version":"v${calls}"}\n\n`, 'event: breaker\ndata: {"breaker":{"candidate":"a","from":"closed","to":"open"}}\n\n']);
      }),
    );
    const c = new Client();
    const states: ConnState['kind'][] = [];
    const events: LiveEvent[] = [];
    const sub = c.events({ onEvent: (e) => events.push(e), onState: (s) => states.push(s.kind) });
    await vi.waitFor(() => expect(states).toContain('reconnecting'));
    sub.retryNow();
    await vi.waitFor(() => expect(calls).toBe(2));
    await vi.waitFor(() => expect(events.length).toBe(4));
    sub.close();
    expect(states.slice(0, 3)).toEqual(['connecting', 'open', 'reconnecting']);
    expect(events[0]).toEqual({ type: 'status', data: { version: 'v1' } });
    expect(events[1]!.type).toBe('breaker');
    expect(events[2]).toEqual({ type: 'status', data: { version: 'v2' } });
  });

  it('waits for a token on 401 and retries when one is set', async () => {
    let calls = 0;
    vi.stubGlobal(
      'fetch',
      vi.fn(async (_u: string, init: RequestInit) => {
        calls++;
        const auth = (init.headers as Record<string, string>)['Authorization'];
        if (auth !== 'Bearer k') return new Response('{"error":"unauthorized"}', { status: 401 });
        return sse(['event: status\ndata: {}\n\n']);
      }),
    );
    const c = new Client();
    const states: ConnState['kind'][] = [];
    const sub = c.events({ onEvent() {}, onState: (s) => states.push(s.kind) });
    await vi.waitFor(() => expect(states).toContain('unauthorized'));
    expect(calls).toBe(1);
    c.setToken('k');
    await vi.waitFor(() => expect(states).toContain('open'));
    sub.close();
  });
});
