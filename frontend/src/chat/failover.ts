// Words for what the router did with one request, built from its record.

import { formatMs, humanOutcome } from '../format';
import type { Attempt, RequestRecord } from '../types';

/** attemptReason is "candidate: why", using the ready-made error text when there is one. */
export function attemptReason(a: Attempt): string {
  return `${a.candidate}: ${a.error || humanOutcome(a.outcome)}`;
}

/**
 * failedAttempts are the attempts that did not serve the request, in order,
 * up to the one that served: candidates recorded after it (skipped or
 * demoted, their turn never came) did not stand in its way.
 */
export function failedAttempts(r: RequestRecord): Attempt[] {
  const sorted = [...(r.attempts ?? [])].sort((a, b) => a.order - b.order);
  const served = sorted.findIndex((a) => a.outcome === 'success');
  return (served < 0 ? sorted : sorted.slice(0, served)).filter((a) => a.outcome !== 'hedge_lost');
}

/**
 * failoverSummary reads like "qwen3-8b: no first token in 2.1s → served by
 * llama3-vllm"; several failures are joined with "; ".
 */
export function failoverSummary(r: RequestRecord): string {
  const reasons = failedAttempts(r).map(attemptReason);
  const served = r.served_candidate ? `served by ${r.served_candidate}` : 'no candidate served';
  return reasons.length ? `${reasons.join('; ')} → ${served}` : served;
}

/** ttftText prefers the client's own measurement and adds the router's when they differ. */
export function ttftText(clientMs: number | null, record: RequestRecord | null): string {
  const server = record && record.ttft_ms > 0 ? record.ttft_ms : null;
  if (clientMs === null && server === null) return '';
  if (clientMs === null) return `TTFT ${formatMs(server)}`;
  if (server === null) return `TTFT ${formatMs(clientMs)}`;
  return `TTFT ${formatMs(clientMs)} (router ${formatMs(server)})`;
}
