/** The two longest benchmarks, run small beside the others (see test/support/bench-smoke.ts). */
import { describe } from 'vitest';
import { LONG_BENCHMARKS, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs, the long ones', () => {
  smokeEach(LONG_BENCHMARKS);
});
