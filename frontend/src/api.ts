// The one module that talks to Switchyard's localhost API (docs/API.md).
//
// Everything goes through fetch, Server-Sent Events included: they are read
// from a ReadableStream rather than EventSource so that an
// `Authorization: Bearer` header can be sent when the server has an api_key.
// The base URL is '' (same origin) in a browser; inside the Wails webview the
// shell tells it (APIBase).

import { desktopAPIBase } from './desktop';
import { readSSE } from './sse';
import type {
  ChatMessage,
  ConfigDoc,
  DemoServer,
  DemoState,
  LiveEvent,
  ModelList,
  RequestRecord,
  Stats,
  Status,
  TeamDoc,
  TeamRequests,
} from './types';

// SSE parsing lives in sse.ts; it is part of this module's surface.
export { SSEParser, readSSE, type SSEEvent } from './sse';

// ---------------------------------------------------------------------------
// Errors

/** APIError is a non-2xx answer, with the server's own message. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly requestId: string | null = null,
  ) {
    super(message);
    this.name = 'APIError';
  }
}

/** NetworkError means the server could not be reached at all. */
export class NetworkError extends Error {
  constructor(where: string) {
    super(`Switchyard is not answering${where ? ` at ${where}` : ''}. Is it running?`);
    this.name = 'NetworkError';
  }
}

/** isAbort reports whether err comes from an AbortController. */
export function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === 'AbortError';
}

/** errorMessage extracts the message of both error dialects, or the raw text. */
export function errorMessage(body: string, status: number): string {
  try {
    const j = JSON.parse(body) as { error?: unknown; message?: unknown };
    if (typeof j.error === 'string' && j.error) return j.error;
    if (j.error && typeof j.error === 'object') {
      const m = (j.error as { message?: unknown }).message;
      if (typeof m === 'string' && m) return m;
    }
    if (typeof j.message === 'string' && j.message) return j.message;
  } catch {
    // not JSON: fall through
  }
  const text = body.trim();
  if (text && text.length < 300 && !text.startsWith('<')) return text;
  return `HTTP ${status}`;
}

// ---------------------------------------------------------------------------
// Chat streaming

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  thinking: boolean;
}

/** What the response headers say about a routed request. */
export interface RouteInfo {
  requestId: string | null;
  servedModel: string | null;
  fallback: boolean;
}

export interface ChatHandlers {
  onOpen(info: RouteInfo): void;
  onContent(text: string): void;
  onReasoning(text: string): void;
  /** An in-stream error: the answer so far stays, the stream is over. */
  onStreamError(message: string): void;
}

export interface ChatResult {
  /** True when the stream ended with [DONE] or a finish_reason. */
  finished: boolean;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
}

interface ChunkDelta {
  content?: string | null;
  reasoning?: string | null;
  reasoning_content?: string | null;
}

interface Chunk {
  choices?: { delta?: ChunkDelta; finish_reason?: string | null }[] | null;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  error?: { message?: string } | string;
}

/**
 * applyChunk routes one `data:` payload of a chat stream to the handlers and
 * reports whether it ended the stream. Exported for tests.
 */
export function applyChunk(data: string, h: ChatHandlers, result: ChatResult): 'more' | 'done' | 'error' {
  if (data === '[DONE]') {
    result.finished = true;
    return 'done';
  }
  let chunk: Chunk;
  try {
    chunk = JSON.parse(data) as Chunk;
  } catch {
    return 'more'; // tolerate junk lines; the router validates upstream output
  }
  if (chunk.error) {
    const msg = typeof chunk.error === 'string' ? chunk.error : chunk.error.message || 'upstream error';
    h.onStreamError(msg);
    return 'error';
  }
  if (chunk.usage) result.usage = chunk.usage;
  for (const choice of chunk.choices ?? []) {
    const d = choice.delta;
    if (d) {
      // Accept `reasoning` first, fall back to `reasoning_content`; never both.
      const r = d.reasoning ?? d.reasoning_content;
      if (r) h.onReasoning(r);
      if (d.content) h.onContent(d.content);
    }
    if (choice.finish_reason) result.finished = true;
  }
  return 'more';
}

