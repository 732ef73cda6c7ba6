import { defineConfig } from 'vitest/config';

// Two groups, run one after the other. The end-to-end files time real processes (SIGKILL and
// SIGSTOP failover, a running cluster polled by the CLI) against an Azurite that shares the
// cores with them; beside the heavy integration files on a 2-core machine they starved for
// seconds at a time, so they run on their own, after everything else.
export default defineConfig({
  test: {
    // Lease tests wait on real 15 s Azure leases; they mostly sleep, so files run side by side.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 4,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**'], sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          exclude: [
            'test/e2e/bench-smoke.e2e.test.ts',
            'test/e2e/chaos-*.e2e.test.ts',
            'test/e2e/scale-failover.e2e.test.ts',
            'test/e2e/status-page.e2e.test.ts',
          ],
          sequence: { groupOrder: 1 },
        },
      },
      {
        // Each benchmark, small, and the chaos soaks: clusters of real processes again, so after
        // the timed e2e files. The soaks assert no timings tighter than a run's timeout, and nor
        // do the leader killed mid-fold of a large run and the status page in a browser; they
        // take the group's free worker once the large run is done, rather than queue behind the
        // timed files.
        extends: true,
        test: {
          name: 'bench-smoke',
          include: [
            'test/e2e/bench-smoke.e2e.test.ts',
            'test/e2e/chaos-*.e2e.test.ts',
            'test/e2e/scale-failover.e2e.test.ts',
            'test/e2e/status-page.e2e.test.ts',
          ],
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
