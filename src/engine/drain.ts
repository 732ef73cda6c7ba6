import type { ReceivedMessage } from '../queue/queue-port';
import { runKeys, type RunRecord } from '../runs/run-record';
import type { EngineContext, TermContext } from './engine-context';
import { foldOutcomes, type FailureEntry } from './fold';
import {
  ClaimMissingError,
  itemOutcomeSchema,
  loadClaim,
  parseBody,
  poisonNoteSchema,
  resultMessageSchema,
  workMessageSchema,
  type ItemOutcome,
} from './messages';
import type { RunBook } from './run-book';

const BATCH = 32;

/** What a drain pass did, for logs and tests. */
export interface DrainStats {
  received: number;
  folded: number;
  duplicates: number;
  /** Results of runs that are unknown or already ended. */
  stray: number;
  malformed: number;
}

interface Group {
  messages: ReceivedMessage[];
  outcomes: ItemOutcome[];
  rejected: number;
  /** Claim-check blobs the messages point at. */
  claims: string[];
}

/**
 * One batch from the results queue: fold each new item into its run, checkpoint, and only then
 * delete the messages. A crash in between redelivers them, and the dedupe set makes the second
 * fold a no-op, so every item counts exactly once.
 */
export async function drainResults(ctx: EngineContext, term: TermContext, book: RunBook): Promise<DrainStats> {
  const messages = await ctx.results.receive(BATCH, ctx.tuning.drainVisibilitySeconds, { abortSignal: term.signal });
  const stats: DrainStats = { received: messages.length, folded: 0, duplicates: 0, stray: 0, malformed: 0 };
  const groups = new Map<string, Group>();
  const discard: ReceivedMessage[] = [];
  for (const message of messages) {
    const body = parseBody(message.text);
    const parsed = body.ok ? resultMessageSchema.safeParse(body.value) : undefined;
    if (!parsed?.success) {
      ctx.log.warn(`deleted a malformed result message ${message.id}`);
      stats.malformed++;
      discard.push(message);
      continue;
    }
    let outcomes = parsed.data.outcomes;
    if (parsed.data.claim) {
      try {
        const claimed = itemOutcomeSchema
          .array()
          .safeParse(await loadClaim(parsed.data.claim, ctx.docs, { abortSignal: term.signal }));
        outcomes = claimed.success ? claimed.data : undefined;
      } catch (err) {
        if (!(err instanceof ClaimMissingError)) throw err;
      }
    }
    if (!outcomes) {
      ctx.log.warn(`deleted result message ${message.id}: its claim-check blob is missing or malformed`);
      stats.malformed++;
      discard.push(message);
      continue;
    }
    const group = groupFor(groups, parsed.data.run);
    group.messages.push(message);
    group.outcomes.push(...outcomes);
    if (parsed.data.claim) group.claims.push(parsed.data.claim);
  }
  for (const [runId, group] of groups) {
    const applied = await applyToRun(ctx, term, book, runId, group);
    if (applied === 'defer') continue;
    if (applied === 'stray') {
      stats.stray += group.messages.length;
      // The run's claims were cleared when it ended; these came later and would be left behind.
      await Promise.all(group.claims.map((key) => ctx.docs.delete(key, { abortSignal: term.signal })));
    } else {
      stats.folded += applied.folded;
      stats.duplicates += applied.duplicates;
    }
    await deleteAll(ctx, term, group.messages, 'results');
  }
  await deleteAll(ctx, term, discard, 'results');
  return stats;
}

/**
 * One batch from the work poison queue. A worker's note about a malformed message counts as
 * `rejected` on its run (the output is unaffected). A raw work message moved there by the host
 * after its last delivery means no worker ever reported those items: they fail.
 */
