import type { Client } from '../api';
import { FaultPanel } from '../demo/FaultPanel';
import { useNow, useObservable } from '../hooks';
import type { LiveStore } from '../store';
import { Empty, Loading } from '../ui/States';
import { ActivityFeed } from './ActivityFeed';
import { CandidateCard } from './CandidateCard';
import { GpuPanel } from './GpuPanel';
import { HostPanel } from './HostPanel';

interface Props {
  client: Client;
  live: LiveStore;
}

export function FleetScreen({ client, live }: Props) {
  useObservable(live);
  const status = live.status;
  const candidates = status?.candidates ?? [];
  const ticking = live.inflight.waiting() || candidates.some((c) => c.breaker.remaining_ms > 0 || c.busy_ms > 0);
  const now = useNow(200, ticking);

  return (
    <section class="screen fleet-screen" aria-labelledby="fleet-title">
      <header class="screen-head">
        <h1 id="fleet-title">Fleet</h1>
        {status && (
          <span class="muted small">
            {candidates.length} candidate{candidates.length === 1 ? '' : 's'} · default{' '}
            <span class="mono">{status.default_model || '—'}</span>
            {status.hedge && ' · hedging on'}
          </span>
        )}
        {status && live.conn.kind !== 'open' && (
          <span class="badge badge-warn" role="status">
            not live — last reading at {new Date(live.statusAt).toLocaleTimeString([], { hour12: false })}
          </span>
        )}
      </header>
      {!status ? (
        <Loading what="fleet status" />
      ) : (
        <div class={`fleet-grid ${live.conn.kind === 'open' ? '' : 'stale'}`}>
          <div class="fleet-main">
            {candidates.length === 0 ? (
              <Empty title="No candidates configured">
                Add candidates under <code>chat.candidates</code> in the config file (see Settings).
              </Empty>
            ) : (
              <div class="candidates">
                {candidates.map((c) => (
                  <CandidateCard
                    key={c.id}
                    c={c}
                    receivedAt={live.statusAt}
                    now={Math.max(now, live.statusAt)}
                    isDefault={c.id === status.default_model}
                    isDeep={c.id === status.deep_thinking_model}
                    learnAfter={status.min_samples}
                    waits={live.inflight.waitsOn(c.id)}
                    change={live.breakerChanges.get(c.id)}
                  />
                ))}
              </div>
            )}
            {status.demo && <FaultPanel client={client} status={status} />}
          </div>
          <aside class="fleet-side" aria-label="Machine and activity">
            <GpuPanel gpu={status.gpu} candidates={candidates} memory={live.gpuMemory} />
            <HostPanel host={status.host} />
            <ActivityFeed items={live.feed} />
          </aside>
        </div>
      )}
    </section>
  );
}
