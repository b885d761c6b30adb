import { formatBytes, formatPct, ratio } from '../format';
import { Gauge } from '../ui/Gauge';
import type { HostStatus } from '../types';

export function HostPanel({ host }: { host: HostStatus | null }) {
  return (
    <section class="card" data-testid="host-panel" aria-labelledby="host-title">
      <div class="card-head">
        <h2 id="host-title">Host</h2>
      </div>
      {!host ? (
        <p class="muted">Waiting for the first reading…</p>
      ) : (
        <>
          <Gauge label="CPU" value={host.cpu_pct / 100} detail={formatPct(host.cpu_pct)} warn={0.85} danger={0.97} />
          <Gauge
            label="Memory"
            value={host.memory_used_pct ? host.memory_used_pct / 100 : ratio(host.memory_used_bytes, host.memory_total_bytes)}
            detail={`${formatBytes(host.memory_used_bytes)} / ${formatBytes(host.memory_total_bytes)}`}
          />
        </>
      )}
    </section>
  );
}