// ---------------------------------------------------------------------------
// Live events

export type ConnState =
  | { kind: 'connecting' }
  | { kind: 'open' }
  | { kind: 'reconnecting'; retryAt: number; attempt: number; reason: string }
  | { kind: 'unauthorized' };

export interface EventHandlers {
  onEvent(e: LiveEvent): void;
  onState(s: ConnState): void;
}

export interface Subscription {
  close(): void;
  /** retryNow skips the current back-off wait. */
  retryNow(): void;
}

const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000];
/** Status arrives every second and pings every 15 s; this much silence means a dead link. */
const IDLE_MS = 20000;

export function backoffDelay(attempt: number): number {
  return BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)]!;
}

export interface RequestFilter {
  limit?: number;
  served?: string;
  fallback?: boolean;
  status?: string;
  since?: string;
  before?: string;
}

export function requestsQuery(f: RequestFilter): string {
  const q = new URLSearchParams();
  q.set('limit', String(f.limit ?? 50));
  if (f.served) q.set('served', f.served);
  if (f.fallback !== undefined) q.set('fallback', String(f.fallback));
  if (f.status) q.set('status', f.status);
  if (f.since) q.set('since', f.since);
  if (f.before) q.set('before', f.before);
  return q.toString();
}

// ---------------------------------------------------------------------------
// The client

const TOKEN_KEY = 'switchyard.token';

type Init = Omit<RequestInit, 'headers'> & { headers?: Record<string, string> };

/** withSignal is the init that carries signal, if there is one. */
function withSignal(signal: AbortSignal | undefined): Init {
  return signal ? { signal } : {};
}

/**
 * Client holds the base URL and the bearer token. Call init() once before
 * anything else; every method then waits for it.
 */
export class Client {
  private base = '';
  private token = '';
  private readonly ready: Promise<void>;
  private authListeners = new Set<() => void>();
  private unauthorizedListeners = new Set<() => void>();

  constructor() {
    try {
      this.token = sessionStorage.getItem(TOKEN_KEY) ?? '';
    } catch {
      this.token = '';
    }
    this.ready = this.resolveBase();
  }

  private async resolveBase(): Promise<void> {
    try {
      const d = await desktopAPIBase();
      if (d) {
        this.base = d.base.replace(/\/+$/, '');
        if (d.token) this.token = d.token;
      }
    } catch {
      // The shell failed to answer: same origin is the best guess.
    }
  }

  /** The base URL in use ('' means same origin). */
  baseURL(): string {
    return this.base;
  }

  hasToken(): boolean {
    return this.token !== '';
  }

