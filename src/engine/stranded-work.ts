import type { EngineContext, TermContext } from './engine-context';
import { inLanes } from './lanes';

const BATCH = 32;

/**
 * Moves work messages from shards past the hub's count (a lowered `BATON_QUEUE_SHARDS`) onto the
 * hub's own shards, where its queue triggers listen: up to one batch per stranded queue a turn.
 * Each message is sent again before it is deleted, so a crash in between leaves a duplicate,
 * which the fold counts once, and never a loss. The copy starts again at delivery 1: an item
 * moved this way can get more attempts than the host's maxDequeueCount, never fewer. Returns
 * how many messages moved.
 */
export async function moveStrandedWork(ctx: EngineContext, term: TermContext): Promise<number> {
  let moved = 0;
  for (const queue of ctx.queues.strandedWork()) {
    const messages = await queue.receive(BATCH, ctx.tuning.drainVisibilitySeconds, { abortSignal: term.signal });
    if (messages.length === 0) {
      ctx.queues.seenEmpty(queue);
      continue;
    }
    await inLanes(messages, ctx.tuning.dispatchConcurrency, async (message) => {
      await ctx.queues.workFor(moved++).send(message.text, { abortSignal: term.signal });
      await queue.delete(message, { abortSignal: term.signal });
    });
    ctx.log.info(`moved ${messages.length} work message(s) from ${queue.name}, a shard past BATON_QUEUE_SHARDS`);
  }
  return moved;
}
