import { randomUUID } from 'node:crypto';
import { FencedDocuments } from '../fencing/fenced-documents';
import type { JobDefinition } from '../jobs/job-definition';
import { manualRunId, newRunRecord, scheduledRunId } from '../runs/run-record';
import { decideOverlap, planOccurrences, Schedule } from '../schedule/schedule';
import type { EngineContext, TermContext } from './engine-context';
import { jobStateKey, jobStateSchema, newJobState, withEvents, type JobEvent, type JobState } from './job-state';
import type { RunBook } from './run-book';

const schedules = new Map<string, Schedule>();
function scheduleOf(job: JobDefinition): Schedule {
  let schedule = schedules.get(job.schedule);
  if (!schedule) schedules.set(job.schedule, (schedule = Schedule.parse(job.schedule, `${job.name}.schedule`)));
  return schedule;
}

export function jobStates(ctx: EngineContext): FencedDocuments<JobState> {
  return new FencedDocuments(ctx.docs, { parse: (v) => jobStateSchema.parse(v) });
}

/**
 * Starts the job's due occurrences. The run is created before the job state records it, with
 * `If-None-Match: *` on an id made of job and occurrence: if a leader dies in between, the
 * next one finds the run already there and adopts it, and no occurrence ever gets two runs.
 */
export async function reconcileJob(ctx: EngineContext, term: TermContext, book: RunBook, job: JobDefinition): Promise<string[]> {
  const states = jobStates(ctx);
  const key = jobStateKey(job.name);
  const current = (await states.read(key, { abortSignal: term.signal }))?.value ?? newJobState(job.name);
  const now = ctx.clock.date();
  const plan = planOccurrences({
    schedule: scheduleOf(job),
    lastChecked: current.lastChecked ? new Date(current.lastChecked) : undefined,
    now,
    startingDeadlineSeconds: job.startingDeadlineSeconds,
    catchUp: job.catchUp,
  });
  const events: JobEvent[] = plan.missed.map((o) => ({
    at: now.toISOString(),
    occurrence: o.toISOString(),
    outcome: 'missed',
    reason: `not started within ${job.startingDeadlineSeconds} s, or superseded by a later occurrence`,
  }));
  let active = await openRuns(book, current.active);
  const cancelledNow = new Set<string>();
  const started: string[] = [];
  let skipped = 0;
  for (const occurrence of plan.run) {
    const decision = decideOverlap(job.overlap, active);
    if (!decision.start) {
      skipped++;
      events.push({
        at: now.toISOString(),
        occurrence: occurrence.toISOString(),
        outcome: 'skipped',
        reason: decision.skippedBecause ?? 'overlap',
      });
      continue;
    }
    for (const runId of decision.cancel) {
      cancelledNow.add(runId);
      await cancelRun(ctx, book, runId, `replaced by the occurrence at ${occurrence.toISOString()}`);
      events.push({ at: now.toISOString(), occurrence: null, outcome: 'cancelled', runId, reason: 'overlap: replace' });
    }
    active = active.filter((id) => !decision.cancel.includes(id));
    const runId = scheduledRunId(job.name, occurrence);
    const record = newRunRecord({
      runId,
      job: job.name,
      trigger: 'schedule',
      occurrence,
      now,
      timeoutSeconds: job.timeoutSeconds,
    });
    const created = await book.create(job, record);
    if (created) ctx.log.info(`run ${runId} created (epoch ${term.epoch})`);
    active.push(runId);
    started.push(runId);
    events.push({ at: now.toISOString(), occurrence: occurrence.toISOString(), outcome: 'started', runId });
  }
  const checkedUntil = plan.checkedUntil.toISOString();
  await states.update(
    key,
    term.epoch,
    (latest) => {
      const base = latest ?? newJobState(job.name);
      // Another coordinator (a racing or stale one) reconciled this window meanwhile: keep only
      // what it cannot have recorded, the runs it does not know about, and never move back.
      const raced = base.lastChecked !== current.lastChecked;
      const known = new Set([...base.active.map((id) => `started:${id}`), ...base.recent.map((e) => `${e.outcome}:${e.runId}`)]);
      const fresh = events.filter((e) =>
        e.outcome === 'started' || e.outcome === 'cancelled' ? !known.has(`${e.outcome}:${e.runId}`) : !raced,
      );
      const freshStarts = fresh.filter((e) => e.outcome === 'started').length;
      return withEvents(
        {
          ...base,
          lastChecked: base.lastChecked && base.lastChecked > checkedUntil ? base.lastChecked : checkedUntil,
          active: [...new Set([...active, ...base.active.filter((id) => book.active.has(id))])].filter(
            (id) => !cancelledNow.has(id),
          ),
          totals: {
            started: base.totals.started + freshStarts,
            skipped: base.totals.skipped + (raced ? 0 : skipped),
            missed: base.totals.missed + (raced ? 0 : plan.missedCount),
          },
        },
        fresh,
      );
    },
    { abortSignal: term.signal },
  );
  return started;
}

/** A manual run: its own id, started whatever the overlap policy says. */
export async function startManualRun(
  ctx: EngineContext,
  term: TermContext,
  book: RunBook,
  job: JobDefinition,
  requestId: string,
): Promise<string> {
  const runId = manualRunId(job.name, requestId || randomUUID());
  const record = newRunRecord({
    runId,
    job: job.name,
    trigger: 'manual',
    occurrence: undefined,
    now: ctx.clock.date(),
    timeoutSeconds: job.timeoutSeconds,
  });
  await book.create(job, record);
  await jobStates(ctx).update(
    jobStateKey(job.name),
    term.epoch,
    (latest) => {
      const base = latest ?? newJobState(job.name);
      if (base.active.includes(runId)) return undefined;
      return withEvents(
        { ...base, active: [...base.active, runId], totals: { ...base.totals, started: base.totals.started + 1 } },
        [{ at: ctx.clock.date().toISOString(), occurrence: null, outcome: 'started', runId, reason: 'manual' }],
      );
    },
    { abortSignal: term.signal },
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

async function openRuns(book: RunBook, ids: readonly string[]): Promise<string[]> {
  const open: string[] = [];
  for (const id of ids) {
    const run = await book.get(id);
    if (run && !('terminal' in run)) open.push(id);
  }
  return open;
}

/** Marks a run for cancellation; the run's next step ends it. */
export async function cancelRun(ctx: EngineContext, book: RunBook, runId: string, reason: string): Promise<boolean> {
  const run = await book.get(runId);
  if (!run || 'terminal' in run) return false;
  await book.save(run, { ...run.doc.value, cancelRequested: true, endReason: reason, updatedAt: ctx.clock.date().toISOString() });
  return true;
}
