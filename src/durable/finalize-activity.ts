import type { FailureEntry } from '../hub/fold';
import { appendFailures } from '../hub/failure-log';
import { writeFailuresManifest } from '../hub/failures-manifest';
import { finalizeContext } from '../hub/finalize-context';
import type { RunOutput } from '../hub/run-output';
import type { DocumentStore } from '../fencing/document-store';
import { callHook } from '../jobs/call-hook';
import { errorText } from '../jobs/error-text';
import { withinTolerance } from '../jobs/job-definition';
import { isTerminal, runKeys, transition, type RunRecord, type TerminalRunState } from '../hub/run-record';
import { nowOf, signalOf, timersOf, type DurableActivityDeps } from './activity-deps';
import { finalizeInputSchema, type RunResult } from './contracts';
import { requireJob } from './jobs';
import { DURABLE_EPOCH } from './names';
import { assertDurableRecord, deleteOtherPlans, runRecords, runResultOf } from './run-records';
import { writeOnce } from '../fencing/write-once';
import { messageOf } from '../errors';

/** Failures per part of the log: a part is read whole, so it stays a bounded read. */
const FAILURES_PER_PART = 1000;

/**
 * The finalize activity: the queue engine's end of a run, from the orchestration's totals.
 * Writes `runs/<run>/output.json` and `runs/<run>/failures.json` (same documents, `If-None-Match: *`,
 * so at most one of each whoever finalizes), decides succeeded or failed with the job's tolerance,
 * calls the job's `finalize` hook with the run id as idempotency key, and ends the record with
 * its counters. Durable may run it more than once; each step is safe to repeat, and a run that
 * has already ended (finished, or cancelled by the starter) is only reported.
 */
export function createFinalizeActivity(deps: DurableActivityDeps): (input: unknown) => Promise<RunResult> {
  return async (raw) => {
    const input = finalizeInputSchema.parse(raw);
    const signal = signalOf(deps);
    const records = runRecords(deps.docs);
    const key = runKeys.record(input.runId);
    const doc = await records.read(key, { abortSignal: signal });
    if (!doc) throw new Error(`run ${input.runId} has no record to finalize`);
    if (isTerminal(doc.value.state)) return runResultOf(doc.value);
    assertDurableRecord(input.runId, doc);
    if (input.kind === 'abort') return abort(deps, doc.value, input.reason);
    const job = requireJob(deps.jobs, input.job);

    // Finalizing first: from here the starter's cancel leaves the run alone (as the queue engine's does).
    const finalizing = await records.update(
      key,
      DURABLE_EPOCH,
      (current) => (current?.state === 'running' ? transition(current, 'finalizing', nowOf(deps)) : undefined),
      { abortSignal: signal },
    );
    if (!finalizing) throw new Error(`run ${input.runId} disappeared while finalizing`);
    if (isTerminal(finalizing.value.state)) return runResultOf(finalizing.value);
    if (finalizing.value.state !== 'finalizing') throw new Error(`run ${input.runId} is ${finalizing.value.state}, not running`);

    const record = finalizing.value;
    const { planned, succeeded, failed } = input.counts;
    const counters: RunRecord['counters'] = { ...record.counters, planned, dispatched: planned, succeeded, failed };
    const state: 'succeeded' | 'failed' = withinTolerance(job.failureTolerance, planned, failed) ? 'succeeded' : 'failed';
    const output = job.aggregate.output(input.acc);
    const document: RunOutput = { runId: record.runId, job: record.job, occurrence: record.occurrence, state, counters, output };
    await writeOnce(deps.docs, runKeys.output(record.runId), document, signal);
    // Durable may repeat this activity: a repeat finds the manifest and writes no second log.
    if (!(await deps.docs.read(runKeys.manifest(record.runId), { abortSignal: signal }))) {
      const failureParts = await logFailures(deps.docs, record.runId, input.failures, signal);
      const failedCount = input.failures.length;
      await writeFailuresManifest(
        deps.docs,
        { runId: record.runId, state, failedCount, failureParts, missing: [], missingCount: 0 },
        signal,
      );
    }

    let finalizeError: string | null = null;
    const finalize = job.finalize;
    if (finalize) {
      const { finalizeSeconds, graceSeconds } = job.hookTimeouts;
      try {
        // Bounded as the queue engine bounds it: a hook that hangs must not hold the activity forever.
        await callHook(
          (hookSignal) =>
            finalize(output, finalizeContext(deps.docs, record.runId, state, { planned, succeeded, failed }, hookSignal)),
          { hook: 'finalize', timeoutMs: finalizeSeconds * 1000, graceMs: graceSeconds * 1000, clock: timersOf(deps), signal },
        );
      } catch (err) {
        if (signal.aborted) throw err;
        finalizeError = errorText(messageOf(err));
        deps.log?.('warn', `run ${record.runId}: finalize hook failed: ${finalizeError}`);
      }
    }
    const ended = await end(deps, record.runId, state, {
      counters,
      acc: input.acc,
      outputKey: runKeys.output(record.runId),
      manifestKey: runKeys.manifest(record.runId),
      finalizeError,
      firstItemAt: record.firstItemAt ?? input.firstItemAt ?? null,
    });
    // Every chunk orchestration has returned before this activity runs: nothing reads the plan again.
    await deleteOtherPlans(deps.docs, record.runId, null, { abortSignal: signal });
    deps.log?.('info', `run ${record.runId} ${ended.state}: ${succeeded} succeeded, ${failed} failed of ${planned}`);
    return runResultOf(ended);
  };
}

