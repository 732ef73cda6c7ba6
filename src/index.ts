// `baton-functions`: what an app's own code uses. Jobs, a client to read and steer a hub, and
// the typed errors. Registering Baton on a Functions app is `baton-functions/functions`; the
// election and fencing underneath are `baton-functions/election`; a one-job runner, fakes and an
// embedded Azurite for tests are `baton-functions/testing`. Anything not exported from one of
// the four is internal and may change.

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
  ItemFailure,
  ItemFailedContext,
  FailureTolerance,
  HookTimeouts,
  HedgeOptions,
  OverlapPolicyName,
  RunCountersView,
} from './jobs/job-definition';
export type { ItemRetryOptions } from './jobs/retry-policy';

// --- the hub: read what happened, ask for runs ------------------------------------------
export { BatonClient } from './app/baton-client';
export type { BatonClientOptions, ClientCallOptions } from './app/baton-client';
export type { HubStatus, RunDetails } from './hub/status';
export type { RunsPage } from './hub/run-index';
export type { IfActive } from './hub/requests';
export type { RunOutput, FailuresManifest } from './hub/run-output';
export type { FailureEntry } from './hub/fold';
export type { RunRecord, RunState, TerminalRunState, RunCounters, RunEnding } from './hub/run-record';
export type { JobState, JobEvent, JobScheduleRecord } from './hub/job-state';
export type { LeaderRank } from './lease/leader-rank';
export type { LeadershipChange, LeaseFreedAs } from './lease/lease-store';

// --- errors -------------------------------------------------------------------------------
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
  InvalidRunIdError,
  isBatonError,
} from './errors';
export type { BatonErrorCode, LeaseLossReason, HookName } from './errors';
