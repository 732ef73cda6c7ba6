import type { OrchestrationContext, OrchestrationHandler, Task } from 'durable-functions';
import type { FailureEntry } from '../hub/fold';
import { errorText } from '../jobs/error-text';
import type { JobDefinition } from '../jobs/job-definition';
import {
  chunkResultSchema,
  runInputSchema,
  runResultSchema,
  splitResultSchema,
  type ChunkInput,
  type FinalizeInput,
  type RunProgress,
  type RunResult,
} from './contracts';
import { chunkInstanceId } from './instance-ids';
import { requireJob } from './jobs';
import { DURABLE_NAMES } from './names';
import { assertDurableReady } from './ready';
import { resolveDurableSettings, retryOptions } from './settings';
import { failureReason, settleAll } from './settle';
import { messageOf } from '../errors';

/**
 * A run: split, one sub-orchestration per chunk, merge, finalize.
 *
 * - The split activity persists the plan (the queue engine's NDJSON chunks, one blob per
 *   chunk) and the run record; its result is all this history keeps of the plan.
 * - Each chunk is a sub-orchestration with a fixed instance id (`<run>~chunk-<i>`), so its own
 *   history is bounded by the chunk size; this one holds two events per chunk and the chunks'
 *   small results (accumulator, counts, failures).
 * - Chunks are collected with `settleAll`, never `Task.all`: a chunk that fails as a whole
 *   (its orchestration threw) counts its items failed, with the reason, and the run goes on.
 * - `customStatus` is `{ done, failed, total }`, advanced as chunks are collected.
 * - The chunks' accumulators are merged with `aggregate.merge` in chunk order (the order
 *   `settleAll` hands chunks over in), so the result does not depend on which finished first.
 * Nothing here reads a clock, a random number or storage: every decision comes from the input
 * and the history, so each replay makes the same calls in the same order.
 */
export function createRunOrchestrator(jobs: ReadonlyMap<string, JobDefinition>): OrchestrationHandler {
  return function* runOrchestrator(context: OrchestrationContext): Generator<Task, RunResult, unknown> {
    const input = runInputSchema.parse(context.df.getInput());
    const job = requireJob(jobs, input.job);
    assertDurableReady(job);
    const settings = resolveDurableSettings(input.settings);
    const policy = retryOptions(settings, settings.maxAttempts);
    const progress: RunProgress = { done: 0, failed: 0, total: 0 };
    context.df.setCustomStatus({ ...progress });

    let split;
    try {
      split = splitResultSchema.parse(
        yield context.df.callActivityWithRetry(DURABLE_NAMES.split, policy, {
          runId: input.runId,
          job: input.job,
          occurrence: input.occurrence,
          trigger: input.trigger,
          chunkItems: settings.chunkItems,
        }),
      );
    } catch (err) {
      // Storage kept failing (the split's own errors are recorded by the activity, not thrown).
      const reason = errorText(`the split activity failed: ${failureReason(err as Error)}`);
      return yield* finalize(context, policy, { kind: 'abort', runId: input.runId, job: input.job, reason });
    }
    // Ended before (an orchestration restarted for an old occurrence): report it, redo nothing.
    if (split.kind === 'ended') return split.result;
    if (split.kind === 'failed') {
      // `split` threw or yielded a bad item: the activity has already recorded the run failed, with the reason.
      return {
        runId: input.runId,
        state: 'failed',
        counts: { planned: 0, succeeded: 0, failed: 0 },
        outputKey: null,
        manifestKey: null,
      };
    }

    progress.total = split.planned;
    context.df.setCustomStatus({ ...progress });
    const chunks: ChunkInput[] = [];
    for (let chunk = 0; chunk < split.chunks; chunk++) {
      const first = chunk * split.chunkItems;
      chunks.push({
        runId: input.runId,
        job: input.job,
        planEpoch: split.planEpoch,
        chunkItems: split.chunkItems,
        chunk,
        first,
        count: Math.min(split.chunkItems, split.planned - first),
        itemsPerMessage: job.itemsPerMessage,
        settings,
      });
    }
    const tasks = chunks.map((chunk) =>
      context.df.callSubOrchestrator(DURABLE_NAMES.chunk, chunk, chunkInstanceId(context.df.instanceId, chunk.chunk)),
    );

    let acc = job.aggregate.initial();
    let succeeded = 0;
    let firstItemAt: string | undefined;
    const failures: FailureEntry[] = [];
    // Chunks are taken in chunk order, so the merge order never depends on which finished first.
    yield* settleAll(context.df, tasks, (index, outcome) => {
      const chunk = chunks[index]!;
      const failAll = (why: string): void => {
        const reason = errorText(`chunk ${chunk.chunk} (items ${chunk.first}..${chunk.first + chunk.count - 1}) ${why}`);
        for (let i = chunk.first; i < chunk.first + chunk.count; i++) failures.push({ item: i, reason, attempts: 0 });
        progress.failed += chunk.count;
      };
      const result = outcome.ok ? chunkResultSchema.safeParse(outcome.result) : undefined;
      if (!outcome.ok) failAll(`failed: ${failureReason(outcome.error)}`);
      else if (!result?.success || result.data.succeeded + result.data.failed !== chunk.count)
        failAll('returned a result of the wrong shape');
      else {
        let merged: { acc: unknown } | undefined;
        try {
          merged = { acc: job.aggregate.merge(acc, result.data.acc) };
        } catch (err) {
          // Like `add` throwing in the fold: the chunk's items fail, not the run.
          failAll(`could not be merged: aggregate.merge threw: ${messageOf(err)}`);
        }
        if (merged) {
          acc = merged.acc;
          succeeded += result.data.succeeded;
          failures.push(...result.data.failures);
          const first = result.data.firstDoneAt;
          if (first !== undefined && (firstItemAt === undefined || first < firstItemAt)) firstItemAt = first;
          progress.failed += result.data.failed;
        }
      }
      progress.done += chunk.count;
      context.df.setCustomStatus({ ...progress });
    });

    return yield* finalize(context, policy, {
      kind: 'complete',
      runId: input.runId,
      job: input.job,
      acc,
      counts: { planned: split.planned, succeeded, failed: split.planned - succeeded },
      failures,
      ...(firstItemAt === undefined ? {} : { firstItemAt }),
    });
  };
}

function* finalize(
  context: OrchestrationContext,
  policy: ReturnType<typeof retryOptions>,
  input: FinalizeInput,
): Generator<Task, RunResult, unknown> {
  return runResultSchema.parse(yield context.df.callActivityWithRetry(DURABLE_NAMES.finalize, policy, input));
}
