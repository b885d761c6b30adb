import type { ComponentChildren } from 'preact';
import { Fragment } from 'preact';
import { memo } from 'preact/compat';
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
  // The rows call the latest onOpen through this, so that a row is drawn
  // again only when its request, or whether it is open, changes: the list
  // re-renders with every live event, and hundreds of rows paged in made
  // each such render block the page.
  const openRef = useRef(onOpen);
  openRef.current = onOpen;
  const open = useRef((id: string) => openRef.current(id)).current;
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
            <Row key={r.id} r={r} selected={r.id === selected} open={open} detail={r.id === selected ? detail : null} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

interface RowProps {
  r: RequestRecord;
  selected: boolean;
  open(id: string): void;
  detail: ComponentChildren;
}

/** One request, and its timeline under it when open. */
const Row = memo(
  function Row({ r, selected, open, detail }: RowProps) {
    return (
      <Fragment>
        <tr data-testid="history-row" data-request-id={r.id} class={selected ? 'selected' : ''} aria-selected={selected} onClick={() => open(r.id)}>
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
        {selected && (
          <tr class="detail-row">
            <td colSpan={7}>{detail}</td>
          </tr>
        )}
      </Fragment>
    );
  },
  // The open row draws its timeline every time; the others when their request changes.
  (a, b) => a.r === b.r && a.selected === b.selected && !a.selected,
);
