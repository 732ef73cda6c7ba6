import { runKeys, transition, type RunRecord } from '../hub/run-record';
import { inLanes } from './lanes';
import type { EngineContext, TermContext } from './engine-context';
import { encodeWithClaimCheck, type WorkMessage } from './messages';
import type { ActiveRun, RunBook } from './run-book';

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
  const planned = record.counters.planned;
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
    for (let m = cursor; m < end; m++) {
      const first = m * itemsPerMessage;
      const count = Math.min(itemsPerMessage, planned - first);
      const message: WorkMessage = {
        v: 1,
        t: 'work',
        run: record.runId,
        job: record.job,
        first,
        count,
        items: await chunks.items(first, count),
      };
      texts.push({ m, text: await encodeWithClaimCheck(message, 'items', ctx.docs, { abortSignal: term.signal }) });
    }
    await inLanes(texts, ctx.tuning.dispatchConcurrency, ({ m, text }) =>
      ctx.queues.workFor(m).send(text, { abortSignal: term.signal }),
    );
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

/** Reads plan chunks in order, keeping one chunk in memory. */
class ChunkReader {
  private index = -1;
  private lines: string[] = [];

  constructor(
    private readonly ctx: EngineContext,
    private readonly term: TermContext,
    private readonly record: RunRecord,
    private readonly chunkItems: number,
  ) {}

  async items(first: number, count: number): Promise<unknown[]> {
    const chunk = Math.floor(first / this.chunkItems);
    if (chunk !== this.index) {
      const key = runKeys.planChunkOf(this.record, chunk);
      const stored = await this.ctx.docs.read(key, { abortSignal: this.term.signal });
      if (!stored) throw new Error(`plan chunk ${key} is missing`);
      this.lines = stored.body.split('\n');
      this.index = chunk;
    }
    const offset = first - chunk * this.chunkItems;
    return this.lines.slice(offset, offset + count).map((line) => JSON.parse(line) as unknown);
  }
}
