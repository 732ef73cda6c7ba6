import { StaleEpochError } from '../errors';
import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments } from '../fencing/fenced-documents';
import { jobStateKey, jobStateSchema, newJobState, withEvents, type JobEvent, type JobState } from '../engine/job-state';
import type { JobDefinition } from '../jobs/job-definition';
import { scheduledRunId } from '../runs/run-record';
import { decideOverlap, planOccurrences, Schedule } from '../schedule/schedule';
import { cancelDurableRun } from './cancel-run';
import type { DurableClientPort } from './client-port';
import type { RunInput } from './contracts';
import { isChunkInstance, jobInstancePrefix, runIdOfInstance, runInstanceId } from './instance-ids';
import { DURABLE_NAMES } from './names';
import { assertDurableReady } from './ready';
import { resolveDurableSettings, type DurableRunSettings } from './settings';

export interface StartDueRunsDeps {
  jobs: readonly JobDefinition[];
  client: DurableClientPort;
  /** The hub's `<hub>-runs` documents: job states (`jobs/<job>.json`) and run records. */
  docs: DocumentStore;
  /** The leader's epoch: job states are fenced writes, as the queue engine's reconcile makes them. */
  epoch: number;
  now: Date;
  /** Copied into every run's input; missing fields take the defaults. */
  settings?: Partial<DurableRunSettings>;
  signal?: AbortSignal;
  log?: (level: 'info' | 'warn', message: string) => void;
}

export interface StartSummary {
  /** Runs whose orchestration this call started. */
  started: string[];
  /** Due runs whose orchestration already existed (an earlier tick, or another starter, made it). */
  existing: string[];
  skipped: Array<{ job: string; occurrence: string; reason: string }>;
  /** Runs cancelled for overlap `replace`. */
  cancelled: string[];
  /** Occurrences recorded as missed. */
  missed: number;
}

const schedules = new Map<string, Schedule>();
function scheduleOf(job: JobDefinition): Schedule {
  let schedule = schedules.get(job.schedule);
  if (!schedule) schedules.set(job.schedule, (schedule = Schedule.parse(job.schedule, `${job.name}.schedule`)));
  return schedule;
}

/**
 * The durable engine's reconcile, for the leader to call under the lease on each tick: for each
 * job, the occurrences due since the last check (the queue engine's schedule rules: starting
 * deadline, catch-up, missed), the overlap policy against the job's open orchestrations, and a
 * start for each occurrence that may run.
 *
 * One occurrence, one orchestration, even without the lease: a run's instance id is a function
 * of its run id (job + occurrence), an instance Durable already has is never started again
 * (`getStatus` first, so not even a finished one is replaced), and a start Durable refuses
 * because another starter got there first is counted as existing, not as an error. Behind that,
 * the split activity creates the run record with `If-None-Match: *` and does nothing for a run
 * that has ended.
 *
 * The job state (`jobs/<job>.json`, as the queue engine keeps it) records where the schedule was
 * checked up to, the starts, skips and misses, and the open runs, so `baton status` shows them.
 * It is written after the starts: a leader that dies in between leaves the window unchecked,
 * and the next tick finds those instances and starts nothing twice.
 */
export async function startDueRuns(deps: StartDueRunsDeps): Promise<StartSummary> {
  for (const job of deps.jobs) assertDurableReady(job);
  const settings = resolveDurableSettings(deps.settings);
  const summary: StartSummary = { started: [], existing: [], skipped: [], cancelled: [], missed: 0 };
  const states = new FencedDocuments<JobState>(deps.docs, { parse: (v) => jobStateSchema.parse(v) });
  for (const job of deps.jobs) {
    deps.signal?.throwIfAborted();
    await startJob(deps, settings, states, job, summary);
  }
  return summary;
}

