import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BenchmarkNotes } from './benchmark-notes';
import { BENCHMARK_NOTES } from './benchmark-notes';
import { formatGoal, formatNumber, renderBenchmarksMarkdown, writeBenchmarksMarkdown } from './benchmarks-md';
import type { BenchResult, Goal } from './report';
import { formatTick, niceTicks, renderLineChartSvg, SERIES_COLOURS } from './svg-chart';

// ---- helpers -------------------------------------------------------------------------------

/** Checks the tags nest: every open tag closed in order, one root <svg>. Returns the tag names seen. */
function checkWellFormed(xml: string): string[] {
  const stack: string[] = [];
  const seen: string[] = [];
  let roots = 0;
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let last = 0;
  for (let m = tag.exec(xml); m; m = tag.exec(xml)) {
    const between = xml.slice(last, m.index);
    // Text between tags has no stray markup and only escaped ampersands.
    expect(between).not.toMatch(/[<>]/);
    expect(between).not.toMatch(/&(?!amp;|lt;|gt;|quot;|apos;)/);
    last = tag.lastIndex;
    const [, closing, name, , selfClosing] = m as unknown as [string, string, string, string, string];
    if (closing) {
      expect(stack.pop(), `</${name}> closes the open tag`).toBe(name);
    } else {
      seen.push(name);
      if (stack.length === 0) roots++;
      if (!selfClosing) stack.push(name);
    }
  }
  expect(xml.slice(last).trim()).toBe('');
  expect(stack).toEqual([]);
  expect(roots).toBe(1);
  return seen;
}

/** Digits after the decimal point, as written. */
function decimals(text: string): number {
  return (text.split('.')[1] ?? '').length;
}

function attr(element: string, name: string): string | undefined {
  return new RegExp(`\\s${name}="([^"]*)"`).exec(element)?.[1];
}

function polylines(svg: string): string[] {
  return svg.match(/<polyline\b[^>]*>/g) ?? [];
}

function pointsOf(polyline: string): [number, number][] {
  return (attr(polyline, 'points') ?? '')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map((p) => p.split(',').map(Number) as [number, number]);
}

function tickLabels(svg: string, axis: 'x' | 'y'): string[] {
  return [...svg.matchAll(new RegExp(`<text class="tick ${axis}-tick"[^>]*>([^<]*)</text>`, 'g'))].map((m) => m[1] as string);
}

function result(name: string, ours: number, floor: number, goal: Goal, extra: Partial<BenchResult> = {}): BenchResult {
  const date = '2026-11-21T08:25:09.618Z';
  return {
    name,
    date,
    machine: {
      cores: 2,
      cpuModel: 'Test CPU',
      totalMemBytes: 1,
      platform: 'linux',
      release: 'x',
      arch: 'x64',
      node: 'v20.20.2',
      date,
    },
    ours,
    floor,
    unit: 'items/s',
    ratio: ours / floor,
    goal,
    met: true,
    summary: {},
    samples: [],
    ...extra,
  };
}

const NOTES: BenchmarkNotes = {
  alpha: { measures: 'Alpha measures things.', limits: 'Alpha is limited by Azurite.' },
  beta: { measures: 'Beta measures.', limits: 'Beta limits.', draft: 'Needs figures.' },
  gamma: { measures: 'Gamma.', limits: 'Gamma limits.' },
};

