import type { ComponentChildren } from 'preact';
import { Fragment } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';
import { formatDateTime, formatMs, formatTokens, humanStatus } from '../format';
import { Badge } from '../ui/Badge';
import type { RequestRecord } from '../types';
import { statusTone } from './tones';

interface Props {
  rows: RequestRecord[];
  selected: string | null;
  onOpen(id: string): void;
  /** Shown in a full-width row under the selected request. */
  detail: ComponentChildren;
}

export function RequestsTable({ rows, selected, onOpen, detail }: Props) {
  const wrap = useRef<HTMLDivElement>(null);
  // A request opened from elsewhere (a link to #/history/<id>, the chat's
  // Timeline) may be far down the list: bring it into sight, once per
  // opening, and no more than needed when it is in sight already.
  const shown = useRef<string | null>(null);
  useLayoutEffect(() => {
    if (selected === shown.current) return;
    const row = selected ? wrap.current?.querySelector(`tr[data-request-id="${CSS.escape(selected)}"]`) : null;
    if (selected && !row) return; // not loaded yet: when it comes
    shown.current = selected;
    row?.nextElementSibling?.scrollIntoView?.({ block: 'nearest' });
    row?.scrollIntoView?.({ block: 'nearest' });
  });
  return (
    <div class="table-wrap" ref={wrap}>
      <table class="table requests-table">
        <caption class="sr-only">Requests, newest first. Open one to see its attempt timeline.</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Requested → served</th>
            <th scope="col">Fallback</th>
            <th scope="col">Status</th>
            <th scope="col" class="num">
              TTFT
            </th>
            <th scope="col" class="num">
              Latency
            </th>
            <th scope="col" class="num">
              Tokens
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <Fragment key={r.id}>
            <tr
              data-testid="history-row"
              data-request-id={r.id}
              class={r.id === selected ? 'selected' : ''}
              aria-selected={r.id === selected}
              onClick={() => onOpen(r.id)}
            >
              <td>
                <a
                  href={`#/history/${encodeURIComponent(r.id)}`}
                  class="row-link"
                  onClick={(e) => e.stopPropagation()}
                  aria-label={`Open the timeline of the request at ${formatDateTime(r.started_at)}`}
                >
                  {formatDateTime(r.started_at)}
                </a>
              </td>
              <td class="mono route-cell">
                {r.requested_model || 'auto'} → {r.served_candidate || '—'}
                {r.protocol !== 'ui' && <span class="muted small"> · {r.protocol}</span>}
              </td>
              <td>{r.is_fallback ? <Badge tone="warn">fallback</Badge> : <span class="muted">—</span>}</td>
              <td>
                <Badge tone={statusTone(r.status)}>{humanStatus(r.status)}</Badge>
              </td>
              <td class="num mono">{r.ttft_ms ? formatMs(r.ttft_ms) : '—'}</td>
              <td class="num mono">{formatMs(r.latency_ms)}</td>
              <td class="num mono">{formatTokens(r.prompt_tokens, r.completion_tokens)}</td>
            </tr>
            {r.id === selected && (
              <tr class="detail-row">
                <td colSpan={7}>{detail}</td>
              </tr>
            )}
            </Fragment>
          ))}
        </tbody>
      </table>
    </div>
  );
}
