/**
 * A small line chart as SVG text, without dependencies: axes with round-number ticks, a
 * horizontal grid, a legend and one polyline per series. The output depends only on the input
 * (fixed decimals, no dates, no random ids), so regenerating it from the same data gives the
 * same bytes.
 */

export type Point = [x: number, y: number];

export interface LineSeries {
  name: string;
  points: Point[];
}

export interface LineChartInput {
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  /** 720 unless told. */
  width?: number;
  /** 360 unless told. */
  height?: number;
  /** The y axis starts at 0 unless the data goes below it (true unless told): rates read honestly from 0. */
  yFromZero?: boolean;
  /** About how many ticks per axis (6 unless told). */
  targetTicks?: number;
}

/** Distinct colours (and dashes, for readers who cannot tell the colours apart), in series order. */
export const SERIES_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const SERIES_DASHES = ['', '6 4', '2 3', '8 3 2 3'];

const MARGIN = { top: 56, right: 24, bottom: 52, left: 72 };

export interface Ticks {
  min: number;
  max: number;
  step: number;
  values: number[];
}

/** The digits after the decimal point that multiples of `step` (1, 2 or 5 × 10^k) need. */
function decimalsFor(step: number): number {
  return Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
}

/** A round step near `rough`: 1, 2 or 5 times a power of ten. */
export function niceStep(rough: number): number {
  if (!(rough > 0) || !Number.isFinite(rough)) return 1;
  const exponent = Math.floor(Math.log10(rough));
  const fraction = rough / 10 ** exponent;
  const mantissa = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  const step = mantissa * 10 ** exponent;
  return Number(step.toFixed(decimalsFor(step)));
}

/**
 * Round ticks covering [min, max]: the axis runs from a multiple of the step at or below min to
 * one at or above max, and every tick is an exact multiple of the step (no 0.30000000000000004).
 */
export function niceTicks(min: number, max: number, target = 6): Ticks {
  let lo = Number.isFinite(min) ? min : 0;
  let hi = Number.isFinite(max) ? max : 1;
  if (lo > hi) [lo, hi] = [hi, lo];
  if (lo === hi) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    lo -= lo === 0 ? 0 : pad;
    hi += pad;
  }
  const step = niceStep((hi - lo) / Math.max(1, target - 1));
  const decimals = decimalsFor(step);
  const first = Math.floor(lo / step + 1e-9);
  const last = Math.ceil(hi / step - 1e-9);
  const values: number[] = [];
  for (let i = first; i <= last; i++) values.push(Number((i * step).toFixed(decimals)) + 0);
  return { min: values[0] as number, max: values[values.length - 1] as number, step, values };
}

/** A tick label: the value with just the decimals its step needs; thousands as k, millions as M. */
export function formatTick(value: number, step: number): string {
  const abs = Math.abs(value);
  const scaled = (divisor: number, suffix: string): string => {
    const v = value / divisor;
    return `${v.toFixed(decimalsFor(step / divisor))}${suffix}`;
  };
  if (value === 0) return '0';
  if (abs >= 1e6 && step >= 1e5) return scaled(1e6, 'M');
  if (abs >= 1e4 && step >= 1e3) return scaled(1e3, 'k');
  return value.toFixed(decimalsFor(step));
}

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** Fixed two decimals, without a "-0.00". */
function coord(n: number): string {
  const s = n.toFixed(2);
  return s === '-0.00' ? '0.00' : s;
}

function finitePoints(points: readonly Point[]): Point[] {
  return points.filter((p) => Array.isArray(p) && Number.isFinite(p[0]) && Number.isFinite(p[1]));
}

