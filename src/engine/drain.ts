import type { QueuePort, ReceivedMessage } from '../queue/queue-port';
import { inLanes } from './lanes';
import { keepDeadLetter } from './dead-letters';
import type { EngineContext, TermContext } from './engine-context';
import { foldOutcomes } from '../hub/fold';
import { appendFailures } from '../hub/failure-log';
import {
  ClaimMissingError,
  loadClaim,
  parseBody,
  poisonNoteSchema,
  resultMessageSchema,
  runIdSchema,
  workMessageSchema,
  type ResultMessage,
} from './messages';
import { describeIssue } from '../jobs/error-text';
import { claimedOutcomesSchema, type ItemOutcome } from '../jobs/item-outcome';
import { messageCounted, oldestOutstanding, type ActiveRun, type RunBook } from './run-book';
import { retryLater } from './retry-later';
import { tellFailures } from './failure-hooks';

const BATCH = 32;
/**
 * Deletes after a checkpoint run this many at a time per queue drained (up to 4 batches of each
 * are deleted per checkpoint): a pass over several shards deletes as fast as one pass on each.
 */
const DELETE_LANES = 32;
/** Receives folded into one checkpoint: fewer rewrites of the bitset on big runs. */
const BATCHES_PER_CHECKPOINT = 4;
/** How soon a message the leader cannot count yet is offered again. */
const DEFER_SECONDS = 5;

export interface DrainOptions {
  /**
   * Takes the pass's deletes instead of waiting for them, so the next pass receives while they
   * finish. They start after the checkpoint that counted their messages, so one that never lands
   * only brings a counted message back, which the dedupe set ignores. The promise never rejects:
   * a failed delete is logged.
   */
  deleteBehind?: (deleting: Promise<void>) => void;
}

/** What a drain pass did, for logs and tests. */
export interface DrainStats {
  received: number;
  folded: number;
  duplicates: number;
  /** Results of runs that are unknown or already ended. */
  stray: number;
  malformed: number;
  /** Messages left for a later pass because their run could not be read or saved this time. */
  deferred: number;
  /** Poison copies received but not counted yet: results sent before them may still be on the way. */
  held: number;
}

interface Group {
  run: string;
  /** The job the messages name (results only): they count only toward a run of that job. */
  job?: string;
  messages: Received[];
  /** The outcomes each message brought, by its position in `messages`. */
  byMessage: ItemOutcome[][];
  rejected: number;
  /** Claim-check blobs the messages point at. */
  claims: string[];
  /** How long the workers took over the messages, as they reported (hedged dispatch compares against it). */
  durations: number[];
  /** Items the workers sent back to be tried again, and in how long. */
  retrying: RetryNote[];
}

type RetryNote = NonNullable<ResultMessage['retrying']>;

type Parsed =
  | {
      kind: 'group';
      run: string;
      job?: string;
      outcomes: ItemOutcome[];
      rejected: number;
      claim?: string;
      ms?: number;
      retrying?: RetryNote;
    }
  | { kind: 'dead'; reason: string; run?: string }
  /** Its run cannot be read now: the message comes back after the drain visibility. */
  | { kind: 'later' }
  /** A poison copy that may not fail its items yet (see `PoisonGate`): offered again soon. */
  | { kind: 'hold' };

/**
 * Up to a few batches from the results queue: fold each new item into its run, checkpoint once
 * per run, and only then delete the messages. A crash in between redelivers them, and the dedupe
 * set makes the second fold a no-op, so every item counts exactly once.
 */
