// The demo fleet's faults as the UI shows them, and its one-click presets.
// The words are the server's: GET /switchyard/v1/demo lists every fault with
// its label, description and argument (backend/simfleet's fault table), so a
// fault added there shows up here without a change.

import type { DemoFault, DemoServer, Status } from '../types';

/** The faults as GET demo lists them, each with its words. */
export type FaultList = readonly DemoFault[];

/** What the presets read of GET demo. */
export interface DemoFaults {
  servers: readonly DemoServer[];
  faults: FaultList;
}

/** splitFault splits a fault into its name and the argument after its colon, if any. */
export function splitFault(fault: string): { name: string; value?: string } {
  const i = fault.indexOf(':');
  return i < 0 ? { name: fault } : { name: fault.slice(0, i), value: fault.slice(i + 1) };
}

/** FaultChoice is a fault of the list, and the argument given to it. */
export interface FaultChoice {
  info: DemoFault;
  /** The argument after the colon, '' for none. */
  value: string;
}

/** findFault finds a fault ("status:503", "slow") in the list: by its whole name, else by its name before the colon. */
export function findFault(fault: string, faults: FaultList): FaultChoice | null {
  const whole = faults.find((f) => f.name === fault);
  if (whole) return { info: whole, value: '' };
  const { name, value = '' } = splitFault(fault);
  const info = faults.find((f) => f.name === name);
  return info ? { info, value } : null;
}

/** joinFault is the fault SetFault takes for a name and an argument ('' for none). */
export function joinFault(name: string, value: string): string {
  const v = value.trim();
  return v ? `${name}:${v}` : name;
}

/**
 * argText puts an argument's value into the words of FaultInfo.arg, where N
 * stands for a number and DUR for a duration: "after N tokens" and 3 make
 * "after 3 tokens".
 */
export function argText(arg: string, value: string): string {
  return /\b(N|DUR)\b/.test(arg) ? arg.replace(/\b(N|DUR)\b/, value) : value;
}

/** faultLabel words a fault ("die_after:3") with the labels of the list. */
export function faultLabel(fault: string, faults: FaultList = []): string {
  const found = findFault(fault, faults);
  if (!found) return fault.replace(/_/g, ' ');
  const { info, value } = found;
  return value ? `${info.label} (${argText(info.arg, value)})` : info.label;
}

export interface Preset {
  label: string;
  /** [candidate, fault] pairs applied together. */
  set: [string, string][];
}

/** primaryCandidate is the demo server the default chain tries first. */
export function primaryCandidate(status: Status | null, demo: DemoFaults): string | null {
  const ids = demo.servers.map((s) => s.candidate);
  if (status?.default_model && ids.includes(status.default_model)) return status.default_model;
  const byPriority = [...(status?.candidates ?? [])]
    .filter((c) => ids.includes(c.id))
    .sort((a, b) => a.priority - b.priority || a.id.localeCompare(b.id));
  return byPriority[0]?.id ?? ids[0] ?? null;
}

/** presets are the one-click scenarios, each only when the server offers its fault. */
export function presets(status: Status | null, demo: DemoFaults): Preset[] {
  const p = primaryCandidate(status, demo);
  const out: Preset[] = [];
  if (p) {
    const offer = (fault: string, label: string) => {
      if (findFault(fault, demo.faults)) out.push({ label, set: [[p, fault]] });
    };
    offer('close_before_first', `Crash ${p} before first token`);
    offer('hang_first_token', `Stall ${p} before first token`);
    offer('status:503', `${p} answers 503`);
    offer('die_after:3', `${p} dies mid-stream`);
    offer('vram_pressure', `GPU memory pressure on ${p}`);
  }
  const sick = demo.servers.filter((s) => s.fault !== 'healthy');
  if (sick.length && findFault('healthy', demo.faults)) {
    out.push({ label: 'Heal all', set: sick.map((s) => [s.candidate, 'healthy']) });
  }
  return out;
}
