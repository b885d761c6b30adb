import { useEffect, useRef, useState } from 'preact/hooks';
import { formatCountdown } from '../format';
import type { Client } from '../api';
import { useAction, useAsync } from '../hooks';
import { Badge } from '../ui/Badge';
import { ErrorBox, Loading } from '../ui/States';
import type { DemoServer, Status } from '../types';
import { faultLabel, findFault, joinFault, presets, type Preset } from './faults';

interface Props {
  client: Client;
  status: Status | null;
  /** compact: presets and active faults only (the Chat screen's version). */
  compact?: boolean;
}

/** How often the panel reloads the demo fleet: another window or an API caller may change faults too. */
const POLL_MS = 5000;

/**
 * stillCooling says, after the servers were healed, which breakers still
 * cool down and why: healing a server does not close its breaker, which
 * waits out its cool-down before one trial request. Null when none does.
 */
export function stillCooling(status: Status | null): string | null {
  const open = (status?.candidates ?? []).filter((c) => c.breaker.state === 'open' && c.breaker.remaining_ms > 0);
  if (open.length === 0) return null;
  const names = open.map((c) => `${c.id} (${formatCountdown(c.breaker.remaining_ms)} left)`).join(', ');
  return `${open.length === 1 ? 'Its breaker is' : 'Their breakers are'} still cooling down: ${names}. A healed server gets requests again once its cool-down ends and one trial request succeeds, so that a server that only seems well is not flooded.`;
}

