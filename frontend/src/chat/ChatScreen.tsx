import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Client } from '../api';
import { FaultPanel } from '../demo/FaultPanel';
import { useAsync, useNow, useObservable } from '../hooks';
import type { LiveStore } from '../store';
import { Answer } from './Answer';
import { Composer } from './Composer';
import { modelOptions } from './models';
import { EmptyChat } from './EmptyChat';
import type { AnswerTurn, ChatSession } from './session';

interface Props {
  client: Client;
  live: LiveStore;
  session: ChatSession;
}

const MODEL_KEY = 'switchyard.chat.model';
const THINK_KEY = 'switchyard.chat.thinking';

function stored(key: string, fallback: string): string {
  try {
    return localStorage.getItem(key) ?? fallback;
  } catch {
    return fallback;
  }
}

function store(key: string, value: string): void {
  try {
    localStorage.setItem(key, value);
  } catch {
    // storage disabled
  }
}

export function ChatScreen({ client, live, session }: Props) {
  useObservable(session);
  useObservable(live);
  const status = live.status;
  const [model, setModel] = useState(() => stored(MODEL_KEY, 'auto'));
  const [thinking, setThinking] = useState(() => stored(THINK_KEY, 'false') === 'true');
  const [text, setText] = useState('');
  const input = useRef<HTMLTextAreaElement>(null);
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  // What /v1/models serves, again when a reload changes the fleet's ids
  // (a rename keeps its size), so that a removed id is no longer offered.
  const fleetIds = status?.candidates?.map((c) => c.id).join('\n');
  const [list] = useAsync((signal) => client.models(signal), [client, fleetIds]);
  const served = useMemo(() => (list.state === 'error' ? [] : (list.value?.data.map((d) => d.id) ?? [])), [list]);

  useEffect(() => input.current?.focus(), []);

  const models = useMemo(() => modelOptions(status, served, thinking), [status, served, thinking]);
  const effectiveModel = models.some((m) => m.id === model) ? model : 'auto';

  // Follow the stream while the reader is at the bottom; stop following when
  // they scroll up. The empty chat reads from its top.
  const empty = session.turns.length === 0;
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stick.current && !empty) el.scrollTop = el.scrollHeight;
  });
  useLayoutEffect(() => {
    if (empty && scroller.current) scroller.current.scrollTop = 0;
  }, [empty]);

  // The answer waiting for its first token counts down its candidate's deadline.
  const now = useNow(250, session.busy);
  // An answer whose record is not there yet (a failure, a failover while it
  // streams) tells the attempts the events told.
  const progressOf = (t: AnswerTurn) => {
    const id = t.route?.requestId;
    if (t.phase === 'waiting') return (id ? live.inflight.get(id) : live.inflight.startedAfter(t.liveMark)) ?? null;
    if (!t.record && id) return live.inflight.get(id) ?? null;
    return null;
  };
  // The record may have come with the live events before the session fetched it.
  const withRecord = (t: AnswerTurn): AnswerTurn => {
    const id = t.route?.requestId;
    const r = !t.record && id && t.phase !== 'waiting' && t.phase !== 'streaming' ? live.recentRequest(id) : undefined;
    return r ? { ...t, record: r } : t;
  };
  const onScroll = () => {
    const el = scroller.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 60;
  };

  // Esc stops a running answer from anywhere on this screen.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && session.busy) session.stop();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [session]);

  const send = () => {
    if (!text.trim() || session.busy) return;
    stick.current = true;
    void session.send(text, effectiveModel, thinking);
    setText('');
  };

  // A suggestion is sent as it is.
  const suggest = (t: string) => {
    if (session.busy) return;
    stick.current = true;
    void session.send(t, effectiveModel, thinking);
    input.current?.focus();
  };

  return (
    <section class="screen chat-screen" aria-labelledby="chat-title">
      <header class="screen-head">
        <h1 id="chat-title">Chat</h1>
        <div class="screen-actions">
          {status?.demo && <FaultPanel client={client} status={status} compact />}
          <button
            type="button"
            class="btn btn-ghost btn-small"
            onClick={() => session.clear()}
            disabled={session.busy || session.turns.length === 0}
          >
            New chat
          </button>
        </div>
      </header>
      <div class="chat-log" ref={scroller} onScroll={onScroll} role="log" aria-live="polite" aria-label="Conversation">
        {empty ? (
          <EmptyChat status={status} onSuggest={suggest} />
        ) : (
          session.turns.map((t) =>
            t.kind === 'user' ? (
              <article key={t.key} class="msg msg-user" data-testid="question">
                <div class="msg-role" aria-hidden="true">
                  You
                </div>
                <div class="msg-text">{t.text}</div>
              </article>
            ) : (
              <Answer key={t.key} turn={withRecord(t)} progress={progressOf(t)} now={now} />
            ),
          )
        )}
      </div>
      <Composer
        models={models}
        model={effectiveModel}
        onModel={(id) => {
          setModel(id);
          store(MODEL_KEY, id);
        }}
        thinking={thinking}
        onThinking={(on) => {
          setThinking(on);
          store(THINK_KEY, String(on));
        }}
        text={text}
        onText={setText}
        busy={session.busy}
        onSend={send}
        onStop={() => session.stop()}
        inputRef={input}
      />
    </section>
  );
}
