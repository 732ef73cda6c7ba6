/** The benchmarks of leader changes: start lag through them, a crash failover, a graceful handover (see test/support/bench-smoke.ts). */
import { describe } from 'vitest';
import { SMOKE_FILES, smokeEach } from '../support/bench-smoke';

describe('benchmark smoke runs, leadership', () => {
  smokeEach(SMOKE_FILES.leadership);
});