export async function drainPoison(ctx: EngineContext, term: TermContext, book: RunBook): Promise<DrainStats> {
  const messages = await ctx.poison.receive(BATCH, ctx.tuning.drainVisibilitySeconds, { abortSignal: term.signal });
  const stats: DrainStats = { received: messages.length, folded: 0, duplicates: 0, stray: 0, malformed: 0 };
  const groups = new Map<string, Group>();
  const discard: ReceivedMessage[] = [];
  for (const message of messages) {
    const body = parseBody(message.text);
    const note = body.ok ? poisonNoteSchema.safeParse(body.value) : undefined;
    if (note?.success) {
      ctx.log.warn(`poisoned work message: ${note.data.reason}`);
      if (note.data.run) {
        const group = groupFor(groups, note.data.run);
        group.messages.push(message);
        group.rejected++;
      } else discard.push(message);
      stats.malformed++;
      continue;
    }
    const work = body.ok ? workMessageSchema.safeParse(body.value) : undefined;
    if (work?.success) {
      const { run, first, count } = work.data;
      const group = groupFor(groups, run);
      group.messages.push(message);
      for (let i = first; i < first + count; i++) {
        group.outcomes.push({
          i,
          ok: false,
          e: `no result after ${message.dequeueCount} deliveries: the worker never finished this message`,
          a: ctx.tuning.maxAttempts,
        });
      }
      continue;
    }
    ctx.log.warn(`deleted an unreadable poison message ${message.id}`);
    stats.malformed++;
    discard.push(message);
  }
  for (const [runId, group] of groups) {
    const applied = await applyToRun(ctx, term, book, runId, group);
    if (applied === 'defer') continue;
    if (applied === 'stray') stats.stray += group.messages.length;
    else stats.folded += applied.folded;
    await deleteAll(ctx, term, group.messages, 'poison');
  }
  await deleteAll(ctx, term, discard, 'poison');
  return stats;
}

async function applyToRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  runId: string,
  group: Group,
): Promise<'stray' | 'defer' | { folded: number; duplicates: number }> {
  const run = await book.get(runId);
  // Not planned yet: leave the messages for a later pass rather than lose them.
  if (run && !('terminal' in run) && !run.seen) return 'defer';
  if (!run || 'terminal' in run || !run.seen) {
    ctx.log.info(`deleted ${group.messages.length} message(s) of ${run ? 'ended' : 'unknown'} run ${runId}`);
    return 'stray';
  }
  const record = run.doc.value;
  const before = run.seen.clone();
  const folded = foldOutcomes(run.job, { acc: record.acc, seen: run.seen, counters: record.counters }, group.outcomes);
  const counters = { ...folded.counters, rejected: folded.counters.rejected + group.rejected };
  try {
    const failureParts = folded.failures.length
      ? [...record.failureParts, await writeFailurePart(ctx, term, record, folded.failures)]
      : record.failureParts;
    await book.save(run, {
      ...record,
      acc: folded.acc,
      counters,
      seen: run.seen.toBase64(),
      failureParts,
      updatedAt: ctx.clock.date().toISOString(),
    });
  } catch (err) {
    run.seen = before; // the checkpoint did not land; neither did these items
    throw err;
  }
  return {
    folded: counters.succeeded + counters.failed - record.counters.succeeded - record.counters.failed,
    duplicates: counters.duplicates - record.counters.duplicates,
  };
}

async function writeFailurePart(
  ctx: EngineContext,
  term: TermContext,
  record: RunRecord,
  failures: FailureEntry[],
): Promise<string> {
  // Keyed by epoch and position: a stale leader's part can never take the place of one the
  // checkpoint names.
  const key = runKeys.failurePart(record.runId, term.epoch, record.failureParts.length);
  await ctx.docs.write(key, `${failures.map((f) => JSON.stringify(f)).join('\n')}\n`, {}, { abortSignal: term.signal });
  return key;
}

async function deleteAll(
  ctx: EngineContext,
  term: TermContext,
  messages: ReceivedMessage[],
  which: 'results' | 'poison',
): Promise<void> {
  const queue = which === 'results' ? ctx.results : ctx.poison;
  await Promise.all(messages.map((m) => queue.delete(m, { abortSignal: term.signal })));
}

function groupFor(groups: Map<string, Group>, runId: string): Group {
  let group = groups.get(runId);
  if (!group) groups.set(runId, (group = { messages: [], outcomes: [], rejected: 0, claims: [] }));
  return group;
}
