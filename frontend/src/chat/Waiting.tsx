import type { Progress } from '../inflight';
import { Deadline } from '../ui/Deadline';
import { attemptWhy } from './failover';

interface Props {
  /** The model asked for: 'auto' or a candidate id. */
  model: string;
  /** What the live events told of this request so far, when they did. */
  progress: Progress | null;
  /** When the question was sent (Date.now()), and the clock now. */
  startedAt: number;
  now: number;
}

/**
 * Waiting is what an answer shows before its first token: each candidate
 * that already failed, and the one waited on now with its first-token
 * deadline counting down. Without live events (the link is down) it says
 * how long it has been routing.
 */
export function Waiting({ model, progress, startedAt, now }: Props) {
  const waits = progress?.waits ?? [];
  const failed = progress?.failed ?? [];
  const elapsed = Math.floor((now - startedAt) / 1000);
  return (
    <div class="waiting" data-testid="answer-waiting">
      {failed.length > 0 && (
        <ul class="wait-failed small" aria-label="Candidates that failed so far">
          {failed.map((a) => (
            <li key={a.order} data-testid="wait-failed">
              <span class="attempt-candidate">{a.candidate}</span> <span class="muted">{attemptWhy(a)}</span>
            </li>
          ))}
        </ul>
      )}
      {waits.length === 0 ? (
        <div class="wait-line muted">
          <span class="spinner spinner-small" aria-hidden="true" />{' '}
          {progress?.committed ? (
            <>
              <strong class="mono">{progress.committed}</strong> is answering…
            </>
          ) : failed.length ? (
            'Trying the next candidate…'
          ) : (
            `Routing to ${model === 'auto' ? 'the best healthy model' : model}…`
          )}
          {elapsed >= 1 && (
            <span class="mono small" aria-hidden="true">
              {' '}
              {elapsed}s
            </span>
          )}
        </div>
      ) : (
        waits.map((w) => (
          <div
            class="wait-line"
            key={w.order}
            data-testid="wait"
            data-candidate={w.candidate}
            title={`If ${w.candidate} sends no token before its first-token deadline, Switchyard gives up on it and tries the next candidate; you only see the answer that comes through.`}
          >
            <span class="spinner spinner-small" aria-hidden="true" />
            <span>
              Waiting for <strong class="mono">{w.candidate}</strong>’s first token
              {w.cold ? <span class="muted"> (its model is loading)</span> : null}
            </span>
            <Deadline wait={w} now={now} testid="wait-countdown" />
          </div>
        ))
      )}
    </div>
  );
}
