// Baton's public surface. Anything not exported here is internal and may change.

export { LeaderElector } from './lease/leader-elector';
export type { Leadership, LeaderInfo, RunIfLeaderResult, RunOptions } from './lease/leader-elector';
export type { LeaderElectorOptions, LeaderLogger } from './lease/elector-options';
export { describeLeaderEvent } from './lease/leader-events';
export type { LeaderEvent } from './lease/leader-events';
export type { LeaseStore, LeaseRecord, LeaseCallOptions } from './lease/lease-store';
export { BlobLeaseStore } from './lease/blob-lease-store';
export type { BlobLeaseStoreOptions } from './lease/blob-lease-store';
export { InMemoryLeaseStore } from './lease/in-memory-lease-store';

export { FencedDocuments } from './fencing/fenced-documents';
export type { FencedDocument, FencedDocumentsOptions } from './fencing/fenced-documents';
export type { DocumentStore, StoredDocument, WriteCondition, DocumentCallOptions } from './fencing/document-store';
export { BlobDocumentStore } from './fencing/blob-document-store';
export { InMemoryDocumentStore } from './fencing/in-memory-document-store';

export {
  BatonError,
  InvalidConfigError,
  InvalidSettingError,
  LeaseHeldError,
  LeaseLostError,
  StaleEpochError,
  ConcurrentUpdateError,
  isBatonError,
} from './errors';
export type { BatonErrorCode, LeaseLossReason } from './errors';

export { systemClock } from './clock/clock';
export type { Clock, TimerHandle } from './clock/clock';
export { FakeClock } from './clock/fake-clock';
export { StorageTimeClock } from './clock/storage-time-clock';
export type { StorageTimeClockOptions } from './clock/storage-time-clock';

export { parseStorageSettings } from './storage/connection';
export { parseBatonSettings } from './app/settings';
export { redactSecrets } from './redact';
export type { StorageSettings } from './storage/connection';
export type { BatonSettings } from './app/settings';
export { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from './storage/client-factory';
export type { StorageClientOptions } from './storage/client-factory';

export { startAzurite } from './local/azurite';
export type { StartAzuriteOptions, RunningAzurite } from './local/azurite';

export { defineJob } from './jobs/define-job';
export { withinTolerance } from './jobs/job-definition';
export type {
  JobOptions,
  JobDefinition,
  Aggregate,
  ItemRef,
  SplitContext,
  ProcessContext,
  FinalizeContext,
  FailureTolerance,
  OverlapPolicyName,
} from './jobs/job-definition';
export { Schedule } from './schedule/schedule';
export { Coordinator } from './engine/coordinator';
export type { LeadOptions, LeadSummary } from './engine/coordinator';
export type { EngineContext, EngineTuning } from './engine/engine-context';
export { requestRun, requestCancel } from './hub/requests';
export { handleWorkMessage } from './engine/worker';
export type { WorkerDeps, WorkOutcome } from './engine/worker';
export type { RunOutput, FailuresManifest } from './hub/run-output';
export type { RunRecord, RunState } from './hub/run-record';
export { runKeys } from './hub/run-record';
export type { QueuePort, ReceivedMessage } from './queue/queue-port';
export { AzureQueue } from './queue/azure-queue';
export { InMemoryQueue } from './queue/in-memory-queue';
export { pumpQueue } from './local/queue-pump';
export { createBatonRuntime } from './app/runtime';
export { hubResources } from './hub/resources';
export type { BatonRuntime } from './app/runtime';
export { batonRegistrations } from './app/registrations';
export type { Registration } from './app/registration-types';
