import {
  BlobDocumentStore,
  createBlobServiceClient,
  hubResources,
  parseBatonSettings,
  parseStorageSettings,
  type JobDefinition,
} from '../src/index';
import { createBlobAuditJob } from '../src/sample/blob-audit';
import { createSyntheticJob, parseSyntheticJobs } from '../src/sample/synthetic-job';

/**
 * The jobs this app runs: the one place to add yours (`defineJob` from the library). The
 * Functions entry point and the local cluster both read this list, so every instance
 * registers the same jobs.
 */
export function createJobs(env: NodeJS.ProcessEnv = process.env): JobDefinition[] {
  const blobs = createBlobServiceClient(parseStorageSettings(env));
  const { hub, auditContainer } = parseBatonSettings(env);
  return [
    // The sample: scrub a container for integrity (BATON_AUDIT_CONTAINER, default audit-demo).
    createBlobAuditJob({
      target: blobs.getContainerClient(auditContainer),
      reports: new BlobDocumentStore(blobs.getContainerClient(hubResources(hub).container)),
      downloadConcurrency: 2,
    }),
    // Optional jobs with known output, for benchmarks and soak tests (BATON_SYNTHETIC_JOBS).
    ...parseSyntheticJobs(env).map(createSyntheticJob),
  ];
}