export function renderLineChartSvg(input: LineChartInput): string {
  const width = input.width ?? 720;
  const height = input.height ?? 360;
  const target = input.targetTicks ?? 6;
  const series = input.series.map((s) => ({ name: s.name, points: finitePoints(s.points) }));
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  let yMin = ys.length > 0 ? Math.min(...ys) : 0;
  let yMax = ys.length > 0 ? Math.max(...ys) : 1;
  if (input.yFromZero ?? true) {
    yMin = Math.min(0, yMin);
    yMax = Math.max(0, yMax);
  }
  const xTicks = niceTicks(xs.length > 0 ? Math.min(...xs) : 0, xs.length > 0 ? Math.max(...xs) : 1, target);
  const yTicks = niceTicks(yMin, yMax, target);

  const left = MARGIN.left;
  const right = width - MARGIN.right;
  const top = MARGIN.top;
  const bottom = height - MARGIN.bottom;
  const sx = (x: number): number => left + ((x - xTicks.min) / (xTicks.max - xTicks.min)) * (right - left);
  const sy = (y: number): number => bottom - ((y - yTicks.min) / (yTicks.max - yTicks.min)) * (bottom - top);

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="12" role="img">`,
  );
  out.push(`  <title>${escapeXml(input.title)}</title>`);
  out.push(`  <rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`  <text x="${left}" y="22" font-size="15" font-weight="bold" fill="#222222">${escapeXml(input.title)}</text>`);

  // Legend: one row under the title; widths estimated from the text (about 7 px a character).
  let legendX = left;
  series.forEach((s, i) => {
    const colour = SERIES_COLOURS[i % SERIES_COLOURS.length] as string;
    const dash = SERIES_DASHES[i % SERIES_DASHES.length] as string;
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : '';
    out.push(
      `  <g class="legend-entry">` +
        `<line x1="${legendX}" y1="38" x2="${legendX + 24}" y2="38" stroke="${colour}" stroke-width="2.5"${dashAttr}/>` +
        `<text x="${legendX + 30}" y="42" fill="#222222">${escapeXml(s.name)}</text></g>`,
    );
    legendX += 30 + s.name.length * 7 + 20;
  });

  // Grid and y ticks.
  for (const v of yTicks.values) {
    const y = coord(sy(v));
    out.push(`  <line x1="${left}" y1="${y}" x2="${right}" y2="${y}" stroke="#e6e6e6" stroke-width="1"/>`);
    out.push(`  <line x1="${left - 5}" y1="${y}" x2="${left}" y2="${y}" stroke="#333333" stroke-width="1"/>`);
    out.push(
      `  <text class="tick y-tick" x="${left - 8}" y="${y}" dy="0.32em" text-anchor="end" fill="#444444">${formatTick(v, yTicks.step)}</text>`,
    );
  }
  // x ticks.
  for (const v of xTicks.values) {
    const x = coord(sx(v));
    out.push(`  <line x1="${x}" y1="${bottom}" x2="${x}" y2="${bottom + 5}" stroke="#333333" stroke-width="1"/>`);
    out.push(
      `  <text class="tick x-tick" x="${x}" y="${bottom + 18}" text-anchor="middle" fill="#444444">${formatTick(v, xTicks.step)}</text>`,
    );
  }
  // Axes.
  out.push(`  <line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="#333333" stroke-width="1"/>`);
  out.push(`  <line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333333" stroke-width="1"/>`);
  out.push(
    `  <text x="${coord((left + right) / 2)}" y="${height - 12}" text-anchor="middle" fill="#222222">${escapeXml(input.xLabel)}</text>`,
  );
  const yLabelY = coord((top + bottom) / 2);
  out.push(
    `  <text x="18" y="${yLabelY}" transform="rotate(-90 18 ${yLabelY})" text-anchor="middle" fill="#222222">${escapeXml(input.yLabel)}</text>`,
  );

  // The series.
  series.forEach((s, i) => {
    const colour = SERIES_COLOURS[i % SERIES_COLOURS.length] as string;
    const dash = SERIES_DASHES[i % SERIES_DASHES.length] as string;
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : '';
    const points = s.points.map(([x, y]) => `${coord(sx(x))},${coord(sy(y))}`).join(' ');
    out.push(
      `  <polyline data-series="${escapeXml(s.name)}" fill="none" stroke="${colour}" stroke-width="2" ` +
        `stroke-linejoin="round" stroke-linecap="round"${dashAttr} points="${points}"/>`,
    );
    // A lone point draws no line: mark it.
    if (s.points.length === 1) {
      const [x, y] = s.points[0] as Point;
      out.push(`  <circle cx="${coord(sx(x))}" cy="${coord(sy(y))}" r="3" fill="${colour}"/>`);
    }
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
