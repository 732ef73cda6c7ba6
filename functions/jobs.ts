import type { JobDefinition } from '../src/index';
import { createSampleJobs } from '../src/sample/sample-jobs';

/**
 * The jobs this app runs: the one place to add yours (`defineJob` from the library). The
 * Functions host and `baton start` both load the entry module that passes this list to
 * `registerBaton`, so every instance registers the same jobs.
 */
export function createJobs(env: NodeJS.ProcessEnv = process.env): JobDefinition[] {
  return [
    // The sample (blob-audit) and, when BATON_SYNTHETIC_JOBS asks, jobs with known output for
    // benchmarks and soak tests.
    ...createSampleJobs(env),
  ];
}
