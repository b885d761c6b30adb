import { formatCountdown, formatMs, remainingAt } from '../format';
import type { Wait } from '../inflight';
import { Badge } from '../ui/Badge';
import { Deadline } from '../ui/Deadline';
import type { BreakerChange, CandidateStatus } from '../types';
import { breakerFact, candidateBadge, serverBusy, serverProblem, shownState } from './breaker';

interface Props {
  c: CandidateStatus;
  /** When the status holding c arrived, and the clock now: remaining times count down locally. */
  receivedAt: number;
  now: number;
  isDefault: boolean;
  isDeep: boolean;
  /** Samples needed before a learned deadline replaces the ceiling (the status's min_samples; docs/DESIGN.md, "The learned deadline"). */
  learnAfter?: number;
  /** The requests waiting on this candidate's first token, the soonest deadline first. */
  waits?: Wait[];
  /** Its last breaker change this page saw, for what tripped it. */
  change?: BreakerChange;
}

export function CandidateCard({ c, receivedAt, now, isDefault, isDeep, learnAfter = 20, waits = [], change }: Props) {
  const cooldown = remainingAt(c.breaker.remaining_ms, receivedAt, now);
  const state = shownState(c.breaker.state, cooldown);
  const badge = candidateBadge(c, cooldown);
  const problem = serverProblem(c);
  const busyWork = problem ? null : serverBusy(c);
  const busy = remainingAt(c.busy_ms, receivedAt, now);
  const ttft = c.ttft;
  const fact = breakerFact(c.breaker, change);
  const next = waits[0];
  return (
    <article
      class={`card candidate state-${state} ${problem ? 'server-down' : ''} ${c.enabled ? '' : 'disabled'}`}
      data-testid={`candidate-${c.id}`}
      aria-labelledby={`cand-${c.id}`}
    >
      <header class="candidate-head">
        <h3 id={`cand-${c.id}`} class="mono">
          {c.id}
        </h3>
        <Badge tone={badge.tone} testid={`breaker-${c.id}`} title={badge.title}>
          {badge.label}
        </Badge>
      </header>
      <div class="candidate-sub muted small">
        <span>{c.provider}</span> · <span class="mono">{c.model}</span>
        <div class="mono truncate" title={c.url}>
          {c.url}
        </div>
      </div>
      <div class="badge-row">
        {isDefault && <Badge tone="accent">default</Badge>}
        {isDeep && <Badge tone="accent">deep thinking</Badge>}
        {c.supports_thinking && <Badge tone="muted">thinking</Badge>}
        {c.embeds && (
          <Badge tone="muted" title={c.embed_only ? 'Makes embeddings only: chats skip it' : 'Makes embeddings too'}>
            embeddings
          </Badge>
        )}
        {c.cold && (
          <Badge tone="info" title="Model not resident: its deadline includes the expected load time">
            cold
          </Badge>
        )}
        {c.demoted && <Badge tone="warn">demoted</Badge>}
        {c.kept_out && (
          <Badge tone="bad" title="Two Switchyards of the team or more see its server failing: skipped as a tripped breaker is">
            kept out by the team
          </Badge>
        )}
        {!c.enabled && <Badge tone="muted">disabled</Badge>}
      </div>

      {problem && (
        <p class="note note-bad small" data-testid={`server-problem-${c.id}`}>
          {problem}
        </p>
      )}
      {busyWork && (
        <p class="note small" data-testid={`server-busy-${c.id}`} title={busyWork.evidence}>
          {busyWork.text}
        </p>
      )}
      {state === 'open' && (
        <p class="cooldown">
          Cooling down — trying again in{' '}
          <strong class="mono" data-testid={`countdown-${c.id}`}>
            {formatCountdown(cooldown)}
          </strong>
        </p>
      )}
      {state === 'half_open' && (
        <p class="cooldown" data-testid={`trying-again-${c.id}`}>
          {c.breaker.probing ? 'Cool-down over: a trial request is in flight; it decides whether the breaker closes.' : 'Cool-down over: the next request is a single trial.'}
        </p>
      )}

      {next && (
        <div
          class="card-wait"
          data-testid={`wait-${c.id}`}
          title={`Switchyard waits up to the first-token deadline (${formatMs(next.deadlineMs)}) for ${c.id} to send a token; if none comes, it tries the next candidate.`}
        >
          <span class="spinner spinner-small" aria-hidden="true" />
          <span>
            {waits.length === 1 ? 'Waiting for its first token' : `${waits.length} requests wait for a first token`}
            {next.cold ? ' (model loading)' : ''}
          </span>
          <Deadline wait={next} now={now} testid={`wait-countdown-${c.id}`} />
        </div>
      )}

      <dl class="stats">
        <div>
          <dt>Priority</dt>
          <dd class="mono">{c.priority}</dd>
        </div>
        <div>
          <dt>TTFT p50 / p95</dt>
          <dd class="mono">
            {ttft && ttft.n > 0 ? (
              <>
                {formatMs(ttft.p50_ms)} / {formatMs(ttft.p95_ms)}
                <span class="muted small"> n={ttft.n}</span>
              </>
            ) : (
              <span class="muted small">no samples yet</span>
            )}
          </dd>
        </div>
        <div
          title={
            c.cold
              ? 'Its model is not loaded: the deadline adds the time a load takes (learned from its loads, else 60s) to the first-token deadline.'
              : !ttft || ttft.n < learnAfter
                ? `Too few answers to learn from yet (${learnAfter} needed): the deadline is the ceiling, first_token_timeout.`
                : 'Learned from its recent times to first token.'
          }
        >
          <dt>First-token deadline</dt>
          <dd class="mono" data-testid={`deadline-${c.id}`}>
            {formatMs(c.deadline_ms)}
            {c.cold ? (
              <span class="muted small"> with a model load</span>
            ) : (
              (!ttft || ttft.n < learnAfter) && <span class="muted small"> ceiling</span>
            )}
          </dd>
        </div>
        <div title={fact.hint} data-testid={`breaker-fact-${c.id}`}>
          <dt>{fact.term}</dt>
          <dd class="mono">{fact.value}</dd>
          {fact.detail && (
            <dd class="muted small" data-testid={`breaker-cause-${c.id}`}>
              {fact.detail}
            </dd>
          )}
        </div>
      </dl>

      {busy > 0 && (
        <p class="note note-warn small">
          Busy — backed off for <span class="mono">{formatCountdown(busy)}</span>
        </p>
      )}
      {c.kept_out && (
        <p class="note note-bad small" data-testid={`kept-out-${c.id}`} title={c.kept_out.reason}>
          Skipped for <span class="mono">{formatCountdown(Math.max(0, Date.parse(c.kept_out.until) - now))}</span>: other
          Switchyards of the team see its server failing ({c.kept_out.reason})
        </p>
      )}
      {c.demoted && (
        <p class="note note-warn small" data-testid={`demoted-${c.id}`}>
          Demoted to the end of the chain{c.pressure?.reason ? `: ${c.pressure.reason}` : ''}
        </p>
      )}
    </article>
  );
}
