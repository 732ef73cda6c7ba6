import { join } from 'node:path';
import { InvalidSettingError } from '../errors';
import type { JobDefinition } from '../jobs/job-definition';
import type { Env } from '../storage/setting';

/**
 * The app's jobs, loaded as the Functions host loads an app: by path when the process starts,
 * not by an import, so the library does not depend on the app that is built beside it.
 * `BATON_JOBS_MODULE` names a module that exports `createJobs(env)`, as `functions/jobs.ts`
 * does; by default it is this project's own, built beside the library in `dist/`.
 */
export function loadAppJobs(env: Env): JobDefinition[] {
  const path = env.BATON_JOBS_MODULE?.trim() || join(__dirname, '..', '..', 'functions', 'jobs');
  let loaded: { createJobs?: unknown };
  try {
    loaded = require(path) as { createJobs?: unknown };
  } catch (err) {
    // Only a module that is not there is a setting's fault; anything it throws as it loads is its own.
    if ((err as { code?: unknown }).code !== 'MODULE_NOT_FOUND') throw err;
    throw new InvalidSettingError('BATON_JOBS_MODULE', `BATON_JOBS_MODULE: no module at ${path}`);
  }
  if (typeof loaded.createJobs !== 'function') {
    throw new InvalidSettingError('BATON_JOBS_MODULE', `BATON_JOBS_MODULE: ${path} does not export createJobs(env)`);
  }
  return (loaded.createJobs as (env: Env) => JobDefinition[])(env);
}
