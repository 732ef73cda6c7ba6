import type { RunOutput } from '../hub/run-output';
import { writeFailuresManifest } from '../hub/failures-manifest';
import { finalizeContext } from '../hub/finalize-context';
import { writeOnce } from '../fencing/write-once';
import { callHook } from '../jobs/call-hook';
import { withinTolerance } from '../jobs/job-definition';
import { isTerminal, runKeys, transition, type RunRecord, type TerminalRunState } from '../hub/run-record';
import type { EngineContext, TermContext } from './engine-context';
import { forgetRun } from './reconcile';
import type { ActiveRun, RunBook } from './run-book';
import { errorText } from '../jobs/error-text';
import { messageOf } from '../errors';

const MISSING_LISTED = 100_000;

/**
 * Ends a run whose every item is accounted for: records the end first (succeeded or failed by
 * the job's tolerance), then writes the output and the failures manifest (`If-None-Match: *`,
 * so there is at most one of each whoever finalizes), calls the job's `finalize` hook with the
 * run id as idempotency key, and records the terminal state. Safe to repeat after a crash at
 * any point; a run whose end is already recorded ends that way.
 */
export async function finalizeRun(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun): Promise<void> {
  const record = run.doc.value;
  if (!record.ending) {
    const { planned, failed } = record.counters;
    const state = withinTolerance(run.job.failureTolerance, planned, failed) ? 'succeeded' : 'failed';
    const moved = record.state === 'running' ? transition(record, 'finalizing', ctx.clock.date()) : record;
    await book.save(run, { ...moved, ending: { state, reason: null, output: true } });
  }
  await completeEnding(ctx, term, book, run);
}

/** Ends a run that cannot go on (its plan is gone, a step keeps failing), listing what never came back. */
export function failRun(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun, reason: string): Promise<void> {
  return abortRun(ctx, term, book, run, 'failed', reason);
}

/**
 * Ends an open run early: cancelled on request, timed-out past its deadline, or failed. Lists
 * what never came back. A run whose end is already recorded ends that way instead.
 */
export async function abortRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  run: ActiveRun,
  state: 'cancelled' | 'timed-out' | 'failed',
  reason: string,
): Promise<void> {
  const record = run.doc.value;
  if (!record.ending) {
    await book.save(run, { ...record, ending: { state, reason, output: false }, updatedAt: ctx.clock.date().toISOString() });
  }
  await completeEnding(ctx, term, book, run);
}

/**
 * Writes the end the record names. From the moment it is named, the drains count nothing more
 * into the run, so whoever completes it writes the same output and manifest from the same
 * record, and the manifest always says the state the record ends in.
 */
export async function completeEnding(ctx: EngineContext, term: TermContext, book: RunBook, run: ActiveRun): Promise<void> {
  const record = run.doc.value;
  const ending = record.ending;
  if (!ending) throw new Error(`run ${record.runId} has no recorded end to complete`);
  if (!ending.output) {
    const missing = run.seen ? run.seen.missing(MISSING_LISTED) : [];
    const missingCount = run.seen ? record.counters.planned - run.seen.count() : 0;
    await writeManifest(ctx, term, record, ending.state, missing, missingCount);
    await endRun(ctx, term, book, run, ending.state, {
      manifestKey: runKeys.manifest(record.runId),
      endReason: ending.reason ?? undefined,
    });
    ctx.log.warn(`run ${record.runId} ${ending.state}: ${ending.reason}; ${missingCount} item(s) without an outcome`);
    return;
  }
  const state = ending.state === 'succeeded' ? 'succeeded' : 'failed';
  const { planned, failed } = record.counters;
  const output = run.job.aggregate.output(record.acc);
  const document: RunOutput = {
    runId: record.runId,
    job: record.job,
    occurrence: record.occurrence,
    state,
    counters: record.counters,
    output,
  };
  await writeOnce(ctx.docs, runKeys.output(record.runId), document, term.signal);
  await writeManifest(ctx, term, record, state, []);
  let finalizeError: string | null = null;
  if (run.job.finalize) {
    const finalize = run.job.finalize;
    const { finalizeSeconds, graceSeconds } = run.job.hookTimeouts;
    try {
      await callHook(
        (signal) =>
          finalize(
            output,
            finalizeContext(ctx.docs, record.runId, state, { planned, succeeded: record.counters.succeeded, failed }, signal),
          ),
        {
          hook: 'finalize',
          timeoutMs: finalizeSeconds * 1000,
          graceMs: graceSeconds * 1000,
          clock: ctx.clock,
          signal: term.signal,
          // The hook's own bound stands in for the watchdog while it runs.
          heartbeat: () => term.leadership.heartbeat(),
        },
      );
    } catch (err) {
      if (term.signal.aborted) throw err;
      finalizeError = errorText(messageOf(err));
      ctx.log.warn(`run ${record.runId}: finalize hook failed: ${finalizeError}`);
    }
  }
  await endRun(ctx, term, book, run, state, {
    outputKey: runKeys.output(record.runId),
    manifestKey: runKeys.manifest(record.runId),
    finalizeError,
  });
}

async function endRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  run: ActiveRun,
  state: TerminalRunState,
  fields: Partial<Pick<RunRecord, 'outputKey' | 'manifestKey' | 'finalizeError' | 'endReason'>>,
): Promise<void> {
  const record = run.doc.value;
  if (isTerminal(record.state)) return;
  await book.save(run, {
    ...transition(record, state, ctx.clock.date(), fields.endReason ?? undefined),
    ...fields,
    endReason: fields.endReason ?? record.endReason,
  });
  book.dropJobState(record.job);
  await forgetRun(ctx, term, record.job, record.runId);
  // The plan and the claims are read only to send an open run's work: an ended run's storage is
  // its record, output and failures. A term cut short here leaves the rest to retention.
  for (const prefix of [runKeys.claimsPrefix(record.runId), runKeys.planPrefix(record.runId)]) {
    for await (const key of ctx.docs.list(prefix, { abortSignal: term.signal })) {
      await ctx.docs.delete(key, { abortSignal: term.signal });
    }
  }
  ctx.log.info(
    `run ${record.runId} ${state}: ${record.counters.succeeded} succeeded, ${record.counters.failed} failed of ${record.counters.planned}`,
  );
}

/**
 * The manifest names the record's failure log instead of copying it: however many items
 * failed, this reads nothing and writes a document the size of the log's roots.
 */
async function writeManifest(
  ctx: EngineContext,
  term: TermContext,
  record: RunRecord,
  state: TerminalRunState,
  missing: number[],
  missingCount = missing.length,
): Promise<void> {
  await writeFailuresManifest(
    ctx.docs,
    {
      runId: record.runId,
      state,
      failedCount: record.counters.failed,
      failureParts: record.failureParts,
      missing,
      missingCount,
    },
    term.signal,
  );
}
