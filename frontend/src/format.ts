// Small pure formatters shared by the screens.

/**
 * formatCountdown renders a remaining time for a live countdown: whole
 * seconds rounded up ("30s", "1s"), "m:ss" from a minute, "h:mm:ss" from an
 * hour. Zero or less is "0s". Rounding up means the display reaches "0s"
 * exactly when the time is over, never a second early.
 */
export function formatCountdown(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  const total = Math.ceil(ms / 1000);
  if (total < 60) return `${total}s`;
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const ss = String(s).padStart(2, '0');
  if (h === 0) return `${m}:${ss}`;
  return `${h}:${String(m).padStart(2, '0')}:${ss}`;
}

/**
 * remainingAt is the countdown's value at `now` for a value `remainingMs`
 * reported at `receivedAt`, never below zero.
 */
export function remainingAt(remainingMs: number, receivedAt: number, now: number): number {
  return Math.max(0, remainingMs - (now - receivedAt));
}

/** formatMs renders a duration compactly: "850 ms", "2.1 s", "12 s", "3m 05s". */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10000) return `${(Math.round(ms / 100) / 10).toFixed(1)} s`;
  if (ms < 60000) return `${Math.round(ms / 1000)} s`;
  const m = Math.floor(ms / 60000);
  const s = Math.round((ms % 60000) / 1000);
  return s === 60 ? `${m + 1}m 00s` : `${m}m ${String(s).padStart(2, '0')}s`;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** formatBytes renders a byte count in binary units: "512 MiB", "7.6 GiB". */
export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n) || n < 0) return '—';
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  const digits = u === 0 || v >= 100 ? 0 : 1;
  return `${v.toFixed(digits)} ${UNITS[u]}`;
}

/** formatPct renders a percentage with no decimals below 100. */
export function formatPct(p: number | null | undefined): string {
  if (p === null || p === undefined || !Number.isFinite(p)) return '—';
  return `${Math.round(p)}%`;
}

/** ratio is used/total clamped to [0, 1]; 0 when total is unknown. */
export function ratio(used: number, total: number): number {
  if (!total || total <= 0) return 0;
  return Math.min(1, Math.max(0, used / total));
}

/** formatClock renders an RFC 3339 time as local HH:MM:SS. */
export function formatClock(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

/** formatDateTime renders an RFC 3339 time as "Mon 14 10:32:05" style local text. */
export function formatDateTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  const time = formatClock(iso);
  if (sameDay) return time;
  return `${d.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

/** formatTokens renders prompt → completion token counts, or a dash when unknown. */
export function formatTokens(prompt: number, completion: number): string {
  if (!prompt && !completion) return '—';
  return `${prompt || 0} → ${completion || 0}`;
}

/** humanOutcome turns an attempt outcome into words. */
export function humanOutcome(outcome: string): string {
  switch (outcome) {
    case 'success':
      return 'success';
    case 'timeout':
      return 'timeout';
    case 'no_content':
      return 'no content';
    case 'skipped_open':
      return 'skipped (breaker open)';
    case 'client_abort':
      return 'stopped by client';
    case 'not_retryable':
      return 'not retryable';
    case 'failed_after_commit':
      return 'failed after commit';
    case 'hedge_lost':
      return 'hedge lost';
    case 'demoted':
      return 'demoted (GPU memory pressure)';
    default:
      return outcome.replace(/_/g, ' ');
  }
}

/** humanStatus turns a request status into words. */
export function humanStatus(status: string): string {
  switch (status) {
    case 'ok':
      return 'ok';
    case 'client_abort':
      return 'stopped';
    case 'upstream_error_after_commit':
      return 'failed mid-stream';
    default:
      return status.replace(/_/g, ' ');
  }
}

/**
 * failureSummary says in words why a request got no answer when its error
 * is only the sum of its attempts' (failure `unavailable` or
 * `no_candidates`: "all candidates failed: a: …; b: …"), for views that
 * show each attempt's reason beside it; '' for the other failures, whose
 * error says something the attempts do not.
 */
export function failureSummary(failure: string, attempts: number): string {
  switch (failure) {
    case 'unavailable':
      return attempts > 1 ? `None of the ${attempts} candidates could answer; each one’s reason is on its row.` : 'The candidate could not answer; its reason is on its row.';
    case 'no_candidates':
      return 'No candidate could take the request now; each one’s reason is on its row.';
    default:
      return '';
  }
}
