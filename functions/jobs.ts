import { InvalidSettingError, type JobDefinition } from '../src/index';
import { blobServiceClient } from '../src/functions';
import { createBlobAuditJob } from './blob-audit';
import { createSyntheticJob, parseSyntheticJobs } from './synthetic-job';

/** The container the sample audits when BATON_AUDIT_CONTAINER does not name one. */
export const DEFAULT_AUDIT_CONTAINER = 'audit-demo';

const CONTAINER_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/** BATON_AUDIT_CONTAINER, checked by Storage's rules for a container name, so a bad one is one line at start-up. */
export function auditContainerName(env: NodeJS.ProcessEnv): string {
  const setting = 'BATON_AUDIT_CONTAINER';
  const name = env[setting]?.trim() || DEFAULT_AUDIT_CONTAINER;
  const rule =
    name.length < 3
      ? 'must be a container name of at least 3 characters'
      : name.length > 63
        ? 'must be a container name of at most 63 characters'
        : CONTAINER_NAME.test(name)
          ? undefined
          : 'must be a container name: lowercase letters, digits and single hyphens, starting and ending with a letter or digit';
  if (rule) throw new InvalidSettingError(setting, `${setting} ${rule}`);
  return name;
}

/**
 * BATON_SAMPLE_JOB: whether the app registers the sample audit job. Unset, it does (`npm start`
 * and the tests run it); the deploy writes false unless the sample is asked for, so a
 * production app neither runs it nor has its container.
 */
export function sampleJobEnabled(env: NodeJS.ProcessEnv): boolean {
  const setting = 'BATON_SAMPLE_JOB';
  const value = env[setting]?.trim().toLowerCase();
  if (!value) return true;
  if (value === 'true' || value === 'false') return value === 'true';
  throw new InvalidSettingError(setting, `${setting} must be true or false`);
}

/**
 * The jobs this app runs: the one place to add yours (`defineJob` from the package). The
 * Functions host and `baton start` both load the entry module that passes this list to
 * `registerBaton`, so every instance registers the same jobs. Nothing here touches storage:
 * a bad setting stops the app at start-up with one line naming it.
 */
export function createJobs(env: NodeJS.ProcessEnv = process.env): JobDefinition[] {
  return [
    // The sample: scrub a container of the app's storage account for integrity, hourly.
    ...(sampleJobEnabled(env)
      ? [
          createBlobAuditJob({
            target: blobServiceClient({ env }).getContainerClient(auditContainerName(env)),
            downloadConcurrency: 2,
          }),
        ]
      : []),
    // Jobs with known output, when BATON_SYNTHETIC_JOBS asks: the benchmarks and soaks run these.
    ...parseSyntheticJobs(env).map(createSyntheticJob),
  ];
}
