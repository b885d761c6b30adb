// @vitest-environment happy-dom
// The Team screen: the link, the nodes, and who saw what of each shared
// server.

import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Client } from '../api';
import { LiveStore } from '../store';
import type { Status, TeamDoc } from '../types';
import { TeamScreen, reportTone } from './TeamScreen';

let root: HTMLElement;
beforeEach(() => {
  root = document.createElement('div');
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
});

const doc: TeamDoc = {
  node: 'a',
  link: 'offline',
  link_since: '2026-12-01T18:41:00Z',
  link_error: 'connect: connection refused',
  shipped: 12,
  nodes: [
    { name: 'a', version: '0.1.0', config_hash: 'abc', last_seen: '2026-12-01T18:41:00Z', link: 'online' },
    { name: 'b', version: '0.1.0', config_hash: 'abd', last_seen: '2026-12-01T18:40:00Z', link: 'offline' },
  ],
  servers: [
    {
      server: 'gpu1',
      model: 'qwen3:8b',
      reports: [
        { node: 'a', status: 'ok', detail: '', at: null, until: null, in_flight: 2, current: true },
        { node: 'b', status: 'breaker_open', detail: 'breaker open: 2 failures', at: '2026-12-01T18:41:00Z', until: '2026-12-01T18:41:30Z', in_flight: 0, current: true },
      ],
    },
  ],
};

const rec = {
  id: 'r1', started_at: '2026-12-01T18:41:00Z', protocol: 'openai', stream: false, thinking: false, requested_model: 'auto',
  served_candidate: 'good', served_model: 'm', is_fallback: true, status: 'ok', http_status: 200, error: '', failure: '',
  ttft_ms: 0, latency_ms: 20, prompt_tokens: 0, completion_tokens: 0, attempts: [],
};

describe('TeamScreen', () => {
  it('says the link is offline and shows who saw what', async () => {
    let answer: (d: TeamDoc) => void = () => {};
    const asked: string[] = [];
    const client = {
      team: () => new Promise<TeamDoc>((r) => (answer = r)),
      teamRequests: (node: string) => {
        asked.push(node);
        return Promise.resolve({ requests: [{ ...rec, node: node || 'b' }] });
      },
    } as unknown as Client;
    const live = new LiveStore(client);
    live.apply({ type: 'status', data: { team: { node: 'a', link: 'offline', link_since: '', link_error: '' } } as unknown as Status }, 0);
    await act(() => render(<TeamScreen client={client} live={live} />, root));
    await act(async () => answer(doc));
    expect(root.querySelector('[data-testid=team-link]')!.textContent).toContain('team link offline');
    expect(root.querySelector('[data-testid=team-node-b]')!.textContent).toContain('offline');
    const srv = root.querySelector('[data-testid=team-server-gpu1]')!.textContent!;
    expect(srv).toContain('breaker open');
    expect(srv).toContain('2 in flight');
    await act(async () => {});
    expect(root.querySelector('[data-testid=team-history]')!.textContent).toContain('auto → good');
    const filter = root.querySelector<HTMLSelectElement>('[data-testid=team-node-filter]')!;
    await act(async () => {
      filter.value = 'a';
      filter.dispatchEvent(new Event('change'));
    });
    expect(asked).toEqual(['', 'a']);
  });

  it('on a node that is not in a team, says how to join one and asks nothing', async () => {
    let asked = 0;
    const client = { team: () => (asked++, new Promise(() => {})) } as unknown as Client;
    const live = new LiveStore(client);
    live.apply({ type: 'status', data: { candidates: [] } as unknown as Status }, 0);
    await act(() => render(<TeamScreen client={client} live={live} />, root));
    expect(asked).toBe(0);
    expect(root.querySelector('.state-empty')!.textContent).toMatch(/^This Switchyard is not in a team.*team\.database_env/);
    expect(root.querySelector('.state-error')).toBeNull();
  });

  it('mutes a failing report that no longer counts', () => {
    const r = doc.servers[0]!.reports[1]!;
    expect(reportTone(r)).toBe('bad');
    expect(reportTone({ ...r, current: false })).toBe('muted');
    expect(reportTone({ ...r, status: 'busy' })).toBe('warn');
  });
});
