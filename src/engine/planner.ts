import type { JobDefinition } from '../jobs/job-definition';
import { redactSecrets } from '../storage/settings';
import { Bitset } from '../runs/bitset';
import { runKeys, transition, type RunRecord } from '../runs/run-record';
import type { EngineContext, TermContext } from './engine-context';
import { describeIssue } from './messages';
import type { ActiveRun, RunBook } from './run-book';

export class PlanError extends Error {
  override name = 'PlanError';
}

/**
 * Runs the job's `split` and persists the items as NDJSON chunks under this term's epoch, then
 * moves the run to dispatching. Dispatch only ever reads the chunks the record names, so a new
 * leader resumes the same plan; a plan interrupted before that write is simply redone, and a
 * stale leader's chunks land under its own epoch where nobody reads them.
 */
export async function planRun(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun): Promise<void> {
  const record = run.doc.value;
  const job = run.job;
  const chunkItems = job.itemsPerMessage * Math.max(1, Math.ceil(ctx.tuning.planChunkItems / job.itemsPerMessage));
  let chunk: string[] = [];
  let chunks = 0;
  let planned = 0;
  const flush = async (): Promise<void> => {
    if (chunk.length === 0) return;
    const body = `${chunk.join('\n')}\n`;
    await ctx.docs.write(runKeys.planChunk(record.runId, term.epoch, chunks), body, {}, { abortSignal: term.signal });
    chunks++;
    chunk = [];
    term.leadership.heartbeat();
  };
  try {
    const items = job.split({
      runId: record.runId,
      occurrence: record.occurrence ? new Date(record.occurrence) : undefined,
      signal: term.signal,
    });
    for await (const item of items as AsyncIterable<unknown>) {
      term.signal.throwIfAborted();
      chunk.push(serializeItem(job, item, planned));
      planned++;
      if (chunk.length === chunkItems) await flush();
    }
    await flush();
  } catch (err) {
    if (term.signal.aborted) throw err;
    // The reason is kept in the run record and shown by `baton show`: a storage error from split can quote a SAS.
    const reason = redactSecrets(
      err instanceof PlanError ? err.message : `split failed: ${err instanceof Error ? err.message : String(err)}`,
    );
    ctx.log.warn(`run ${record.runId} failed while planning: ${reason}`);
    await book.save(run, transition(record, 'failed', ctx.clock.date(), reason));
    return;
  }
  const dispatching = transition(record, 'dispatching', ctx.clock.date());
  const next: RunRecord = {
    // Nothing to send: straight on to running, where an empty run finalizes at once.
    ...(planned === 0 ? transition(dispatching, 'running', ctx.clock.date()) : dispatching),
    planEpoch: term.epoch,
    planChunks: chunks,
    chunkItems,
    messages: Math.ceil(planned / job.itemsPerMessage),
    cursor: 0,
    counters: { ...record.counters, planned },
    acc: job.aggregate.initial(),
    seen: Bitset.empty(planned).toBase64(),
  };
  await book.save(run, next);
  run.seen = Bitset.empty(planned);
  ctx.log.info(`run ${record.runId} planned ${planned} items in ${next.messages} messages`);
}

/** One planned item as its NDJSON line: the item schema, JSON, and `maxItemBytes`; a bad item throws `PlanError` naming it. */
export function serializeItem(job: JobDefinition, item: unknown, index: number): string {
  let value = item;
  if (job.itemSchema) {
    const checked = job.itemSchema.safeParse(item);
    if (!checked.success)
      throw new PlanError(`item ${index} does not match the job's item schema: ${describeIssue(checked.error)}`);
    value = checked.data;
  }
  const line = JSON.stringify(value);
  if (line === undefined) throw new PlanError(`item ${index} is not JSON (${typeof item})`);
  // One item too big fails the plan rather than the item: it is the split's bug, and it would fail every attempt.
  const bytes = Buffer.byteLength(line);
  if (bytes > job.maxItemBytes) {
    throw new PlanError(`item ${index} is ${bytes} bytes as JSON, over the job's maxItemBytes (${job.maxItemBytes})`);
  }
  return line;
}
