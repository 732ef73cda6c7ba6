import type { JobDefinition } from './job-definition';

/**
 * The longest one work message of the job may keep a worker: its `itemsPerMessage` items run one
 * after another in one invocation, each within `process`'s bound and its grace. What a leader
 * waits before it copies a message while it has no durations to go by.
 */
export function messageBoundSeconds(job: Pick<JobDefinition, 'itemsPerMessage' | 'hookTimeouts'>): number {
  const { processSeconds, graceSeconds } = job.hookTimeouts;
  return job.itemsPerMessage * (processSeconds + graceSeconds);
}
