import { breakerHint, breakerLabel } from '../fleet/breaker';
import type { Status } from '../types';
import type { ModelOption } from './Composer';

/**
 * modelOptions lists auto, then every candidate that chats, then any other
 * model id the server offers. Embedding models are not offered to chat.
 */
export function modelOptions(status: Status | null, served: string[], thinking: boolean): ModelOption[] {
  const first = thinking && status?.deep_thinking_model ? status.deep_thinking_model : status?.default_model;
  const out: ModelOption[] = [{ id: 'auto', label: first ? `auto — ${first} first, then fallbacks` : 'auto' }];
  const seen = new Set(['auto']);
  for (const c of status?.candidates ?? []) {
    if (c.embed_only) seen.add(c.id);
    if (!c.enabled || seen.has(c.id)) continue;
    seen.add(c.id);
    const notes: string[] = [];
    if (c.breaker.state !== 'closed') notes.push(breakerLabel(c.breaker.state));
    else if (c.unreachable) notes.push('unreachable');
    else if (c.config_error) notes.push('model missing');
    else if (c.auth_error) notes.push('key refused');
    if (thinking && !c.supports_thinking) notes.push('no thinking');
    const title =
      c.breaker.state !== 'closed'
        ? breakerHint(c.breaker.state)
        : c.unreachable
          ? `Its server does not answer (${c.unreachable}).`
          : c.config_error || c.auth_error || undefined;
    out.push({ id: c.id, label: notes.length ? `${c.id} (${notes.join(', ')})` : c.id, ...(title ? { title } : {}) });
  }
  for (const id of served) {
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ id, label: id });
  }
  return out;
}
