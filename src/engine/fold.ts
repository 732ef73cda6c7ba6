import type { JobDefinition } from '../jobs/job-definition';
import type { Bitset } from '../runs/bitset';
import type { RunCounters } from '../runs/run-record';
import type { ItemOutcome } from './messages';

export interface FailureEntry {
  item: number;
  reason: string;
  attempts: number;
}

export interface FoldState {
  acc: unknown;
  seen: Bitset;
  counters: RunCounters;
}

/**
 * Folds outcomes into the run's state: each item index counts once, whatever arrives first
 * (a success or a final failure); later copies only raise `duplicates`. Outcomes for indexes
 * outside the plan are `rejected`. Mutates `state.seen` and returns the new accumulator and
 * counters with the failures that are new.
 */
export function foldOutcomes(
  job: JobDefinition,
  state: FoldState,
  outcomes: readonly ItemOutcome[],
): { acc: unknown; counters: RunCounters; failures: FailureEntry[] } {
  let acc = state.acc;
  const counters = { ...state.counters };
  const failures: FailureEntry[] = [];
  for (const outcome of outcomes) {
    if (outcome.i >= state.seen.size) {
      counters.rejected++;
      continue;
    }
    if (!state.seen.add(outcome.i)) {
      counters.duplicates++;
      continue;
    }
    if (outcome.ok) {
      const checked = job.resultSchema ? job.resultSchema.safeParse(outcome.r) : { success: true as const, data: outcome.r };
      if (checked.success) {
        try {
          acc = job.aggregate.add(acc, checked.data, { itemIndex: outcome.i });
          counters.succeeded++;
          continue;
        } catch (err) {
          // A fold that throws on one result must not stop the run: that item fails instead.
          failures.push({
            item: outcome.i,
            reason: `aggregate.add threw: ${err instanceof Error ? err.message : String(err)}`,
            attempts: 1,
          });
        }
      } else {
        failures.push({ item: outcome.i, reason: "result does not match the job's result schema", attempts: 1 });
      }
    } else {
      failures.push({ item: outcome.i, reason: outcome.e, attempts: outcome.a });
    }
    counters.failed++;
  }
  return { acc, counters, failures };
}
