// Baton's public surface, in the order a user meets it: jobs, the app, the hub's read model,
// then the election and fencing primitives underneath. Fakes and the embedded Azurite for
// tests are in `baton-functions/testing`. Anything not exported here or there is internal and may change.

// --- jobs ---------------------------------------------------------------------------------
export { defineJob } from './jobs/define-job';
export { withinTolerance } from './jobs/job-definition';
export type { JobSchema } from './jobs/job-schema';
export type {
  JobOptions,
  JobDefinition,
  Aggregate,
  ItemRef,
  SplitContext,
  ProcessContext,
  FinalizeContext,
  FailureTolerance,
  HookTimeouts,
  OverlapPolicyName,
  RunCountersView,
} from './jobs/job-definition';

// --- the app: settings → runtime → registrations ------------------------------------------
export { createBatonRuntime } from './app/runtime';
export type { BatonRuntime, RuntimeOptions } from './app/runtime';
export { batonRegistrations } from './app/registrations';
export type {
  Registration,
  TimerRegistration,
  QueueRegistration,
  OrchestrationRegistration,
  ActivityRegistration,
} from './app/registration-types';
export { findHostJson, readHostQueueConfig } from './app/host-config';
export type { HostQueueConfig } from './app/host-config';
export { parseBatonSettings } from './app/settings';
export type { BatonSettings } from './app/settings';
export { parseStorageSettings } from './storage/connection';
export type { StorageSettings } from './storage/connection';
export { redactSecrets } from './redact';

// --- the hub: ask for runs, read what happened ------------------------------------------
export { requestRun, requestCancel } from './hub/requests';
export { readHubStatus, listRuns, readRunDetails } from './hub/status';
export type { HubStatus, RunDetails } from './hub/status';
export type { RunOutput, FailuresManifest } from './hub/run-output';
export { readFailuresManifest, readFailures } from './hub/failures-manifest';
export type { FailureEntry } from './hub/fold';
export type { RunRecord, RunState } from './hub/run-record';
export { hubResources } from './hub/resources';

// --- leader election ----------------------------------------------------------------------
export { LeaderElector } from './lease/leader-elector';
export type { Leadership, LeaderInfo, RunIfLeaderResult, RunOptions } from './lease/leader-elector';
export type { LeaderElectorOptions, LeaderLogger } from './lease/elector-options';
export { describeLeaderEvent } from './lease/leader-events';
export type { LeaderEvent } from './lease/leader-events';
export type { LeaseStore, LeaseRecord, LeaseCallOptions } from './lease/lease-store';
export { BlobLeaseStore } from './lease/blob-lease-store';
export type { BlobLeaseStoreOptions } from './lease/blob-lease-store';
export { BlobEpochMark } from './lease/blob-epoch-mark';

// --- fencing ------------------------------------------------------------------------------
export { FencedDocuments } from './fencing/fenced-documents';
export type { FencedDocument, FencedDocumentsOptions } from './fencing/fenced-documents';
export type { DocumentStore, StoredDocument, WriteCondition, DocumentCallOptions } from './fencing/document-store';
export { BlobDocumentStore } from './fencing/blob-document-store';

// --- storage clients, time and errors ---------------------------------------------------
export { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from './storage/client-factory';
export type { StorageClientOptions } from './storage/client-factory';
export { systemClock } from './clock/clock';
export type { Clock, TimerHandle } from './clock/clock';
export { StorageTimeClock } from './clock/storage-time-clock';
export type { StorageTimeClockOptions } from './clock/storage-time-clock';
export {
  BatonError,
  InvalidConfigError,
  InvalidSettingError,
  LeaseHeldError,
  LeaseLostError,
  StaleEpochError,
  ConcurrentUpdateError,
  HookTimeoutError,
  TaskAbandonedError,
  isBatonError,
} from './errors';
export type { BatonErrorCode, LeaseLossReason, HookName } from './errors';
