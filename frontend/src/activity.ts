// The live activity feed: one line per interesting event.

import { breakerHint, breakerLabel } from './fleet/breaker';
import { formatMs, humanOutcome, humanStatus } from './format';
import type { LiveEvent } from './types';

export type Tone = 'ok' | 'warn' | 'bad' | 'info';

export interface ActivityItem {
  key: number;
  at: number;
  tone: Tone;
  text: string;
  /** Words on hover, where the line's terms need them. */
  title?: string;
  requestId?: string;
}

function shortId(id: string): string {
  return id.length > 8 ? id.slice(-6) : id;
}

const goodOutcomes = new Set(['success', 'hedge_lost', 'client_abort']);

/** describeEvent turns a live event into a feed line, or null for events the feed skips (status, request_started). */
export function describeEvent(e: LiveEvent, key: number, at: number): ActivityItem | null {
  switch (e.type) {
    case 'attempt': {
      const a = e.data.attempt;
      if (a.outcome === 'success') return null; // the commit line says it
      const why = a.error ? `: ${a.error}` : '';
      return {
        key,
        at,
        tone: goodOutcomes.has(a.outcome) ? 'info' : a.outcome === 'busy' || a.outcome === 'skipped_open' || a.outcome === 'demoted' ? 'warn' : 'bad',
        text: `${a.candidate} ${humanOutcome(a.outcome)}${why}`,
        requestId: e.data.request_id,
      };
    }
    case 'commit': {
      const a = e.data.attempt;
      const ttft = a.ttft_ms ? ` after ${formatMs(a.ttft_ms)}` : '';
      return { key, at, tone: 'ok', text: `${a.candidate} committed${ttft}`, requestId: e.data.request_id };
    }
    case 'request_done': {
      const r = e.data.request;
      const served = r.served_candidate ? ` by ${r.served_candidate}` : '';
      const fb = r.is_fallback ? ' after failover' : '';
      const tone: Tone = r.status === 'ok' ? (r.is_fallback ? 'warn' : 'ok') : r.status === 'client_abort' ? 'info' : 'bad';
      return {
        key,
        at,
        tone,
        text: `request …${shortId(r.id)} ${humanStatus(r.status)}${served}${fb} in ${formatMs(r.latency_ms)}`,
        requestId: r.id,
      };
    }
    case 'breaker': {
      const b = e.data.breaker;
      const cause = b.cause ? ` (${b.cause})` : '';
      return {
        key,
        at,
        tone: b.to === 'open' ? 'bad' : b.to === 'closed' ? 'ok' : 'warn',
        text: `${b.candidate}: ${breakerLabel(b.from)} → ${breakerLabel(b.to)}${cause}`,
        title: `${b.candidate}’s circuit breaker: ${breakerHint(b.to)}`,
      };
    }
    case 'config': {
      const c = e.data;
      return c.ok
        ? { key, at, tone: 'ok', text: 'config reloaded' }
        : { key, at, tone: 'bad', text: `config edit rejected: ${c.error}` };
    }
    default:
      return null;
  }
}
