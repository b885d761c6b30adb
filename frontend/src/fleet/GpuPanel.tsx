import { formatBytes, formatPct, ratio } from '../format';
import { Badge } from '../ui/Badge';
import { Gauge } from '../ui/Gauge';
import type { CandidateStatus, GPUStatus } from '../types';

interface Props {
  gpu: GPUStatus | null;
  /** The candidates, to name those demoted for a GPU's memory. */
  candidates?: CandidateStatus[];
}

/**
 * GpuPanel shows each GPU's memory, utilisation and processes, or why there
 * are none. The demo fleet's GPUs (gpu.simulated) look like real ones, with
 * the same gauges, and say clearly that they are made up.
 */
export function GpuPanel({ gpu, candidates = [] }: Props) {
  const devices = gpu?.devices ?? [];
  const simulated = gpu?.simulated ?? false;
  return (
    <section class={`card ${simulated ? 'gpu-simulated' : ''}`} data-testid="gpu-panel" aria-labelledby="gpu-title">
      <div class="card-head">
        <h2 id="gpu-title">GPUs</h2>
        {simulated && (
          <Badge
            tone="info"
            testid="gpu-simulated"
            title="These GPUs are the demo fleet's: their readings are made up, so that the memory gauges and demotion under memory pressure can be seen without an NVIDIA card."
          >
            simulated
          </Badge>
        )}
      </div>
      {simulated && devices.length > 0 && (
        <p class="muted small gpu-note" data-testid="gpu-simulated-note">
          Made-up readings of the demo fleet’s GPUs, one per simulated server: no real card is read. The “GPU memory
          pressure” demo fault fills one.
        </p>
      )}
      {!gpu ? (
        <p class="muted">Waiting for the first reading…</p>
      ) : !gpu.available || devices.length === 0 ? (
        <p class="note note-info" data-testid="gpu-message">
          {gpu.message || 'No GPU readings.'}
          <span class="muted small block">Routing works as usual; memory-pressure demotion needs NVML readings.</span>
        </p>
      ) : (
        devices.map((d) => {
          const demoted = candidates.filter((c) => c.demoted && c.pressure?.gpu === d.index);
          return (
            <div class="gpu" key={d.uuid || d.index} data-testid={`gpu-${d.index}`}>
              <div class="gpu-name">
                <strong>
                  GPU {d.index} · {d.name}
                </strong>
              </div>
              <Gauge
                label="Memory"
                value={ratio(d.memory_used_bytes, d.memory_total_bytes)}
                detail={`${formatBytes(d.memory_used_bytes)} / ${formatBytes(d.memory_total_bytes)}`}
                testid={`gpu-memory-${d.index}`}
              />
              <Gauge
                label="Utilisation"
                value={d.utilization_pct / 100}
                detail={formatPct(d.utilization_pct)}
                warn={2}
                danger={2}
                thin
              />
              {demoted.map((c) => (
                <p key={c.id} class="note note-warn small" data-testid={`gpu-demoted-${c.id}`}>
                  <span class="mono">{c.id}</span> demoted to the end of the chain
                  {c.pressure?.reason ? `: ${c.pressure.reason}` : ''}
                </p>
              ))}
              {(d.processes?.length ?? 0) > 0 ? (
                <ul class="gpu-procs small" aria-label={`Processes on GPU ${d.index}`}>
                  {d.processes!.map((p) => (
                    <li key={p.pid}>
                      <span class="truncate" title={`${p.name} (PID ${p.pid})`}>
                        {p.name} <span class="muted mono">{p.pid}</span>
                      </span>
                      <span class="mono">{formatBytes(p.used_bytes)}</span>
                    </li>
                  ))}
                </ul>
              ) : (
                <p class="muted small">No processes on this GPU.</p>
              )}
            </div>
          );
        })
      )}
    </section>
  );
}
