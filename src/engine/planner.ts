import { HookTimeoutError, messageOf } from '../errors';
import { callHook } from '../jobs/call-hook';
import { PlanError, serializeItem } from '../jobs/plan-item';
import { redactSecrets } from '../redact';
import { Bitset } from '../hub/bitset';
import { runKeys, transition, type RunRecord } from '../hub/run-record';
import type { EngineContext, TermContext } from './engine-context';
import type { PlanSession } from './plan-session';
import type { ActiveRun, RunBook } from './run-book';

/**
 * Planning persists its position every second or every 16 chunks, whichever comes first, and at
 * the end of each slice: a leader change costs at most that much planning again.
 */
const CHECKPOINT_EVERY_MS = 1000;
const CHECKPOINT_EVERY_CHUNKS = 16;

/**
 * Plans for one slice: takes items from the job's `split` until `until`, persists them as
 * NDJSON chunks under this term's epoch, and checkpoints the position in the run record as a
 * segment of chunks. A new leader calls `split` again and passes over the items the record
 * says are persisted, so a leader change mid-plan costs a re-iteration, not a re-plan. When the
 * split ends, the run moves to dispatching. Dispatch reads only the chunks the record names,
 * so a stale leader's chunks (under its own epoch) are never read.
 *
 * Each wait for the split's next item is bounded (`hookTimeouts.splitSeconds`); while it waits
 * the leader heartbeats. A split that times out ends this planning attempt; the next turn
 * resumes from the checkpoint, and at `maxSplitTimeouts` the run fails saying why.
 *
 * Only the job fails a plan: its `split` throwing, or an item it gives that cannot be sent. A
 * chunk write or checkpoint that storage refuses (after the SDK's retries) is thrown to the turn,
 * which retries the run's step next turn from the checkpoint, as it does any other step's.
 */
export async function planRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  run: ActiveRun,
  until = Number.POSITIVE_INFINITY,
): Promise<void> {
  const record = run.doc.value;
  const job = run.job;
  const chunkItems =
    record.chunkItems || job.itemsPerMessage * Math.max(1, Math.ceil(ctx.tuning.planChunkItems / job.itemsPerMessage));
  let session = book.planSessions.get(record.runId);
  // Chunks it wrote but did not checkpoint are keyed by its epoch: after a raise, start again
  // from the checkpoint rather than name them under the new one.
  if (session && session.epoch !== term.epoch) {
    session.abort.abort(new Error(`the term's epoch moved to ${term.epoch}`));
    session = undefined;
  }
  if (!session) {
    const abort = new AbortController();
    const onTermEnd = (): void => abort.abort(term.signal.reason);
    term.signal.addEventListener('abort', onTermEnd, { once: true });
    let iterator: PlanSession['iterator'];
    let isAsync = false;
    try {
      const items = job.split({
        runId: record.runId,
        occurrence: record.occurrence ? new Date(record.occurrence) : undefined,
        signal: abort.signal,
      });
      isAsync = Symbol.asyncIterator in Object(items);
      iterator = isAsync
        ? (items as AsyncIterable<unknown>)[Symbol.asyncIterator]()
        : (items as Iterable<unknown>)[Symbol.iterator]();
    } catch (err) {
      await failPlan(ctx, term, book, run, err);
      return;
    }
    const baseChunks = record.planSegments.reduce((n, s) => n + s.chunks, 0);
    session = {
      iterator,
      async: isAsync,
      epoch: term.epoch,
      abort,
      skip: record.planCursor,
      next: 0,
      chunk: [],
      baseChunks,
      written: 0,
      done: false,
    };
    book.planSessions.set(record.runId, session);
  }
  const { splitSeconds, graceSeconds, maxSplitTimeouts } = job.hookTimeouts;
  let lastCheckpoint = ctx.clock.now();
  // Whose error a failure is: the job's (its split, its items) fails the plan; storage's does not.
  let inStorage = false;
  const stored = async (write: () => Promise<void>): Promise<void> => {
    inStorage = true;
    await write();
    inStorage = false;
  };
  try {
    for (;;) {
      term.signal.throwIfAborted();
      const current = session;
      // A synchronous split cannot be waited on: it runs to its next item before anything else can.
      const step = !current.async
        ? (current.iterator as Iterator<unknown>).next()
        : await callHook(
            (signal) => {
              signal.addEventListener('abort', () => current.abort.abort(signal.reason), { once: true });
              return current.iterator.next();
            },
            {
              hook: 'split',
              timeoutMs: splitSeconds * 1000,
              graceMs: graceSeconds * 1000,
              clock: ctx.clock,
              signal: term.signal,
              heartbeat: () => term.leadership.heartbeat(),
            },
          );
      term.leadership.heartbeat();
      if (step.done) {
        session.done = true;
        break;
      }
      const index = session.next++;
      if (session.skip > 0) {
        session.skip--;
        if (session.skip % 1000 === 0 && ctx.clock.now() >= until) return;
        continue;
      }
      session.chunk.push(serializeItem(job, step.value, index));
      let due = false;
      if (session.chunk.length === chunkItems) {
        await stored(() => writeChunk(ctx, term, record, current));
        due = session.written % CHECKPOINT_EVERY_CHUNKS === 0;
      }
      const now = ctx.clock.now();
      // A slice may end mid-chunk: the session keeps the partial chunk for the next turn.
      if (now >= until || ((due || now - lastCheckpoint >= CHECKPOINT_EVERY_MS) && unsaved(run.doc.value, session))) {
        if (unsaved(run.doc.value, session)) await stored(() => checkpoint(ctx, book, run, current, chunkItems));
        lastCheckpoint = ctx.clock.now();
        if (now >= until) return;
      }
    }
  } catch (err) {
    if (term.signal.aborted) throw err;
    book.planSessions.delete(record.runId);
    session.abort.abort(err);
    // The next turn starts a session again from the checkpoint; its chunks are rewritten.
    if (inStorage) throw err;
    if (err instanceof HookTimeoutError) {
      const timeouts = run.doc.value.splitTimeouts + 1;
      const reason = `split timed out ${timeouts} time${timeouts > 1 ? 's' : ''}: ${err.message}`;
      if (timeouts >= maxSplitTimeouts) {
        ctx.log.warn(`run ${record.runId} failed while planning: ${reason}`);
        await book.save(run, transition(run.doc.value, 'failed', ctx.clock.date(), reason));
      } else {
        ctx.log.warn(`run ${record.runId}: ${reason}; planning again from item ${run.doc.value.planCursor}`);
        await book.save(run, { ...run.doc.value, splitTimeouts: timeouts, updatedAt: ctx.clock.date().toISOString() });
      }
      return;
    }
    await failPlan(ctx, term, book, run, err);
    return;
  }
  book.planSessions.delete(record.runId);
  if (session.skip > 0) {
    const reason = `split gave ${session.next} items, but ${record.planCursor} were planned before: a split must give the same items each time it is called for a run`;
    await failPlan(ctx, term, book, run, new PlanError(reason));
    return;
  }
  await writeChunk(ctx, term, record, session);
  const persisted = checkpointed(run.doc.value, session.epoch, session, chunkItems);
  const planned = persisted.planCursor;
  const dispatching = transition(run.doc.value, 'dispatching', ctx.clock.date());
  const next: RunRecord = {
    // Nothing to send: straight on to running, where an empty run finalizes at once.
    ...(planned === 0 ? transition(dispatching, 'running', ctx.clock.date()) : dispatching),
    ...persisted,
    planEpoch: session.epoch,
    planChunks: persisted.planSegments.reduce((n, s) => n + s.chunks, 0),
    chunkItems,
    messages: Math.ceil(planned / job.itemsPerMessage),
    cursor: 0,
    counters: { ...record.counters, planned },
    acc: job.aggregate.initial(),
    seen: Bitset.empty(planned).toCheckpoint(),
  };
  await book.save(run, next);
  run.seen = Bitset.empty(planned);
  ctx.log.info(`run ${record.runId} planned ${planned} items in ${next.messages} messages`);
}

