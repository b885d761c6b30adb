import { formatBytes, formatPct, ratio } from '../format';
import { Badge } from '../ui/Badge';
import { Gauge } from '../ui/Gauge';
import type { MemoryPoint } from '../store';
import type { CandidateStatus, GPUStatus } from '../types';

interface Props {
  gpu: GPUStatus | null;
  /** The candidates, to name the models on each GPU and those demoted for its memory. */
  candidates?: CandidateStatus[];
  /** Each GPU's memory use over the last hour, by index. */
  memory?: Map<number, MemoryPoint[]>;
}

/** modelsOn are the enabled candidates whose model runs on GPU index: configured there, or on every local GPU. */
export function modelsOn(candidates: CandidateStatus[], index: number): CandidateStatus[] {
  return candidates.filter((c) => c.enabled && (c.all_gpus || (c.gpus ?? []).includes(index)));
}

/** MemoryHistory draws a GPU's memory used over time, 0 to its total, as a line. */
function MemoryHistory({ points, index }: { points: MemoryPoint[]; index: number }) {
  if (points.length < 2) {
    return (
      <p class="muted small" data-testid={`gpu-history-${index}`}>
        Memory over time: the line starts after a few readings.
      </p>
    );
  }
  const t0 = points[0]!.at;
  const span = Math.max(1, points.at(-1)!.at - t0);
  const line = points
    .map((p) => `${((100 * (p.at - t0)) / span).toFixed(2)},${(30 - (30 * ratio(p.used, p.total))).toFixed(2)}`)
    .join(' ');
  const over = span < 60_000 ? `${Math.max(1, Math.round(span / 1000))} s` : `${Math.round(span / 60_000)} min`;
  const peak = Math.max(...points.map((p) => p.used));
  return (
    <figure class="gpu-history" data-testid={`gpu-history-${index}`}>
      <svg viewBox="0 0 100 30" preserveAspectRatio="none" role="img" aria-label={`Memory used on GPU ${index}, last ${over}`}>
        <polyline points={line} fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke" />
      </svg>
      <figcaption class="muted small">
        Memory used, last {over} · peak {formatBytes(peak)}
      </figcaption>
    </figure>
  );
}

/**
 * GpuPanel shows each GPU's memory, utilisation and processes, or why there
 * are none. The demo fleet's GPUs (gpu.simulated) look like real ones, with
 * the same gauges, and say clearly that they are made up.
 */
export function GpuPanel({ gpu, candidates = [], memory }: Props) {
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
              {modelsOn(candidates, d.index).length > 0 && (
                <p class="small gpu-models" data-testid={`gpu-models-${d.index}`}>
                  <span class="muted">Models on it: </span>
                  {modelsOn(candidates, d.index).map((c, i) => (
                    <span key={c.id}>
                      {i > 0 && ', '}
                      <span class="mono" title={`candidate ${c.id}`}>
                        {c.model}
                      </span>
                    </span>
                  ))}
                </p>
              )}
              <MemoryHistory points={memory?.get(d.index) ?? []} index={d.index} />
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
