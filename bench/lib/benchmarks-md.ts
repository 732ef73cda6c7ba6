import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { BENCHMARK_NOTES, type BenchmarkNotes } from './benchmark-notes';
import { formatNumber } from './format';
import { goalMet, ratioOf, RESULTS_DIR, summaryList, type BenchResult, type Goal } from './report';
import { renderLineChartSvg, type Point } from './svg-chart';

/**
 * BENCHMARKS.md, generated: the intro, how to run, the latest table, the throughput chart and a
 * section per benchmark, from bench/results/*.json and the hand-written notes in
 * bench/lib/benchmark-notes.ts. The output depends only on those (no clock, fixed order), so
 * regenerating changes only what the results changed.
 *
 *   node --import tsx bench/lib/benchmarks-md.ts
 */

const ROOT = resolve(__dirname, '..', '..');
export const BENCHMARKS_MD = join(ROOT, 'BENCHMARKS.md');
export const THROUGHPUT_SVG = join(RESULTS_DIR, 'throughput.svg');
/** The chart's path as BENCHMARKS.md (at the repository root) links it. */
const CHART_LINK = 'bench/results/throughput.svg';

export { formatNumber };

export interface RenderOptions {
  /** How BENCHMARKS.md links the throughput chart; shown only when the throughput result has a series. */
  chartLink?: string;
}

export function formatGoal(goal: Goal): string {
  // Four significant digits: a goal derived from a measured floor (an absolute goal as a ratio) stays short.
  const ratio = Number.isFinite(goal.ratio) ? String(Number(goal.ratio.toPrecision(4))) : 'n/a';
  return `${goal.direction === 'atLeast' ? '≥' : '≤'} ${ratio}`;
}

/** Met or missed, computed from ours, floor and the goal (not taken on trust from `met`). */
export function isMet(result: Pick<BenchResult, 'ours' | 'floor' | 'goal'>): boolean {
  return goalMet(ratioOf(result.ours, result.floor), result.goal);
}

/** 2026-11-21T08:25:09.618Z → 2026-11-21 08:25 UTC; anything else as it is. */
export function formatDate(iso: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(iso);
  return m ? `${m[1]} ${m[2]} UTC` : iso;
}

/**
 * A benchmark with several goals (scale) lists them in `summary.goals`; the table row holds its
 * headline one. Each is rendered as one line of the benchmark's section, met or missed computed
 * here like the table's.
 */
interface SummaryGoal {
  name: string;
  measure?: string;
  ours: number;
  floor: number;
  unit?: string;
  goal: Goal;
  result?: string;
}

function summaryGoals(result: BenchResult): SummaryGoal[] {
  return summaryList<SummaryGoal>(
    result,
    'goals',
    (g) =>
      typeof g.name === 'string' &&
      typeof g.ours === 'number' &&
      typeof g.floor === 'number' &&
      typeof (g.goal as Partial<Goal> | undefined)?.ratio === 'number',
  );
}

function goalLine(g: SummaryGoal): string {
  const ratio = ratioOf(g.ours, g.floor);
  const unit = g.unit ? ` ${g.unit}` : '';
  const verdict = g.result === 'not measured' ? 'not measured' : isMet(g) ? 'met' : '**missed**';
  return (
    `- \`${g.name}\`${g.measure ? ` (${g.measure})` : ''}: ${formatNumber(g.ours)}${unit} against ` +
    `${formatNumber(g.floor)}${unit}, ratio ${Number.isFinite(ratio) ? ratio.toFixed(3) : 'n/a'}, ` +
    `goal ${formatGoal(g.goal)}, ${verdict}.`
  );
}

/**
 * A run a benchmark makes beside those its goals compare (scale's opt-in 1M items at 1 item per
 * message), from `summary.extraRuns`: finished, or how far it got within its time limit.
 */
interface ExtraRun {
  name: string;
  items: number;
  itemsPerMessage: number;
  finished: boolean;
  done: number;
  runSeconds: number;
  timeoutSeconds?: number;
  itemsPerSecond: number;
  bytesPerItem: number;
  requestsPerItem: number;
  /** Null when the run did not end: there is no output to check. */
  exact: boolean | null;
  /** Whether the last checkpoint's accumulator is the fold of exactly the items it marks counted. */
  exactSoFar?: boolean;
}

