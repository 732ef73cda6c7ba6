import type { JobEvent } from '../src/hub/job-state';
import type { RunRecord } from '../src/hub/run-record';
import { jitterMs } from '../src/schedule/jitter';
import { Schedule } from '../src/schedule/schedule';
import { TimeZone } from '../src/schedule/time-zone';
import type { Violation } from './invariants';

/**
 * The soak's account of every occurrence its test jobs had due while the faults ran. Each job's
 * occurrences are its schedule's in its own zone (`timeZone`, by the zone's rules on the days
 * the clocks change), and each is due at its instant plus its jitter (`jitterSeconds`, the same
 * `jitterMs` the library draws). Each one either has exactly one run, started no earlier than it
 * was due and no later than the SIGKILL bound after it, or after the end of a fault under way
 * when it came due, plus that bound; or the job state records it as skipped (an overlap: the
 * job's previous run was still open, as its design allows) or as missed while a fault was under
 * way (no leader could start it in time, and a later occurrence superseded it). Anything else,
 * late, early, lost or run twice, is a violation, and so is a scheduled run of an instant the
 * schedule does not name in the job's zone.
 */
export interface AccountedJob {
  name: string;
  schedule: string;
  /** The IANA zone whose wall clock the schedule reads; UTC when unset. */
  timeZone?: string | undefined;
  /** Each occurrence is due up to this much past its instant (`jitterMs`); none when unset. */
  jitterSeconds?: number | undefined;
}

export interface OccurrenceAccountInput {
  jobs: readonly AccountedJob[];
  /** Occurrences due (their instant plus their jitter) in [from, to] (ms since the epoch) are accounted for. */
  from: number;
  to: number;
  /** Every fault injected, from when it began to when it was over (ms since the epoch). */
  faults: ReadonlyArray<{ kind: string; from: number; to: number }>;
  /** The SIGKILL bound: how late a run may start after it was due, or after a fault's end (lease + 2 s, times the slowdown). */
  boundMs: number;
  /** Every run record of the hub. */
  runs: readonly RunRecord[];
  /** Each job's recent events (its job state), newest last. */
  recent: ReadonlyMap<string, readonly JobEvent[]>;
}

export interface OccurrenceTally {
  due: number;
  onTime: number;
  /** Started past the bound, but within it after the end of a fault under way when it came due. */
  lateButExplained: number;
  skipped: number;
  missed: number;
  /** Older than the job state's recent events, and not run: what became of it is not recorded anywhere to check. */
  unchecked: number;
}

export interface OccurrenceAccount extends OccurrenceTally {
  /** The same, job by job, with the zone and jitter each job's occurrences were read with. */
  jobs: Record<string, OccurrenceTally & { timeZone: string; jitterSeconds: number }>;
  violations: Violation[];
}

/** The job's schedule, read in its zone as the library reads it. */
export function scheduleOfJob(job: AccountedJob): Schedule {
  return Schedule.parse(job.schedule, `${job.name}.schedule`, TimeZone.of(job.timeZone ?? 'UTC', `${job.name}.timeZone`));
}

/** When an occurrence of the job is due to start (ms since the epoch): its instant plus its jitter. */
export function dueAtOf(job: AccountedJob, occurrence: Date): number {
  return occurrence.getTime() + jitterMs(job.name, occurrence, job.jitterSeconds ?? 0);
}

/** The job's occurrences due (instant plus jitter) in [from, to], ascending. */
export function occurrencesDue(job: AccountedJob, from: number, to: number): Array<{ occurrence: Date; dueAt: number }> {
  const schedule = scheduleOfJob(job);
  const out: Array<{ occurrence: Date; dueAt: number }> = [];
  // An occurrence is due at most its jitter after its instant, and never before it.
  const earliest = from - (job.jitterSeconds ?? 0) * 1000;
  for (let o = schedule.next(new Date(earliest - 1)); o && o.getTime() <= to; o = schedule.next(o)) {
    const dueAt = dueAtOf(job, o);
    if (dueAt >= from && dueAt <= to) out.push({ occurrence: o, dueAt });
  }
  return out;
}

/**
 * The longest time between two consecutive starts the job's schedule asks for, among the `count`
 * occurrences after `from`: the longest gap between occurrences, plus the most its jitter can
 * move one start later than the one before (its whole jitter). Undefined with fewer than two.
 */
export function longestStartGapMs(job: AccountedJob, from: Date, count = 400): number | undefined {
  const schedule = scheduleOfJob(job);
  let longest: number | undefined;
  let previous = schedule.next(from);
  for (let i = 1; i < count && previous; i++) {
    const next = schedule.next(previous);
    if (!next) break;
    longest = Math.max(longest ?? 0, next.getTime() - previous.getTime());
    previous = next;
  }
  return longest === undefined ? undefined : longest + (job.jitterSeconds ?? 0) * 1000;
}

const emptyTally = (): OccurrenceTally => ({ due: 0, onTime: 0, lateButExplained: 0, skipped: 0, missed: 0, unchecked: 0 });

