import { transition } from '../hub/run-record';
import { inLanes } from './lanes';
import type { EngineContext, TermContext } from './engine-context';
import type { ActiveRun, RunBook } from './run-book';
import { ChunkReader, workMessageText } from './work-text';

const CHECKPOINT_EVERY_MS = 1000;

/**
 * Sends the run's messages from its cursor, in windows of parallel sends, checkpointing the
 * cursor as it goes. Everything before the cursor was surely sent; a new leader resends from
 * there, and the duplicates that makes are counted once by the fold. While `maxInFlightMessages`
 * are out it waits for the run's next save (the turn's drains fold results beside it); it stops
 * at `until`, or when no save comes before then. Returns how many messages it sent.
 */
export async function dispatchSlice(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  run: ActiveRun,
  until: number,
): Promise<number> {
  const record = run.doc.value;
  const { itemsPerMessage } = run.job;
  const stragglers = book.stragglersOf(run);
  const window = ctx.tuning.dispatchConcurrency * 4;
  const chunks = new ChunkReader(ctx, term, record, record.chunkItems);
  let cursor = record.cursor;
  let lastCheckpoint = ctx.clock.now();
  while (cursor < record.messages && ctx.clock.now() < until) {
    // Messages whose items are not all counted yet: sent, being worked on, or results not drained.
    const counted = run.doc.value.counters.succeeded + run.doc.value.counters.failed;
    const inFlight = cursor - Math.floor(counted / itemsPerMessage);
    const room = ctx.tuning.maxInFlightMessages - inFlight;
    if (room <= 0) {
      // The drains beside this slice open the window as they count results.
      if (await book.nextSave(record.runId, until - ctx.clock.now())) continue;
      break;
    }
    const end = Math.min(record.messages, cursor + Math.min(window, room));
    const texts: { m: number; text: string }[] = [];
    for (let m = cursor; m < end; m++)
      texts.push({ m, text: await workMessageText(ctx, term, record, chunks, m, itemsPerMessage) });
    await inLanes(texts, ctx.tuning.dispatchConcurrency, ({ m, text }) =>
      ctx.queues.workFor(m).send(text, { abortSignal: term.signal }),
    );
    if (stragglers) for (let m = cursor; m < end; m++) stragglers.sent(m);
    cursor = end;
    term.leadership.heartbeat();
    if (cursor === record.messages || ctx.clock.now() - lastCheckpoint >= CHECKPOINT_EVERY_MS) {
      await checkpoint(ctx, book, run, cursor, itemsPerMessage);
      lastCheckpoint = ctx.clock.now();
    }
  }
  const sent = cursor - record.cursor;
  if (cursor > run.doc.value.cursor || (cursor >= record.messages && run.doc.value.state === 'dispatching')) {
    await checkpoint(ctx, book, run, cursor, itemsPerMessage);
  }
  return sent;
}

async function checkpoint(
  ctx: EngineContext,
  book: RunBook,
  run: ActiveRun,
  cursor: number,
  itemsPerMessage: number,
): Promise<void> {
  // The drains fold this run's results meanwhile: only the dispatch's fields are set.
  await book.update(run, (current) => {
    const done = cursor >= current.messages;
    const base = done
      ? transition(current, 'running', ctx.clock.date())
      : { ...current, updatedAt: ctx.clock.date().toISOString() };
    return {
      ...base,
      cursor,
      counters: { ...current.counters, dispatched: Math.min(current.counters.planned, cursor * itemsPerMessage) },
    };
  });
}
