import { formatClock } from '../format';
import type { Breaker, BreakerChange, CandidateStatus } from '../types';
import type { BadgeTone } from '../ui/Badge';

/** breakerState normalises the state name to closed | open | half_open. */
export function breakerState(s: string): string {
  return s.toLowerCase().replace(/[-\s]/g, '_');
}

/** breakerLabel is a state in the words people read right: healthy, tripped, trying again. */
export function breakerLabel(s: string): string {
  switch (breakerState(s)) {
    case 'closed':
      return 'healthy';
    case 'open':
      return 'tripped';
    case 'half_open':
      return 'trying again';
    default:
      return s;
  }
}

/** technicalState is the circuit breaker's own name for a state: closed, open, half-open. */
export function technicalState(s: string): string {
  return breakerState(s).replace('_', '-');
}

export function breakerTone(s: string): BadgeTone {
  switch (breakerState(s)) {
    case 'closed':
      return 'ok';
    case 'open':
      return 'bad';
    case 'half_open':
      return 'warn';
    default:
      return 'muted';
  }
}

/** breakerHint says in plain words what a breaker state means, with its technical name, for a tooltip. */
export function breakerHint(s: string): string {
  switch (breakerState(s)) {
    case 'closed':
      return 'Healthy (circuit breaker closed): requests go through.';
    case 'open':
      return 'Tripped (circuit breaker open) after repeated failures: skipped until the cool-down ends.';
    case 'half_open':
      return 'Trying again (circuit breaker half-open): the cool-down is over and the next request is a single trial.';
    default:
      return `Circuit breaker state ${s}.`;
  }
}

/**
 * shownState is the state a card shows: an open breaker whose cool-down
 * has run out is half-open in all but name (the breaker turns half-open
 * when the next request asks it), so it reads "trying again" whichever of
 * the two the last status said.
 */
export function shownState(s: string, cooldownLeftMs: number): string {
  const st = breakerState(s);
  return st === 'open' && cooldownLeftMs <= 0 ? 'half_open' : st;
}

/** A candidate's badge: the breaker's state, unless its server does not answer or lacks the model. */
export interface CandidateBadge {
  label: string;
  tone: BadgeTone;
  title: string;
}

/**
 * candidateBadge is what a card's badge says: "unreachable", "model
 * missing" or "key refused" when the server can't serve (a closed breaker only means no
 * request failed yet), else the breaker in words ("tripped, cooling down"
 * while the countdown runs). The title adds the breaker's technical state.
 */
export function candidateBadge(c: CandidateStatus, cooldownLeftMs: number): CandidateBadge {
  const st = shownState(c.breaker.state, cooldownLeftMs);
  const technical = `Circuit breaker: ${technicalState(c.breaker.state)}.`;
  if (st === 'closed' && c.unreachable) {
    return { label: 'unreachable', tone: 'bad', title: `Its server does not answer (${c.unreachable}). ${technical}` };
  }
  if (st === 'closed' && c.config_error) {
    return { label: 'model missing', tone: 'bad', title: `${c.config_error}. ${technical}` };
  }
  if (st === 'closed' && c.auth_error) {
    return { label: 'key refused', tone: 'bad', title: `${c.auth_error}. ${technical}` };
  }
  const label = st === 'open' ? 'tripped, cooling down' : breakerLabel(st);
  return { label, tone: breakerTone(st), title: breakerHint(st) };
}

/**
 * serverProblem says in a line why a candidate's server can't serve:
 * "Unreachable since 18:41:07 (connection refused)", its model is
 * missing, or it refused Switchyard's key; null while it answers.
 */
export function serverProblem(c: CandidateStatus): string | null {
  if (c.unreachable) {
    const since = c.unreachable_since ? ` since ${formatClock(c.unreachable_since)}` : '';
    return `Unreachable${since} (${c.unreachable})`;
  }
  if (c.config_error) return `Model not found: ${c.config_error}`;
  if (c.auth_error) return `Key refused: ${c.auth_error}`;
  return null;
}

/**
 * serverBusy is what a card says of a server busy with other clients'
 * work (docs/DESIGN.md, "Shared servers"): busy, not sick, apart from its
 * breaker. From the evidence of its last wait behind work Switchyard did
 * not send, or from what the server reports of its queue beyond
 * Switchyard's own requests; null when neither says so.
 */
export function serverBusy(c: CandidateStatus): { text: string; evidence: string } | null {
  const q = c.server_queue;
  const queue = q ? `${q.running} running, ${q.waiting} waiting on its server` : '';
  const others = q ? (q.running ?? 0) + (q.waiting ?? 0) - c.in_flight : 0;
  if (c.busy_with_others) {
    const since = c.busy_since ? ` (${formatClock(c.busy_since)})` : '';
    return { text: `Busy with other clients' work${since}${queue ? `: ${queue}` : ''}. Not counted as a failure.`, evidence: c.busy_with_others };
  }
  if (q && others > 0) {
    return { text: `Busy with other clients' work: ${queue}, ${c.in_flight} of them Switchyard's.`, evidence: 'as its server last reported' };
  }
  return null;
}

/** A term of a candidate card's facts, with the words shown on hover. */
export interface BreakerFact {
  term: string;
  value: string;
  /** What tripped an open breaker, when this page saw it happen: "last failure: HTTP 500". */
  detail: string;
  hint: string;
}

/**
 * breakerFact is what a card says about its breaker next to the other
 * facts. The failure count means something only while closed: the breaker
 * starts it again from zero when it opens, so an open card showed "0
 * failures in a row". An open or half-open breaker says since when it is
 * so instead, and an open one what tripped it when the page saw the change
 * (`change`, the candidate's last breaker event); the card's banner says
 * what comes next.
 */
export function breakerFact(b: Breaker, change?: BreakerChange): BreakerFact {
  switch (breakerState(b.state)) {
    case 'open': {
      const seen = change && breakerState(change.to) === 'open' ? change : null;
      const afterTrial = seen !== null && breakerState(seen.from) === 'half_open';
      const why = seen?.cause ? `${afterTrial ? 'trial failed' : 'last failure'}: ${seen.cause}` : '';
      return {
        term: 'Tripped since',
        value: formatClock(b.since),
        detail: why,
        hint:
          (afterTrial
            ? 'The breaker tripped again because its trial request failed'
            : 'The breaker tripped after failures in a row (selection.failure_threshold in the config)') +
          (seen?.cause ? `; the last was ${seen.cause}. ` : '. ') +
          'Its failure count starts again from zero when it opens. Switchyard skips this candidate until the cool-down ends, then sends one trial request.',
      };
    }
    case 'half_open':
      return {
        term: 'Trying again since',
        value: formatClock(b.since),
        detail: '',
        hint: 'When the cool-down ended. One trial request decides: success closes the breaker, failure opens it again.',
      };
    default:
      return {
        term: 'Failures in a row',
        value: String(b.failures),
        detail: '',
        hint: 'Failed attempts since the last success that were the server’s fault. Enough of them in a row (selection.failure_threshold) open the breaker.',
      };
  }
}
