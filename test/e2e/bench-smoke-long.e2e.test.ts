/** The two longest benchmarks, transactions (which reuses throughput's run) and idle-cost (see test/support/bench-smoke.ts). */
import { describe } from 'vitest';
import { LONG_BENCHMARKS, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs, the long ones', () => {
  smokeEach(LONG_BENCHMARKS);
});
