import type { Status } from '../types';

interface Props {
  status: Status | null;
  onSuggest(text: string): void;
}

const SUGGESTIONS = [
  'Explain a circuit breaker in two sentences.',
  'Write a Go function that reverses a string, with a test.',
  'What should I check when a local model answers slowly?',
];

/** EmptyChat says what Switchyard is and offers something to try. */
export function EmptyChat({ status, onSuggest }: Props) {
  const primary = status?.default_model;
  return (
    <div class="empty-chat">
      <h2>One chat box, your whole fleet behind it</h2>
      <p>
        Switchyard sends each message to the best healthy model you run. If one fails before its first token, the
        request moves to the next candidate and the answer still arrives; the line under it says who served it and
        what went wrong on the way.
      </p>
      {status?.demo && primary && (
        <p class="note note-info">
          This is the demo fleet. Open <strong>Demo faults</strong> above, choose “Crash {primary} before first token”,
          then ask something: you will see the failover happen.
        </p>
      )}
      <div class="suggestions" role="group" aria-label="Suggestions">
        {SUGGESTIONS.map((s) => (
          <button type="button" class="suggestion" key={s} onClick={() => onSuggest(s)}>
            {s}
          </button>
        ))}
      </div>
    </div>
  );
}