async function startJob(
  deps: StartDueRunsDeps,
  settings: DurableRunSettings,
  states: FencedDocuments<JobState>,
  job: JobDefinition,
  summary: StartSummary,
): Promise<void> {
  const options = { abortSignal: deps.signal };
  const key = jobStateKey(job.name);
  const stored = await states.read(key, options);
  // Refused before starting anything, so a leader that raises its epoch and starts again records every start.
  if (stored && stored.epoch > deps.epoch) throw new StaleEpochError(key, deps.epoch, stored.epoch);
  const current = stored?.value ?? newJobState(job.name);
  const plan = planOccurrences({
    schedule: scheduleOf(job),
    lastChecked: current.lastChecked ? new Date(current.lastChecked) : undefined,
    now: deps.now,
    startingDeadlineSeconds: job.startingDeadlineSeconds,
    catchUp: job.catchUp,
  });
  const at = deps.now.toISOString();
  const events: JobEvent[] = plan.missed.map((o) => ({
    at,
    occurrence: o.toISOString(),
    outcome: 'missed',
    reason: `not started within ${job.startingDeadlineSeconds} s, or superseded by a later occurrence`,
  }));
  summary.missed += plan.missedCount;

  const open = await deps.client.listRunning(jobInstancePrefix(job.name));
  const runs = open.filter((i) => i.name === DURABLE_NAMES.orchestrator && !isChunkInstance(i.instanceId));
  let active = runs.map((i) => runIdOfInstance(i.instanceId, i.input));
  const started: string[] = [];
  for (const occurrence of plan.run) {
    const runId = scheduledRunId(job.name, occurrence);
    const instanceId = runInstanceId(runId);
    if (await deps.client.getStatus(instanceId)) {
      summary.existing.push(runId);
      continue;
    }
    const decision = decideOverlap(job.overlap, [...active, ...started]);
    if (!decision.start) {
      const reason = decision.skippedBecause ?? 'overlap';
      events.push({ at, occurrence: occurrence.toISOString(), outcome: 'skipped', reason });
      summary.skipped.push({ job: job.name, occurrence: occurrence.toISOString(), reason });
      continue;
    }
    for (const old of decision.cancel) {
      const reason = `replaced by the occurrence at ${occurrence.toISOString()}`;
      if (await cancelDurableRun(deps.client, deps.docs, open, old, reason, deps.now, deps.signal)) {
        events.push({ at, occurrence: null, outcome: 'cancelled', runId: old, reason: 'overlap: replace' });
        summary.cancelled.push(old);
      }
      active = active.filter((id) => id !== old);
    }
    const input: RunInput = {
      runId,
      job: job.name,
      occurrence: occurrence.toISOString(),
      trigger: 'schedule',
      settings,
    };
    const outcome = await deps.client.startNew(DURABLE_NAMES.orchestrator, { instanceId, input });
    if (outcome === 'exists') {
      deps.log?.('info', `run ${runId}: its orchestration ${instanceId} was started by another starter`);
      summary.existing.push(runId);
      active.push(runId);
      continue;
    }
    deps.log?.('info', `run ${runId} started as orchestration ${instanceId}`);
    summary.started.push(runId);
    started.push(runId);
    events.push({ at, occurrence: occurrence.toISOString(), outcome: 'started', runId });
  }

  const nextActive = [...new Set([...active, ...started])];
  const sameActive = nextActive.length === current.active.length && nextActive.every((id) => current.active.includes(id));
  // Nothing happened and the job has been checked before: leave the state as it is (the next
  // check covers the longer window just the same) and save a write on every idle tick.
  if (events.length === 0 && sameActive && current.lastChecked !== null) return;
  const checkedUntil = plan.checkedUntil.toISOString();
  await states.update(
    key,
    deps.epoch,
    (latest) => {
      const base = latest ?? newJobState(job.name);
      // Another leader checked this window meanwhile: keep only what it cannot have recorded.
      const raced = base.lastChecked !== current.lastChecked;
      const known = new Set(base.recent.filter((e) => e.runId).map((e) => `${e.outcome}:${e.runId}`));
      const fresh = events.filter((e) => (e.runId ? !known.has(`${e.outcome}:${e.runId}`) : !raced));
      return withEvents(
        {
          ...base,
          lastChecked: base.lastChecked && base.lastChecked > checkedUntil ? base.lastChecked : checkedUntil,
          active: nextActive,
          totals: {
            started: base.totals.started + fresh.filter((e) => e.outcome === 'started').length,
            skipped: base.totals.skipped + fresh.filter((e) => e.outcome === 'skipped').length,
            missed: base.totals.missed + (raced ? 0 : plan.missedCount),
          },
        },
        fresh,
      );
    },
    options,
  );
}
