import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments, refuseStale } from '../fencing/fenced-documents';
import { jobStateKey, jobStateSchema, newJobState, type JobEvent, type JobState } from '../hub/job-state';
import {
  checkSchedule,
  recordCheck,
  recordedOccurrences,
  recordsSchedule,
  scheduleRecordOf,
  startedEvent,
  type ScheduleCheck,
} from '../hub/occurrence-ledger';
import { describeThrown, LeaseLostError, StaleEpochError } from '../errors';
import type { JobDefinition } from '../jobs/job-definition';
import { scheduledRunId, type TerminalRunState } from '../hub/run-record';
import { decideOverlap } from '../schedule/schedule';
import { redactSecrets } from '../redact';
import { cancelDurableRun } from './cancel-run';
import { isOpenStatus, type DurableClientPort, type InstanceView } from './client-port';
import type { RunInput } from './contracts';
import { isChunkInstance, jobInstancePrefix, runIdOfInstance, runInstanceId } from './instance-ids';
import { DURABLE_NAMES } from './names';
import { assertDurableReady } from './ready';
import { settleRun, type RunEndDeps } from './run-end';
import { durableSettingsFor, resolveDurableSettings, type DurableRunSettings } from './settings';
import type { RunEndTelemetry } from '../telemetry/run-telemetry';

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
  /** Told of each run the starter ends (deadline, cancel, an orchestration that ended without it). */
  telemetry?: RunEndTelemetry;
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
  /** Runs this call ended: past their deadline, or left open by an orchestration that had ended. */
  ended: Array<{ runId: string; state: TerminalRunState; reason: string }>;
  /** What failed without stopping the other jobs, each naming its job; tried again on the next tick. */
  errors: Array<{ job: string; error: string }>;
}

/**
 * The durable engine's reconcile, for the leader to call under the lease on each tick. For each
 * job: every run it is watching reaches its end (`settleRun`: deadlines, and records left open
 * by orchestrations that ended without finishing them); then the occurrences due since the last
 * check (the queue engine's schedule rules: starting deadline, catch-up, missed), the overlap
 * policy against the job's open orchestrations, and a start for each occurrence that may run.
 * Runs of jobs no longer defined (a deploy removed them) are settled too.
 *
 * Jobs are isolated as the queue coordinator isolates its pieces: an error in one job (its state
 * unreadable, a start refused, a run that cannot be read) is logged and reported naming the job,
 * and the other jobs go on; a failed terminate does not even stop its own job. Only an error
 * that ends the tick (its signal aborted, the lease lost, a newer leader's job state) stops it.
 *
 * One occurrence, one orchestration, even without the lease: a run's instance id is a function
 * of its run id (job + occurrence), an instance Durable already has is never started again
 * (`getStatus` first, so not even a finished one is replaced), and a start Durable refuses
 * because another starter got there first is counted as existing, not as an error. Behind that,
 * the split activity creates the run record with `If-None-Match: *` and does nothing for a run
 * that has ended.
 *
 * The job state (`jobs/<job>.json`, as the queue engine keeps it) records where the schedule was
 * checked up to, the starts, skips and misses, and the runs to watch (`active`) until they have
 * ended, so `baton status` shows them. A run is added to `active` before its start, so a leader
 * that dies after starting still leaves it watched, even if its orchestration fails before the
 * next tick. The rest is written after the starts: a leader that dies in between leaves the
 * window unchecked, and the next tick finds those instances and starts nothing twice.
 */
export async function startDueRuns(deps: StartDueRunsDeps): Promise<StartSummary> {
  for (const job of deps.jobs) assertDurableReady(job);
  const settings = resolveDurableSettings(deps.settings);
  const summary: StartSummary = { started: [], existing: [], skipped: [], cancelled: [], missed: 0, ended: [], errors: [] };
  const states = new FencedDocuments<JobState>(deps.docs, { parse: (v) => jobStateSchema.parse(v) });
  for (const job of deps.jobs) {
    deps.signal?.throwIfAborted();
    await isolated(deps, summary, job.name, () => startJob(deps, settings, states, job, summary));
  }
  deps.signal?.throwIfAborted();
  await isolated(deps, summary, '(jobs no longer defined)', () => settleUndefinedJobs(deps, states, summary));
  return summary;
}

/** An error that ends the tick, not one job's trouble: shutting down, the lease lost, or a newer leader's job state. */
function endsTheTick(deps: StartDueRunsDeps, err: unknown): boolean {
  return !!deps.signal?.aborted || err instanceof LeaseLostError || err instanceof StaleEpochError;
}

function report(deps: StartDueRunsDeps, summary: StartSummary, job: string, err: unknown, what?: string): void {
  // SDK errors can carry request details, a SAS included.
  const text = redactSecrets(describeThrown(err));
  const error = what ? `${what}: ${text}` : text;
  summary.errors.push({ job, error });
  deps.log?.('warn', `job ${job}: ${error}; the other jobs went on, and this is tried again on the next tick`);
}

async function isolated(deps: StartDueRunsDeps, summary: StartSummary, job: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (endsTheTick(deps, err)) throw err;
    report(deps, summary, job, err);
  }
}

