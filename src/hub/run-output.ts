import type { FailureEntry } from './fold';
import type { RunRecord, TerminalRunState } from './run-record';

/** The output document: the job's output plus enough of the run to read it alone. */
export interface RunOutput {
  runId: string;
  job: string;
  occurrence: string | null;
  state: 'succeeded' | 'failed';
  counters: RunRecord['counters'];
  output: unknown;
}

/**
 * The failures manifest, written beside the output (and for runs that end early, alone). It
 * names where the failure reasons are rather than holding them, so it stays small however many
 * items failed; read them with `readFailures` (`failures-manifest.ts`).
 */
export interface FailuresManifest {
  runId: string;
  state: TerminalRunState;
  /** Failed items the manifest gives a reason for: how many `readFailures` yields. */
  failedCount: number;
  /**
   * The roots of the run's failure log (`failure-log.ts`): write-once parts and indexes holding
   * every failed item with its reason, in the order they were counted. Deleted only by retention.
   */
  failureParts?: string[];
  /** Only in manifests written before the failure log: every failure inline, by item. */
  failed?: FailureEntry[];
  /** Items with no outcome at all (timed-out or cancelled runs). */
  missing: number[];
  missingCount: number;
  /** Only in manifests written before the failure log: failure blobs storage no longer had. */
  unreadableParts?: string[];
}