export function drainResults(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  options: DrainOptions = {},
): Promise<DrainStats> {
  return drain(ctx, term, book, options, 'results', async (message) => {
    const body = parseBody(message.text);
    const parsed = body.ok ? resultMessageSchema.safeParse(body.value) : undefined;
    if (!parsed?.success)
      return {
        kind: 'dead',
        reason: body.ok ? `malformed result: ${describeIssue(parsed!.error)}` : `malformed result: ${body.reason}`,
      };
    const { run, job } = parsed.data;
    // Whichever instance ran them, the leader's own worker learns how its items hold the loop.
    if (parsed.data.held !== undefined && ctx.jobs.has(job)) ctx.itemGate?.held(job, parsed.data.held);
    const ms = parsed.data.ms === undefined ? {} : { ms: parsed.data.ms };
    const retrying = parsed.data.retrying ? { retrying: parsed.data.retrying } : {};
    if (parsed.data.outcomes) return { kind: 'group', run, job, outcomes: parsed.data.outcomes, rejected: 0, ...ms, ...retrying };
    if (parsed.data.claim === undefined) return { kind: 'group', run, job, outcomes: [], rejected: 0, ...retrying };
    const claim = parsed.data.claim as string;
    try {
      const claimed = claimedOutcomesSchema.safeParse(await loadClaim(claim, ctx.docs, { abortSignal: term.signal }));
      if (claimed.success) return { kind: 'group', run, job, outcomes: claimed.data, rejected: 0, claim, ...ms, ...retrying };
      return { kind: 'dead', reason: `claim-check blob ${claim} does not hold outcomes`, run: parsed.data.run };
    } catch (err) {
      if (err instanceof ClaimMissingError) return { kind: 'dead', reason: err.message, run: parsed.data.run };
      if (err instanceof SyntaxError)
        return { kind: 'dead', reason: `claim-check blob ${claim} is not JSON`, run: parsed.data.run };
      throw err;
    }
  });
}

/**
 * Up to a few batches from the work poison queue. A worker's note about a malformed message
 * counts as `rejected` on its run (the output is unaffected) and is kept as a dead letter. A raw
 * work message moved there by the host after its last delivery fails the items that have no
 * outcome, once the results sent before it have been counted (see `PoisonGate`).
 */
export function drainPoison(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  options: DrainOptions = {},
): Promise<DrainStats> {
  return drain(ctx, term, book, options, 'poison', async (message, queue) => {
    const body = parseBody(message.text);
    const note = body.ok ? poisonNoteSchema.safeParse(body.value) : undefined;
    if (note?.success) {
      await keepDeadLetter(ctx, term, queue.name, message, note.data.reason, note.data.run, note.data.body);
      ctx.log.warn(`poisoned work message: ${note.data.reason}`);
      return note.data.run && runIdSchema.safeParse(note.data.run).success
        ? { kind: 'group', run: note.data.run, outcomes: [], rejected: 1 }
        : { kind: 'dead', reason: note.data.reason };
    }
    const work = body.ok ? workMessageSchema.safeParse(body.value) : undefined;
    if (work?.success) {
      const { run, first, count } = work.data;
      if (!book.poisonGate.mayFail(message.id, run)) return { kind: 'hold' };
      // Only items of the plan can fail; a malformed count (up to 2^53) must not become that many
      // outcomes in memory. Past the plan the message is rejected once, as a worker's note would be.
      let found: Awaited<ReturnType<RunBook['get']>>;
      try {
        found = await book.get(run);
      } catch (err) {
        // One unreadable record must not end the pass for every other run's messages in it.
        retryLater(ctx, term, `left a poisoned work message of run ${run} for a later pass`, err);
        return { kind: 'later' };
      }
      const planned = found && 'seen' in found ? found.seen?.size : undefined;
      const end = Math.min(first + count, planned ?? first);
      const reason = `no result after ${message.dequeueCount} deliveries: the worker never finished this message`;
      const outcomes: ItemOutcome[] = [];
      for (let i = first; i < end; i++) outcomes.push({ i, ok: false, e: reason, a: ctx.tuning.maxAttempts });
      book.poisonGate.settled(message.id);
      return { kind: 'group', run, outcomes, rejected: planned !== undefined && first + count > planned ? 1 : 0 };
    }
    // Say what is wrong with what it claims to be: a note (t: poison) or else a work message.
    const claimsNote = body.ok && (body.value as { t?: unknown } | null)?.t === 'poison';
    const why = !body.ok ? body.reason : describeIssue((claimsNote ? note : work)!.error!);
    const reason = `unreadable message on the poison queue: ${why}`;
    // Neither a note nor a work message: nothing else keeps its reason once it is deleted.
    await keepDeadLetter(ctx, term, queue.name, message, reason);
    return { kind: 'dead', reason };
  });
}

/** A received message and the queue it came from, which is where it is deleted or hidden again. */
interface Received {
  queue: QueuePort;
  message: ReceivedMessage;
}

