/** The benchmarks of runs against their floors and what storage they cost, transactions on throughput's run (see test/support/bench-smoke.ts). */
import { describe } from 'vitest';
import { SMOKE_FILES, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs, throughput', () => {
  smokeEach(SMOKE_FILES.throughput);
});