  /** setToken stores a bearer token for this browser tab and retries what was waiting for it. */
  setToken(token: string): void {
    this.token = token.trim();
    try {
      if (this.token) sessionStorage.setItem(TOKEN_KEY, this.token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // storage disabled: the token lives in memory only
    }
    for (const fn of this.authListeners) fn();
  }

  /** onUnauthorized registers fn for every 401; returns the unregister func. */
  onUnauthorized(fn: () => void): () => void {
    this.unauthorizedListeners.add(fn);
    return () => this.unauthorizedListeners.delete(fn);
  }

  private onTokenChange(fn: () => void): () => void {
    this.authListeners.add(fn);
    return () => this.authListeners.delete(fn);
  }

  private headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.token) h['Authorization'] = `Bearer ${this.token}`;
    return h;
  }

  private async fetch(path: string, init: Init = {}): Promise<Response> {
    await this.ready;
    let res: Response;
    try {
      res = await fetch(this.base + path, { ...init, headers: this.headers(init.headers) });
    } catch (err) {
      if (isAbort(err)) throw err;
      // fetch's own TypeError says only "Failed to fetch"; say what it means here.
      throw new NetworkError(this.base || (typeof location === 'undefined' ? '' : location.host));
    }
    if (res.status === 401) {
      for (const fn of this.unauthorizedListeners) fn();
    }
    return res;
  }

  private async json<T>(path: string, init: Init = {}): Promise<T> {
    const res = await this.fetch(path, { ...init, headers: { Accept: 'application/json', ...init.headers } });
    const text = await res.text();
    if (!res.ok) {
      throw new APIError(errorMessage(text, res.status), res.status, res.headers.get('X-Switchyard-Request-Id'));
    }
    return JSON.parse(text) as T;
  }

  status(signal?: AbortSignal): Promise<Status> {
    return this.json('/switchyard/v1/status', withSignal(signal));
  }

  models(signal?: AbortSignal): Promise<ModelList> {
    return this.json('/v1/models', withSignal(signal));
  }

  config(signal?: AbortSignal): Promise<ConfigDoc> {
    return this.json('/switchyard/v1/config', withSignal(signal));
  }

  async requests(f: RequestFilter, signal?: AbortSignal): Promise<RequestRecord[]> {
    const r = await this.json<{ requests: RequestRecord[] | null }>(
      `/switchyard/v1/requests?${requestsQuery(f)}`,
      withSignal(signal),
    );
    return r.requests ?? [];
  }

  request(id: string, signal?: AbortSignal): Promise<RequestRecord> {
    return this.json(`/switchyard/v1/requests/${encodeURIComponent(id)}`, withSignal(signal));
  }

  /**
   * requestWhenRecorded fetches a request record, retrying on 404 for a few
   * seconds: the history writer batches, so a record may land just after the
   * stream it describes ended.
   */
  async requestWhenRecorded(id: string, signal?: AbortSignal): Promise<RequestRecord> {
    const waits = [0, 150, 300, 600, 1000, 1500, 2500];
    let last: unknown;
    for (const w of waits) {
      if (w) await sleep(w, signal);
      try {
        return await this.request(id, signal);
      } catch (err) {
        last = err;
        if (!(err instanceof APIError && err.status === 404)) throw err;
      }
    }
    throw last;
  }

  stats(since: string, bucket: string, signal?: AbortSignal): Promise<Stats> {
    const q = new URLSearchParams({ since, bucket });
    return this.json(`/switchyard/v1/stats?${q}`, withSignal(signal));
  }

  /** The team document; 404 (an error) when this Switchyard is in no team. */
  team(signal?: AbortSignal): Promise<TeamDoc> {
    return this.json('/switchyard/v1/team', withSignal(signal));
  }

  /** The team's newest shipped requests, of one node when node is set. */
  teamRequests(node: string, limit: number, signal?: AbortSignal): Promise<TeamRequests> {
    const q = new URLSearchParams({ limit: String(limit) });
    if (node) q.set('node', node);
    return this.json(`/switchyard/v1/team/requests?${q}`, withSignal(signal));
  }

  demo(signal?: AbortSignal): Promise<DemoState> {
    return this.json('/switchyard/v1/demo', withSignal(signal));
  }

  /** writeConfig writes the config in force as the config file at the default path; it never overwrites one. */
  writeConfig(signal?: AbortSignal): Promise<{ path: string }> {
    return this.json('/switchyard/v1/config/write', { ...withSignal(signal), method: 'POST' });
  }

  setFault(candidate: string, fault: string, signal?: AbortSignal): Promise<DemoServer> {
    return this.json('/switchyard/v1/demo/fault', {
      ...withSignal(signal),
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ candidate, fault }),
    });
  }

  /**
   * chat sends a streaming chat completion as the UI and feeds the handlers.
   * A non-2xx answer (every candidate failed before the first token, or the
   * request was invalid) rejects with an APIError carrying the request id.
   * Aborting signal aborts the upstream too.
   */
  async chat(req: ChatRequest, signal: AbortSignal, h: ChatHandlers): Promise<ChatResult> {
    const body: Record<string, unknown> = {
      model: req.model,
      messages: req.messages,
      stream: true,
      stream_options: { include_usage: true },
    };
    if (req.thinking) body['reasoning_effort'] = 'medium';
    const res = await this.fetch('/v1/chat/completions', {
      method: 'POST',
      signal,
      headers: {
        'Content-Type': 'application/json',
        Accept: 'text/event-stream',
        'X-Switchyard-Client': 'ui',
      },
      body: JSON.stringify(body),
    });
    const info: RouteInfo = {
      requestId: res.headers.get('X-Switchyard-Request-Id'),
      servedModel: res.headers.get('X-Switchyard-Served-Model'),
      fallback: res.headers.get('X-Switchyard-Fallback') === 'true',
    };
    if (!res.ok || !res.body) {
      const text = await res.text();
      throw new APIError(errorMessage(text, res.status), res.status, info.requestId);
    }
    h.onOpen(info);
    const result: ChatResult = { finished: false, usage: null };
    let over = false;
    await readSSE(res.body, (e) => {
      if (over || e.event !== 'message') return;
      if (applyChunk(e.data, h, result) !== 'more') over = true;
    });
    return result;
  }

  /**
   * events subscribes to the live event stream and keeps it up: on any
   * failure it reconnects with back-off (1 s, 2 s, 4 s, 8 s, then every
   * 15 s), on silence longer than IDLE_MS it drops and reconnects, and on 401
   * it waits for a token.
   */
  events(h: EventHandlers): Subscription {
    let closed = false;
    let current: AbortController | null = null;
    let wake: (() => void) | null = null;
    const unsubToken = this.onTokenChange(() => wake?.());

    const waitFor = (ms: number | null) =>
      new Promise<void>((resolve) => {
        const t = ms === null ? undefined : setTimeout(done, ms);
        function done() {
          if (t !== undefined) clearTimeout(t);
          wake = null;
          resolve();
        }
        wake = done;
      });

    const loop = async () => {
      let attempt = 0;
      h.onState({ kind: 'connecting' });
      while (!closed) {
        const ctl = new AbortController();
        current = ctl;
        let idle: ReturnType<typeof setTimeout> | undefined;
        const arm = () => {
          if (idle !== undefined) clearTimeout(idle);
          idle = setTimeout(() => ctl.abort(), IDLE_MS);
        };
        let reason = 'connection closed';
        try {
          arm();
          const res = await this.fetch('/switchyard/v1/events', {
            signal: ctl.signal,
            headers: { Accept: 'text/event-stream' },
          });
          if (res.status === 401) {
            clearTimeout(idle);
            h.onState({ kind: 'unauthorized' });
            await waitFor(null);
            continue;
          }
          if (!res.ok || !res.body) {
            reason = errorMessage(await res.text(), res.status);
          } else {
            let opened = false;
            await readSSE(
              res.body,
              (e) => {
                let data: unknown;
                try {
                  data = JSON.parse(e.data);
                } catch {
                  return;
                }
                if (!opened) {
                  opened = true;
                  attempt = 0;
                  h.onState({ kind: 'open' });
                }
                h.onEvent({ type: e.event, data } as LiveEvent);
              },
              arm,
            );
          }
        } catch (err) {
          if (closed) break;
          reason = ctl.signal.aborted ? 'no data from the server for 20 s' : 'server unreachable';
          void err;
        } finally {
          if (idle !== undefined) clearTimeout(idle);
        }
        if (closed) break;
        const delay = backoffDelay(attempt);
        h.onState({ kind: 'reconnecting', retryAt: Date.now() + delay, attempt: attempt + 1, reason });
        attempt++;
        await waitFor(delay);
      }
    };
    void loop();

    return {
      close() {
        closed = true;
        unsubToken();
        current?.abort();
        wake?.();
      },
      retryNow() {
        wake?.();
      },
    };
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(new DOMException('aborted', 'AbortError'));
      },
      { once: true },
    );
  });
}
