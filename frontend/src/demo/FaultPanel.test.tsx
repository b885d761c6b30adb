// @vitest-environment happy-dom
// The fault panel shows the server's words for its faults and sends a
// fault's argument with it.

import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Client } from '../api';
import type { DemoServer, DemoState } from '../types';
import type { Status } from '../types';
import { FaultPanel, stillCooling } from './FaultPanel';

let root: HTMLElement;
beforeEach(() => {
  root = document.createElement('div');
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
});

const state: DemoState = {
  servers: [{ candidate: 'qwen3-8b', provider: 'ollama', url: '', fault: 'status:503' }],
  faults: [
    { name: 'healthy', label: 'All good', description: 'Answers normally.', arg: '' },
    { name: 'status', label: 'Answer an HTTP error', description: 'Answers the HTTP error status N.', arg: 'HTTP N' },
    { name: 'die_after', label: 'Die mid-stream', description: 'Sends N tokens, then cuts the connection.', arg: 'after N tokens' },
  ],
};

async function showPanel(demo: unknown) {
  const setFault = vi.fn(async (candidate: string, fault: string): Promise<DemoServer> => ({ ...state.servers[0]!, candidate, fault }));
  const client = { demo: async () => demo, setFault } as unknown as Client;
  await act(() => render(<FaultPanel client={client} status={null} />, root));
  await act(async () => {});
  return setFault;
}

const el = <T extends Element>(testid: string) => root.querySelector(`[data-testid=${testid}]`) as T;

/** enter gives a select or a text box a value as the user does. */
const enter = (e: HTMLSelectElement | HTMLInputElement, value: string) =>
  act(() => {
    e.value = value;
    e.dispatchEvent(new Event(e instanceof HTMLSelectElement ? 'change' : 'input'));
  });

/** applyFault clicks the server's Apply and lets the request settle. */
async function applyFault() {
  await act(() => el<HTMLButtonElement>('fault-apply-qwen3-8b').click());
  await act(async () => {});
}

describe('FaultPanel with the fault table', () => {
  it('shows the labels and descriptions the server sends', async () => {
    await showPanel(state);
    const options = [...el<HTMLSelectElement>('fault-select-qwen3-8b').options].map((o) => [o.value, o.textContent, o.title]);
    expect(options).toEqual([
      ['healthy', 'All good', 'Answers normally.'],
      ['status', 'Answer an HTTP error', 'Answers the HTTP error status N.'],
      ['die_after', 'Die mid-stream', 'Sends N tokens, then cuts the connection.'],
    ]);
    expect(root.textContent).toContain('Answer an HTTP error (HTTP 503)');
    // The fault in force is selected, its argument in the box.
    expect(el<HTMLSelectElement>('fault-select-qwen3-8b').value).toBe('status');
    expect(el<HTMLInputElement>('fault-arg-qwen3-8b').value).toBe('503');
  });

  it('sends the chosen fault with its argument', async () => {
    const setFault = await showPanel(state);
    const select = el<HTMLSelectElement>('fault-select-qwen3-8b');
    await enter(select, 'die_after');
    const arg = el<HTMLInputElement>('fault-arg-qwen3-8b');
    expect(arg.value).toBe('');
    expect(arg.placeholder).toBe('after N tokens');
    await enter(arg, '3');
    await applyFault();
    expect(setFault).toHaveBeenCalledWith('qwen3-8b', 'die_after:3', expect.any(AbortSignal));
    expect(root.textContent).toContain('qwen3-8b: Die mid-stream (after 3 tokens): done');

    await enter(select, 'healthy');
    expect(el('fault-arg-qwen3-8b')).toBeNull();
  });

  it('closes the compact pop-over on a click outside it', async () => {
    const client = { demo: async () => state, setFault: vi.fn() } as unknown as Client;
    await act(() => render(<FaultPanel client={client} status={null} compact />, root));
    await act(async () => {});
    const pop = el<HTMLDetailsElement>('fault-compact');
    pop.open = true;
    pop.querySelector('.fault-pop')!.dispatchEvent(new Event('pointerdown', { bubbles: true }));
    expect(pop.open).toBe(true);
    document.body.dispatchEvent(new Event('pointerdown', { bubbles: true }));
    expect(pop.open).toBe(false);
  });
});

describe('after Heal all', () => {
  it('says which breakers still cool down, and why', () => {
    const cand = (id: string, state: string, remaining_ms: number) => ({ id, breaker: { state, remaining_ms } });
    const status = (...c: ReturnType<typeof cand>[]) => ({ candidates: c }) as unknown as Status;
    expect(stillCooling(status(cand('a', 'closed', 0), cand('b', 'open', 0)))).toBeNull();
    expect(stillCooling(status(cand('a', 'open', 24_000), cand('b', 'closed', 0)))).toBe(
      'Its breaker is still cooling down: a (24s left). A healed server gets requests again once its cool-down ends and one trial request succeeds, so that a server that only seems well is not flooded.',
    );
  });
});