async function writeChunk(ctx: EngineContext, term: TermContext, record: RunRecord, session: PlanSession): Promise<void> {
  if (session.chunk.length === 0) return;
  const body = `${session.chunk.join('\n')}\n`;
  const key = runKeys.planChunk(record.runId, session.epoch, session.baseChunks + session.written);
  await ctx.docs.write(key, body, {}, { abortSignal: term.signal });
  session.written++;
  session.chunk = [];
}

/**
 * The record's plan position with every chunk this session wrote, as (part of) the segment of
 * `epoch`: the session's, under which its chunks were written, even if the term's epoch was
 * raised since (a refused write elsewhere in the turn raises it between pieces of work).
 */
function checkpointed(
  record: RunRecord,
  epoch: number,
  session: PlanSession,
  chunkItems: number,
): Pick<RunRecord, 'planSegments' | 'planCursor' | 'chunkItems'> {
  const segments = record.planSegments.map((s) => ({ ...s }));
  const added = session.baseChunks + session.written - segments.reduce((n, s) => n + s.chunks, 0);
  const last = segments.at(-1);
  if (added > 0) {
    if (last && last.epoch === epoch) last.chunks += added;
    else segments.push({ epoch, chunks: added });
  }
  // Mid-plan every chunk is full; the last one may not be, so the end counts what the split gave.
  const items = session.done ? session.next : (session.baseChunks + session.written) * chunkItems;
  return { planSegments: segments, planCursor: items, chunkItems };
}

/** Whether the session wrote chunks the record does not name yet. */
function unsaved(record: RunRecord, session: PlanSession): boolean {
  return session.baseChunks + session.written > record.planSegments.reduce((n, s) => n + s.chunks, 0);
}

async function checkpoint(
  ctx: EngineContext,
  book: RunBook,
  run: ActiveRun,
  session: PlanSession,
  chunkItems: number,
): Promise<void> {
  await book.save(run, {
    ...run.doc.value,
    ...checkpointed(run.doc.value, session.epoch, session, chunkItems),
    updatedAt: ctx.clock.date().toISOString(),
  });
}

async function failPlan(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun, err: unknown): Promise<void> {
  // The reason is kept in the run record and shown by `baton show`: a storage error from split can quote a SAS.
  const reason = redactSecrets(err instanceof PlanError ? err.message : `split failed: ${messageOf(err)}`);
  ctx.log.warn(`run ${run.doc.value.runId} failed while planning: ${reason}`);
  await book.save(run, transition(run.doc.value, 'failed', ctx.clock.date(), reason));
}
