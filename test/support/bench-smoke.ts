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
 * The longest two, smoked in a file of their own so the two halves run side by side; the other
 * file smokes every benchmark not named here, so none is left out. Transactions follows
 * throughput here, so it counts the requests of throughput's run as `npm run bench` does, rather
 * than starting a cluster for the same run again (40 s of a busy worker). Idle-cost (about 25 s,
 * mostly waiting) evens out the two files' lengths.
 */
export const LONG_BENCHMARKS = ['leader-memory', 'throughput', 'transactions', 'idle-cost'];

/**
 * A smoke run takes 5 to 95 s on an idle 2-core machine: the cap says only that one hung, so it
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
      expect(result.ours).toBeGreaterThan(0);
      expect(result.floor).toBeGreaterThan(0);
      expect(Number.isFinite(result.ratio)).toBe(true);
      expect(result.ratio).toBeCloseTo(result.ours / result.floor, 9);
      expect(result.machine.cores).toBeGreaterThan(0);
      expect(Object.keys(result.summary).length).toBeGreaterThan(0);
    },
  );
}
