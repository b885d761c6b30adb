// ChatSession holds one conversation and streams answers into it. It lives
// outside the components so a stream keeps going while another screen is open.

import { APIError, isAbort, type Client, type RouteInfo } from '../api';
import type { LiveStore } from '../store';
import type { ChatMessage, RequestRecord } from '../types';

export type Phase = 'waiting' | 'streaming' | 'done' | 'stopped' | 'failed' | 'stream_error';

export interface UserTurn {
  kind: 'user';
  key: number;
  text: string;
}

export interface AnswerTurn {
  kind: 'answer';
  key: number;
  model: string;
  thinking: boolean;
  phase: Phase;
  content: string;
  reasoning: string;
  route: RouteInfo | null;
  startedAt: number;
  /**
   * The live store's mark (InFlight.mark) when the question was sent: the
   * first request seen after it is this answer's until the headers name it.
   */
  liveMark: number;
  /** Client-measured time to the first content or reasoning token. */
  ttftMs: number | null;
  /** Time from send to the reasoning's end (first content token), when thinking. */
  thoughtMs: number | null;
  record: RequestRecord | null;
  /** The error shown under the answer: every candidate failed, or the stream broke. */
  error: string | null;
  /** The stream ended without [DONE] or finish_reason and without an error event. */
  truncated: boolean;
}

export type Turn = UserTurn | AnswerTurn;

/** Where the conversation is kept, so that it survives a reload. */
export const CHAT_KEY = 'switchyard.chat.turns';
/** The most turns kept: the oldest go first. */
export const MAX_KEPT_TURNS = 100;

/** How often a streaming answer is written to the store. */
export const KEEP_EVERY_MS = 1000;

/** The part of Storage a session keeps its conversation in. */
export type TurnStore = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

function localTurns(): TurnStore | null {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null; // storage disabled
  }
}

export class ChatSession {
  turns: Turn[] = [];
  busy = false;

  private ctl: AbortController | null = null;
  private seq = 0;
  private listeners = new Set<() => void>();
  private scheduled = false;
  /** When the conversation was last written (performance.now()). */
  private keptAt = 0;

  /**
   * A session starts with the conversation kept in store (localStorage by
   * default): an answer that was still coming when the page went away
   * reads as stopped.
   */
  constructor(
    private readonly client: Client,
    private readonly live: LiveStore,
    private readonly store: TurnStore | null = localTurns(),
  ) {
    this.turns = this.restore();
    this.seq = this.turns.reduce((m, t) => Math.max(m, t.key), 0);
    // A reload or a closed tab keeps what has streamed so far, to the last token.
    if (typeof window !== 'undefined') window.addEventListener('pagehide', () => this.keep());
  }

  private restore(): Turn[] {
    try {
      const raw = this.store?.getItem(CHAT_KEY);
      const turns = raw ? (JSON.parse(raw) as Turn[]) : [];
      if (!Array.isArray(turns)) return [];
      return turns.map((t) => (t.kind === 'answer' && (t.phase === 'waiting' || t.phase === 'streaming') ? { ...t, phase: 'stopped' } : t));
    } catch {
      return [];
    }
  }

