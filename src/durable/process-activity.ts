import type { ItemOutcome } from '../jobs/item-outcome';
import { processItem } from '../jobs/process-item';
import { runKeys } from '../hub/run-record';
import { nowOf, signalOf, type DurableActivityDeps } from './activity-deps';
import { processInputSchema, type ProcessOutput } from './contracts';
import { requireJob } from './jobs';
import { PlanCache } from './plan-cache';

/** Thrown on a try before the last when any item failed, so Durable's retry policy applies. */
export class ItemsFailedError extends Error {
  override name = 'ItemsFailedError';
}

/**
 * The process activity: one message's items, read from the run's plan blob, through the job
 * with the queue worker's own `processItem` (item size and schema, `process`, result schema,
 * JSON, result size: the same checks and reasons a queue message gets). On a try before the
 * last it throws if any item failed (the message is retried whole, as a queue message is); on
 * the last try it returns every item's outcome and throws only when it cannot run at all (plan
 * unreadable, job unknown).
 */
export function createProcessActivity(
  deps: DurableActivityDeps & { planCache?: PlanCache },
): (input: unknown) => Promise<ProcessOutput> {
  const cache = deps.planCache ?? new PlanCache();
  return async (raw) => {
    const input = processInputSchema.parse(raw);
    const job = requireJob(deps.jobs, input.job);
    const signal = signalOf(deps);
    const chunk = Math.floor(input.first / input.chunkItems);
    const offset = input.first % input.chunkItems;
    if (offset + input.count > input.chunkItems) {
      throw new Error(`items ${input.first}..${input.first + input.count - 1} span two plan chunks of ${input.chunkItems}`);
    }
    const key = runKeys.planChunk(input.runId, input.planEpoch, chunk);
    const lines = await cache.lines(deps.docs, key, signal);
    if (!lines) throw new Error(`plan chunk ${key} is missing`);
    if (lines.length < offset + input.count) {
      throw new Error(`plan chunk ${key} holds ${lines.length} items, fewer than the ${offset + input.count} the message needs`);
    }
    const outcomes: ItemOutcome[] = [];
    for (let k = 0; k < input.count; k++) {
      const itemIndex = input.first + k;
      let item: unknown;
      try {
        item = JSON.parse(lines[offset + k]!);
      } catch {
        throw new Error(`plan chunk ${key} line ${offset + k} is not JSON`);
      }
      outcomes.push(await processItem(job, item, { runId: input.runId, itemIndex, attempt: input.attempt, signal }));
    }
    const failed = outcomes.filter((o) => !o.ok);
    if (!input.final && failed.length > 0) {
      const first = failed[0] as Extract<ItemOutcome, { ok: false }>;
      throw new ItemsFailedError(`${failed.length} of ${input.count} item(s) failed; item ${first.i}: ${first.e}`);
    }
    return { outcomes, doneAt: nowOf(deps).toISOString() };
  };
}
