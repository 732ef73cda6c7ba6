import type { JobEvent } from '../src/hub/job-state';
import { startLagMs, type RunRecord } from '../src/hub/run-record';
import { Schedule } from '../src/schedule/schedule';
import type { Violation } from './invariants';

/**
 * The soak's account of every occurrence its test jobs had due while the faults ran: each one
 * either started (a run record) no later than the SIGKILL bound after it was due, or after the
 * end of a fault under way when it came due, plus that bound; or the job state records it as
 * skipped (an overlap: the job's previous run was still open, as its design allows) or as missed
 * while a fault was under way (no leader could start it in time, and a later occurrence
 * superseded it). Anything else, late or lost, is a violation.
 */
export interface OccurrenceAccountInput {
  jobs: ReadonlyArray<{ name: string; schedule: string }>;
  /** Occurrences due in [from, to] (ms since the epoch) are accounted for. */
  from: number;
  to: number;
  /** Every fault injected, from when it began to when it was over (ms since the epoch). */
  faults: ReadonlyArray<{ kind: string; from: number; to: number }>;
  /** The SIGKILL bound: how late a run may start after its occurrence, or after a fault's end (lease + 2 s, times the slowdown). */
  boundMs: number;
  /** Every run record of the hub. */
  runs: readonly RunRecord[];
  /** Each job's recent events (its job state), newest last. */
  recent: ReadonlyMap<string, readonly JobEvent[]>;
}

export interface OccurrenceAccount {
  due: number;
  onTime: number;
  /** Started past the bound, but within it after the end of a fault under way when it came due. */
  lateButExplained: number;
  skipped: number;
  missed: number;
  /** Older than the job state's recent events, and not run: what became of it is not recorded anywhere to check. */
  unchecked: number;
  violations: Violation[];
}

export function accountForOccurrences(input: OccurrenceAccountInput): OccurrenceAccount {
  const account: OccurrenceAccount = {
    due: 0,
    onTime: 0,
    lateButExplained: 0,
    skipped: 0,
    missed: 0,
    unchecked: 0,
    violations: [],
  };
  const runs = new Map(input.runs.filter((r) => r.occurrence !== null).map((r) => [`${r.job}|${r.occurrence}`, r]));
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
  for (const job of input.jobs) {
    const schedule = Schedule.parse(job.schedule, `${job.name}.schedule`);
    const recent = input.recent.get(job.name) ?? [];
    const oldestRecorded = recent.length > 0 ? Date.parse(recent[0]!.occurrence ?? recent[0]!.at) : Number.POSITIVE_INFINITY;
    for (let due = schedule.next(new Date(input.from - 1)); due && due.getTime() <= input.to; due = schedule.next(due)) {
      account.due++;
      const occurrence = due.toISOString();
      const subject = `${job.name} at ${occurrence}`;
      const run = runs.get(`${job.name}|${occurrence}`);
      if (run) {
        const lag = startLagMs(run) ?? 0;
        const createdAt = Date.parse(run.createdAt);
        const faultEnd = faultEndAround(due.getTime(), createdAt);
        if (lag <= input.boundMs) account.onTime++;
        else if (faultEnd !== undefined && createdAt <= faultEnd + input.boundMs) account.lateButExplained++;
        else
          account.violations.push({
            rule: 'occurrences-accounted',
            subject,
            evidence: `started ${lag} ms after it was due (bound ${input.boundMs} ms), and no fault was under way then to explain it`,
          });
        continue;
      }
      const event = recent.find((e) => e.occurrence === occurrence && (e.outcome === 'skipped' || e.outcome === 'missed'));
      if (event?.outcome === 'skipped') {
        account.skipped++;
        const evidence = overlapDoubt(event.reason, due.getTime(), byId);
        if (evidence) account.violations.push({ rule: 'occurrences-accounted', subject, evidence });
      } else if (event?.outcome === 'missed') {
        account.missed++;
        if (faultEndAround(due.getTime(), due.getTime() + input.boundMs) === undefined)
          account.violations.push({
            rule: 'occurrences-accounted',
            subject,
            evidence: 'recorded as missed, and no fault was under way when it came due',
          });
      } else if (due.getTime() < oldestRecorded) {
        account.unchecked++;
      } else {
        account.violations.push({
          rule: 'occurrences-accounted',
          subject,
          evidence: 'no run, and the job state records it neither as skipped nor as missed',
        });
      }
    }
  }
  return account;
}

/** The overlap skip's reason as the scheduler words it: the runs of the job still active. */
const STILL_ACTIVE = /^runs? (.+) (?:is|are) still active$/;
/** Storage stamps and the leader's clock may differ by this much. */
const CLOCK_SLACK_MS = 1000;

/**
 * Why a skip is not explained by an overlap, or undefined when it is: its reason names runs of
 * the job that had begun before the occurrence was due and had not ended by then.
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
