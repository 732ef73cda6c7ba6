import type { EngineContext, TermContext } from './engine-context';
import { inLanes } from './lanes';
import type { ActiveRun, RunBook } from './run-book';
import { hedgeBound, hedgeGrant } from './straggler-watch';
import { ChunkReader, workMessageText } from './work-text';

/**
 * Hedged dispatch, one step for one run: sends a copy of each work message its straggler watch
 * finds overdue, within the job's bound. The copies are added to the run record's `hedges` in a
 * fenced write before any is sent, so a stale leader's copies are refused before they go, and
 * every leader of the run together never sends more than the bound. A copy is the message as
 * planned; whichever result comes first counts and the rest are duplicates. Returns how many it
 * sent.
 */
export async function hedgeStragglers(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun): Promise<number> {
  const record = run.doc.value;
  const { hedge, itemsPerMessage } = run.job;
  if (!hedge || record.ending || (record.state !== 'dispatching' && record.state !== 'running')) return 0;
  const bound = hedgeBound(hedge.maxPercent, record.messages, hedge.minCopies);
  const left = hedgeGrant(bound, record.hedges, bound);
  if (left === 0) return 0;
  const watch = book.stragglersOf(run);
  const due = watch?.due(left) ?? [];
  if (!watch || due.length === 0) return 0;
  let granted = 0;
  await book.update(run, (current) => {
    granted = hedgeGrant(bound, current.hedges, due.length);
    return { ...current, hedges: current.hedges + granted, updatedAt: ctx.clock.date().toISOString() };
  });
  const copies = due.slice(0, granted).sort((a, b) => a - b);
  const chunks = new ChunkReader(ctx, term, record, record.chunkItems);
  const texts: { m: number; text: string }[] = [];
  for (const m of copies) texts.push({ m, text: await workMessageText(ctx, term, record, chunks, m, itemsPerMessage) });
  await inLanes(texts, ctx.tuning.dispatchConcurrency, async ({ m, text }) => {
    await ctx.queues.workFor(m).send(text, { abortSignal: term.signal });
    watch.sent(m);
  });
  if (copies.length > 0) {
    const waited = Math.round(watch.thresholdMs() / 100) / 10;
    ctx.log.info(
      `hedged ${copies.length} message(s) of run ${record.runId} that waited over ${waited} s ` +
        `(${run.doc.value.hedges} of at most ${bound} copies)`,
    );
  }
  return copies.length;
}
