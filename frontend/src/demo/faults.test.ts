import { describe, expect, it } from 'vitest';
import type { DemoFault, Status } from '../types';
import { argText, faultLabel, findFault, joinFault, presets } from './faults';

// The faults as GET /switchyard/v1/demo lists them (backend/simfleet's table).
const table: DemoFault[] = [
  { name: 'healthy', label: 'Healthy', description: 'Answers normally.', arg: '' },
  { name: 'status', label: 'Answer an HTTP error', description: 'Answers HTTP N.', arg: 'HTTP N' },
  { name: 'close_before_first', label: 'Crash before first token', description: 'Cuts the connection.', arg: '' },
  { name: 'hang_first_token', label: 'Stall before first token', description: 'Sends nothing.', arg: '' },
  { name: 'die_after', label: 'Die mid-stream', description: 'Sends N tokens, then cuts.', arg: 'after N tokens' },
  { name: 'slow', label: 'Slow tokens', description: 'DUR between tokens.', arg: 'DUR apart' },
  { name: 'vram_pressure', label: 'GPU memory pressure', description: 'Demoted, not broken.', arg: '' },
];

describe('demo faults from the fault table', () => {
  it('labels faults with the server’s words, arguments put into them', () => {
    expect(faultLabel('close_before_first', table)).toBe('Crash before first token');
    expect(faultLabel('die_after:7', table)).toBe('Die mid-stream (after 7 tokens)');
    expect(faultLabel('status:429', table)).toBe('Answer an HTTP error (HTTP 429)');
    expect(faultLabel('slow:250ms', table)).toBe('Slow tokens (250ms apart)');
    expect(faultLabel('slow', table)).toBe('Slow tokens');
    // A label changed on the server changes here.
    expect(faultLabel('healthy', [{ ...table[0]!, label: 'Fine' }])).toBe('Fine');
    expect(faultLabel('new_thing', table)).toBe('new thing');
  });

  it('finds a fault by its name before the colon, with its argument', () => {
    expect(findFault('die_after:3', table)).toEqual({ info: table[4], value: '3' });
    expect(findFault('healthy', table)).toEqual({ info: table[0], value: '' });
    expect(findFault('nope:1', table)).toBeNull();
    expect(joinFault('die_after', ' 3 ')).toBe('die_after:3');
    expect(joinFault('status', '')).toBe('status');
    expect(argText('after N tokens', '5')).toBe('after 5 tokens');
    expect(argText('retry after DUR', '2s')).toBe('retry after 2s');
    expect(argText('a count', '5')).toBe('5');
  });

  it('offers the presets with their arguments, and a heal-all', () => {
    const demo = {
      servers: [
        { candidate: 'qwen3-8b', provider: 'ollama', url: '', fault: 'healthy' },
        { candidate: 'llama3-vllm', provider: 'openai', url: '', fault: 'die_after:2' },
      ],
      faults: table,
    };
    const ps = presets({ default_model: 'qwen3-8b', candidates: [] } as unknown as Status, demo);
    expect(ps.map((p) => p.label)).toEqual([
      'Crash qwen3-8b before first token',
      'Stall qwen3-8b before first token',
      'qwen3-8b answers 503',
      'qwen3-8b dies mid-stream',
      'GPU memory pressure on qwen3-8b',
      'Heal all',
    ]);
    expect(ps.map((p) => p.set)).toEqual([
      [['qwen3-8b', 'close_before_first']],
      [['qwen3-8b', 'hang_first_token']],
      [['qwen3-8b', 'status:503']],
      [['qwen3-8b', 'die_after:3']],
      [['qwen3-8b', 'vram_pressure']],
      [['llama3-vllm', 'healthy']],
    ]);
    // Only the faults the server offers.
    const fewer = presets({ default_model: 'qwen3-8b', candidates: [] } as unknown as Status, { ...demo, faults: table.slice(0, 2) });
    expect(fewer.map((p) => p.label)).toEqual(['qwen3-8b answers 503', 'Heal all']);
  });

});
