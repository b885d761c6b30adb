import { formatMs } from '../format';
import type { Progress } from '../inflight';
import { CopyButton } from '../ui/CopyButton';
import { Markdown } from '../ui/Markdown';
import type { Attempt, RequestRecord } from '../types';
import { attemptReason, failedAttempts, failoverLine, failoverSummary, firstTokenTime, rawErrors, rawErrorsOf } from './failover';
import type { AnswerTurn } from './session';
import { Waiting } from './Waiting';

interface Props {
  turn: AnswerTurn;
  /** What the live events say of the request while it waits for its first token. */
  progress?: Progress | null;
  /** The clock for the countdowns (Date.now()). */
  now?: number;
}

/** Answer is one assistant message with what the router did under it. */
export function Answer({ turn, progress = null, now = Date.now() }: Props) {
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
      {/* Before the first token the wait says what happens; "Thinking…" starts with the reasoning. */}
      {(reasoning || (turn.thinking && phase === 'streaming' && !content)) && (
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
      {phase === 'waiting' && !reasoning && <Waiting model={turn.model} progress={progress} startedAt={turn.startedAt} now={now} />}
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
            <FailureWords error={error} record={record} progress={progress} />
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
          {fallback && <FailoverNotice record={record} served={served} failed={progress?.failed ?? []} />}
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
 * candidate, from the request's record, else from the attempts the live
 * events told, else the server's message (it names the same attempts in
 * one long line). Candidates that cannot do this kind of request (an
 * embedding model asked to chat: fault `capability`) are set apart: they
 * were never a way to answer it.
 */
function FailureWords({ error, record, progress }: { error: string; record: RequestRecord | null; progress: Progress | null }) {
  const failed = record ? failedAttempts(record) : (progress?.failed ?? []);
  const tried = failed.filter((a) => a.fault !== 'capability');
  const unfit = failed.filter((a) => a.fault === 'capability');
  if (tried.length === 0) {
    return (
      <>
        <strong>The request failed.</strong> {error}
      </>
    );
  }
  return (
    <>
      <strong>{tried.length > 1 ? `None of the ${tried.length} candidates could answer:` : 'The request failed:'}</strong>
      <Reasons attempts={tried} />
      {unfit.length > 0 && (
        <div class="muted small attempt-unfit" data-testid="attempt-unfit">
          Not able to do this kind of request:
          <Reasons attempts={unfit} />
        </div>
      )}
    </>
  );
}

/**
 * FailoverNotice says why another model answered, in plain words; the
 * attempts' raw errors are inside, for those who open it. Before the
 * request's record comes (while the answer streams) the words come from
 * the attempts the live events told.
 */
function FailoverNotice({ record, served, failed }: { record: RequestRecord | null; served: string; failed: Attempt[] }) {
  const raw = record ? rawErrors(record) : rawErrorsOf(failed);
  const line = (
    <>
      <span aria-hidden="true">↪ </span>
      {record ? failoverSummary(record) : failed.length ? failoverLine(failed, served) : `Failover — served by ${served}`}
    </>
  );
  if (raw.length === 0) {
    return (
      <span class="failover-notice" data-testid="failover-notice" role="note">
        {line}
      </span>
    );
  }
  return (
    <details class="failover-notice" data-testid="failover-notice" role="note">
      <summary>{line}</summary>
      <ul class="failover-raw mono small" data-testid="failover-raw">
        {raw.map((e, i) => (
          <li key={i}>{e}</li>
        ))}
      </ul>
    </details>
  );
}

/** One line per attempt: in words, naming the candidate, why it did not answer; its raw error on hover. */
function Reasons({ attempts }: { attempts: Attempt[] }) {
  return (
    <ul class="attempt-reasons">
      {attempts.map((a) => (
        <li key={a.order} title={a.error || undefined}>
          {attemptReason(a)}
        </li>
      ))}
    </ul>
  );
}
