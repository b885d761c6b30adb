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
