import type { DocumentStore } from '../fencing/document-store';
import type { JobDefinition } from '../jobs/job-definition';
import { PlanError, serializeItem } from '../jobs/plan-item';
import { runKeys } from '../hub/run-record';
import { messageOf } from '../errors';

/**
 * Runs the job's `split` and writes the items as the queue engine's plan: NDJSON blobs of
 * `chunkItems` lines under `runs/<run>/plan/e<planEpoch>/`. One blob per chunk, so a chunk's
 * process activities all read the same, immutable blob.
 *
 * Errors from `split` itself, and items that are not valid, throw `PlanError` (the run fails,
 * as in the queue engine); storage errors are thrown as they are, so the activity is retried.
 */
export async function writePlan(
  docs: DocumentStore,
  job: JobDefinition,
  run: { runId: string; occurrence: string | null },
  planEpoch: number,
  chunkItems: number,
  signal: AbortSignal,
): Promise<{ planned: number; chunks: number }> {
  let lines: string[] = [];
  let chunks = 0;
  let planned = 0;
  const flush = async (): Promise<void> => {
    if (lines.length === 0) return;
    await docs.write(runKeys.planChunk(run.runId, planEpoch, chunks), `${lines.join('\n')}\n`, {}, { abortSignal: signal });
    chunks++;
    lines = [];
  };
  const iterator = itemsOf(job, run, signal);
  let done = false;
  try {
    for (;;) {
      let step: IteratorResult<unknown>;
      try {
        step = await iterator.next();
      } catch (err) {
        if (signal.aborted) throw err;
        throw new PlanError(`split failed: ${messageOf(err)}`);
      }
      if (step.done) {
        done = true;
        break;
      }
      try {
        lines.push(serializeItem(job, step.value, planned));
      } catch (err) {
        // JSON.stringify throws on a BigInt or a cycle: the split's bug, as in the queue planner.
        throw err instanceof PlanError ? err : new PlanError(`split failed: ${messageOf(err)}`);
      }
      planned++;
      if (lines.length === chunkItems) await flush();
    }
    await flush();
  } finally {
    if (!done) await Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
  return { planned, chunks };
}

function itemsOf(
  job: JobDefinition,
  run: { runId: string; occurrence: string | null },
  signal: AbortSignal,
): AsyncIterator<unknown> {
  let items: Iterable<unknown> | AsyncIterable<unknown>;
  try {
    items = job.split({ runId: run.runId, occurrence: run.occurrence ? new Date(run.occurrence) : undefined, signal });
  } catch (err) {
    throw new PlanError(`split failed: ${messageOf(err)}`);
  }
  if (items && typeof (items as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    return (items as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  }
  if (items && typeof (items as Iterable<unknown>)[Symbol.iterator] === 'function') {
    const sync = (items as Iterable<unknown>)[Symbol.iterator]();
    return {
      next: async () => sync.next(),
      return: async () => sync.return?.() ?? { done: true, value: undefined },
    };
  }
  throw new PlanError('split failed: split() must return an iterable or an async iterable of items');
}
