// Words for what the router did with one request, built from its record.

import { formatMs, humanOutcome } from '../format';
import type { Attempt, RequestRecord } from '../types';

/** attemptWhy says why an attempt did not serve: its ready-made error text when there is one. */
export function attemptWhy(a: Attempt): string {
  return a.error || humanOutcome(a.outcome);
}

/**
 * attemptReason is why an attempt did not serve, in plain words and naming
 * its candidate ("qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB), tried
 * last"): the server's reason, else "candidate: why".
 */
export function attemptReason(a: Attempt): string {
  return a.reason || `${a.candidate}: ${attemptWhy(a)}`;
}

/**
 * failedAttempts are the attempts that did not serve the request, in order,
 * up to the one that served, and the candidates demoted for GPU memory
 * pressure after it: they were ahead of it until the demotion. Other
 * candidates recorded after it (skipped, their turn never came) did not
 * stand in its way.
 */
export function failedAttempts(r: RequestRecord): Attempt[] {
  const sorted = [...(r.attempts ?? [])].sort((a, b) => a.order - b.order);
  const served = sorted.findIndex((a) => a.outcome === 'success');
  const before = served < 0 ? sorted : sorted.slice(0, served);
  const demoted = served < 0 ? [] : sorted.slice(served + 1).filter((a) => a.outcome === 'demoted');
  return [...before, ...demoted].filter((a) => a.outcome !== 'hedge_lost');
}

/**
 * failoverSummary reads like "qwen3-8b: no first token in 2.1s → served by
 * llama3-vllm"; several reasons are joined with "; ".
 */
export function failoverSummary(r: RequestRecord): string {
  return failoverLine(failedAttempts(r), r.served_candidate);
}

/**
 * failoverLine is failoverSummary from the attempts that failed and the
 * candidate that serves: while an answer streams, the live events have told
 * both before the request's record comes.
 */
export function failoverLine(failed: Attempt[], servedCandidate: string): string {
  const reasons = failed.map(attemptReason);
  const served = servedCandidate ? `served by ${servedCandidate}` : 'no candidate served';
  return reasons.length ? `${reasons.join('; ')} → ${served}` : served;
}

/** rawErrors are the failed attempts' own error texts, for those who open the notice: "qwen3-8b: upstream HTTP 503: busy". */
export function rawErrors(r: RequestRecord): string[] {
  return rawErrorsOf(failedAttempts(r));
}

/** rawErrorsOf is rawErrors of attempts that failed. */
export function rawErrorsOf(failed: Attempt[]): string[] {
  return failed.filter((a) => a.error).map((a) => `${a.candidate}: ${a.error}`);
}

/** The time to first token as the answer's footer shows it: a short text and the words on hover. */
export interface FirstTokenTime {
  text: string;
  title: string;
}

/**
 * firstTokenTime names the measurements of the time to first token, and
 * splits Switchyard's into the model's own part and the rest.
 *
 * - The browser's (clientMs) runs from Send to the first token received.
 * - Switchyard's (the record's ttft_ms) runs from the moment it received
 *   the request to the first token of the candidate that served it.
 * - The model's (the serving attempt's ttft_ms) runs from the moment that
 *   candidate was asked to its first token.
 *
 * Switchyard's less the model's is what came before the serving candidate
 * was asked: the candidates that failed first, and Switchyard's own
 * routing (a few milliseconds). The browser's less Switchyard's is the
 * trip over the connection.
 */
export function firstTokenTime(clientMs: number | null, record: RequestRecord | null): FirstTokenTime | null {
  const server = record && record.ttft_ms > 0 ? record.ttft_ms : null;
  if (clientMs === null && server === null) return null;
  const failover = record?.is_fallback ?? false;
  const served = record?.served_candidate || 'the model that answered';
  const serving = record?.attempts?.find((a) => a.outcome === 'success' && a.candidate === record.served_candidate);
  const model = serving && serving.ttft_ms > 0 && server !== null && serving.ttft_ms <= server ? serving.ttft_ms : null;
  const before = server !== null && model !== null ? server - model : null;

  const parts: string[] = [];
  if (model !== null) parts.push(`model ${formatMs(model)}`);
  if (failover && before !== null) parts.push(`failover ${formatMs(before)}`);
  else if (failover) parts.push('includes failover');
  if (model === null && server !== null && clientMs !== null) parts.unshift(`${formatMs(server)} at Switchyard`);
  const total = clientMs ?? server;
  const text = `time to first token ${formatMs(total)}${parts.length ? ` (${parts.join(', ')})` : ''}`;

  const words: string[] = [];
  if (clientMs !== null) words.push(`Time to first token: ${formatMs(clientMs)} from Send to the first token, measured in this browser.`);
  if (server !== null) {
    words.push(`Switchyard measured ${formatMs(server)} from receiving the request to the first token of ${served}.`);
    if (model !== null && before !== null) {
      words.push(
        `Of that, ${formatMs(model)} was the model’s own time (from being asked to its first token) and ${formatMs(before)} came before it was asked: ${
          failover ? 'the candidates that failed first, and Switchyard’s routing' : 'Switchyard’s routing'
        }.`,
      );
    } else if (failover) {
      words.push('That includes the time spent on the candidates that failed before it.');
    }
    if (clientMs !== null && clientMs >= server) {
      words.push(`The other ${formatMs(clientMs - server)} is the trip between this browser and Switchyard.`);
    }
  }
  return { text, title: words.join(' ') };
}
