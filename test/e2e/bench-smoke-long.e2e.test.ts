/** The two longest benchmarks and transactions, which reuses throughput's run (see test/support/bench-smoke.ts). */
import { describe } from 'vitest';
import { LONG_BENCHMARKS, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs, the long ones', () => {
  smokeEach(LONG_BENCHMARKS);
});