/** The data rows of the "Latest results" table, split into trimmed cells. */
function tableRows(md: string): string[][] {
  const section = md.split('## Latest results')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('|'))
    .slice(2)
    .map((l) =>
      l
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

// ---- the chart ------------------------------------------------------------------------------

describe('niceTicks', () => {
  it.each([
    [0, 1],
    [0, 873.2],
    [0, 0.37],
    [12.3, 97.9],
    [-40, 260],
    [0, 123_456],
    [1e-4, 3.3e-4],
    [5, 5],
    [0, 0],
  ])('covers [%d, %d] with round, evenly spaced ticks', (min, max) => {
    const t = niceTicks(min, max, 6);
    const mantissa = t.step / 10 ** Math.floor(Math.log10(t.step) + 1e-9);
    expect([1, 2, 5]).toContainEqual(Number(mantissa.toFixed(9)));
    expect(t.min).toBeLessThanOrEqual(Math.min(min, max));
    expect(t.max).toBeGreaterThanOrEqual(Math.max(min, max));
    expect(t.max).toBeGreaterThan(t.min);
    expect(t.values.length).toBeGreaterThanOrEqual(2);
    expect(t.values.length).toBeLessThanOrEqual(12);
    for (const [i, v] of t.values.entries()) {
      // An exact multiple of the step, written without float noise.
      expect(Math.abs(v / t.step - Math.round(v / t.step))).toBeLessThan(1e-9);
      expect(decimals(String(v))).toBeLessThanOrEqual(decimals(String(t.step)));
      if (i > 0) expect(v - (t.values[i - 1] as number)).toBeCloseTo(t.step, 9);
    }
  });

  it('picks 0, 200, … 1000 for items/s up to 873', () => {
    expect(niceTicks(0, 873.2, 6).values).toEqual([0, 200, 400, 600, 800, 1000]);
    expect(niceTicks(0, 0.3, 4).values).toEqual([0, 0.1, 0.2, 0.3]);
  });

  it('labels ticks with only the decimals the step needs', () => {
    expect(formatTick(0.30000000000000004, 0.1)).toBe('0.3');
    expect(formatTick(400, 200)).toBe('400');
    expect(formatTick(2.5, 0.5)).toBe('2.5');
    expect(formatTick(20_000, 5000)).toBe('20k');
    expect(formatTick(25_000, 5000)).toBe('25k');
    expect(formatTick(1_500_000, 500_000)).toBe('1.5M');
  });
});

describe('renderLineChartSvg', () => {
  const ours: [number, number][] = [
    [0, 0],
    [1, 210.5],
    [2, 233.25],
    [3.5, 241],
    [5, 228.7],
  ];
  const floor: [number, number][] = [
    [0, 0],
    [1.2, 240],
    [2.4, 251.3],
    [3.6, 247],
  ];
  const input = {
    title: 'Throughput <items> & more',
    xLabel: 'seconds',
    yLabel: 'items/s',
    series: [
      { name: 'ours', points: ours },
      { name: 'floor', points: floor },
      { name: 'third', points: [[6, 100]] as [number, number][] },
    ],
  };
  const svg = renderLineChartSvg(input);

  it('is well-formed, one <svg> root with a viewBox of about 720 × 360, text escaped', () => {
    const tags = checkWellFormed(svg);
    expect(tags[0]).toBe('svg');
    const root = /<svg\b[^>]*>/.exec(svg)?.[0] ?? '';
    expect(attr(root, 'xmlns')).toBe('http://www.w3.org/2000/svg');
    expect(attr(root, 'viewBox')).toBe('0 0 720 360');
    expect(svg).toContain('Throughput &lt;items&gt; &amp; more');
    expect(svg).not.toContain('<items>');
  });

  it('draws one polyline per series, with every point, in distinct colours', () => {
    const lines = polylines(svg);
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => attr(l, 'data-series'))).toEqual(['ours', 'floor', 'third']);
    expect(lines.map((l) => pointsOf(l).length)).toEqual([ours.length, floor.length, 1]);
    const colours = lines.map((l) => attr(l, 'stroke'));
    expect(new Set(colours).size).toBe(3);
    expect(colours).toEqual(SERIES_COLOURS.slice(0, 3));
    // The legend names every series.
    for (const name of ['ours', 'floor', 'third']) expect(svg).toMatch(new RegExp(`<text[^>]*>${name}</text>`));
  });

  it('scales the points into the plot area inside the viewBox, y growing upwards', () => {
    const all = polylines(svg).flatMap(pointsOf);
    for (const [x, y] of all) {
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThanOrEqual(720);
      expect(y).toBeGreaterThanOrEqual(0);
      expect(y).toBeLessThanOrEqual(360);
    }
    const [oursLine] = polylines(svg);
    const pts = pointsOf(oursLine as string);
    // x in data order maps left to right; a higher y is drawn higher (a smaller SVG y).
    for (let i = 1; i < pts.length; i++) expect((pts[i] as number[])[0]).toBeGreaterThan((pts[i - 1] as number[])[0] as number);
    expect((pts[3] as number[])[1]).toBeLessThan((pts[1] as number[])[1] as number);
    // The y axis starts at 0: the (0, 0) point sits on the x axis, the bottom of the plot area.
    const axisY = Math.max(...all.map((p) => p[1]));
    expect((pts[0] as number[])[1]).toBe(axisY);
    // Points spread over most of the width: scaled, not clipped or squashed.
    const xs = all.map((p) => p[0]);
    expect(Math.max(...xs) - Math.min(...xs)).toBeGreaterThan(500);
  });

  it('puts round ticks on both axes', () => {
    const y = tickLabels(svg, 'y');
    const x = tickLabels(svg, 'x');
    expect(y[0]).toBe('0');
    expect(y.length).toBeGreaterThanOrEqual(3);
    expect(x.length).toBeGreaterThanOrEqual(3);
    for (const labels of [x, y]) {
      const values = labels.map(Number);
      expect(values.every(Number.isFinite)).toBe(true);
      const step = (values[1] as number) - (values[0] as number);
      const mantissa = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
      expect([1, 2, 5]).toContainEqual(Number(mantissa.toFixed(9)));
      for (const v of values) expect(Math.abs(v / step - Math.round(v / step))).toBeLessThan(1e-9);
    }
  });

  it('is the same text for the same input', () => {
    const again = renderLineChartSvg(input);
    expect(again).toBe(svg);
  });

  it('survives empty and flat series', () => {
    const flat = renderLineChartSvg({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        { name: 'a', points: [] },
        {
          name: 'b',
          points: [
            [1, 5],
            [2, 5],
            [3, Number.NaN],
          ],
        },
      ],
    });
    checkWellFormed(flat);
    expect(flat).not.toMatch(/NaN|Infinity/);
    expect(polylines(flat).map((l) => pointsOf(l).length)).toEqual([0, 2]);
  });
});

