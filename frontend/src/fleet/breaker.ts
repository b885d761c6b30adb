import { formatClock } from '../format';
import type { Breaker, BreakerChange } from '../types';
import type { BadgeTone } from '../ui/Badge';

/** breakerState normalises the state name to closed | open | half_open. */
export function breakerState(s: string): string {
  return s.toLowerCase().replace(/[-\s]/g, '_');
}

/** breakerLabel is a state as words show it: closed, open, half-open. */
export function breakerLabel(s: string): string {
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

/** breakerHint says in plain words what a breaker state means, for a tooltip. */
export function breakerHint(s: string): string {
  switch (breakerState(s)) {
    case 'closed':
      return 'Closed — healthy: requests go through.';
    case 'open':
      return 'Open — tripped after repeated failures: skipped until the cool-down ends.';
    case 'half_open':
      return 'Half-open — cool-down over: the next request is a single trial.';
    default:
      return `Circuit breaker state ${s}.`;
  }
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
        term: 'Open since',
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
        term: 'Half-open since',
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