/**
 * The orchestration's failures in the failure log both engines keep, by item, a part per
 * `FAILURES_PER_PART`: the manifest names the log, as the queue engine's does.
 */
async function logFailures(
  docs: DocumentStore,
  runId: string,
  failures: readonly FailureEntry[],
  signal: AbortSignal,
): Promise<string[]> {
  const sorted = [...failures].sort((a, b) => a.item - b.item);
  let roots: string[] = [];
  for (let at = 0; at < sorted.length; at += FAILURES_PER_PART) {
    const slice = sorted.slice(at, at + FAILURES_PER_PART);
    roots = await appendFailures(docs, { runId, epoch: DURABLE_EPOCH, roots, failures: slice }, signal);
  }
  return roots;
}

/** A run that cannot go on: failed, with a manifest that lists no outcomes (the durable engine never got any). */
async function abort(deps: DurableActivityDeps, record: RunRecord, reason: string): Promise<RunResult> {
  await writeFailuresManifest(
    deps.docs,
    {
      runId: record.runId,
      state: 'failed',
      failedCount: 0,
      failureParts: [],
      missing: [],
      missingCount: record.counters.planned,
    },
    signalOf(deps),
  );
  const ended = await end(deps, record.runId, 'failed', { manifestKey: runKeys.manifest(record.runId), endReason: reason });
  deps.log?.('warn', `run ${record.runId} failed: ${reason}`);
  return runResultOf(ended);
}

/** Moves the record to its terminal state with `fields`; a record that ended meanwhile is kept as it is. */
async function end(
  deps: DurableActivityDeps,
  runId: string,
  state: TerminalRunState,
  fields: Partial<
    Pick<RunRecord, 'counters' | 'acc' | 'outputKey' | 'manifestKey' | 'finalizeError' | 'endReason' | 'firstItemAt'>
  >,
): Promise<RunRecord> {
  // `update` may call the change more than once; the last call says whether this write ended it.
  let ended = false;
  const written = await runRecords(deps.docs).update(
    runKeys.record(runId),
    DURABLE_EPOCH,
    (current) => {
      ended = !!current && !isTerminal(current.state);
      if (!current || !ended) return undefined;
      return {
        ...transition(current, state, nowOf(deps), fields.endReason ?? undefined),
        ...fields,
        endReason: fields.endReason ?? current.endReason,
      };
    },
    { abortSignal: signalOf(deps) },
  );
  if (!written) throw new Error(`run ${runId} disappeared while ending`);
  // A repeat of the activity finds the run ended and reports nothing.
  if (ended && written.value.firstItemAt !== null) deps.telemetry?.firstItemCounted(written.value);
  if (ended) deps.telemetry?.runEnded(written.value);
  return written.value;
}
