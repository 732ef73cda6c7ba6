import { randomUUID } from 'node:crypto';
import { FencedDocuments } from '../fencing/fenced-documents';
import type { JobDefinition } from '../jobs/job-definition';
import { manualRunId, newRunRecord, scheduledRunId } from '../hub/run-record';
import { decideOverlap } from '../schedule/schedule';
import type { EngineContext, TermContext } from './engine-context';
import { jobStateKey, jobStateSchema, newJobState, withEvents, type JobEvent, type JobState } from '../hub/job-state';
import {
  checkSchedule,
  dueAtOf,
  recordCheck,
  recordedOccurrences,
  recordsSchedule,
  scheduleRecordOf,
  startedEvent,
  type ScheduleCheck,
} from '../hub/occurrence-ledger';
import type { RunBook } from './run-book';

export function jobStates(ctx: EngineContext): FencedDocuments<JobState> {
  return new FencedDocuments(ctx.docs, { parse: (v) => jobStateSchema.parse(v) });
}

/**
 * Starts the job's due occurrences. The job state records a run as active *before* the run
 * is created, and the run is created with `If-None-Match: *` on an id made of job and
 * occurrence. A leader that dies in between leaves an active id without a record, which the
 * next leader creates; so no run is ever lost to the job's view, and no occurrence gets two.
 */
export async function reconcileJob(ctx: EngineContext, term: TermContext, book: RunBook, job: JobDefinition): Promise<string[]> {
  const states = jobStates(ctx);
  const key = jobStateKey(job.name);
  let current = book.jobStates.get(job.name);
  if (!current) {
    const read = await states.read(key, { abortSignal: term.signal });
    current = read?.value ?? newJobState(job.name);
    book.keepJobState(job.name, current, read?.etag);
  }
  const now = ctx.clock.date();
  const { plan, notRun } = checkSchedule(job, current, now);
  const at = now.toISOString();
  const events: JobEvent[] = [...notRun];
  const active = await adoptOpenRuns(ctx, book, job, current.active);
  const ended = new Set(current.active.filter((id) => !active.includes(id)));
  const starting: Array<{ runId: string; occurrence: Date }> = [];
  for (const occurrence of plan.run) {
    // Runs asked to cancel still count as active until they have ended.
    const decision = decideOverlap(job.overlap, [...active, ...starting.map((s) => s.runId)]);
    if (!decision.start) {
      events.push({ at, occurrence: occurrence.toISOString(), outcome: 'skipped', reason: decision.skippedBecause ?? 'overlap' });
      continue;
    }
    for (const runId of decision.cancel) {
      if (await cancelRun(ctx, book, runId, `replaced by the occurrence at ${occurrence.toISOString()}`)) {
        events.push({ at, occurrence: null, outcome: 'cancelled', runId, reason: 'overlap: replace' });
      }
    }
    const runId = scheduledRunId(job.name, occurrence);
    starting.push({ runId, occurrence });
    events.push(startedEvent(job, occurrence, runId, at));
  }
  const checkedUntil = plan.checkedUntil.toISOString();
  // Nothing happened and the job has been checked before: leave the state as it is (the next
  // check covers the longer window just the same) and save a write on every idle turn.
  const nothingNew =
    events.length === 0 &&
    starting.length === 0 &&
    ended.size === 0 &&
    current.lastChecked !== null &&
    recordsSchedule(current, job);
  if (nothingNew) return [];
  book.dropJobState(job.name);
  let before: JobState | undefined;
  const check: ScheduleCheck = {
    readFrom: current,
    checkedUntil,
    events,
    missedCount: plan.missedCount,
    leaves: (id) => ended.has(id),
    watch: starting.map((s) => s.runId),
    schedule: scheduleRecordOf(job),
  };
  const written = await states.update(
    key,
    term.epoch,
    (latest) => {
      before = latest;
      return recordCheck(latest, job.name, check);
    },
    { abortSignal: term.signal },
  );
  if (written) {
    book.keepJobState(job.name, written.value, written.etag);
    // The last call of the change is the one whose write landed.
    ctx.telemetry?.occurrencesRecorded(job.name, recordedOccurrences(before, written.value, check));
  }
  for (const { runId, occurrence } of starting) {
    const record = newRunRecord({
      runId,
      job: job.name,
      trigger: 'schedule',
      occurrence,
      dueAt: dueAtOf(job, occurrence),
      now,
      timeoutSeconds: job.timeoutSeconds,
    });
    if (await book.create(job, record)) ctx.log.info(`run ${runId} created (epoch ${term.epoch})`);
  }
  return starting.map((s) => s.runId);
}

