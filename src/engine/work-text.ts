import { runKeys, type RunRecord } from '../hub/run-record';
import type { EngineContext, TermContext } from './engine-context';
import { encodeWithClaimCheck, type WorkMessage } from './messages';

/**
 * The text of work message `m` of a run, from its persisted plan: the dispatch sends it once,
 * hedged dispatch again for a straggler. Bulky items go behind a claim check.
 */
export async function workMessageText(
  ctx: EngineContext,
  term: TermContext,
  record: RunRecord,
  chunks: ChunkReader,
  m: number,
  itemsPerMessage: number,
): Promise<string> {
  const first = m * itemsPerMessage;
  const count = Math.min(itemsPerMessage, record.counters.planned - first);
  const message: WorkMessage = {
    v: 1,
    t: 'work',
    run: record.runId,
    job: record.job,
    first,
    count,
    items: await chunks.items(first, count),
  };
  return encodeWithClaimCheck(message, 'items', ctx.docs, { abortSignal: term.signal });
}

/** Reads plan chunks in order, keeping one chunk in memory. */
export class ChunkReader {
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
