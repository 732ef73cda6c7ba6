/** Every benchmark that no other bench-smoke file smokes (idle cost, leader memory, stragglers), run small (see test/support/bench-smoke.ts). */
import { describe, expect, it } from 'vitest';
import { BENCHMARKS, OTHER_BENCHMARKS, SMOKE_FILES, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs', () => {
  it('finds the benchmarks, and each file smokes ones that are there, none twice', () => {
    expect(BENCHMARKS).toContain('dispatch');
    const named = Object.values(SMOKE_FILES).flat();
    for (const name of named) expect(BENCHMARKS).toContain(name);
    expect(new Set(named).size).toBe(named.length);
    // So every benchmark is smoked by exactly one file.
    expect([...named, ...OTHER_BENCHMARKS].sort()).toEqual(BENCHMARKS);
  });

  smokeEach(OTHER_BENCHMARKS);
});
