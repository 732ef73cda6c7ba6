// `baton-functions/election`: the leader election and fencing underneath Baton, for an app that
// wants only the pattern (one blob lease, an epoch that fences a replaced leader) and not the
// jobs. docs/election.md says what it guarantees and what it does not.

export { LeaderElector } from './lease/leader-elector';
export type { Leadership, LeaderInfo, RunIfLeaderResult, RunOptions } from './lease/leader-elector';
export type { LeaderElectorOptions, LeaderLogger } from './lease/elector-options';
export { describeLeaderEvent } from './lease/leader-events';
export type { LeaderEvent } from './lease/leader-events';
export type { LeaseStore, LeaseRecord, LeaseCallOptions } from './lease/lease-store';
export { BlobLeaseStore } from './lease/blob-lease-store';
export type { BlobLeaseStoreOptions } from './lease/blob-lease-store';
export { BlobEpochMark } from './lease/blob-epoch-mark';
export { FencedDocuments } from './fencing/fenced-documents';
export type { FencedDocument, FencedDocumentsOptions } from './fencing/fenced-documents';
export type { DocumentStore, StoredDocument, WriteCondition, DocumentCallOptions } from './fencing/document-store';
export { BlobDocumentStore } from './fencing/blob-document-store';
export { createBlobServiceClient, LEASE_RETRY_OPTIONS } from './storage/client-factory';
export type { StorageClientOptions } from './storage/client-factory';
export { parseStorageSettings } from './storage/connection';
export type { StorageSettings } from './storage/connection';
export { systemClock } from './clock/clock';
export type { Clock, TimerHandle } from './clock/clock';
export { StorageTimeClock } from './clock/storage-time-clock';
export type { StorageTimeClockOptions } from './clock/storage-time-clock';