/**
 * Up to `BATCHES_PER_CHECKPOINT` receives from each queue, all queues at once: with several
 * shards, one pass (and so one checkpoint per run) folds every shard's messages. `emptied` says
 * whether every queue's last receive came back short of a batch.
 */
async function receiveAll(ctx: EngineContext, term: TermContext, queues: readonly QueuePort[]) {
  let emptied = true;
  const perQueue = await Promise.all(
    queues.map(async (queue) => {
      const got: Received[] = [];
      for (let batch = 0; batch < BATCHES_PER_CHECKPOINT; batch++) {
        const messages = await queue.receive(BATCH, ctx.tuning.drainVisibilitySeconds, { abortSignal: term.signal });
        got.push(...messages.map((message) => ({ queue, message })));
        // A shard past the hub's count that has nothing left is not polled until it is found again.
        if (batch === 0 && messages.length === 0) ctx.queues.seenEmpty(queue);
        if (messages.length < BATCH) return got;
      }
      emptied = false;
      return got;
    }),
  );
  return { received: perQueue.flat(), emptied };
}

async function drain(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  options: DrainOptions,
  kind: 'results' | 'poison',
  parse: (message: ReceivedMessage, queue: QueuePort) => Promise<Parsed>,
): Promise<DrainStats> {
  const stats: DrainStats = { received: 0, folded: 0, duplicates: 0, stray: 0, malformed: 0, deferred: 0, held: 0 };
  const groups = new Map<string, Group>();
  const discard: Received[] = [];
  const hold: Received[] = [];
  const startedAt = ctx.clock.now();
  const queues = kind === 'results' ? ctx.queues.resultsToDrain() : ctx.queues.poisonToDrain();
  const { received, emptied } = await receiveAll(ctx, term, queues);
  stats.received = received.length;
  for (const entry of received) {
    const { queue, message } = entry;
    const parsed = await parse(message, queue);
    if (parsed.kind === 'hold') {
      stats.held++;
      hold.push(entry);
      continue;
    }
    if (parsed.kind === 'later') {
      stats.deferred++;
      continue;
    }
    if (parsed.kind === 'dead') {
      if (kind === 'results') await keepDeadLetter(ctx, term, queue.name, message, parsed.reason, parsed.run);
      ctx.log.warn(`set aside message ${message.id} from ${queue.name}: ${parsed.reason}`);
      stats.malformed++;
      discard.push(entry);
      continue;
    }
    if (parsed.rejected) stats.malformed += parsed.rejected;
    const group = groupFor(groups, parsed.run, parsed.job);
    group.messages.push(entry);
    group.byMessage.push(parsed.outcomes);
    group.rejected += parsed.rejected;
    if (parsed.claim) group.claims.push(parsed.claim);
    if (parsed.ms !== undefined) group.durations.push(parsed.ms);
    if (parsed.retrying) group.retrying.push(parsed.retrying);
  }
  // Shown again by the next drain visibility at the latest, when the gate may have opened.
  const holdSeconds = Math.min(DEFER_SECONDS, ctx.tuning.drainVisibilitySeconds);
  await Promise.all(hold.map((m) => m.queue.setVisibility(m.message, holdSeconds, { abortSignal: term.signal })));
  const leftBehind = new Set<string>();
  const deletes: Promise<void>[] = [];
  const remove = async (messages: Received[]): Promise<void> => {
    const deleting = deleteAll(term, messages, queues.length);
    if (!options.deleteBehind) return deleting;
    // Handled at once: a rejection left unhandled while the pass goes on would end the process.
    deletes.push(
      deleting.catch((err: unknown) => {
        try {
          retryLater(ctx, term, 'deleting drained messages failed; they come back and count once', err);
        } catch {
          // The term is over, which the turn that follows finds out by itself.
        }
      }),
    );
  };
  for (const group of groups.values()) {
    const runId = group.run;
    let applied: Awaited<ReturnType<typeof applyToRun>>;
    try {
      applied = await applyToRun(ctx, term, book, group);
    } catch (err) {
      // One run whose record cannot be read or saved must not hold up the others' messages:
      // its own come back after the drain visibility, and the next pass tries again.
      retryLater(ctx, term, `left ${group.messages.length} message(s) of run ${runId} for a later pass`, err);
      stats.deferred += group.messages.length;
      leftBehind.add(runId);
      continue;
    }
    if (applied === 'defer') {
      leftBehind.add(runId);
      // Back on the queue in a few seconds rather than after the full drain visibility.
      await Promise.all(group.messages.map((m) => m.queue.setVisibility(m.message, DEFER_SECONDS, { abortSignal: term.signal })));
      continue;
    }
    if (applied === 'stray' || applied === 'unknown') {
      stats.stray += group.messages.length;
      // No run has this id (made-up input, or a run retention deleted long after it ended): kept with its reason
      // like other malformed messages. A worker's note already has its letter; a second is a no-op.
      if (applied === 'unknown') {
        for (const m of group.messages) await keepDeadLetter(ctx, term, m.queue.name, m.message, `unknown run ${runId}`, runId);
      }
      // The run's claims were cleared when it ended; these came later and would be left behind.
      await Promise.all(group.claims.map((key) => ctx.docs.delete(key, { abortSignal: term.signal })));
    } else {
      stats.folded += applied.folded;
      stats.duplicates += applied.duplicates;
      stats.malformed += applied.misdirected;
    }
    await remove(group.messages);
  }
  await remove(discard);
  options.deleteBehind?.(Promise.all(deletes).then(() => undefined));
  if (kind === 'results') book.poisonGate.resultsPass(startedAt, emptied, leftBehind);
  return stats;
}

