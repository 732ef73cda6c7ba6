import type { FailureEntry } from './fold';
import type { JobScheduleRecord, JobState } from './job-state';
import { jitterMs } from '../schedule/jitter';
import { Schedule } from '../schedule/schedule';
import { TimeZone } from '../schedule/time-zone';
import type { HubStatus, RunDetails } from './status';
import { firstItemLagMs, isTerminal, startLagMs, type RunRecord } from './run-record';

/**
 * The read model: what `baton … --json` prints and the HTTP API returns, one shape for both.
 * Stable, plain data. Run records are trimmed of engine internals (the aggregate checkpoint, the
 * dedupe bitset, plan layout), which are large and not for reading.
 */

export interface RunView {
  runId: string;
  job: string;
  trigger: RunRecord['trigger'];
  occurrence: string | null;
  state: RunRecord['state'];
  /** Items with an outcome (succeeded + failed) out of `counters.planned`. */
  done: number;
  counters: RunRecord['counters'];
  createdAt: string;
  updatedAt: string;
  deadlineAt: string;
  endedAt: string | null;
  endReason: string | null;
  cancelRequested: boolean;
  /** A scheduled run's start lag: from its occurrence to its creation (storage time); null for a manual run. */
  startLagMs: number | null;
  /** When the leader first counted one of its items, and how long after the occurrence (or creation). */
  firstItemAt: string | null;
  firstItemLagMs: number | null;
  /** Open runs: the oldest work messages sent and not counted at the last checkpoint, with their age. */
  outstanding: OutstandingView[];
}

/** A work message sent and not counted yet: items `first` to `first + count - 1`. */
export interface OutstandingView {
  message: number;
  first: number;
  count: number;
  /** When it first went out (storage time). */
  since: string;
  ageMs: number | null;
}

/** One scheduled occurrence of a job as its state recorded it: started (with its lag), skipped or missed. */
export interface OccurrenceView {
  occurrence: string;
  outcome: 'started' | 'skipped' | 'missed';
  /** Started: from the occurrence to when the leader started it (storage time). */
  startLagMs: number | null;
  runId: string | null;
  reason: string | null;
}

/** Occurrences a job view lists, newest first. */
export const OCCURRENCES_SHOWN = 20;

export interface LeaderView {
  identity: string | null;
  epoch: number;
  acquiredAt: string | null;
  ledForMs: number | null;
  /** When this holder took over from another (its terms in a row count as one stretch). */
  since: string | null;
  /** The holder's app version (`BATON_APP_VERSION`) and priority, when it recorded them. */
  version: string | null;
  priority: number | null;
}

/** One change of holder: `reason` is how the new holder found the lease (released, expired, broken). */
export interface LeadershipChangeView {
  at: string;
  epoch: number;
  holder: string;
  previous: string | null;
  reason: string;
  /** The reason as people read it, naming the previous holder: what the CLI and the page print. */
  why: string;
}

const WHY: Record<string, string> = {
  first: 'first leader',
  released: 'previous leader released the lease',
  expired: 'previous lease expired (crash or pause)',
  // Mostly a successor's crash takeover; an operator's break reads the same.
  broken: 'previous lease broken (its beats stopped: crash or pause)',
};

function whyLeaderChanged(reason: string, previous: string | undefined): string {
  return `${WHY[reason] ?? 'took a free lease'}${previous ? ` (after ${previous})` : ''}`;
}

export interface JobView {
  job: string;
  lastChecked: string | null;
  active: string[];
  /** Counts among the job's recent events (the last 50 kept). */
  recent: { started: number; skipped: number; missed: number; cancelled: number };
  /** The newest skip or miss, with its reason, if any. */
  lastSkipOrMiss: { at: string; outcome: 'skipped' | 'missed'; occurrence: string | null; reason: string | null } | null;
  totals: JobState['totals'];
  /** Its latest scheduled occurrences (up to `OCCURRENCES_SHOWN`), newest first: each start's lag, each skip and miss. */
  occurrences: OccurrenceView[];
  /** Its schedule as the last check read it, with the next occurrences; null if no check recorded one. */
  schedule: ScheduleView | null;
}

/** A job's schedule, and when it next runs in its zone's wall clock and in UTC. */
export interface ScheduleView {
  expression: string;
  timeZone: string;
  jitterSeconds: number;
  /**
   * The next occurrences (up to `NEXT_SHOWN`): `at` the instant (UTC, its run id), `local` the
   * same on the zone's wall clock with its offset, `dueAt` when it starts with its jitter.
   */
  next: Array<{ at: string; local: string; dueAt: string }>;
}