const EXTRA_RUN_FIGURES = ['items', 'itemsPerMessage', 'done', 'runSeconds', 'itemsPerSecond', 'bytesPerItem', 'requestsPerItem'];

function extraRuns(result: BenchResult): ExtraRun[] {
  return summaryList<ExtraRun>(
    result,
    'extraRuns',
    (r) =>
      typeof r.name === 'string' && typeof r.finished === 'boolean' && EXTRA_RUN_FIGURES.every((k) => typeof r[k] === 'number'),
  );
}

/** A count: whole numbers below 100 without formatNumber's decimals. */
const formatCount = (n: number): string => (Number.isInteger(n) && Math.abs(n) < 100 ? String(n) : formatNumber(n));

function extraRunLine(r: ExtraRun): string {
  const per = `${formatCount(r.itemsPerMessage)} item${r.itemsPerMessage === 1 ? '' : 's'} per message`;
  const what = `- \`${r.name}\` (${formatCount(r.items)} items, ${per}): `;
  // The plan of every item is written before the first is dispatched: per item counted so far, it weighs heavily.
  const plan = r.finished ? '' : ' (the plan of every item, written up front, included)';
  const rates = `${formatNumber(r.itemsPerSecond)} items/s, ${formatNumber(r.bytesPerItem)} B/item${plan}, ${formatNumber(r.requestsPerItem)} requests/item`;
  const checkpoint =
    r.exactSoFar === undefined
      ? ''
      : `; its last checkpoint ${r.exactSoFar ? 'folds' : '**does not fold**'} each counted item once`;
  if (r.finished) {
    return `${what}finished in ${formatNumber(r.runSeconds)} s, ${rates}, output ${r.exact ? 'exact' : '**not exact**'}.`;
  }
  const limit = r.timeoutSeconds === undefined ? '' : ` within its ${formatCount(r.timeoutSeconds)} s limit`;
  const share = r.items > 0 ? ` (${((100 * r.done) / r.items).toFixed(1)} %)` : '';
  return (
    `${what}not finished${limit}: ${formatCount(r.done)} items counted${share} in ${formatNumber(r.runSeconds)} s, ` +
    `${rates} so far${checkpoint}. The output is written when a run ends, so whether it is exact is not checkable.`
  );
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

/** Results in the notes' order, then any others by name. */
export function orderResults(results: readonly BenchResult[], notes: BenchmarkNotes): BenchResult[] {
  const known = Object.keys(notes);
  const rank = (name: string): number => {
    const i = known.indexOf(name);
    return i === -1 ? known.length : i;
  };
  return [...results].sort((a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The throughput result's `summary.series` as chart series, or undefined when it has none. */
export function throughputSeries(result: BenchResult | undefined): { name: string; points: Point[] }[] | undefined {
  const series = (result?.summary as { series?: unknown } | undefined)?.series;
  if (!series || typeof series !== 'object') return undefined;
  const points = (value: unknown): Point[] =>
    Array.isArray(value)
      ? value
          .filter(
            (p): p is [number, number] =>
              Array.isArray(p) && p.length >= 2 && typeof p[0] === 'number' && typeof p[1] === 'number',
          )
          .map((p) => [p[0], p[1]] as Point)
      : [];
  const { ours, floor } = series as { ours?: unknown; floor?: unknown };
  const out = [
    { name: 'ours (Baton)', points: points(ours) },
    { name: 'floor (raw SDK)', points: points(floor) },
  ];
  return out.some((s) => s.points.length > 0) ? out : undefined;
}

export function renderThroughputSvg(result: BenchResult | undefined): string | undefined {
  const series = throughputSeries(result);
  if (!series) return undefined;
  return renderLineChartSvg({
    title: 'Throughput over time: ours against the floor',
    xLabel: 'seconds since the start of the run',
    yLabel: 'items/s',
    series,
  });
}

function tableRow(r: BenchResult): string {
  const ratio = ratioOf(r.ours, r.floor);
  const met = isMet(r);
  const verdict = met ? 'met' : '**missed**';
  const disagrees = typeof r.met === 'boolean' && r.met !== met ? ` (the JSON says ${r.met ? 'met' : 'missed'})` : '';
  const machine = r.machine ? `${r.machine.cores} cores, Node ${r.machine.node}` : 'unknown';
  return `| ${[
    `[${r.name}](#${r.name})`,
    `${formatNumber(r.ours)} ${r.unit}`,
    `${formatNumber(r.floor)} ${r.unit}`,
    Number.isFinite(ratio) ? ratio.toFixed(3) : 'n/a',
    formatGoal(r.goal),
    `${verdict}${disagrees}`,
    formatDate(r.date),
    machine,
  ]
    .map(cell)
    .join(' | ')} |`;
}

export function renderBenchmarksMarkdown(
  results: readonly BenchResult[],
  notes: BenchmarkNotes = BENCHMARK_NOTES,
  options: RenderOptions = {},
): string {
  const ordered = orderResults(results, notes);
  const byName = new Map(ordered.map((r) => [r.name, r]));
  const names = [...Object.keys(notes), ...ordered.map((r) => r.name).filter((n) => !(n in notes))];
  const notRun = Object.keys(notes).filter((n) => !byName.has(n));
  const out: string[] = [];
  const p = (...lines: string[]): void => {
    out.push(...lines);
  };

  p(
    '# Benchmarks',
    '',
    '<!-- Generated by bench/lib/benchmarks-md.ts from bench/results/*.json and bench/lib/benchmark-notes.ts:',
    '     edit those, not this file. Regenerate: node --import tsx bench/lib/benchmarks-md.ts -->',
    '',
    'What Baton adds on top of Azure Storage, measured: how fast a run goes through, how fast the leader',
    'dispatches, how long a run stalls when the leader dies or hands over, how many storage requests (the bill)',
    'an item costs, and how much memory the leader holds. Each benchmark runs on a local cluster: Azurite in',
    'process, and real instance processes where the benchmark needs them.',
    '',
    'Every figure is a **ratio to a floor**: the same work done with the raw Azure SDK (or the least the',
    'protocol allows), measured in the same run, on the same Azurite and the same machine. The machines these',
    'run on are noisy (shared, two cores), so an absolute figure moves a lot from one run to the next, while',
    'the ratio of two arms measured side by side moves much less. Each goal is set on the ratio: `≥` for',
    'rates, `≤` for times, requests and memory.',
    '',
    '## Reproducing them',
    '',
    'From a clean checkout, with Node 22.15 or later; no Azure account is needed, each benchmark starts its own',
    'Azurite:',
    '',
    '```bash',
    'npm ci',
    'npm run bench                # every benchmark in bench/benchmarks, in order',
    'npm run bench -- throughput  # only the one named (several names are fine)',
    '```',
    '',
    'Each benchmark writes `bench/results/<name>.json`: ours, the floor, the ratio, the goal, the machine, a',
    'summary and the raw samples. After running, `bench/run.ts` regenerates this file from every result present,',
    'so running one benchmark updates its row and keeps the others. The whole set takes most of an hour on 2',
    'cores (the leadership and scale benchmarks wait on leases and run a million items); the machine column says',
    'which Node each row ran on. To regenerate this file without running anything:',
    '',
    '```bash',
    'node --import tsx bench/lib/benchmarks-md.ts',
    '```',
    '',
    '## Latest results',
    '',
  );
  if (ordered.length === 0) {
    p('No results yet: run `npm run bench`.', '');
  } else {
    p(
      '| benchmark | ours | floor | ratio | goal | result | date | machine |',
      '|---|--:|--:|--:|:-:|---|---|---|',
      ...ordered.map(tableRow),
      '',
      'The ratio is ours / floor; the goal says which way it must go. Each row is the latest run of that benchmark,',
      'so rows can come from different days and machines.',
      '',
    );
  }
  if (notRun.length > 0) {
    p(`Not run yet: ${notRun.map((n) => `\`${n}\``).join(', ')}.`, '');
  }

  p('## Throughput over time', '');
  const chart = throughputSeries(byName.get('throughput'));
  if (chart) {
    p(
      `![Throughput over time: items/s of ours against the floor](${options.chartLink ?? CHART_LINK})`,
      '',
      "Items/s over the throughput benchmark's run, ours against the floor, from `summary.series` in",
      '`bench/results/throughput.json`.',
      '',
    );
  } else {
    p(
      "The chart (the throughput run's items/s over time, ours against the floor) appears here after the",
      'throughput benchmark has run: `npm run bench -- throughput`.',
      '',
    );
  }

  for (const name of names) {
    const note = notes[name];
    const r = byName.get(name);
    p(`## ${name}`, '');
    if (note?.draft) p(`> **Draft**: ${note.draft}`, '');
    p(`**What it measures.** ${note?.measures ?? '_No notes yet: add them to bench/lib/benchmark-notes.ts._'}`, '');
    if (note) p(`**What limits this figure.** ${note.limits}`, '');
    if (r) {
      const ratio = ratioOf(r.ours, r.floor);
      p(
        `**Latest.** Ours ${formatNumber(r.ours)} ${r.unit}, floor ${formatNumber(r.floor)} ${r.unit}: ratio ` +
          `${Number.isFinite(ratio) ? ratio.toFixed(3) : 'n/a'}, goal ${formatGoal(r.goal)}, ${isMet(r) ? 'met' : '**missed**'}. ` +
          `${formatDate(r.date)}` +
          (r.machine ? `, ${r.machine.cores} cores (${r.machine.cpuModel}), Node ${r.machine.node}` : '') +
          `; details in \`bench/results/${name}.json\`.`,
        '',
      );
      const goals = summaryGoals(r);
      if (goals.length > 0) p('**Every goal of the latest run.**', '', ...goals.map(goalLine), '');
      const extra = extraRuns(r);
      if (extra.length > 0) p('**Runs of the latest result outside its goals.**', '', ...extra.map(extraRunLine), '');
    } else {
      p(`**Latest.** Not run yet: \`npm run bench -- ${name}\`.`, '');
    }
    if (note?.more) p(...note.more(r), '');
  }
  return `${out.join('\n').replace(/\n+$/, '')}\n`;
}

function isBenchResult(value: unknown): value is BenchResult {
  const v = value as Partial<BenchResult> | null;
  return (
    !!v &&
    typeof v === 'object' &&
    typeof v.name === 'string' &&
    typeof v.ours === 'number' &&
    typeof v.floor === 'number' &&
    typeof v.unit === 'string' &&
    !!v.goal &&
    typeof v.goal.ratio === 'number' &&
    (v.goal.direction === 'atLeast' || v.goal.direction === 'atMost')
  );
}

/** Every bench/results/*.json that looks like a BenchResult, by file name; others are skipped with a warning. */
export function readResults(dir: string = RESULTS_DIR): BenchResult[] {
  if (!existsSync(dir)) return [];
  const results: BenchResult[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(join(dir, file), 'utf8'));
      if (isBenchResult(parsed)) results.push(parsed);
      else console.warn(`BENCHMARKS.md: skipped ${file}: not a benchmark result`);
    } catch (err) {
      console.warn(`BENCHMARKS.md: skipped ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return results;
}

export interface WriteOptions {
  resultsDir?: string;
  markdownPath?: string;
  svgPath?: string;
  notes?: BenchmarkNotes;
}

/**
 * Reads every result, writes BENCHMARKS.md and, when the throughput result has a series,
 * bench/results/throughput.svg (removing a chart left from an earlier run when it has none).
 */
export function writeBenchmarksMarkdown(options: WriteOptions = {}): {
  markdownPath: string;
  svgPath?: string;
  results: string[];
} {
  const resultsDir = options.resultsDir ?? RESULTS_DIR;
  const markdownPath = options.markdownPath ?? BENCHMARKS_MD;
  const svgPath = options.svgPath ?? join(resultsDir, 'throughput.svg');
  const results = readResults(resultsDir);
  const svg = renderThroughputSvg(results.find((r) => r.name === 'throughput'));
  if (svg) writeFileSync(svgPath, svg);
  else if (existsSync(svgPath)) rmSync(svgPath);
  const chartLink = relative(resolve(markdownPath, '..'), svgPath).split(sep).join('/');
  writeFileSync(markdownPath, renderBenchmarksMarkdown(results, options.notes ?? BENCHMARK_NOTES, { chartLink }));
  return { markdownPath, ...(svg ? { svgPath } : {}), results: results.map((r) => r.name) };
}

// Run directly: node --import tsx bench/lib/benchmarks-md.ts
if (process.argv[1] && resolve(process.argv[1]).replace(/\.ts$/, '') === __filename.replace(/\.ts$/, '')) {
  const written = writeBenchmarksMarkdown();
  console.log(
    `wrote ${relative(ROOT, written.markdownPath)}${written.svgPath ? ` and ${relative(ROOT, written.svgPath)}` : ''} ` +
      `from ${written.results.length} result(s)`,
  );
}
