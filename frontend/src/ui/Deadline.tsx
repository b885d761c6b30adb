import { formatCountdown, formatMs } from '../format';
import type { Wait } from '../inflight';

interface Props {
  wait: Wait;
  now: number;
  testid?: string;
}

/**
 * Deadline is a first-token wait's countdown: the time left in words and a
 * bar that drains to the deadline. The seconds change every second, so they
 * are hidden from screen readers, which read the deadline once instead.
 */
export function Deadline({ wait, now, testid }: Props) {
  // A clock read a moment before the event arrived must not show more than the whole deadline.
  const left = Math.min(wait.deadlineMs, Math.max(0, wait.endsAt - now));
  const share = wait.deadlineMs > 0 ? Math.min(1, left / wait.deadlineMs) : 0;
  return (
    <span class="deadline" data-testid={testid}>
      <span class="deadline-text mono" aria-hidden="true">
        {left > 0 ? `${formatCountdown(left)} left` : 'deadline reached'}
      </span>
      <span class="sr-only">first-token deadline {formatMs(wait.deadlineMs)}</span>
      <span class="deadline-track" aria-hidden="true">
        <span class={`deadline-fill ${share < 0.25 ? 'deadline-low' : ''}`} style={{ width: `${share * 100}%` }} />
      </span>
    </span>
  );
}
