import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Lease tests wait on real 15 s Azure leases; they mostly sleep, so files run side by side.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 4,
    reporters: ['default'],
  },
});
