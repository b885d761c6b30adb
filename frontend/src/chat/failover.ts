// Words for what the router did with one request, built from its record.

import { formatMs, humanOutcome } from '../format';
import type { Attempt, RequestRecord } from '../types';

/** attemptWhy says why an attempt did not serve: its ready-made error text when there is one. */
export function attemptWhy(a: Attempt): string {
  return a.error || humanOutcome(a.outcome);
}

/** attemptReason is "candidate: why". */
export function attemptReason(a: Attempt): string {
  return `${a.candidate}: ${attemptWhy(a)}`;
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

/** The time to first token as the answer's footer shows it: a short text and the words on hover. */
export interface FirstTokenTime {
  text: string;
  title: string;
}

/**
 * firstTokenTime names the two measurements of the time to first token.
 * The browser's runs from Send to the first token received; Switchyard's
 * (the record's ttft_ms) from the moment it received the request to the
 * first token of the candidate that served it, so it includes every
 * candidate that failed before that one. The browser's adds the trip over
 * the connection, so it is the larger.
 */
export function firstTokenTime(clientMs: number | null, record: RequestRecord | null): FirstTokenTime | null {
  const server = record && record.ttft_ms > 0 ? record.ttft_ms : null;
  const failover = record?.is_fallback ?? false;
  const serverWords =
    server === null
      ? ''
      : `Switchyard measured ${formatMs(server)} from receiving the request to the first token of ${
          record?.served_candidate || 'the model that answered'
        }${failover ? ', including the time spent on the candidates that failed before it' : ''}.`;
  if (clientMs === null && server === null) return null;
  if (clientMs === null) {
    return { text: `time to first token ${formatMs(server)}${failover ? ' (includes failover)' : ''}`, title: serverWords };
  }
  const clientWords = `Time to first token: ${formatMs(clientMs)} from Send to the first token, measured in this browser.`;
  if (server === null) return { text: `time to first token ${formatMs(clientMs)}`, title: clientWords };
  return {
    text: `time to first token ${formatMs(clientMs)} (${formatMs(server)} in Switchyard${failover ? ', includes failover' : ''})`,
    title: `${clientWords} ${serverWords}`,
  };
}
