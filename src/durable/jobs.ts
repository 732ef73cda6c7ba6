import type { JobDefinition } from '../jobs/job-definition';

/** The job a payload names; a job missing here is a deploy that dropped it, or another app's. */
export function requireJob(jobs: ReadonlyMap<string, JobDefinition>, name: string): JobDefinition {
  const job = jobs.get(name);
  if (!job) throw new Error(`job ${name} is not registered on this instance`);
  return job;
}
