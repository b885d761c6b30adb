import type { ConnState } from '../api';
import { formatCountdown } from '../format';
import { useNow } from '../hooks';

interface Props {
  conn: ConnState;
  everConnected: boolean;
  base: string;
  onRetry(): void;
}

/** ConnectionBanner shows while the live link to the server is down. */
export function ConnectionBanner({ conn, everConnected, base, onRetry }: Props) {
  const reconnecting = conn.kind === 'reconnecting';
  const now = useNow(250, reconnecting);
  if (conn.kind === 'open' || conn.kind === 'unauthorized') return null;
  if (conn.kind === 'connecting' && !everConnected) return null;
  const where = base || window.location.host || 'the server';
  const wait = reconnecting ? formatCountdown(Math.max(0, conn.retryAt - now)) : '';
  return (
    <div class="banner banner-bad" role="status" aria-live="polite" data-testid="reconnect-banner">
      <span class="dot dot-bad pulse" aria-hidden="true" />
      <span>
        {everConnected ? 'Lost the connection to Switchyard' : 'Cannot reach Switchyard'} at {where}
        {reconnecting ? ` — ${conn.reason}; retrying in ${wait}` : ' — connecting…'}
      </span>
      {reconnecting && (
        <button type="button" class="btn btn-small" onClick={onRetry}>
          Retry now
        </button>
      )}
    </div>
  );
}
