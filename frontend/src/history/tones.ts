import type { BadgeTone } from '../ui/Badge';

export function statusTone(status: string): BadgeTone {
  switch (status) {
    case 'ok':
      return 'ok';
    case 'client_abort':
      return 'muted';
    default:
      return 'bad';
  }
}
