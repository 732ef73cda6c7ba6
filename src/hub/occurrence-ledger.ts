import type { JobDefinition } from '../jobs/job-definition';
import { planOccurrences, Schedule, type OccurrencePlan } from '../schedule/schedule';
import { TimeZone } from '../schedule/time-zone';
import { jitterMs } from '../schedule/jitter';
import { newJobState, withEvents, type JobEvent, type JobScheduleRecord, type JobState } from './job-state';

/**
 * The occurrence ledger: how a job's schedule is checked and how each check is recorded in its
 * job state (`jobs/<job>.json`). Both engines keep the ledger through these two functions, so a
 * job's state reads the same whichever engine ran it; they differ only in how a run is started
 * and when it has ended.
 */

const schedules = new Map<string, Schedule>();

/** The job's parsed schedule, parsed once per expression and zone for the life of the process. */
export function scheduleOf(job: JobDefinition): Schedule {
  // A definition made by hand (a test's) may name no zone: UTC, as defineJob's default.
  const timeZone = job.timeZone ?? 'UTC';
  const key = `${timeZone}\n${job.schedule}`;
  let schedule = schedules.get(key);
  if (!schedule) {
    schedule = Schedule.parse(job.schedule, `${job.name}.schedule`, TimeZone.of(timeZone, `${job.name}.timeZone`));
    schedules.set(key, schedule);
  }
  return schedule;
}

/** When an occurrence of the job is due to start: the occurrence, plus its jitter if the job has one. */
export function dueAtOf(job: JobDefinition, occurrence: Date): Date {
  const jitter = job.jitterSeconds ?? 0;
  return jitter > 0 ? new Date(occurrence.getTime() + jitterMs(job.name, occurrence, jitter)) : occurrence;
}

/** The event a scheduled start records: with jitter, when the occurrence was due, its lag counted from then. */
export function startedEvent(job: JobDefinition, occurrence: Date, runId: string, at: string): JobEvent {
  const dueAt = dueAtOf(job, occurrence);
  return {
    at,
    occurrence: occurrence.toISOString(),
    outcome: 'started',
    runId,
    ...(dueAt.getTime() !== occurrence.getTime() ? { dueAt: dueAt.toISOString() } : {}),
  };
}

/**
 * The next instant after `now` at which an occurrence of the job is due to start: one already
 * past whose jitter is still running, or the next one's start. Undefined when none is left.
 */
export function nextDueAt(job: JobDefinition, now: Date): number | undefined {
  const schedule = scheduleOf(job);
  const jitter = (job.jitterSeconds ?? 0) * 1000;
  if (jitter > 0) {
    const waiting = schedule
      .occurrencesBetween(new Date(now.getTime() - jitter), now, 2)
      .occurrences.map((o) => dueAtOf(job, o).getTime())
      .find((at) => at > now.getTime());
    if (waiting !== undefined) return waiting;
  }
  const next = schedule.next(now);
  return next ? dueAtOf(job, next).getTime() : undefined;
}

/**
 * When the first occurrence the job's state has not yet checked is due to start: the one after
 * its `lastChecked`, plus its jitter. Nothing past a check is missed by asking from the check
 * itself, however long ago it ran; undefined when the schedule has no occurrence left.
 */
export function dueAfterCheck(job: JobDefinition, lastChecked: Date): number | undefined {
  const next = scheduleOf(job).next(lastChecked);
  return next ? dueAtOf(job, next).getTime() : undefined;
}

/**
 * The occurrences due since the state's last check, and an event for each one listed as not run:
 * `missed`, or `skipped` for a wall time the clocks skipped when the job says `dstGap: 'skip'`.
 */
export function checkSchedule(job: JobDefinition, state: JobState, now: Date): { plan: OccurrencePlan; notRun: JobEvent[] } {
  const jitter = job.jitterSeconds ?? 0;
  const schedule = scheduleOf(job);
  const plan = planOccurrences({
    schedule,
    lastChecked: state.lastChecked ? new Date(state.lastChecked) : undefined,
    now,
    startingDeadlineSeconds: job.startingDeadlineSeconds,
    catchUp: job.catchUp,
    ...(jitter > 0 ? { jitter: { startOf: (o: Date) => dueAtOf(job, o).getTime(), maxMs: jitter * 1000 } } : {}),
    ...(job.dstGap === 'skip' ? { skip: (o: Date) => schedule.inGap(o) } : {}),
  });
  const at = now.toISOString();
  const skipped: JobEvent[] = plan.skipped.map((o) => ({
    at,
    occurrence: o.toISOString(),
    outcome: 'skipped',
    reason: `dstGap: the clocks in ${schedule.timeZone} skipped the wall time this occurrence stands for`,
  }));
  const missed: JobEvent[] = plan.missed.map((o) => ({
    at,
    occurrence: o.toISOString(),
    outcome: 'missed',
    reason: `not started within ${job.startingDeadlineSeconds} s, or superseded by a later occurrence`,
  }));
  // In order of occurrence, as the job state lists its events.
  const notRun = [...skipped, ...missed].sort((a, b) => (a.occurrence as string).localeCompare(b.occurrence as string));
  return { plan, notRun };
}