/** FaultPanel injects faults into the simulated fleet (demo mode only). */
export function FaultPanel({ client, status, compact = false }: Props) {
  const [res, reload, update] = useAsync((signal) => client.demo(signal), [client], { pollMs: POLL_MS });
  const action = useAction();
  const [choice, setChoice] = useState<Record<string, string>>({});
  const [pendingLabel, setPendingLabel] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [healed, setHealed] = useState(false);
  const pop = useRef<HTMLDetailsElement>(null);
  const demo = res.value ?? null;

  // The pop-over closes on a click outside it, as menus do.
  useEffect(() => {
    if (!compact) return;
    const onDown = (e: PointerEvent) => {
      const el = pop.current;
      if (el?.open && e.target instanceof Node && !el.contains(e.target)) el.open = false;
    };
    document.addEventListener('pointerdown', onDown);
    return () => document.removeEventListener('pointerdown', onDown);
  }, [compact]);
  const pending = action.pending ? pendingLabel : null;

  const apply = (set: [string, string][], label: string) => {
    setPendingLabel(label);
    setNotice(null);
    setHealed(false);
    action.run(
      async (signal) => {
        const updated: DemoServer[] = [];
        for (const [candidate, fault] of set) updated.push(await client.setFault(candidate, fault, signal));
        return updated;
      },
      (updated) => {
        update((d) => ({ ...d, servers: d.servers.map((s) => updated.find((u) => u.candidate === s.candidate) ?? s) }));
        setNotice(`${label}: done. Send a chat to see the router react.`);
        setHealed(label === 'Heal all');
        // A poll that started before the change would bring back the old faults.
        reload();
      },
      (e) => setNotice(`${label} failed: ${e.message}`),
    );
  };

  if (res.state === 'error' && !demo) return <ErrorBox title="Could not load the demo fleet" message={res.error.message} onRetry={reload} />;
  if (!demo) return <Loading what="demo fleet" />;

  const ps = presets(status, demo);
  const faults = demo.faults;
  const sick = demo.servers.filter((s) => s.fault !== 'healthy');
  const presetButtons = (
    <div class="preset-row" role="group" aria-label="Fault presets">
      {ps.map((p: Preset) => (
        <button
          type="button"
          key={p.label}
          class={`btn btn-small ${p.label === 'Heal all' ? 'btn-ghost' : ''}`}
          disabled={pending !== null}
          onClick={() => apply(p.set, p.label)}
          data-testid={`preset-${p.label.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`}
        >
          {p.label}
        </button>
      ))}
    </div>
  );

  if (compact) {
    return (
      <details ref={pop} class="fault-compact" data-testid="fault-compact" onToggle={(e) => (e.currentTarget as HTMLDetailsElement).open && reload()}>
        <summary>
          Demo faults
          {sick.length ? (
            <span class="fault-active" data-testid="fault-active">
              {/* One server's fault fits the header; several are counted, each named on hover. */}
              {sick.length === 1 ? (
                <Badge tone="warn" title={`${sick[0]!.candidate}: ${faultLabel(sick[0]!.fault, demo.faults)}`}>
                  {sick[0]!.candidate}: {faultLabel(sick[0]!.fault, demo.faults)}
                </Badge>
              ) : (
                <Badge tone="warn" title={sick.map((s) => `${s.candidate}: ${faultLabel(s.fault, demo.faults)}`).join('\n')}>
                  {sick.length} servers broken
                </Badge>
              )}
            </span>
          ) : (
            <span class="muted"> — all simulated servers healthy</span>
          )}
        </summary>
        <div class="fault-pop">
          <p class="muted small">One click breaks a simulated server; then send a message.</p>
          {presetButtons}
          {notice && (
            <p class="small" role="status">
              {notice}
            </p>
          )}
          {healed && stillCooling(status) && (
            <p class="note note-info small" data-testid="heal-cooling">
              {stillCooling(status)}
            </p>
          )}
          <a href="#/fleet" class="link small">
            All servers and faults on Fleet
          </a>
        </div>
      </details>
    );
  }

  return (
    <section class="card fault-panel" aria-labelledby="fault-title" data-testid="fault-panel">
      <div class="card-head">
        <h2 id="fault-title">Fault injection</h2>
        <span class="muted small">Break a simulated server and watch the router route around it.</span>
      </div>
      {presetButtons}
      <table class="table fault-table">
        <thead>
          <tr>
            <th scope="col">Server · now</th>
            <th scope="col">Set a fault</th>
          </tr>
        </thead>
        <tbody>
          {demo.servers.map((s) => {
            const selected = choice[s.candidate] ?? s.fault;
            const found = findFault(selected, demo.faults);
            const name = found?.info.name ?? selected;
            const arg = found?.info.arg ?? '';
            const value = found?.value ?? '';
            const selId = `fault-${s.candidate}`;
            const choose = (fault: string) => setChoice((c) => ({ ...c, [s.candidate]: fault }));
            return (
              <tr key={s.candidate}>
                <td class="fault-server">
                  <label for={selId} class="mono">
                    {s.candidate}
                  </label>
                  <span class="muted small"> {s.provider}</span>
                  <div>
                    <Badge tone={s.fault === 'healthy' ? 'ok' : 'warn'}>{faultLabel(s.fault, demo.faults)}</Badge>
                  </div>
                </td>
                <td>
                  <div class="fault-set">
                    <select
                      id={selId}
                      value={name}
                      data-testid={`fault-select-${s.candidate}`}
                      onChange={(e) => choose((e.target as HTMLSelectElement).value)}
                    >
                      {faults.map((f) => (
                        <option key={f.name} value={f.name} title={f.description || undefined}>
                          {f.label}
                        </option>
                      ))}
                    </select>
                    {arg && (
                      <input
                        type="text"
                        size={8}
                        value={value}
                        placeholder={arg}
                        aria-label={`${s.candidate}: ${found?.info.label}, ${arg}`}
                        data-testid={`fault-arg-${s.candidate}`}
                        onInput={(e) => choose(joinFault(name, (e.target as HTMLInputElement).value))}
                      />
                    )}
                    <button
                      type="button"
                      class="btn btn-small"
                      disabled={pending !== null}
                      data-testid={`fault-apply-${s.candidate}`}
                      onClick={() => apply([[s.candidate, selected]], `${s.candidate}: ${faultLabel(selected, demo.faults)}`)}
                    >
                      Apply
                    </button>
                  </div>
                  {found?.info.description && <div class="muted small">{found.info.description}</div>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {notice && (
        <p class="muted small" role="status">
          {notice}
        </p>
      )}
      {healed && stillCooling(status) && (
        <p class="note note-info small" data-testid="heal-cooling">
          {stillCooling(status)}
        </p>
      )}
    </section>
  );
}
