/** Every benchmark but the long ones, run small (see test/support/bench-smoke.ts). */
import { describe, expect, it } from 'vitest';
import { BENCHMARKS, LONG_BENCHMARKS, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs', () => {
  it('finds the benchmarks, the long ones among them', () => {
    expect(BENCHMARKS).toContain('dispatch');
    for (const name of LONG_BENCHMARKS) expect(BENCHMARKS).toContain(name);
  });

  smokeEach(BENCHMARKS.filter((name) => !LONG_BENCHMARKS.includes(name)));
});