/** What one check of a job's schedule did, to be recorded in its job state. */
export interface ScheduleCheck {
  /** The job state the check was planned from. */
  readFrom: JobState;
  /** Where the schedule is now checked up to; `null` leaves the window unchecked (to be decided again). */
  checkedUntil: string | null;
  /** Starts, skips, misses and cancels, newest last. */
  events: readonly JobEvent[];
  /** Occurrences missed in the window, listed in `events` or not (the list may be truncated). */
  missedCount: number;
  /** Runs that have ended and leave `active`. */
  leaves: (runId: string) => boolean;
  /** Runs that are, or stay, `active`: the ones started, and the ones still to be watched. */
  watch: Iterable<string>;
  /** The schedule the check read. */
  schedule: JobScheduleRecord;
}

/** The job's schedule as its state records it. */
export function scheduleRecordOf(job: JobDefinition): JobScheduleRecord {
  return { expression: job.schedule, timeZone: job.timeZone ?? 'UTC', jitterSeconds: job.jitterSeconds ?? 0 };
}

/** Whether the state already records the job's schedule as it is now (a check that changes nothing else need not write). */
export function recordsSchedule(state: JobState, job: JobDefinition): boolean {
  const now = scheduleRecordOf(job);
  const was = state.schedule;
  return (
    was !== undefined &&
    was.expression === now.expression &&
    was.timeZone === now.timeZone &&
    was.jitterSeconds === now.jitterSeconds
  );
}

/**
 * Records a check in the job state as stored now (`latest`), which another leader (a racing or
 * stale one) may have changed since the check read it. What the other leader decided stands:
 * skips and misses at or before where it checked up to are its to record, and a start or cancel
 * it already recorded is not recorded again (by run id, among the recent events). The window
 * never moves back, and totals count the events recorded.
 */
/** What one write of a job's state recorded: how many occurrences it counted, and the skips and misses it listed. */
export interface RecordedOccurrences {
  started: number;
  skipped: number;
  missed: number;
  /** The skipped and missed occurrences the write listed (a long outage's misses may be counted, not listed). */
  events: JobEvent[];
}

/**
 * Compares a job's state before and after one write (`after` made from `before` by `recordCheck`
 * with `check`). The skips and misses are the check's own, not what the state's recent list kept:
 * the list holds the last 50, and an outage's misses can be more.
 */
export function recordedOccurrences(before: JobState | undefined, after: JobState, check: ScheduleCheck): RecordedOccurrences {
  const was = before?.totals ?? { started: 0, skipped: 0, missed: 0 };
  return {
    started: after.totals.started - was.started,
    skipped: after.totals.skipped - was.skipped,
    missed: after.totals.missed - was.missed,
    events: freshEvents(before ?? newJobState(after.job), check).filter((e) => e.outcome === 'skipped' || e.outcome === 'missed'),
  };
}

/** The check's events that `base` does not have yet, as `recordCheck` records them. */
function freshEvents(base: JobState, check: ScheduleCheck): JobEvent[] {
  const raced = base.lastChecked !== check.readFrom.lastChecked;
  const theirs = raced ? base.lastChecked : null;
  const known = new Set(base.recent.filter((e) => e.runId).map((e) => `${e.outcome}:${e.runId}`));
  return check.events.filter((e) =>
    // A start or a cancel names a run that exists whoever decided it: recorded once. A skip or a
    // miss at or before where the other leader checked up to is its decision, not this one's.
    e.runId !== undefined
      ? !known.has(`${e.outcome}:${e.runId}`)
      : !(theirs !== null && e.occurrence !== null && e.occurrence <= theirs),
  );
}

export function recordCheck(latest: JobState | undefined, job: string, check: ScheduleCheck): JobState {
  const base = latest ?? newJobState(job);
  const raced = base.lastChecked !== check.readFrom.lastChecked;
  const fresh = freshEvents(base, check);
  const count = (outcome: JobEvent['outcome']) => fresh.filter((e) => e.outcome === outcome).length;
  const { checkedUntil } = check;
  return withEvents(
    {
      ...base,
      lastChecked:
        base.lastChecked && (checkedUntil === null || base.lastChecked > checkedUntil) ? base.lastChecked : checkedUntil,
      active: [...new Set([...base.active.filter((id) => !check.leaves(id)), ...check.watch])],
      schedule: { ...check.schedule },
      totals: {
        started: base.totals.started + count('started'),
        skipped: base.totals.skipped + count('skipped'),
        // Unlisted misses count too, unless another leader checked part of the window.
        missed: base.totals.missed + (raced ? count('missed') : check.missedCount),
      },
    },
    fresh,
  );
}
