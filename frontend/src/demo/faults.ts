// Words and one-click presets for the demo fleet's faults.

import type { DemoState, Status } from '../types';

const LABELS: Record<string, string> = {
  healthy: 'Healthy',
  refuse: 'Refuse connections',
  'status:503': 'Answer HTTP 503',
  busy: 'Busy (503 server busy)',
  hang_headers: 'Hang before headers',
  hang_first_token: 'Stall before first token',
  role_then_stall: 'Role chunk, then stall',
  close_before_first: 'Crash before first token',
  empty: 'Empty stream',
  error_event: 'Error event before first token',
  truncated: 'Truncated stream',
  malformed: 'Malformed output',
  slow: 'Slow tokens',
  vram_pressure: 'GPU memory pressure',
};

/** faultLabel describes a fault; "die_after:N" and "status:N" are read from their argument. */
export function faultLabel(fault: string): string {
  const known = LABELS[fault];
  if (known) return known;
  const [kind, arg] = fault.split(':', 2);
  if (kind === 'die_after' && arg) return `Die after ${arg} tokens`;
  if (kind === 'status' && arg) return `Answer HTTP ${arg}`;
  return fault.replace(/_/g, ' ');
}

export interface Preset {
  label: string;
  /** [candidate, fault] pairs applied together. */
  set: [string, string][];
}

/** primaryCandidate is the demo server the default chain tries first. */
export function primaryCandidate(status: Status | null, demo: DemoState): string | null {
  const ids = demo.servers.map((s) => s.candidate);
  if (status?.default_model && ids.includes(status.default_model)) return status.default_model;
  const byPriority = [...(status?.candidates ?? [])]
    .filter((c) => ids.includes(c.id))
    .sort((a, b) => a.priority - b.priority || a.id.localeCompare(b.id));
  return byPriority[0]?.id ?? ids[0] ?? null;
}

/** presets are the one-click scenarios, each only when the server offers its fault. */
export function presets(status: Status | null, demo: DemoState): Preset[] {
  const p = primaryCandidate(status, demo);
  const out: Preset[] = [];
  if (p) {
    const offer = (fault: string, label: string) => {
      if (demo.faults.includes(fault)) out.push({ label, set: [[p, fault]] });
    };
    offer('close_before_first', `Crash ${p} before first token`);
    offer('hang_first_token', `Stall ${p} before first token`);
    offer('status:503', `${p} answers 503`);
    const die = demo.faults.find((f) => f.startsWith('die_after'));
    if (die) out.push({ label: `${p} dies mid-stream`, set: [[p, die]] });
    offer('vram_pressure', `GPU memory pressure on ${p}`);
  }
  const sick = demo.servers.filter((s) => s.fault !== 'healthy');
  if (sick.length && demo.faults.includes('healthy')) {
    out.push({ label: 'Heal all', set: sick.map((s) => [s.candidate, 'healthy']) });
  }
  return out;
}