function endDepsOf(deps: StartDueRunsDeps, summary: StartSummary, job: string): RunEndDeps {
  return {
    client: deps.client,
    docs: deps.docs,
    now: deps.now,
    signal: deps.signal,
    log: deps.log,
    report: (what, err) => report(deps, summary, job, err, what),
    telemetry: deps.telemetry,
  };
}

/** What one job's tick learnt about its runs. */
class JobRuns {
  /** Runs that may still do work: what the overlap policy weighs. */
  readonly running = new Set<string>();
  /** Runs to look at again next tick (the job state's `active`). */
  readonly watch = new Set<string>();
  /** Every run looked at: one of these not in `watch` has ended and leaves `active`. */
  readonly seen = new Set<string>();

  constructor(
    private readonly deps: StartDueRunsDeps,
    private readonly summary: StartSummary,
    private readonly job: string,
    private readonly definition: JobDefinition | undefined,
    private readonly open: () => Promise<readonly InstanceView[]>,
  ) {}

  /** Settles one run; `view` when already read (it must be read before the record), else it is read here. */
  async settle(runId: string, view?: InstanceView): Promise<void> {
    this.seen.add(runId);
    try {
      const current = view ?? (await this.deps.client.getStatus(runInstanceId(runId)));
      const settled = await settleRun(endDepsOf(this.deps, this.summary, this.job), {
        runId,
        job: this.job,
        definition: this.definition,
        view: current,
        open: this.open,
      });
      if (settled.running) this.running.add(runId);
      if (settled.watch) this.watch.add(runId);
      if (settled.ended) this.summary.ended.push({ runId, ...settled.ended });
    } catch (err) {
      if (endsTheTick(this.deps, err)) throw err;
      report(this.deps, this.summary, this.job, err, `checking run ${runId}`);
      // Not known to have ended: watched again next tick; it counts for overlap while Durable says it is open.
      this.watch.add(runId);
      if (view && isOpenStatus(view.runtimeStatus)) this.running.add(runId);
    }
  }
}

