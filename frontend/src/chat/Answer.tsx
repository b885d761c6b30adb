import { formatMs } from '../format';
import { CopyButton } from '../ui/CopyButton';
import { Markdown } from '../ui/Markdown';
import type { RequestRecord } from '../types';
import { attemptWhy, failedAttempts, failoverSummary, firstTokenTime } from './failover';
import type { AnswerTurn } from './session';

/** Answer is one assistant message with what the router did under it. */
export function Answer({ turn }: { turn: AnswerTurn }) {
  const { phase, content, reasoning, route, record, error } = turn;
  const live = phase === 'waiting' || phase === 'streaming';
  const served = route?.servedModel || record?.served_candidate || '';
  const fallback = route?.fallback || record?.is_fallback || false;
  const ttft = firstTokenTime(turn.ttftMs, record);
  const requestId = route?.requestId ?? record?.id ?? null;

  return (
    <article class={`msg msg-answer phase-${phase}`} data-testid="answer" data-phase={phase} aria-busy={live}>
      <div class="msg-role" aria-hidden="true">
        Switchyard
      </div>
      {(reasoning || (turn.thinking && live && !content)) && (
        <details class="thinking" data-testid="answer-thinking">
          <summary>
            {live && !content ? (
              <span>
                <span class="spinner spinner-small" aria-hidden="true" /> Thinking…
              </span>
            ) : turn.thoughtMs !== null ? (
              `Thought for ${formatMs(turn.thoughtMs)}`
            ) : (
              'Thinking'
            )}
          </summary>
          <div class="thinking-body">{reasoning || '…'}</div>
        </details>
      )}
      {phase === 'waiting' && !reasoning && (
        <div class="waiting muted" role="status">
          <span class="spinner spinner-small" aria-hidden="true" /> Routing to {turn.model === 'auto' ? 'the best healthy model' : turn.model}…
        </div>
      )}
      <Markdown text={content} testid="answer-content" class={phase === 'streaming' ? 'streaming' : ''} />
      {phase === 'stopped' && <p class="muted small">Stopped.</p>}
      {turn.truncated && phase === 'done' && (
        <p class="note note-warn small">The stream ended without a finish marker; the answer may be cut short.</p>
      )}
      {error && (
        <div class="answer-error" data-testid="answer-error" role="alert">
          {phase === 'stream_error' ? (
            <>
              <strong>The answer broke off mid-stream.</strong> {error}
              <div class="muted small">After the first token the router cannot switch models, so the text above is partial.</div>
            </>
          ) : (
            <FailureWords error={error} record={record} />
          )}
        </div>
      )}
      {(served || ttft || requestId) && (
        <footer class="answer-meta">
          {served && (
            <span>
              Served by{' '}
              <strong class="mono" data-testid="served-model">
                {served}
              </strong>
            </span>
          )}
          {ttft && (
            <span class="ttft" data-testid="ttft" title={ttft.title}>
              {ttft.text}
            </span>
          )}
          {fallback && (
            <span class="failover-notice" data-testid="failover-notice" role="note">
              <span aria-hidden="true">↪ </span>
              {record ? failoverSummary(record) : `Failover — served by ${served}`}
            </span>
          )}
          <span class="meta-actions">
            {requestId && !live && (
              <a href={`#/history/${encodeURIComponent(requestId)}`} class="link small">
                Timeline
              </a>
            )}
            {content && !live && <CopyButton text={content} label="Copy answer" testid="copy-answer" />}
          </span>
        </footer>
      )}
    </article>
  );
}

/**
 * FailureWords says why a request got no answer, once: one line per
 * candidate from the request's record, or the server's message until the
 * record is there (the message names the same attempts in one long line).
 */
function FailureWords({ error, record }: { error: string; record: RequestRecord | null }) {
  const failed = record ? failedAttempts(record) : [];
  if (failed.length === 0) {
    return (
      <>
        <strong>The request failed.</strong> {error}
      </>
    );
  }
  return (
    <>
      <strong>{failed.length > 1 ? `None of the ${failed.length} candidates could answer:` : 'The request failed:'}</strong>
      <ul class="attempt-reasons">
        {failed.map((a) => (
          <li key={a.order}>
            <span class="attempt-candidate">{a.candidate}</span> {attemptWhy(a)}
          </li>
        ))}
      </ul>
    </>
  );
}
