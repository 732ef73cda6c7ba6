// `baton-functions/election`: the leader election and fencing underneath Baton, for an app that
// wants only the pattern (one blob lease, an epoch that fences a replaced leader) and not the
// jobs. docs/election.md says what it guarantees and what it does not.

export { LeaderElector } from './lease/leader-elector';
export type { LeaderInfo, RunIfLeaderResult, RunOptions, Task } from './lease/leader-elector';
export type { Leadership } from './lease/term';
export type { HandoverOptions, HandoverResult } from './lease/handover';
export type { HandoverTiming } from './lease/handover-timing';
export type { LeaderElectorOptions, LeaderLogger } from './lease/elector-options';
export { describeLeaderEvent } from './lease/leader-events';
export type { LeaderEvent } from './lease/leader-events';
export type {
  LeaseStore,
  LeaseReader,
  LeaseRecord,
  LeaseMark,
  LeaseCallOptions,
  BumpOptions,
  HandoverClaim,
  LeaseFreedAs,
  LeaseHolderBefore,
  LeadershipChange,
} from './lease/lease-store';
export type { LeaderRank } from './lease/leader-rank';
export type { HandoverRequestStore, HandoverRequest, StoredHandoverRequest } from './lease/handover-request-store';
export { BlobLeaseStore } from './lease/blob-lease-store';
export type { BlobLeaseStoreOptions } from './lease/blob-lease-store';
export { BlobHandoverRequestStore } from './lease/blob-handover-request-store';
export type { BlobHandoverRequestStoreOptions } from './lease/blob-handover-request-store';
export { BlobEpochMark } from './lease/blob-epoch-mark';
export { ThreadedLeaseBeats } from './lease/threaded-lease-beats';
export type { ThreadedLeaseBeatsOptions } from './lease/threaded-lease-beats';
export type { LeaseBeats, BeatOptions, BeatRun } from './lease/lease-beats';
export { FencedDocuments } from './fencing/fenced-documents';
export type { FencedDocument, FencedDocumentsOptions } from './fencing/fenced-documents';
export type {
  DocumentStore,
  StoredDocument,
  WriteCondition,
  DocumentCallOptions,
  ListPageOptions,
  DeleteOptions,
  KeyPage,
  FolderPage,
} from './fencing/document-store';
export { BlobDocumentStore } from './fencing/blob-document-store';
export { createBlobServiceClient, LEASE_RETRY_OPTIONS } from './storage/client-factory';
export type { StorageClientOptions } from './storage/client-factory';
export type { StorageRequestCounter, StorageService } from './storage/request-counter';
export { parseStorageSettings } from './storage/connection';
export type { StorageSettings } from './storage/connection';
export { systemClock } from './clock/clock';
export type { Clock, TimerHandle } from './clock/clock';
export { StorageTimeClock } from './clock/storage-time-clock';
export type { StorageTimeClockOptions } from './clock/storage-time-clock';
