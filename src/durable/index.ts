/**
 * The durable engine: the same `defineJob` jobs, run as Durable Functions orchestrations.
 * The app registers (names in `DURABLE_NAMES`):
 * - orchestrations `createRunOrchestrator(jobs)` and `createChunkOrchestrator(jobs)`;
 * - activities `createSplitActivity(deps)`, `createProcessActivity(deps)`, `createFinalizeActivity(deps)`;
 * - a leader's timer that calls `startDueRuns` with `durableClientPort(client)`.
 */
export { DURABLE_NAMES, DURABLE_EPOCH } from './names';
export { durableFunctions } from './durable-functions';
export { assertDurableReady, type DurableReadyJob } from './ready';
export {
  DEFAULT_DURABLE_SETTINGS,
  chunkItemsFor,
  resolveDurableSettings,
  retryOptions,
  type DurableRunSettings,
} from './settings';
export {
  chunkInstanceId,
  chunkInstancePrefix,
  isChunkInstance,
  jobInstancePrefix,
  runIdOfInstance,
  runInstanceId,
} from './instance-ids';
export type {
  ChunkInput,
  ChunkResult,
  DurableCounts,
  FinalizeInput,
  ProcessInput,
  ProcessOutput,
  RunInput,
  RunProgress,
  RunResult,
  SplitInput,
  SplitResult,
} from './contracts';
export { settleAll, failureReason, type Settled } from './settle';
export { createRunOrchestrator } from './run-orchestrator';
export { createChunkOrchestrator } from './chunk-orchestrator';
export type { DurableActivityDeps } from './activity-deps';
export { createSplitActivity } from './split-activity';
export { createProcessActivity, ItemsFailedError } from './process-activity';
export { createFinalizeActivity } from './finalize-activity';
export { PlanCache } from './plan-cache';
export { ForeignRunError } from './run-records';
export { durableClientPort, isOpenStatus, OPEN_STATUSES, type DurableClientPort, type InstanceView } from './client-port';
export { cancelDurableRun } from './cancel-run';
export { startDueRuns, type StartDueRunsDeps, type StartSummary } from './starter';