async function applyToRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  group: Group,
): Promise<'stray' | 'unknown' | 'defer' | { folded: number; duplicates: number; misdirected: number }> {
  const runId = group.run;
  const run = await book.get(runId);
  // Its job is not registered here, or it is not planned yet: leave the messages for a leader
  // that can count them rather than lose them.
  if (run && 'unregistered' in run) return 'defer';
  if (run && !('terminal' in run) && !run.seen) return 'defer';
  // A run whose end is recorded counts nothing more: its output and manifest are fixed.
  if (!run || 'terminal' in run || !run.seen || run.doc.value.ending) {
    ctx.log.info(`deleted ${group.messages.length} message(s) of ${run ? 'ended' : 'unknown'} run ${runId}`);
    return run ? 'stray' : 'unknown';
  }
  const record = run.doc.value;
  // Outcomes reported for another job's items would fold values of the wrong shape into this
  // run's output: they are set aside, as the worker sets aside work naming the wrong job.
  const misdirected = group.job !== undefined && group.job !== record.job ? group.messages.length : 0;
  if (misdirected) {
    const reason = `result for run ${runId} names job ${group.job}, but the run belongs to job ${record.job}`;
    for (const m of group.messages) await keepDeadLetter(ctx, term, m.queue.name, m.message, reason, runId);
    ctx.log.warn(`set aside ${misdirected} message(s) of run ${runId}: ${reason}`);
  }
  if (!misdirected) await keepOutsidePlan(ctx, term, group, run.seen.size);
  const outcomes = misdirected ? [] : group.byMessage.flat();
  const rejected = group.rejected + misdirected;
  // Only retry notes: nothing to count, so no checkpoint either.
  if (outcomes.length === 0 && rejected === 0) {
    watchProgress(book, run, [], [], group.retrying);
    return { folded: 0, duplicates: 0, misdirected: 0 };
  }
  const before = run.seen.clone();
  const folded = foldOutcomes(run.job, { acc: record.acc, seen: run.seen, counters: record.counters }, outcomes);
  const live = run.seen;
  const counters = { ...folded.counters, rejected: folded.counters.rejected + rejected };
  try {
    // Written before the checkpoint that names them, never rewritten or deleted: whether this
    // save lands, fails or lands unseen, every part a stored record names holds what it held.
    const failureParts = folded.failures.length
      ? await appendFailures(
          ctx.docs,
          { runId, epoch: term.epoch, roots: record.failureParts, failures: folded.failures },
          term.signal,
        )
      : record.failureParts;
    const seen = run.seen.toCheckpoint();
    const at = ctx.clock.date().toISOString();
    const counted = counters.succeeded + counters.failed > 0;
    // Only the checkpoint that counts a run's first items says when: a run already counting
    // without the field (written by an earlier version mid-run) stays without it rather than
    // taking a later checkpoint's time, and is never reported twice.
    // The dispatch of this run may checkpoint its cursor meanwhile: only the fold's fields are set.
    await book.update(run, (current) => ({
      ...current,
      acc: folded.acc,
      counters: {
        ...current.counters,
        succeeded: counters.succeeded,
        failed: counters.failed,
        duplicates: counters.duplicates,
        rejected: counters.rejected,
      },
      seen,
      failureParts,
      outstanding: oldestOutstanding(ctx.clock, book.watching(runId), live, run.job.itemsPerMessage),
      firstItemAt: current.firstItemAt ?? (counted && current.counters.succeeded + current.counters.failed === 0 ? at : null),
      updatedAt: at,
    }));
  } catch (err) {
    run.seen = before; // the checkpoint did not land; neither did these items
    throw err;
  }
  if (!misdirected) watchProgress(book, run, group.durations, outcomes, group.retrying);
  // Told once the checkpoint that counts them has landed, and only by it: a later copy of an
  // item is a duplicate, so no failure is handed over twice (at most once, see `onItemFailed`).
  if (folded.failures.length > 0) tellFailures(ctx, run.job, runId, folded.failures);
  // Counted once the checkpoint that counts them has landed; a redelivery is a duplicate then.
  ctx.telemetry?.itemsFolded(
    record.job,
    counters.succeeded - record.counters.succeeded,
    counters.failed - record.counters.failed,
  );
  return {
    folded: counters.succeeded + counters.failed - record.counters.succeeded - record.counters.failed,
    duplicates: counters.duplicates - record.counters.duplicates,
    misdirected,
  };
}