// ---- the markdown ---------------------------------------------------------------------------

describe('renderBenchmarksMarkdown', () => {
  const results = [
    // Given out of order: the table follows the notes' order, then other names by name.
    result('zeta', 5, 10, { ratio: 2, direction: 'atMost' }, { unit: 's' }),
    result('gamma', 80, 100, { ratio: 0.9, direction: 'atLeast' }),
    result('alpha', 95, 100, { ratio: 0.9, direction: 'atLeast' }, { met: false }),
    result('beta', 30, 10, { ratio: 2.5, direction: 'atMost' }, { unit: 'requests/item', met: false }),
  ];
  const md = renderBenchmarksMarkdown(results, NOTES);

  it('has one table row per result, in a fixed order', () => {
    const rows = tableRows(md);
    expect(rows).toHaveLength(results.length);
    expect(rows.map((r) => r[0])).toEqual(['[alpha](#alpha)', '[beta](#beta)', '[gamma](#gamma)', '[zeta](#zeta)']);
  });

  it('computes met or missed from ours, floor and the goal', () => {
    const byName = Object.fromEntries(tableRows(md).map((r) => [/\[(\w+)\]/.exec(r[0] as string)?.[1], r]));
    // alpha: 0.95 ≥ 0.9 is met, though its JSON says missed (and the table says so).
    expect(byName.alpha?.[5]).toBe('met (the JSON says missed)');
    expect(byName.alpha?.[3]).toBe('0.950');
    // beta: 3.0 is above the at-most 2.5.
    expect(byName.beta?.[5]).toBe('**missed**');
    expect(byName.beta?.[4]).toBe('≤ 2.5');
    expect(byName.beta?.[1]).toBe('30.0 requests/item');
    // gamma: 0.8 is below the at-least 0.9.
    expect(byName.gamma?.[5]).toBe('**missed** (the JSON says met)');
    expect(byName.gamma?.[4]).toBe('≥ 0.9');
    // zeta: 0.5 ≤ 2.
    expect(byName.zeta?.[5]).toBe('met');
    expect(byName.zeta?.[6]).toBe('2026-11-21 08:25 UTC');
    expect(byName.zeta?.[7]).toBe('2 cores, Node v20.20.2');
  });

  it('counts a zero floor as missed, not as a division by zero', () => {
    const rows = tableRows(renderBenchmarksMarkdown([result('alpha', 5, 0, { ratio: 1, direction: 'atMost' })], NOTES));
    expect(rows[0]?.[3]).toBe('n/a');
    expect(rows[0]?.[5]).toBe('**missed** (the JSON says met)');
  });

  it('has a section per benchmark with the notes, drafts marked, and the ones not run listed', () => {
    const partial = renderBenchmarksMarkdown([result('beta', 30, 10, { ratio: 2.5, direction: 'atMost' })], NOTES);
    expect(tableRows(partial)).toHaveLength(1);
    expect(partial).toContain('Not run yet: `alpha`, `gamma`.');
    const sections = [...partial.matchAll(/^## (\S+)$/gm)].map((m) => m[1]);
    expect(sections).toEqual(['alpha', 'beta', 'gamma']);
    expect(partial).toContain('**What limits this figure.** Alpha is limited by Azurite.');
    expect(partial).toContain('> **Draft**: Needs figures.');
    expect(partial.split('> **Draft**').length - 1).toBe(1);
    expect(partial).toContain('**Latest.** Not run yet: `npm run bench -- gamma`.');
  });

  it('lists every goal of a benchmark that has several, each met or missed computed here', () => {
    const goals = [
      {
        name: 'bytesPerItem',
        measure: '1000000 / 10000 items',
        ours: 120,
        floor: 100,
        unit: 'B/item',
        goal: { ratio: 1.5, direction: 'atMost' },
      },
      {
        name: 'itemsPerSecond',
        ours: 700,
        floor: 1000,
        unit: 'items/s',
        goal: { ratio: 0.8, direction: 'atLeast' },
        result: 'met',
      },
      { name: 'peakLiveHeap', ours: 30, floor: 20, goal: { ratio: 1.5, direction: 'atMost' }, result: 'not measured' },
      { name: 'malformed', ours: 'x' },
    ];
    const withGoals = renderBenchmarksMarkdown(
      [result('beta', 30, 10, { ratio: 2.5, direction: 'atMost' }, { summary: { goals } })],
      NOTES,
    );
    expect(withGoals).toContain('**Every goal of the latest run.**');
    expect(withGoals).toContain(
      '- `bytesPerItem` (1000000 / 10000 items): 120 B/item against 100 B/item, ratio 1.200, goal ≤ 1.5, met.',
    );
    // 0.7 is below 0.8: missed, whatever the JSON says.
    expect(withGoals).toContain('- `itemsPerSecond`: 700 items/s against 1,000 items/s, ratio 0.700, goal ≥ 0.8, **missed**.');
    expect(withGoals).toContain('- `peakLiveHeap`: 30.0 against 20.0, ratio 1.500, goal ≤ 1.5, not measured.');
    expect(withGoals).not.toContain('malformed');
    expect(md).not.toContain('Every goal of the latest run');
  });

  it('lists the runs outside the goals, finished or with how far they got', () => {
    const partial = {
      name: 'onePerMessage',
      items: 1_000_000,
      itemsPerMessage: 1,
      finished: false,
      done: 117_000,
      runSeconds: 900,
      timeoutSeconds: 900,
      itemsPerSecond: 130,
      bytesPerItem: 640.4,
      requestsPerItem: 4.31,
      exact: null,
      exactSoFar: true,
    };
    const finished = { ...partial, name: 'sideways', items: 30, done: 30, finished: true, runSeconds: 2.5, exact: false };
    const withRuns = renderBenchmarksMarkdown(
      [
        result(
          'beta',
          30,
          10,
          { ratio: 2.5, direction: 'atMost' },
          { summary: { extraRuns: [partial, finished, { name: 'x' }] } },
        ),
      ],
      NOTES,
    );
    expect(withRuns).toContain('**Runs of the latest result outside its goals.**');
    expect(withRuns).toContain(
      '- `onePerMessage` (1,000,000 items, 1 item per message): not finished within its 900 s limit: 117,000 items ' +
        'counted (11.7 %) in 900 s, 130 items/s, 640 B/item (the plan of every item, written up front, included), ' +
        '4.31 requests/item so far; its last checkpoint folds each ' +
        'counted item once. The output is written when a run ends, so whether it is exact is not checkable.',
    );
    expect(withRuns).toContain(
      '- `sideways` (30 items, 1 item per message): finished in 2.50 s, 130 items/s, 640 B/item, 4.31 requests/item, ' +
        'output **not exact**.',
    );
    expect(withRuns.match(/^- `x`/m)).toBeNull();
    expect(md).not.toContain('outside its goals');
  });

  it('says how to run, and that figures are ratios to a floor from the same run', () => {
    expect(md).toContain('npm run bench ');
    expect(md).toContain('npm run bench -- ');
    expect(md).toContain('bench/results/<name>.json');
    expect(md).toContain('which Node each row ran on');
    expect(md).toMatch(/ratio to a floor/i);
    expect(md).toMatch(/same run/);
  });

  it('embeds the chart only when the throughput result has a series', () => {
    expect(md).not.toContain('](bench/results/throughput.svg)');
    expect(md).toMatch(/appears here after the\s+throughput benchmark has run/);
    const withSeries = renderBenchmarksMarkdown(
      [
        result(
          'throughput',
          200,
          220,
          { ratio: 0.8, direction: 'atLeast' },
          {
            summary: {
              series: {
                ours: [
                  [0, 0],
                  [1, 200],
                ],
                floor: [
                  [0, 0],
                  [1, 220],
                ],
              },
            },
          },
        ),
      ],
      NOTES,
    );
    expect(withSeries).toContain('](bench/results/throughput.svg)');
    expect(withSeries).not.toMatch(/appears here after/);
  });

  it('is the same text for the same results, whatever order they come in', () => {
    expect(renderBenchmarksMarkdown([...results].reverse(), NOTES)).toBe(md);
  });

  it('has notes for the fourteen benchmarks', () => {
    expect(Object.keys(BENCHMARK_NOTES)).toEqual([
      'crash-failover',
      'graceful-handover',
      'start-lag',
      'herd',
      'footprint',
      'idle-cost',
      'stragglers',
      'throughput',
      'sharded-throughput',
      'transactions',
      'leader-memory',
      'scale',
      'dispatch',
      'history',
    ]);
    for (const note of Object.values(BENCHMARK_NOTES)) {
      expect(note.measures.length).toBeGreaterThan(40);
      expect(note.limits.length).toBeGreaterThan(40);
    }
  });

  it("turns sharded-throughput's requests per item into Azure's caps, with the targets' sources", () => {
    const perShards = [
      { shards: 1, requestsPerItem: { ours: 4 }, queueRequestsPerItem: { ours: 4 } },
      { shards: 4, requestsPerItem: { ours: 5 }, queueRequestsPerItem: { ours: 4 } },
    ];
    const sharded = renderBenchmarksMarkdown([
      result('sharded-throughput', 200, 220, { ratio: 0.8, direction: 'atLeast' }, { summary: { perShards } }),
    ]);
    const section = sharded.split('### Queue shards on Azure')[1]?.split('\n## ')[0] ?? '';
    expect(section).toContain('https://learn.microsoft.com/azure/storage/queues/scalability-targets');
    expect(section).toContain('https://learn.microsoft.com/azure/storage/common/scalability-targets-standard-account');
    // Queues: 2,000 messages/s each, or 2,000 ÷ (4 / 2) per request; the account: 20,000 ÷ requests per item.
    expect(section).toContain('| 1 | 4.00 | 4.00 | 2,000 (1,000) | 5,000 |');
    expect(section).toContain('| 4 | 5.00 | 4.00 | 8,000 (4,000) | 4,000 |');
    // 4,000 items/s at the most shards: two shards' queues carry it, or four read per request.
    expect(section).toMatch(
      /about 4,000 items\/s, which the queues of 2 shards already carry \(4 reading the target per request\)/,
    );

    const before = renderBenchmarksMarkdown([]).split('### Queue shards on Azure')[1]?.split('\n## ')[0] ?? '';
    expect(before).toContain('20,000 requests per second');
    expect(before).toContain('after `npm run bench -- sharded-throughput`');
    expect(before).not.toContain('| shards |');
  });

  it('lists every stragglers scenario with its clean run, copies and fault, and says when failing is missing', () => {
    const clean = { makespanSeconds: 20, hedges: 0, exact: true };
    const scenarios = [
      {
        name: 'kill',
        makespanSeconds: 24,
        ratio: 1.2,
        hedges: 16,
        hedgeBound: 75,
        exact: true,
        counters: { duplicates: 0 },
        clean,
        fault: {
          signal: 'SIGKILL',
          atMs: 10_000,
          heldAtSignal: 12,
          hiddenAfterRun: 16,
          replacement: { startedAtMs: 12_500 },
        },
      },
      {
        name: 'slow',
        makespanSeconds: 21,
        ratio: 1.05,
        hedges: 0,
        hedgeBound: 75,
        exact: false,
        counters: { duplicates: 0 },
        clean,
      },
    ];
    const md = renderBenchmarksMarkdown([
      result('stragglers', 24, 20, { ratio: 1.3, direction: 'atMost' }, { unit: 's', summary: { scenarios } }),
    ]);
    const section = md.split('## stragglers')[1]?.split('\n## ')[0] ?? '';
    expect(section).toContain(
      '| kill | 24.0 s | 20.0 s | 1.200 | 16 (75) | 0 | exact | SIGKILL at 10.0 s, holding 12 at its last report, 16 left hidden; replacement up at 12.5 s |',
    );
    expect(section).toContain('| slow | 21.0 s | 20.0 s | 1.050 | 0 (75) | 0 | **not exact** | — |');
    expect(section).toContain('The failing scenario is not in the latest run');

    const withFailing = renderBenchmarksMarkdown([
      result(
        'stragglers',
        24,
        20,
        { ratio: 1.3, direction: 'atMost' },
        {
          unit: 's',
          summary: {
            scenarios: [{ ...scenarios[1], name: 'failing', exact: true }],
            retrySchedule: { totalSeconds: 3, source: 'the job retry' },
          },
        },
      ),
    ]);
    expect(withFailing).toContain("The failing run's retry schedule: 3 s (the job retry).");
  });

  it('formats figures like the benchmark line, with thousands grouped', () => {
    expect(formatNumber(876.97)).toBe('877');
    expect(formatNumber(12_345.6)).toBe('12,346');
    expect(formatNumber(-1234)).toBe('-1,234');
    expect(formatNumber(15.04)).toBe('15.0');
    expect(formatNumber(0.125)).toBe('0.13');
    expect(formatNumber(Number.NaN)).toBe('n/a');
  });

  it('keeps a goal derived from a measured floor short', () => {
    expect(formatGoal({ ratio: 16 / 15, direction: 'atMost' })).toBe('≤ 1.067');
    expect(formatGoal({ ratio: 1000 / 42.123456, direction: 'atMost' })).toBe('≤ 23.74');
    expect(formatGoal({ ratio: 0.9, direction: 'atLeast' })).toBe('≥ 0.9');
  });
});

describe('writeBenchmarksMarkdown', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('reads every result JSON, writes the markdown and the throughput chart, and removes a stale chart', () => {
    dir = mkdtempSync(join(tmpdir(), 'bench-report-'));
    const resultsDir = join(dir, 'bench', 'results');
    mkdirSync(resultsDir, { recursive: true });
    const markdownPath = join(dir, 'BENCHMARKS.md');
    const svgPath = join(resultsDir, 'throughput.svg');
    const series = {
      ours: [
        [0, 0],
        [1, 150],
        [2, 180],
      ],
      floor: [
        [0, 0],
        [1, 170],
        [2, 190],
        [3, 185],
      ],
    };
    writeFileSync(
      join(resultsDir, 'throughput.json'),
      JSON.stringify(result('throughput', 180, 190, { ratio: 0.9, direction: 'atLeast' }, { summary: { series } })),
    );
    writeFileSync(
      join(resultsDir, 'dispatch.json'),
      JSON.stringify(result('dispatch', 877, 850, { ratio: 0.9, direction: 'atLeast' })),
    );
    writeFileSync(join(resultsDir, 'broken.json'), '{ not json');
    writeFileSync(join(resultsDir, 'other.json'), JSON.stringify({ hello: 'world' }));

    const written = writeBenchmarksMarkdown({ resultsDir, markdownPath });
    expect(written.results).toEqual(['dispatch', 'throughput']);
    expect(written.svgPath).toBe(svgPath);
    const md = readFileSync(markdownPath, 'utf8');
    expect(tableRows(md).map((r) => r[0])).toEqual(['[throughput](#throughput)', '[dispatch](#dispatch)']);
    expect(md).toContain('](bench/results/throughput.svg)');
    const svg = readFileSync(svgPath, 'utf8');
    checkWellFormed(svg);
    expect(polylines(svg).map((l) => pointsOf(l).length)).toEqual([3, 4]);

    // Rerunning with the same results changes nothing.
    writeBenchmarksMarkdown({ resultsDir, markdownPath });
    expect(readFileSync(markdownPath, 'utf8')).toBe(md);
    expect(readFileSync(svgPath, 'utf8')).toBe(svg);

    // A throughput result without a series: no chart, and the old one is gone.
    writeFileSync(
      join(resultsDir, 'throughput.json'),
      JSON.stringify(result('throughput', 180, 190, { ratio: 0.9, direction: 'atLeast' })),
    );
    const again = writeBenchmarksMarkdown({ resultsDir, markdownPath });
    expect(again.svgPath).toBeUndefined();
    expect(existsSync(svgPath)).toBe(false);
    expect(readFileSync(markdownPath, 'utf8')).toMatch(/appears here after the\s+throughput benchmark has run/);
  });
});
