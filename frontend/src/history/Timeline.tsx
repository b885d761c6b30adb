import { failoverSummary, rawErrors } from '../chat/failover';
import { failureSummary, formatDateTime, formatMs, formatTokens, humanOutcome, humanStatus } from '../format';
import { layoutTimeline } from '../timeline';
import { Badge } from '../ui/Badge';
import type { RequestRecord } from '../types';
import { statusTone } from './tones';

/** Timeline draws every attempt of one request on a shared time axis. */
export function Timeline({ r, onClose }: { r: RequestRecord; onClose(): void }) {
  const attempts = r.attempts ?? [];
  const layout = layoutTimeline(r.started_at, r.latency_ms, attempts);
  // An error that only sums up the attempts is said once, on their rows.
  // (Candidates that cannot do this kind of request are not counted, as in the chat.)
  const summary = r.error && attempts.length > 0 ? failureSummary(r.failure, attempts.filter((a) => a.fault !== 'capability').length) : '';
  return (
    <section class="card timeline-card" data-testid="timeline" data-request-id={r.id} aria-labelledby="timeline-title">
      <div class="card-head">
        <h2 id="timeline-title">
          Request <span class="mono">…{r.id.slice(-8)}</span>
        </h2>
        <button type="button" class="btn btn-ghost btn-small" onClick={onClose} aria-label="Close the timeline">
          Close
        </button>
      </div>
      <dl class="stats stats-wide">
        <div>
          <dt>Started</dt>
          <dd>{formatDateTime(r.started_at)}</dd>
        </div>
        <div>
          <dt>Route</dt>
          <dd class="mono">
            {r.requested_model || 'auto'} → {r.served_candidate || '—'}
          </dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>
            <Badge tone={statusTone(r.status)}>{humanStatus(r.status)}</Badge>
            {r.is_fallback && (
              <>
                {' '}
                <Badge tone="warn">fallback</Badge>
              </>
            )}
          </dd>
        </div>
        <div>
          <dt>TTFT · latency</dt>
          <dd class="mono">
            {formatMs(r.ttft_ms || null)} · {formatMs(r.latency_ms)}
          </dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd class="mono">{formatTokens(r.prompt_tokens, r.completion_tokens)}</dd>
        </div>
        <div>
          <dt>Client</dt>
          <dd>
            {r.protocol}
            {r.stream ? ', stream' : ''}
            {r.thinking ? ', thinking' : ''}
          </dd>
        </div>
      </dl>
      {r.is_fallback && (
        <p class="note small" data-testid="timeline-reason" title={rawErrors(r).join('\n') || undefined}>
          ↪ {failoverSummary(r)}
        </p>
      )}
      {r.error && (
        <p class="note note-bad small" data-testid="timeline-error">
          {summary || r.error}
        </p>
      )}
      {attempts.length === 0 ? (
        <p class="muted small">No attempts were made (the request was rejected before routing).</p>
      ) : (
        <div class="tl" role="list" aria-label="Attempts on a shared time axis">
          <div class="tl-axis" aria-hidden="true">
            <span class="tl-label" />
            <div class="tl-track">
              {layout.ticks.map((t) => (
                <span key={t.ms} class="tl-tick" style={{ left: `${t.pct}%` }}>
                  {t.label}
                </span>
              ))}
            </div>
          </div>
          {layout.bars.map((b) => {
            const a = b.attempt;
            // The error, unless the outcome's words say it already ("skipped (breaker open)" and "breaker open").
            const words = humanOutcome(a.outcome);
            const text = a.error && !words.toLowerCase().includes(a.error.toLowerCase()) ? `${words} — ${a.error}` : words;
            return (
              <div class="tl-row" role="listitem" key={a.order}>
                <span class="tl-label mono" title={a.candidate}>
                  {a.order + 1}. {a.candidate}
                </span>
                <div class="tl-track">
                  {layout.ticks.map((t) => (
                    <span key={t.ms} class="tl-grid" style={{ left: `${t.pct}%` }} aria-hidden="true" />
                  ))}
                  <div
                    class={`tl-bar outcome-${a.outcome}`}
                    data-testid="timeline-bar"
                    data-outcome={a.outcome}
                    style={{ left: `${b.leftPct}%`, width: `${b.widthPct}%` }}
                    title={`${a.candidate}: ${text} (${formatMs(a.duration_ms)})`}
                  />
                  {b.deadlinePct !== null && (
                    <span
                      class="tl-deadline"
                      style={{ left: `${b.deadlinePct}%` }}
                      title={`first-token deadline ${formatMs(a.deadline_ms)}`}
                      aria-hidden="true"
                    />
                  )}
                  <span
                    class={`tl-text ${b.leftPct > 55 ? 'tl-text-left' : ''}`}
                    // Focus shows a cut-off error whole, for those who can't hover.
                    tabIndex={0}
                    title={text}
                    style={
                      b.leftPct > 55
                        ? { right: `${Math.max(0, 100 - b.leftPct - b.widthPct)}%` }
                        : { left: `${b.leftPct}%`, maxWidth: `${100 - b.leftPct}%` }
                    }
                  >
                    {text} · {formatMs(a.duration_ms)}
                    {a.cold ? ' · cold' : ''}
                    {a.demoted ? ' · demoted' : ''}
                  </span>
                </div>
              </div>
            );
          })}
          <div class="tl-legend muted small" aria-hidden="true">
            <span>
              <i class="tl-swatch outcome-success" /> success
            </span>
            <span>
              <i class="tl-swatch outcome-timeout" /> timeout / busy
            </span>
            <span>
              <i class="tl-swatch outcome-error" /> failure
            </span>
            <span>
              <i class="tl-swatch outcome-skipped_open" /> skipped / aborted
            </span>
            <span>
              <i class="tl-deadline-swatch" /> first-token deadline
            </span>
          </div>
        </div>
      )}
    </section>
  );
}
