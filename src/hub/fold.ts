import type { JobDefinition } from '../jobs/job-definition';
import type { Bitset } from './bitset';
import type { RunCounters } from './run-record';
import type { ItemOutcome } from '../jobs/item-outcome';
import { errorText } from '../jobs/error-text';
import { jsonBytes } from '../jobs/process-item';
import { checkSchema } from '../jobs/job-schema';
import { messageOf } from '../errors';

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
      // Workers check the size too; one of another version, or a forged message, may not have.
      const bytes = jsonBytes(outcome.r ?? null);
      const checked =
        bytes > job.maxResultBytes
          ? undefined
          : job.resultSchema
            ? checkSchema(job.resultSchema, outcome.r)
            : { ok: true as const, value: outcome.r };
      if (!checked) {
        const reason = `result is ${bytes} bytes as JSON, over the job's maxResultBytes (${job.maxResultBytes})`;
        failures.push({ item: outcome.i, reason, attempts: 1 });
      } else if (checked.ok) {
        try {
          acc = job.aggregate.add(acc, checked.value, { itemIndex: outcome.i });
          counters.succeeded++;
          continue;
        } catch (err) {
          // A fold that throws on one result must not stop the run: that item fails instead.
          failures.push({
            item: outcome.i,
            reason: errorText(`aggregate.add threw: ${messageOf(err)}`),
            attempts: 1,
          });
        }
      } else {
        failures.push({ item: outcome.i, reason: "result does not match the job's result schema", attempts: 1 });
      }
    } else {
      // Kept in failures.json and shown by `baton show`: short, and masked, whoever wrote the message.
      failures.push({ item: outcome.i, reason: errorText(outcome.e), attempts: outcome.a });
    }
    counters.failed++;
  }
  return { acc, counters, failures };
}
