import { formatPct } from '../format';

interface Props {
  /** 0..1 */
  value: number;
  label: string;
  detail: string;
  /** Above this share the bar turns amber; above danger, red. */
  warn?: number;
  danger?: number;
  /** A slimmer bar, for a secondary reading. */
  thin?: boolean;
  testid?: string;
}

/** Gauge is a labelled horizontal meter. */
export function Gauge({ value, label, detail, warn = 0.8, danger = 0.95, thin = false, testid }: Props) {
  const v = Math.min(1, Math.max(0, value));
  const tone = v >= danger ? 'bad' : v >= warn ? 'warn' : 'ok';
  return (
    <div class={`gauge ${thin ? 'gauge-thin' : ''}`} data-testid={testid} data-tone={tone}>
      <div class="gauge-head">
        <span>{label}</span>
        <span class="mono">{detail}</span>
      </div>
      <div
        class="gauge-track"
        role="meter"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(v * 100)}
        aria-valuetext={`${formatPct(v * 100)} — ${detail}`}
      >
        <div class={`gauge-fill gauge-${tone}`} style={{ width: `${v * 100}%` }} />
      </div>
    </div>
  );
}
