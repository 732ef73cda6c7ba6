import type { Clock } from '../clock/clock';
import type { DocumentStore } from '../fencing/document-store';
import type { RetentionPolicy } from '../hub/retention';
import type { JobDefinition } from '../jobs/job-definition';
import type { Leadership } from '../lease/term';
import type { RunTelemetry } from '../telemetry/run-telemetry';
import type { ItemStartGate } from './item-start-gate';
import type { HubQueues } from './queue-shards';

export interface EngineLogger {
  info(message: string): void;
  warn(message: string): void;
}

/** Everything the leader's engine works with; built once per process. */
export interface EngineContext {
  jobs: ReadonlyMap<string, JobDefinition>;
  /** Run records, plans, claims, outputs, job state and requests. */
  docs: DocumentStore;
  /** The hub's work, results and poison queues, over its shards. */
  queues: HubQueues;
  clock: Clock;
  log: EngineLogger;
  tuning: EngineTuning;
  /** Items folded, runs ended and runs open, for metrics; none when absent. */
  telemetry?: RunTelemetry;
  /** How long ended runs are kept; an idle leader deletes older ones. None: kept for good. */
  retention?: RetentionPolicy;
  /** Told, while this instance leads, when runs are next due, so its own worker does not delay them. */
  itemGate?: ItemStartGate;
}

export interface EngineTuning {
  /** Parallel sends while dispatching. */
  dispatchConcurrency: number;
  /** Items per plan chunk blob. */
  planChunkItems: number;
  /** How long drained messages stay hidden while the leader folds and checkpoints them. */
  drainVisibilitySeconds: number;
  /** Wait between loop turns when nothing happened. */
  idlePollMs: number;
  /** Longest slice of one run's planning or dispatch before the loop drains and heartbeats. */
  sliceMs: number;
  /** Attempts a worker makes (the host's maxDequeueCount). */
  maxAttempts: number;
  /**
   * Dispatch pauses while this many of a run's work messages are sent but not yet counted
   * (uncounted items ÷ itemsPerMessage), and goes on as the leader folds results. Failing items
   * count as in flight until their last attempt. It keeps queues short, which matters on Azurite
   * (its receive and delete slow down as a queue grows) and bounds the work a cancel wastes.
   */
  maxInFlightMessages: number;
}

export const DEFAULT_TUNING: EngineTuning = {
  dispatchConcurrency: 16,
  planChunkItems: 1000,
  drainVisibilitySeconds: 30,
  idlePollMs: 500,
  sliceMs: 2000,
  maxAttempts: 5,
  maxInFlightMessages: 4096,
};

/** What a step of leader work needs from the term: the fence and the way to stop. */
export interface TermContext {
  leadership: Leadership;
  /**
   * The epoch this term writes under. The coordinator raises it between pieces of work when a
   * refused write shows the lease record restarted its count (see `epoch-raise.ts`).
   */
  epoch: number;
  signal: AbortSignal;
}