  /** keep writes the conversation to the store; a full or disabled store keeps nothing. */
  private keep(): void {
    this.keptAt = performance.now();
    try {
      if (this.turns.length === 0) this.store?.removeItem(CHAT_KEY);
      else this.store?.setItem(CHAT_KEY, JSON.stringify(this.turns.slice(-MAX_KEPT_TURNS)));
    } catch {
      // quota or storage disabled: the conversation lives in this page only
    }
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** history is the conversation as the model should see it: finished turns with text. */
  history(): ChatMessage[] {
    const out: ChatMessage[] = [];
    for (const t of this.turns) {
      if (t.kind === 'user') out.push({ role: 'user', content: t.text });
      else if (t.content) out.push({ role: 'assistant', content: t.content });
    }
    return out;
  }

  clear(): void {
    if (this.busy) return;
    this.turns = [];
    this.notifyNow();
  }

  stop(): void {
    this.ctl?.abort();
  }

  async send(text: string, model: string, thinking: boolean): Promise<void> {
    const prompt = text.trim();
    if (!prompt || this.busy) return;
    this.turns = [...this.turns, { kind: 'user', key: ++this.seq, text: prompt }];
    const messages = this.history();
    const key = ++this.seq;
    const startedAt = performance.now();
    let answer: AnswerTurn = {
      kind: 'answer',
      key,
      model,
      thinking,
      phase: 'waiting',
      content: '',
      reasoning: '',
      route: null,
      startedAt: Date.now(),
      liveMark: this.live.inflight.mark(),
      ttftMs: null,
      thoughtMs: null,
      record: null,
      error: null,
      truncated: false,
    };
    this.turns = [...this.turns, answer];
    this.busy = true;
    const ctl = new AbortController();
    this.ctl = ctl;
    this.notifyNow();

    // Every change replaces the answer object, so memoised views see it.
    const update = (patch: Partial<AnswerTurn>, now = false) => {
      answer = { ...answer, ...patch };
      this.turns = this.turns.map((t) => (t.key === key ? answer : t));
      if (now) this.notifyNow();
      else this.notifySoon();
    };
    // The first token changes the phase: the conversation is written then.
    const firstToken = () => {
      if (answer.ttftMs === null) return { ttftMs: Math.round(performance.now() - startedAt), phase: 'streaming' as Phase };
      return {};
    };
    // Thinking lasts from the first reasoning token to the first content,
    // not from the question: the wait for a first token and any failover
    // are the TTFT's.
    let reasoningAt: number | null = null;

    try {
      const result = await this.client.chat({ model, messages, thinking }, ctl.signal, {
        onOpen: (route) => update({ route }, true),
        onReasoning: (r) => {
          reasoningAt ??= performance.now();
          const first = firstToken();
          update({ ...first, reasoning: answer.reasoning + r }, 'phase' in first);
        },
        onContent: (c) => {
          const thought =
            answer.reasoning && answer.thoughtMs === null ? { thoughtMs: Math.round(performance.now() - (reasoningAt ?? startedAt)) } : {};
          const first = firstToken();
          update({ ...first, ...thought, content: answer.content + c }, 'phase' in first);
        },
        onStreamError: (message) => update({ phase: 'stream_error', error: message }, true),
      });
      if (answer.phase !== 'stream_error') {
        update({ phase: 'done', truncated: !result.finished }, true);
      }
    } catch (err) {
      if (isAbort(err)) {
        update({ phase: 'stopped' }, true);
      } else if (err instanceof APIError) {
        const route = answer.route ?? { requestId: err.requestId, servedModel: null, fallback: false };
        // The record, when its event came first, says the same one attempt a line.
        const record = (route.requestId && this.live.recentRequest(route.requestId)) || null;
        update({ phase: 'failed', error: err.message, route, record }, true);
      } else {
        update({ phase: 'failed', error: err instanceof Error ? err.message : String(err) }, true);
      }
    } finally {
      this.busy = false;
      this.ctl = null;
      this.notifyNow();
    }

    const id = answer.route?.requestId;
    if (id && !answer.record) {
      try {
        const record = this.live.recentRequest(id) ?? (await this.client.requestWhenRecorded(id));
        update({ record }, true);
      } catch {
        // The notice falls back to the headers alone.
      }
    }
  }

  private notifySoon(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const flush = () => {
      this.scheduled = false;
      // While tokens stream, the conversation is written now and then.
      this.notifyNow(performance.now() - this.keptAt >= KEEP_EVERY_MS);
    };
    if (typeof requestAnimationFrame === 'function' && typeof document !== 'undefined' && !document.hidden) {
      requestAnimationFrame(flush);
    } else {
      setTimeout(flush, 50);
    }
  }

  /** notifyNow tells the views; with keep (at each change of phase, and every KEEP_EVERY_MS while tokens stream, not at every token) it writes the conversation too. */
  private notifyNow(keep = true): void {
    if (keep) this.keep();
    for (const fn of this.listeners) fn();
  }
}
