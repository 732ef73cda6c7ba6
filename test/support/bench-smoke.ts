/**
 * A tiny run of benchmarks in bench/benchmarks (N small, one trial, nothing written), so the
 * benchmarks keep working as the code changes. Figures are not checked against goals here: that
 * is what `npm run bench` is for. What is checked is that each measured something real.
 */
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { expect, it } from 'vitest';
import type { BenchResult } from '../../bench/lib/report';
import { patience } from './slowdown';

const DIR = join(__dirname, '..', '..', 'bench', 'benchmarks');

/** Every benchmark, by name. */
export const BENCHMARKS = readdirSync(DIR)
  .filter((f) => f.endsWith('.ts'))
  .map((f) => basename(f, '.ts'))
  .sort();

/**
 * The benchmarks smoked in files of their own, by file, so that three files of about the same
 * length (45 to 60 s each on an idle 2-core machine) run side by side; bench-smoke.e2e.test.ts
 * smokes every benchmark none of these names (idle cost, leader memory, stragglers), so none is
 * left out.
 * - leadership (bench-smoke-leadership): start lag through leader changes, a crash failover and
 *   a graceful handover, which mostly wait on leases and ticks;
 * - throughput (bench-smoke-throughput): runs against their floors and what storage they cost,
 *   which keep a core busy. Transactions follows throughput here, so it counts the requests of
 *   throughput's run as `npm run bench` does, rather than starting a cluster for the same run
 *   again.
 */
export const SMOKE_FILES = {
  leadership: ['start-lag', 'crash-failover', 'graceful-handover'],
  throughput: ['throughput', 'transactions', 'sharded-throughput', 'scale', 'dispatch', 'history'],
} as const satisfies Record<string, readonly string[]>;

/** Every benchmark that no file of its own smokes: bench-smoke.e2e.test.ts's. */
export const OTHER_BENCHMARKS = BENCHMARKS.filter((name) =>
  Object.values(SMOKE_FILES).every((names: readonly string[]) => !names.includes(name)),
);

/**
 * A smoke run takes 3 to 30 s on an idle 2-core machine: the cap says only that one hung, so it
 * is five minutes, scaled by the slowdown.
 */
const SMOKE_CAP_MS = 300_000;

export function smokeEach(names: readonly string[]): void {
  it.each([...names])(
    '%s runs small and reports a figure, a floor and a ratio',
    { timeout: patience(SMOKE_CAP_MS) },
    async (name) => {
      const mod = (await import(join(DIR, `${name}.ts`))) as { name: string; run(o: { smoke: boolean }): Promise<BenchResult> };
      expect(mod.name).toBe(name);
      const result = await mod.run({ smoke: true });
      expect(result.name).toBe(name);
      // A start lag of 0 ms is a real figure (the leader creates a run at its occurrence's instant,
      // to the millisecond); with no run at all the figure is NaN, which the ratio check refuses.
      if (name === 'start-lag') expect(result.ours).toBeGreaterThanOrEqual(0);
      else expect(result.ours).toBeGreaterThan(0);
      expect(result.floor).toBeGreaterThan(0);
      expect(Number.isFinite(result.ratio)).toBe(true);
      expect(result.ratio).toBeCloseTo(result.ours / result.floor, 9);
      expect(result.machine.cores).toBeGreaterThan(0);
      expect(Object.keys(result.summary).length).toBeGreaterThan(0);
    },
  );
}
