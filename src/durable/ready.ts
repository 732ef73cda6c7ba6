import { InvalidConfigError } from '../errors';
import type { JobDefinition } from '../jobs/job-definition';

/** A job the durable engine can run: one whose accumulators can be merged. */
export type DurableReadyJob = JobDefinition & {
  readonly aggregate: JobDefinition['aggregate'] & { merge(a: unknown, b: unknown): unknown };
};

/**
 * The durable engine folds each chunk on its own and merges the chunks' accumulators, so a
 * job needs `aggregate.merge`. Checked at start-up (and before any run starts) so a job
 * without it fails with its name, not halfway through a run.
 */
export function assertDurableReady(job: JobDefinition): asserts job is DurableReadyJob {
  if (typeof job.aggregate.merge !== 'function') {
    throw new InvalidConfigError(
      `${job.name}.aggregate.merge`,
      `job ${job.name}: aggregate.merge is required by the durable engine: it folds two accumulators of disjoint ` +
        'item sets, and must be associative and agree with add',
    );
  }
}
