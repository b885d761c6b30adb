import { formatClock } from '../format';
import type { Breaker } from '../types';
import type { BadgeTone } from '../ui/Badge';

/** breakerState normalises the state name to closed | open | half_open. */
export function breakerState(s: string): string {
  return s.toLowerCase().replace(/[-\s]/g, '_');
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
  hint: string;
}

/**
 * breakerFact is what a card says about its breaker next to the other
 * facts. The failure count means something only while closed: the breaker
 * starts it again from zero when it opens. An open or half-open breaker
 * says since when it is so instead; the card's banner says what comes next.
 */
export function breakerFact(b: Breaker): BreakerFact {
  switch (breakerState(b.state)) {
    case 'open':
      return {
        term: 'Open since',
        value: formatClock(b.since),
        hint: 'When the breaker tripped. It skips this candidate until the cool-down ends.',
      };
    case 'half_open':
      return {
        term: 'Half-open since',
        value: formatClock(b.since),
        hint: 'When the cool-down ended. One trial request decides: success closes the breaker, failure opens it again.',
      };
    default:
      return {
        term: 'Failures in a row',
        value: String(b.failures),
        hint: 'Failed attempts since the last success. Enough of them in a row open the breaker.',
      };
  }
}
