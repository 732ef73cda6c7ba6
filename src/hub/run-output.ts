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

/** The failures manifest, written beside the output (and for timed-out runs alone). */
export interface FailuresManifest {
  runId: string;
  state: TerminalRunState;
  failed: FailureEntry[];
  /** Items with no outcome at all (timed-out or cancelled runs). */
  missing: number[];
  missingCount: number;
  /** Failure blobs the checkpoint named but storage no longer had. */
  unreadableParts?: string[];
}