/**
 * A manual run: its own id, started whatever the overlap policy says. A run with that id that
 * exists already (a keyed request asked again, or the same request applied twice) is left as it
 * is: nothing is started or counted again.
 */
export async function startManualRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  job: JobDefinition,
  requestId: string,
): Promise<string> {
  const runId = manualRunId(job.name, requestId || randomUUID());
  if (await book.get(runId)) return runId;
  const now = ctx.clock.date();
  book.dropJobState(job.name);
  await jobStates(ctx).update(
    jobStateKey(job.name),
    term.epoch,
    (latest) => {
      const base = latest ?? newJobState(job.name);
      if (base.active.includes(runId)) return undefined;
      return withEvents(
        { ...base, active: [...base.active, runId], totals: { ...base.totals, started: base.totals.started + 1 } },
        [{ at: now.toISOString(), occurrence: null, outcome: 'started', runId, reason: 'manual' }],
      );
    },
    { abortSignal: term.signal },
  );
  await book.create(
    job,
    newRunRecord({ runId, job: job.name, trigger: 'manual', occurrence: undefined, now, timeoutSeconds: job.timeoutSeconds }),
  );
  return runId;
}

/** Drops ended runs from the job's active list. */
export async function forgetRun(ctx: EngineContext, term: TermContext, job: string, runId: string): Promise<void> {
  await jobStates(ctx).update(
    jobStateKey(job),
    term.epoch,
    (latest) =>
      latest && latest.active.includes(runId) ? { ...latest, active: latest.active.filter((id) => id !== runId) } : undefined,
    { abortSignal: term.signal },
  );
}

/**
 * The job's runs that are still open, loaded into the book. An active id whose record is
 * missing was recorded by a leader that died before creating it: create it now.
 */
export async function adoptOpenRuns(
  ctx: EngineContext,
  book: RunBook,
  job: JobDefinition,
  ids: readonly string[],
): Promise<string[]> {
  const open: string[] = [];
  for (const id of ids) {
    const run = await book.get(id);
    if (run === undefined) {
      const occurrence = occurrenceOf(job.name, id);
      const record = newRunRecord({
        runId: id,
        job: job.name,
        trigger: occurrence ? 'schedule' : 'manual',
        occurrence,
        ...(occurrence ? { dueAt: dueAtOf(job, occurrence) } : {}),
        now: ctx.clock.date(),
        timeoutSeconds: job.timeoutSeconds,
      });
      await book.create(job, record);
      ctx.log.warn(`run ${id} was recorded but never created; created it now`);
      open.push(id);
    } else if (!('terminal' in run)) open.push(id);
  }
  return open;
}

/** The scheduled occurrence in a run id, or undefined for a manual run. */
function occurrenceOf(job: string, runId: string): Date | undefined {
  const rest = runId.slice(job.length + 1);
  const date = new Date(rest);
  return runId.startsWith(`${job}/`) && !Number.isNaN(date.getTime()) && date.toISOString() === rest ? date : undefined;
}

/** Marks a run for cancellation; the run's next step ends it. */
export async function cancelRun(ctx: EngineContext, book: RunBook, runId: string, reason: string): Promise<boolean> {
  const run = await book.get(runId);
  if (!run || 'terminal' in run || 'unregistered' in run) return false;
  const record = run.doc.value;
  if (record.cancelRequested || record.state === 'finalizing' || record.ending) return false;
  await book.save(run, { ...record, cancelRequested: true, endReason: reason, updatedAt: ctx.clock.date().toISOString() });
  return true;
}
