import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { onThemeChange } from '../theme';

interface Props {
  /** Builds the options for a width; called again on theme changes (colours come from CSS variables). */
  options(width: number, css: (name: string) => string): uPlot.Options;
  data: uPlot.AlignedData;
  label: string;
}

/** UPlotChart owns one uPlot instance: sized to its box, rebuilt on theme change. */
export function UPlotChart({ options, data, label }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = (name: string) => getComputedStyle(el).getPropertyValue(name).trim();
    const build = () => {
      plot.current?.destroy();
      plot.current = new uPlot(options(Math.max(200, el.clientWidth), css), data, el);
    };
    build();
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (plot.current && Math.abs(plot.current.width - w) > 2) plot.current.setSize({ width: w, height: plot.current.height });
    });
    ro.observe(el);
    const off = onThemeChange(build);
    return () => {
      off();
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [options, data]);

  return <div class="chart" ref={box} role="img" aria-label={label} />;
}
