import { BlobDocumentStore } from '../fencing/blob-document-store';
import { hubResources } from '../hub/resources';
import type { JobDefinition } from '../jobs/job-definition';
import { createBlobServiceClient } from '../storage/client-factory';
import { parseStorageSettings } from '../storage/connection';
import { readSetting, type Env } from '../storage/setting';
import { createBlobAuditJob } from './blob-audit';
import { createSyntheticJob, parseSyntheticJobs } from './synthetic-job';

/**
 * The reference app's jobs: the sample that scrubs a container for integrity
 * (BATON_AUDIT_CONTAINER, default audit-demo), writing its report into the hub's container, and
 * the optional synthetic jobs with known output that benchmarks and soaks ask for
 * (BATON_SYNTHETIC_JOBS). The hub and the audit container are read as they are: nothing touches
 * storage before `registerBaton`, which checks both with every other setting and stops the app
 * with one line naming a bad one.
 */
export function createSampleJobs(env: Env): JobDefinition[] {
  const blobs = createBlobServiceClient(parseStorageSettings(env));
  const hub = readSetting(env, 'BATON_HUB') ?? 'baton';
  const auditContainer = readSetting(env, 'BATON_AUDIT_CONTAINER') ?? 'audit-demo';
  return [
    createBlobAuditJob({
      target: blobs.getContainerClient(auditContainer),
      reports: new BlobDocumentStore(blobs.getContainerClient(hubResources(hub).container)),
      downloadConcurrency: 2,
    }),
    ...parseSyntheticJobs(env).map(createSyntheticJob),
  ];
}