export function accountForOccurrences(input: OccurrenceAccountInput): OccurrenceAccount {
  const account: OccurrenceAccount = { ...emptyTally(), jobs: {}, violations: [] };
  const byId = new Map(input.runs.map((r) => [r.runId, r]));
  /**
   * The latest end of a fault that can explain what became of an occurrence due at `due`: one that
   * began before `before` (the run's creation, or the bound after `due` for one that never ran) and
   * was not over more than the bound before `due`. Undefined if none.
   */
  const faultEndAround = (due: number, before: number): number | undefined => {
    let end: number | undefined;
    for (const f of input.faults) if (f.from <= before && f.to + input.boundMs >= due) end = Math.max(end ?? f.to, f.to);
    return end;
  };
  const iso = (ms: number) => new Date(ms).toISOString();
  for (const job of input.jobs) {
    const schedule = scheduleOfJob(job);
    const jitterSeconds = job.jitterSeconds ?? 0;
    const tally = emptyTally();
    const recent = input.recent.get(job.name) ?? [];
    const oldestRecorded = recent.length > 0 ? Date.parse(recent[0]!.occurrence ?? recent[0]!.at) : Number.POSITIVE_INFINITY;
    // The job's scheduled runs by occurrence, earliest created first.
    const runsOf = new Map<string, RunRecord[]>();
    for (const r of input.runs) {
      if (r.job !== job.name || r.occurrence === null) continue;
      runsOf.set(r.occurrence, [...(runsOf.get(r.occurrence) ?? []), r]);
    }
    for (const list of runsOf.values()) list.sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
    const due = occurrencesDue(job, input.from, input.to);
    for (const { occurrence: at, dueAt } of due) {
      tally.due++;
      const occurrence = at.toISOString();
      const subject = `${job.name} at ${occurrence}${dueAt === at.getTime() ? '' : ` (due ${iso(dueAt)})`}`;
      const violation = (evidence: string) => account.violations.push({ rule: 'occurrences-accounted', subject, evidence });
      const runs = runsOf.get(occurrence) ?? [];
      // Every run the hub holds, or the job state says it started, for this one occurrence.
      const started = new Set([
        ...runs.map((r) => r.runId),
        ...recent.flatMap((e) => (e.outcome === 'started' && e.occurrence === occurrence && e.runId ? [e.runId] : [])),
      ]);
      if (started.size > 1) violation(`${started.size} runs: ${[...started].join(', ')}`);
      const run = runs[0];
      if (run) {
        const recordedDue = Date.parse(run.dueAt ?? occurrence);
        if (recordedDue !== dueAt)
          violation(
            `its run record says it was due at ${iso(recordedDue)}, and its job's jitter (${jitterSeconds} s) puts it at ${iso(dueAt)}`,
          );
        const createdAt = Date.parse(run.createdAt);
        const lag = createdAt - dueAt;
        const faultEnd = faultEndAround(dueAt, createdAt);
        if (lag < 0) violation(`started ${-lag} ms before it was due`);
        else if (lag <= input.boundMs) tally.onTime++;
        else if (faultEnd !== undefined && createdAt <= faultEnd + input.boundMs) tally.lateButExplained++;
        else
          violation(
            `started ${lag} ms after it was due (bound ${input.boundMs} ms), and no fault was under way then to explain it`,
          );
        continue;
      }
      const event = recent.find((e) => e.occurrence === occurrence && (e.outcome === 'skipped' || e.outcome === 'missed'));
      if (event?.outcome === 'skipped') {
        tally.skipped++;
        const evidence = overlapDoubt(event.reason, dueAt, byId);
        if (evidence) violation(evidence);
      } else if (event?.outcome === 'missed') {
        tally.missed++;
        if (faultEndAround(dueAt, dueAt + input.boundMs) === undefined)
          violation('recorded as missed, and no fault was under way when it came due');
      } else if (at.getTime() < oldestRecorded) {
        tally.unchecked++;
      } else {
        violation('no run, and the job state records it neither as skipped nor as missed');
      }
    }
    // A scheduled run of the window whose instant the schedule does not name in the job's zone:
    // read in another zone, or a wall time the clocks passed twice run twice.
    const named = new Set(due.map((d) => d.occurrence.toISOString()));
    const earliest = input.from - jitterSeconds * 1000;
    for (let o = schedule.next(new Date(earliest - 1)); o && o.getTime() <= input.to; o = schedule.next(o))
      named.add(o.toISOString());
    for (const [occurrence, runs] of runsOf) {
      const t = Date.parse(occurrence);
      if (t < input.from || t > input.to || named.has(occurrence)) continue;
      for (const r of runs) {
        account.violations.push({
          rule: 'occurrences-accounted',
          subject: r.runId,
          evidence: `a run of ${occurrence}, which is not an occurrence of ${JSON.stringify(job.schedule)} in ${schedule.timeZone}`,
        });
      }
    }
    account.jobs[job.name] = { ...tally, timeZone: schedule.timeZone, jitterSeconds };
    for (const key of Object.keys(tally) as Array<keyof OccurrenceTally>) account[key] += tally[key];
  }
  return account;
}

/** The overlap skip's reason as the scheduler words it: the runs of the job still active. */
const STILL_ACTIVE = /^runs? (.+) (?:is|are) still active$/;
/** Storage stamps and the leader's clock may differ by this much. */
const CLOCK_SLACK_MS = 1000;

/**
 * Why a skip is not explained by an overlap, or undefined when it is: its reason names runs of
 * the job that had begun before the occurrence was due (with its jitter) and had not ended by then.
 */
function overlapDoubt(reason: string | undefined, due: number, byId: ReadonlyMap<string, RunRecord>): string | undefined {
  const named = STILL_ACTIVE.exec(reason ?? '')?.[1]?.split(', ');
  if (!named) return `skipped for ${JSON.stringify(reason)}, not for an overlap`;
  for (const id of named) {
    const run = byId.get(id);
    if (!run) return `skipped for ${id}, which has no run record`;
    if (Date.parse(run.createdAt) > due + CLOCK_SLACK_MS) return `skipped for ${id}, which began after it was due`;
    if (run.endedAt !== null && Date.parse(run.endedAt) < due - CLOCK_SLACK_MS) {
      return `skipped for ${id}, which had ended at ${run.endedAt}, before it was due`;
    }
  }
  return undefined;
}