/**
 * Tells the run's straggler watch (hedged dispatch) what this checkpoint counted: the durations
 * workers reported, each message whose items are all counted now, by whichever copy, and the
 * messages whose failed items went back to the queue for a later try.
 */
function watchProgress(
  book: RunBook,
  run: ActiveRun,
  durations: readonly number[],
  outcomes: readonly ItemOutcome[],
  retrying: readonly RetryNote[],
): void {
  const watch = book.watching(run.doc.value.runId);
  if (!watch || !run.seen) return;
  for (const ms of durations) watch.observe(ms);
  const { itemsPerMessage } = run.job;
  const touched = new Set<number>();
  for (const outcome of outcomes) if (outcome.i < run.seen.size) touched.add(Math.floor(outcome.i / itemsPerMessage));
  for (const m of touched) if (messageCounted(run.seen, m, itemsPerMessage)) watch.counted(m);
  for (const note of retrying) {
    const messages = new Set(
      note.items.filter((i) => i < run.seen!.size && !run.seen!.has(i)).map((i) => Math.floor(i / itemsPerMessage)),
    );
    for (const m of messages) watch.retrying(m, note.inMs);
  }
}

/**
 * A message naming items the plan does not have is kept as a dead letter with its reason; the
 * fold counts those items as rejected and still counts the message's other items.
 */
async function keepOutsidePlan(ctx: EngineContext, term: TermContext, group: Group, planned: number): Promise<void> {
  for (const [k, { queue, message }] of group.messages.entries()) {
    const outside = (group.byMessage[k] ?? []).filter((o) => o.i >= planned).map((o) => o.i);
    if (!outside.length) continue;
    const shown = outside.length > 5 ? `${outside.slice(0, 5).join(', ')}, …` : outside.join(', ');
    const reason = `result for run ${group.run} names item${outside.length > 1 ? 's' : ''} ${shown} outside its plan of ${planned} items`;
    await keepDeadLetter(ctx, term, queue.name, message, reason, group.run);
    ctx.log.warn(`kept message ${message.id} from ${queue.name} as a dead letter: ${reason}`);
  }
}

async function deleteAll(term: TermContext, messages: Received[], queues: number): Promise<void> {
  await inLanes(messages, DELETE_LANES * queues, (m) => m.queue.delete(m.message, { abortSignal: term.signal }));
}

function groupFor(groups: Map<string, Group>, run: string, job: string | undefined): Group {
  const key = job === undefined ? run : `${run}\n${job}`;
  let group = groups.get(key);
  if (!group)
    groups.set(key, (group = { run, job, messages: [], byMessage: [], rejected: 0, claims: [], durations: [], retrying: [] }));
  return group;
}
