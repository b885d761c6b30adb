import { formatBytes, ratio } from '../format';
import { Gauge } from '../ui/Gauge';
import type { GPUStatus } from '../types';

/** GpuPanel shows each GPU's memory, utilisation and processes, or why there are none. */
export function GpuPanel({ gpu }: { gpu: GPUStatus | null }) {
  const devices = gpu?.devices ?? [];
  return (
    <section class="card" data-testid="gpu-panel" aria-labelledby="gpu-title">
      <div class="card-head">
        <h2 id="gpu-title">GPUs</h2>
      </div>
      {!gpu ? (
        <p class="muted">Waiting for the first reading…</p>
      ) : !gpu.available || devices.length === 0 ? (
        <p class="note note-info" data-testid="gpu-message">
          {gpu.message || 'No GPU readings.'}
          <span class="muted small block">Routing works as usual; memory-pressure demotion needs NVML readings.</span>
        </p>
      ) : (
        devices.map((d) => (
          <div class="gpu" key={d.uuid || d.index}>
            <div class="gpu-name">
              <strong>
                GPU {d.index} · {d.name}
              </strong>
            </div>
            <Gauge
              label="Memory"
              value={ratio(d.memory_used_bytes, d.memory_total_bytes)}
              detail={`${formatBytes(d.memory_used_bytes)} / ${formatBytes(d.memory_total_bytes)}`}
            />
            <Gauge label="Utilisation" value={d.utilization_pct / 100} detail={`${Math.round(d.utilization_pct)}%`} warn={2} danger={2} />
            {(d.processes?.length ?? 0) > 0 ? (
              <table class="table compact-table">
                <caption class="sr-only">Processes on GPU {d.index}</caption>
                <thead>
                  <tr>
                    <th scope="col">PID</th>
                    <th scope="col">Process</th>
                    <th scope="col" class="num">
                      Memory
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {d.processes!.map((p) => (
                    <tr key={p.pid}>
                      <td class="mono">{p.pid}</td>
                      <td>{p.name}</td>
                      <td class="num mono">{formatBytes(p.used_bytes)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : (
              <p class="muted small">No processes on this GPU.</p>
            )}
          </div>
        ))
      )}
    </section>
  );
}
