import { useEffect, useRef, useState } from 'preact/hooks';
import type { Ref } from 'preact';

export interface ModelOption {
  id: string;
  label: string;
  /** Words on hover: what a breaker state in the label means. */
  title?: string;
}

interface Props {
  models: ModelOption[];
  model: string;
  onModel(id: string): void;
  thinking: boolean;
  onThinking(on: boolean): void;
  text: string;
  onText(t: string): void;
  busy: boolean;
  onSend(): void;
  onStop(): void;
  inputRef: Ref<HTMLTextAreaElement>;
}

/** Composer: model picker, thinking toggle, the message box, send and stop. */
export function Composer(p: Props) {
  const local = useRef<HTMLTextAreaElement | null>(null);

  // Grow the box with its text, up to a limit set in CSS.
  useEffect(() => {
    const ta = local.current;
    if (!ta) return;
    ta.style.height = 'auto';
    ta.style.height = `${ta.scrollHeight}px`;
  }, [p.text]);

  // Enter while an answer streams sends nothing: say so, until it ends.
  const [held, setHeld] = useState(false);
  useEffect(() => {
    if (!p.busy) setHeld(false);
  }, [p.busy]);

  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!p.busy) p.onSend();
      else if (p.text.trim()) setHeld(true);
    } else if (e.key === 'Escape' && p.busy) {
      e.preventDefault();
      p.onStop();
    }
  };

  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        if (!p.busy) p.onSend();
      }}
    >
      <div class="composer-controls">
        <label class="inline-field">
          <span>Model</span>
          <select
            value={p.model}
            onChange={(e) => p.onModel((e.target as HTMLSelectElement).value)}
            data-testid="model-select"
          >
            {p.models.map((m) => (
              <option key={m.id} value={m.id} title={m.title}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <label class="switch" title="Ask for reasoning (reasoning_effort: medium)">
          <input
            type="checkbox"
            role="switch"
            checked={p.thinking}
            onChange={(e) => p.onThinking((e.target as HTMLInputElement).checked)}
            data-testid="thinking-toggle"
          />
          <span class="switch-track" aria-hidden="true" />
          <span>Thinking</span>
        </label>
        {held ? (
          <span class="hint note-warn small" role="status" data-testid="busy-hint">
            An answer is still coming: your message waits in the box. Send it when the answer ends, or press Esc to stop it.
          </span>
        ) : (
          <span class="hint muted small">Enter to send · Shift+Enter for a new line · Esc to stop</span>
        )}
      </div>
      <div class="composer-row">
        <label class="sr-only" for="prompt">
          Message
        </label>
        <textarea
          id="prompt"
          ref={(el) => {
            local.current = el;
            if (typeof p.inputRef === 'function') p.inputRef(el);
            else if (p.inputRef) p.inputRef.current = el;
          }}
          rows={1}
          placeholder="Ask anything…"
          value={p.text}
          onInput={(e) => p.onText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={onKeyDown}
          data-testid="prompt"
        />
        {p.busy ? (
          <button type="button" class="btn btn-danger" onClick={p.onStop} data-testid="stop">
            Stop
          </button>
        ) : (
          <button type="submit" class="btn btn-primary" disabled={!p.text.trim()} data-testid="send">
            Send
          </button>
        )}
      </div>
    </form>
  );
}