const NEXT_SHOWN = 3;

/** The schedule's next occurrences after `now`; none if this runtime cannot read it (an unknown zone). */
function scheduleView(job: string, record: JobScheduleRecord, now: Date): ScheduleView {
  const next: ScheduleView['next'] = [];
  try {
    const zone = TimeZone.of(record.timeZone);
    const schedule = Schedule.parse(record.expression, 'schedule', zone);
    for (let at = schedule.next(now); at && next.length < NEXT_SHOWN; at = schedule.next(at)) {
      const due = new Date(at.getTime() + jitterMs(job, at, record.jitterSeconds));
      next.push({ at: at.toISOString(), local: localTime(at, zone), dueAt: due.toISOString() });
    }
  } catch {
    // Recorded by a leader whose runtime knew the zone; this one's does not: no next occurrences.
  }
  return { expression: record.expression, timeZone: record.timeZone, jitterSeconds: record.jitterSeconds, next };
}

/** An instant as ISO 8601 on the zone's wall clock, with its offset: `2026-03-29T03:00:00+02:00`. */
function localTime(at: Date, zone: TimeZone): string {
  const offset = zone.offsetMs(at.getTime());
  const wall = new Date(at.getTime() + offset).toISOString().slice(0, 19);
  const minutes = Math.abs(offset) / 60_000;
  const sign = offset < 0 ? '-' : '+';
  return `${wall}${sign}${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

export interface StatusView {
  hub: string;
  endpoint: string;
  leader: LeaderView | null;
  /** While the lease is free (an idle hub frees it between ticks): who held it last. */
  lastLeader: {
    identity: string;
    epoch: number;
    acquiredAt: string | null;
    version: string | null;
    priority: number | null;
  } | null;
  /** While the lease rests (its idle leader returned until it is next needed): until when. */
  restingUntil: string | null;
  /** Newest first; the lease record keeps the last ten. */
  leadershipChanges: LeadershipChangeView[];
  activeRuns: RunView[];
  jobs: JobView[];
}

export interface RunsView {
  hub: string;
  job: string | null;
  runs: RunView[];
}

export interface ShowView {
  hub: string;
  run: RunView & {
    outputKey: string | null;
    manifestKey: string | null;
    finalizeError: string | null;
    /** What retention has deleted of the run so far, and when; null while it has everything. */
    pruned: RunRecord['pruned'];
    /** Copies of straggling work messages its leaders sent (hedged dispatch). */
    hedges: number;
  };
  /** `<container>/<key>` of the output document, once the run has one. */
  outputPath: string | null;
  /** The job's output (from the output document), or null before the run finalizes. */
  output: unknown;
  /**
   * From the failures manifest once the run has ended; while it is open (`soFar`), those counted
   * so far. `failed` holds the first `FAILURES_LISTED`; `baton failures` prints every one.
   */
  failures: {
    failed: FailureEntry[];
    failedCount: number;
    missing: number[];
    missingCount: number;
    soFar?: true;
    /** Parts of the failure log storage no longer has, met while reading `failed`. */
    unreadableParts?: string[];
  } | null;
}

/** Failures `show` reads and lists: the manifest says how many there are in all. */
export const FAILURES_LISTED = 1000;

/** The first failures of a run's manifest, as `show` reads them. */
export interface ListedFailures {
  failed: FailureEntry[];
  unreadableParts: string[];
}

/** `now`: storage's time when the record was read, which the ages of outstanding messages count to. */
export function runView(record: RunRecord, now?: Date): RunView {
  return {
    runId: record.runId,
    job: record.job,
    trigger: record.trigger,
    occurrence: record.occurrence,
    state: record.state,
    done: record.counters.succeeded + record.counters.failed,
    counters: { ...record.counters },
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    deadlineAt: record.deadlineAt,
    endedAt: record.endedAt,
    endReason: record.endReason,
    cancelRequested: record.cancelRequested,
    startLagMs: startLagMs(record),
    firstItemAt: record.firstItemAt,
    firstItemLagMs: firstItemLagMs(record),
    outstanding: isTerminal(record.state)
      ? []
      : record.outstanding.map((o) => ({
          ...o,
          ageMs: now ? Math.max(0, now.getTime() - Date.parse(o.since)) : null,
        })),
  };
}

/** The job's recent scheduled occurrences, newest first (manual runs and cancels are not occurrences). */
function occurrenceViews(state: JobState): OccurrenceView[] {
  const views: OccurrenceView[] = [];
  for (const event of [...state.recent].reverse()) {
    if (event.occurrence === null || event.outcome === 'cancelled') continue;
    views.push({
      occurrence: event.occurrence,
      outcome: event.outcome,
      startLagMs: event.outcome === 'started' ? Date.parse(event.at) - Date.parse(event.dueAt ?? event.occurrence) : null,
      runId: event.runId ?? null,
      reason: event.reason ?? null,
    });
    if (views.length === OCCURRENCES_SHOWN) break;
  }
  return views;
}

export function jobView(state: JobState, now: Date = new Date()): JobView {
  const count = (outcome: JobState['recent'][number]['outcome']) => state.recent.filter((e) => e.outcome === outcome).length;
  const last = [...state.recent].reverse().find((e) => e.outcome === 'skipped' || e.outcome === 'missed');
  return {
    job: state.job,
    lastChecked: state.lastChecked,
    active: [...state.active],
    recent: { started: count('started'), skipped: count('skipped'), missed: count('missed'), cancelled: count('cancelled') },
    lastSkipOrMiss: last
      ? { at: last.at, outcome: last.outcome as 'skipped' | 'missed', occurrence: last.occurrence, reason: last.reason ?? null }
      : null,
    totals: { ...state.totals },
    occurrences: occurrenceViews(state),
    schedule: state.schedule ? scheduleView(state.job, state.schedule, now) : null,
  };
}

export function statusView(hub: string, endpoint: string, status: HubStatus, now?: Date): StatusView {
  const { leader } = status;
  return {
    hub,
    endpoint,
    leader: leader
      ? {
          identity: leader.identity ?? null,
          epoch: leader.epoch,
          acquiredAt: leader.acquiredAt ?? null,
          ledForMs: leader.ledForMs ?? null,
          since: leader.since ?? null,
          version: leader.rank?.version ?? null,
          priority: leader.rank?.priority ?? null,
        }
      : null,
    lastLeader: status.lastLeader
      ? {
          identity: status.lastLeader.identity,
          epoch: status.lastLeader.epoch,
          acquiredAt: status.lastLeader.acquiredAt ?? null,
          version: status.lastLeader.rank?.version ?? null,
          priority: status.lastLeader.rank?.priority ?? null,
        }
      : null,
    restingUntil: status.restingUntil ?? null,
    leadershipChanges: status.leadershipChanges.map((c) => ({
      at: c.at.toISOString(),
      epoch: c.epoch,
      holder: c.holder,
      previous: c.previous ?? null,
      reason: c.reason,
      why: whyLeaderChanged(c.reason, c.previous),
    })),
    activeRuns: status.activeRuns.map((record) => runView(record, now)),
    jobs: [...status.jobs].sort((a, b) => a.job.localeCompare(b.job)).map((state) => jobView(state, now)),
  };
}

/**
 * `listed`: the first failures, from the manifest (ended) or the failure log (open), as
 * `firstRunFailures` reads them. `now`: storage's time of the read, for ages.
 */
export function showView(hub: string, container: string, details: RunDetails, listed?: ListedFailures, now?: Date): ShowView {
  const { record, output, manifest } = details;
  const open = !isTerminal(record.state);
  return {
    hub,
    run: {
      ...runView(record, now),
      outputKey: record.outputKey,
      manifestKey: record.manifestKey,
      finalizeError: record.finalizeError,
      pruned: record.pruned,
      hedges: record.hedges,
    },
    outputPath: record.outputKey ? `${container}/${record.outputKey}` : null,
    output: output ? (output.output ?? null) : null,
    failures: manifest
      ? {
          failed: listed?.failed ?? [],
          failedCount: manifest.failedCount,
          missing: manifest.missing,
          missingCount: manifest.missingCount,
          ...(listed?.unreadableParts.length ? { unreadableParts: listed.unreadableParts } : {}),
        }
      : open
        ? {
            failed: listed?.failed ?? [],
            failedCount: record.counters.failed,
            missing: [],
            missingCount: Math.max(0, record.counters.planned - record.counters.succeeded - record.counters.failed),
            ...(listed?.unreadableParts.length ? { unreadableParts: listed.unreadableParts } : {}),
            soFar: true as const,
          }
        : null,
  };
}