/** The run a chunk instance belongs to, from its input. */
function runIdOfChunk(view: InstanceView): string | undefined {
  const runId = (view.input as { runId?: unknown } | null | undefined)?.runId;
  return typeof runId === 'string' ? runId : undefined;
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
  if (stored && stored.epoch > deps.epoch) throw refuseStale(deps.docs, key, deps.epoch, stored.epoch);
  const current = stored?.value ?? newJobState(job.name);
  const { plan, notRun } = checkSchedule(job, current, deps.now);
  const at = deps.now.toISOString();

  const open = await deps.client.listRunning(jobInstancePrefix(job.name));
  const runs = new JobRuns(deps, summary, job.name, job, async () => open);
  // Every run that may still need ending: those watched since the last tick, and every run or chunk open now.
  const watched = new Map<string, InstanceView | undefined>();
  for (const instance of open) {
    if (instance.name === DURABLE_NAMES.orchestrator && !isChunkInstance(instance.instanceId)) {
      watched.set(runIdOfInstance(instance.instanceId, instance.input), instance);
    }
  }
  for (const instance of open) {
    const runId = isChunkInstance(instance.instanceId) ? runIdOfChunk(instance) : undefined;
    if (runId && !watched.has(runId)) watched.set(runId, undefined);
  }
  for (const runId of current.active) if (!watched.has(runId)) watched.set(runId, undefined);
  for (const [runId, view] of watched) await runs.settle(runId, view);

  const planned: JobEvent[] = [...notRun];
  for (const e of notRun)
    if (e.outcome === 'skipped')
      summary.skipped.push({ job: job.name, occurrence: e.occurrence as string, reason: e.reason ?? 'skipped' });
  const runEvents: JobEvent[] = [];
  const toStart: Array<{ runId: string; instanceId: string; occurrence: Date }> = [];
  for (const occurrence of plan.run) {
    const runId = scheduledRunId(job.name, occurrence);
    const instanceId = runInstanceId(runId);
    const existing = await deps.client.getStatus(instanceId);
    if (existing) {
      summary.existing.push(runId);
      // An instance the job state never listed (its record of the start was lost): settled like any other.
      if (!runs.seen.has(runId)) await runs.settle(runId, existing);
      continue;
    }
    const decision = decideOverlap(job.overlap, [...runs.running, ...toStart.map((s) => s.runId)]);
    if (!decision.start) {
      const reason = decision.skippedBecause ?? 'overlap';
      planned.push({ at, occurrence: occurrence.toISOString(), outcome: 'skipped', reason });
      summary.skipped.push({ job: job.name, occurrence: occurrence.toISOString(), reason });
      continue;
    }
    for (const old of decision.cancel) {
      const reason = `replaced by the occurrence at ${occurrence.toISOString()}`;
      const endDeps = endDepsOf(deps, summary, job.name);
      if (await cancelDurableRun(endDeps, open, old, reason, job.timeoutSeconds)) {
        runEvents.push({ at, occurrence: null, outcome: 'cancelled', runId: old, reason: 'overlap: replace' });
        summary.cancelled.push(old);
        // Ended; an orchestration of it a terminate missed is open next tick, and stopped then.
        runs.watch.delete(old);
      }
      runs.running.delete(old);
    }
    toStart.push({ runId, instanceId, occurrence });
  }

  // Watched before it starts: a leader that dies right after the start still leaves it in `active`.
  if (toStart.length > 0) {
    await states.update(
      key,
      deps.epoch,
      (latest) => {
        const base = latest ?? newJobState(job.name);
        const fresh = toStart.map((s) => s.runId).filter((id) => !base.active.includes(id));
        return fresh.length ? { ...base, active: [...base.active, ...fresh] } : undefined;
      },
      options,
    );
  }
  let startError: { runId: string; err: unknown } | undefined;
  // Each leaves `active` again unless its start is made (or found made).
  for (const { runId } of toStart) runs.seen.add(runId);
  for (const { runId, instanceId, occurrence } of toStart) {
    const input: RunInput = {
      runId,
      job: job.name,
      occurrence: occurrence.toISOString(),
      trigger: 'schedule',
      settings: durableSettingsFor(settings, job.retry),
    };
    let outcome: 'started' | 'exists';
    try {
      outcome = await deps.client.startNew(DURABLE_NAMES.orchestrator, { instanceId, input });
    } catch (err) {
      if (endsTheTick(deps, err)) throw err;
      // The later occurrences wait for this one: the window stays unchecked and the next tick tries them in order.
      startError = { runId, err };
      break;
    }
    runs.watch.add(runId);
    if (outcome === 'exists') {
      deps.log?.('info', `run ${runId}: its orchestration ${instanceId} was started by another starter`);
      summary.existing.push(runId);
      continue;
    }
    deps.log?.('info', `run ${runId} started as orchestration ${instanceId}`);
    summary.started.push(runId);
    runEvents.push(startedEvent(job, occurrence, runId, at));
  }

  // With a start that failed, only what happened to runs is recorded; where the schedule was
  // checked up to, and its skips and misses, are decided again on the next tick.
  const events = startError ? runEvents : [...planned, ...runEvents];
  const leaves = (id: string) => runs.seen.has(id) && !runs.watch.has(id);
  const nextActive = [...new Set([...current.active.filter((id) => !leaves(id)), ...runs.watch])];
  const sameActive = nextActive.length === current.active.length && nextActive.every((id) => current.active.includes(id));
  // Nothing happened and the job has been checked before: leave the state as it is (the next
  // check covers the longer window just the same) and save a write on every idle tick.
  if (events.length === 0 && sameActive && current.lastChecked !== null && !startError && recordsSchedule(current, job)) return;
  const checkedUntil = startError ? current.lastChecked : plan.checkedUntil.toISOString();
  let before: JobState | undefined;
  const check: ScheduleCheck = {
    readFrom: current,
    checkedUntil,
    events,
    missedCount: startError ? 0 : plan.missedCount,
    leaves,
    watch: runs.watch,
    schedule: scheduleRecordOf(job),
  };
  const written = await states.update(
    key,
    deps.epoch,
    (latest) => {
      before = latest;
      return recordCheck(latest, job.name, check);
    },
    options,
  );
  // The last call of the change is the one whose write landed.
  if (written) deps.telemetry?.occurrencesRecorded(job.name, recordedOccurrences(before, written.value, check));
  if (startError) {
    const { runId, err } = startError;
    throw new Error(`start of run ${runId} failed: ${describeThrown(err)}`, {
      cause: err,
    });
  }
}

/**
 * The runs a job that is no longer defined left in its `active` list (a deploy removed the
 * job): settled like any other, against their record's deadline, until each has ended. Their
 * open chunks are listed only when one has to be stopped.
 */
async function settleUndefinedJobs(
  deps: StartDueRunsDeps,
  states: FencedDocuments<JobState>,
  summary: StartSummary,
): Promise<void> {
  const defined = new Set(deps.jobs.map((j) => j.name));
  const options = { abortSignal: deps.signal };
  for await (const key of deps.docs.list('jobs/', options)) {
    const name = key.slice('jobs/'.length).replace(/\.json$/, '');
    if (defined.has(name) || key !== jobStateKey(name)) continue;
    await isolated(deps, summary, name, async () => {
      const state = (await states.read(key, options))?.value;
      if (!state || state.active.length === 0) return;
      let listed: Promise<InstanceView[]> | undefined;
      const open = () => (listed ??= deps.client.listRunning(jobInstancePrefix(state.job)));
      const runs = new JobRuns(deps, summary, state.job, undefined, open);
      for (const runId of state.active) await runs.settle(runId);
      const leaves = (id: string) => runs.seen.has(id) && !runs.watch.has(id);
      if (!state.active.some(leaves)) return;
      await states.update(
        key,
        deps.epoch,
        (latest) =>
          latest && latest.active.some(leaves) ? { ...latest, active: latest.active.filter((id) => !leaves(id)) } : undefined,
        options,
      );
    });
  }
}
