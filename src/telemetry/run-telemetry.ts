import type { RecordedOccurrences } from '../hub/occurrence-ledger';
import type { RunRecord } from '../hub/run-record';

/**
 * What the engines tell telemetry about runs. A narrow port, injected through each engine's own
 * context (optional there, so a caller that passes none gets nothing and pays nothing): the
 * engines never import OpenTelemetry, and the composition root decides where the numbers go.
 *
 * Each call is made by the write that made the fact true, after it landed, so a fact is
 * reported once whoever retries: items by the checkpoint that counted them, a run's end by the
 * write that made its record terminal.
 */
export interface RunTelemetry {
  /** What a write of `job`'s state recorded about its schedule: occurrences started, skipped, missed. */
  occurrencesRecorded(job: string, recorded: RecordedOccurrences): void;
  /** `record` as the write that created the run made it: its start lag, for a scheduled run. */
  runStarted(record: RunRecord): void;
  /** `record` as the checkpoint that first counted one of its items left it (`firstItemAt` set). */
  firstItemCounted(record: RunRecord): void;
  /** Items a checkpoint of the leader's fold counted into a run of `job`: new items only, never duplicates. */
  itemsFolded(job: string, succeeded: number, failed: number): void;
  /** `record` as the write that ended the run left it (terminal state, `endedAt`). */
  runEnded(record: RunRecord): void;
  /**
   * While a term leads: how many runs its book has open, read when metrics are collected (not
   * on every change). Returns the function that stops it, called when the term ends.
   */
  trackOpenRuns(count: () => number): () => void;
  /** Retention passed by a run it could not delete after several tries (it tries again next pass). */
  retentionPassedBy?(): void;
}

/** The part of `RunTelemetry` an engine that has no leader's fold or book reports (the durable engine). */
export type RunEndTelemetry = Pick<RunTelemetry, 'runEnded' | 'runStarted' | 'occurrencesRecorded' | 'firstItemCounted'>;
