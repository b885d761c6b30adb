import { useCallback, useMemo, useState } from 'preact/hooks';
import uPlot from 'uplot';
import type { Client } from '../api';
import { useAsync } from '../hooks';
import { Empty, ErrorBox, Loading } from '../ui/States';
import { RANGES, failoverColumns, legendValue, timeAt, timeTickLabels, ttftColumns, xRange } from './chartData';
import { UPlotChart } from './UPlotChart';

/** Series colours, distinct in both themes. */
const PALETTE = ['#3b82f6', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#06b6d4', '#ec4899', '#84cc16'];

function msAxis(v: number): string {
  return v >= 1000 ? `${Number((v / 1000).toFixed(1))} s` : `${Math.round(v)} ms`;
}

/** What every chart of the card shares: the time range shown and how a bucket's time reads. */
interface TimeAxis {
  range: [number, number];
  bucketSec: number;
}

/** The x series (time): the bucket under the cursor, or "latest" when the cursor is off the chart. */
function timeSeries(t: TimeAxis): uPlot.Series {
  return { label: 'Time', value: (_u, v, _s, idx) => (idx == null || v == null ? 'latest' : timeAt(v, t.bucketSec)) };
}

/** legend formats a y series' legend value: the value under the cursor, else the latest one. */
function legend(fmt: (v: number) => string): uPlot.Series['value'] {
  return (u, _v, sidx, idx) => {
    const y = legendValue(u.data[sidx] ?? [], idx);
    return y == null ? '—' : fmt(y);
  };
}

function baseOptions(width: number, css: (n: string) => string, title: string, t: TimeAxis): Partial<uPlot.Options> {
  const axis = {
    stroke: css('--muted'),
    grid: { stroke: css('--grid'), width: 1 },
    ticks: { stroke: css('--grid'), width: 1 },
  };
  return {
    title,
    width,
    height: 220,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true, range: () => t.range } },
    axes: [
      {
        ...axis,
        space: 80,
        values: (_u: uPlot, splits: number[], _ax: number, _space: number, step: number) => timeTickLabels(splits, step),
      },
      { ...axis, size: 60 },
    ],
  };
}

export function Charts({ client, refreshKey }: { client: Client; refreshKey: number }) {
  const [rangeId, setRangeId] = useState<string>('1h');
  const range = RANGES.find((r) => r.id === rangeId) ?? RANGES[0];
  const [res, reload] = useAsync((signal) => client.stats(range.since, range.bucket, signal), [client, range.id, refreshKey]);

  const stats = res.value;
  const ttft = useMemo(() => ttftColumns(stats?.ttft ?? []), [stats]);
  const fo = useMemo(() => failoverColumns(stats?.failover ?? []), [stats]);
  // Both charts show the same stretch of time, up to when the stats came.
  const time = useMemo<TimeAxis>(() => {
    const xs = [...ttft.xs, ...fo.xs].sort((a, b) => a - b);
    return { range: xRange(xs, range.bucketSec, Date.now() / 1000), bucketSec: range.bucketSec };
  }, [ttft, fo, range]);

  const ttftData = useMemo(
    () => [ttft.xs, ...ttft.candidates.flatMap((_, i) => [ttft.p50[i]!, ttft.p95[i]!])] as uPlot.AlignedData,
    [ttft],
  );
  const ttftOpts = useCallback(
    (width: number, css: (n: string) => string): uPlot.Options => {
      const base = baseOptions(width, css, 'Time to first token', time);
      const series: uPlot.Series[] = [timeSeries(time)];
      const value = legend(msAxis);
      ttft.candidates.forEach((c, i) => {
        const color = PALETTE[i % PALETTE.length]!;
        series.push({ label: `${c} p50`, stroke: color, width: 2, spanGaps: true, points: { size: 4 }, value });
        series.push({ label: `${c} p95`, stroke: color, width: 1.5, dash: [5, 4], spanGaps: true, points: { show: false }, value });
      });
      return {
        ...base,
        series,
        axes: [base.axes![0]!, { ...base.axes![1]!, values: (_u, vals) => vals.map(msAxis) }],
        scales: { ...base.scales, y: { range: (_u, _min, max) => [0, Math.max(100, max * 1.1)] } },
      } as uPlot.Options;
    },
    [ttft, time],
  );

  const foData = useMemo(() => [fo.xs, fo.fallbackPct, fo.errorPct] as uPlot.AlignedData, [fo]);
  const foOpts = useCallback(
    (width: number, css: (n: string) => string): uPlot.Options => {
      const base = baseOptions(width, css, 'Failover rate', time);
      const pct = legend((v) => `${v.toFixed(0)}%`);
      return {
        ...base,
        series: [
          timeSeries(time),
          {
            label: 'needed a fallback',
            stroke: css('--warn'),
            fill: css('--warn'),
            width: 0,
            paths: uPlot.paths.bars!({ size: [0.7, 40], gap: 1 }),
            points: { show: false },
            value: pct,
          },
          {
            label: 'failed',
            stroke: css('--bad'),
            fill: css('--bad'),
            width: 0,
            paths: uPlot.paths.bars!({ size: [0.35, 20], gap: 1 }),
            points: { show: false },
            value: pct,
          },
        ],
        axes: [base.axes![0]!, { ...base.axes![1]!, values: (_u, vals) => vals.map((v) => `${v}%`) }],
        scales: { ...base.scales, y: { range: [0, 100] } },
      } as uPlot.Options;
    },
    [time],
  );

  return (
    <section class="card charts" aria-labelledby="charts-title">
      <div class="card-head">
        <h2 id="charts-title">Trends</h2>
        <label class="inline-field">
          <span>Range</span>
          <select value={rangeId} onChange={(e) => setRangeId((e.target as HTMLSelectElement).value)} data-testid="chart-range">
            {RANGES.map((r) => (
              <option key={r.id} value={r.id}>
                {r.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      {res.state === 'loading' && !stats ? (
        <Loading what="stats" />
      ) : res.state === 'error' && !stats ? (
        <ErrorBox title="Could not load stats" message={res.error.message} onRetry={reload} />
      ) : (
        <div class="chart-grid">
          <div data-testid="chart-ttft">
            {ttft.xs.length === 0 ? (
              <Empty title="Time to first token">No answered requests in this range yet.</Empty>
            ) : (
              <UPlotChart options={ttftOpts} data={ttftData} label="Time to first token per candidate, p50 and p95" />
            )}
          </div>
          <div data-testid="chart-failover">
            {fo.xs.length === 0 || fo.requests.every((n) => n === 0) ? (
              <Empty title="Failover rate">No requests in this range yet.</Empty>
            ) : (
              <UPlotChart options={foOpts} data={foData} label="Share of requests that needed a fallback or failed" />
            )}
          </div>
        </div>
      )}
    </section>
  );
}
