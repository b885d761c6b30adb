// Where the API listens, in words (status.listen and status.listen_taken,
// docs/API.md). The desktop app takes a free port when the address it
// wanted is in use; apps set up for that address then miss it, so the UI
// says why the address moved.

import type { Status } from './types';

export interface ListenWords {
  /** Where the API is: host:port. */
  address: string;
  /** The address wanted and found in use, '' when the API is where it was wanted. */
  taken: string;
  /** One sentence for a taken address, '' otherwise. */
  why: string;
}

/** listenWords says where the API listens and, when it moved, why. */
export function listenWords(status: Pick<Status, 'listen' | 'listen_taken'>): ListenWords {
  const address = status.listen;
  const taken = status.listen_taken ?? '';
  const why = taken ? `${taken} was in use (another Switchyard?), so the API is on ${address}.` : '';
  return { address, taken, why };
}
