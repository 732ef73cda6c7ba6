import { messageBoundSeconds } from '../jobs/message-bound';
import { FencedDocuments, type FencedDocument } from '../fencing/fenced-documents';
import type { JobState } from '../hub/job-state';
import { ConcurrentUpdateError } from '../errors';
import type { JobDefinition } from '../jobs/job-definition';
import { Bitset } from '../hub/bitset';
import { isTerminal, OUTSTANDING_KEPT, runKeys, runRecordSchema, type RunRecord } from '../hub/run-record';
import { indexRun } from '../hub/run-index';
import type { EngineContext, TermContext } from './engine-context';
import type { PlanSession } from './plan-session';
import { PoisonGate } from './poison-gate';
import { StragglerWatch } from './straggler-watch';

/** A run the leader is working on, with its dedupe set decoded once per term. */
export interface ActiveRun {
  job: JobDefinition;
  doc: FencedDocument<RunRecord>;
  seen: Bitset | undefined;
}

/** What looking a run up can find. */
export type RunLookup =
  | ActiveRun
  | { terminal: RunRecord }
  /** Open, but its job is not in this leader's registration list (a rolling deploy, another app). */
  | { unregistered: RunRecord; doc: FencedDocument<RunRecord> }
  | undefined;

/**
 * The leader's view of run records for one term. Every write goes through `FencedDocuments`
 * with the term's epoch, so a stale leader's write fails instead of landing.
 */
export class RunBook {
  readonly records: FencedDocuments<RunRecord>;
  /** Open runs loaded this term, by id. */
  readonly active = new Map<string, ActiveRun>();
  /** Every run id this term looks after; one that drops out of `active` is reloaded next turn. */
  readonly open = new Set<string>();
  /**
   * Job states as this term last read or wrote them. Only the leader writes job states, and a
   * newer leader's write ends this term, so an idle turn can plan from memory instead of
   * reading every job's state again. Changed only through `keepJobState` and `dropJobState`.
   */
  get jobStates(): ReadonlyMap<string, JobState> {
    return this.cachedStates;
  }
  private readonly cachedStates = new Map<string, JobState>();
  /** The version (ETag) of each cached job state that has one: what the next leader checks it by. */
  private readonly jobStateTags = new Map<string, string>();

  /** Caches a job's state as read or written, with the version it is (undefined: no blob yet). */
  keepJobState(job: string, value: JobState, etag: string | undefined): void {
    this.cachedStates.set(job, value);
    if (etag === undefined) this.jobStateTags.delete(job);
    else this.jobStateTags.set(job, etag);
  }

  /** Forgets a job's cached state (it is about to change, or did). */
  dropJobState(job: string): void {
    this.cachedStates.delete(job);
    this.jobStateTags.delete(job);
  }

  /** The cached states whose version is known: what this term hands its successor. */
  versionedJobStates(): Array<{ value: JobState; etag: string }> {
    const out: Array<{ value: JobState; etag: string }> = [];
    for (const [job, etag] of this.jobStateTags) {
      const value = this.jobStates.get(job);
      if (value) out.push({ value, etag });
    }
    return out;
  }
  /** Splits under way in this term, by run id: planning goes on where the last slice stopped. */
  readonly planSessions = new Map<string, PlanSession>();
  /** When this term may count poisoned work as failed: after the results sent before it. */
  readonly poisonGate: PoisonGate;
  /** Runs whose kept straggler watch this term has brought up to date with the record. */
  private readonly watchedThisTerm = new Set<string>();
  /** The save under way for each run, which the next `update` of that run waits for. */
  private readonly saving = new Map<string, Promise<void>>();
  /** Who waits for each run's next save. */
  private readonly saveWaiters = new Map<string, Set<() => void>>();

  /**
   * @param stragglers which sent messages of each run wait for a result, and since when (hedged
   *   dispatch): the coordinator keeps them across its terms, so a leader that leads again keeps
   *   its clock and the durations it has seen.
   */
  constructor(
    private readonly ctx: EngineContext,
    private readonly term: TermContext,
    private readonly stragglers = new Map<string, StragglerWatch>(),
  ) {
    this.records = new FencedDocuments(ctx.docs, { parse: (v) => runRecordSchema.parse(v) });
    this.poisonGate = new PoisonGate(ctx.clock, ctx.tuning.drainVisibilitySeconds * 1000);
  }

  /** The run, from this term's cache or storage. Terminal runs are not cached. */
  async get(runId: string): Promise<RunLookup> {
    const cached = this.active.get(runId);
    if (cached) return cached;
    const doc = await this.records.read(runKeys.record(runId), { abortSignal: this.term.signal });
    if (!doc) return undefined;
    if (isTerminal(doc.value.state)) {
      this.open.delete(runId);
      return { terminal: doc.value };
    }
    const job = this.ctx.jobs.get(doc.value.job);
    if (!job) return { unregistered: doc.value, doc };
    const run: ActiveRun = { job, doc, seen: decodeSeen(doc.value) };
    this.active.set(runId, run);
    this.open.add(runId);
    return run;
  }

  /**
   * Creates a run, its index entries first (see `run-index.ts`); false when a run with that id
   * already exists (another tick made it).
   */
  async create(job: JobDefinition, record: RunRecord): Promise<boolean> {
    this.open.add(record.runId);
    await indexRun(this.ctx.docs, this.term.epoch, record, { abortSignal: this.term.signal });
    try {
      const doc = await this.records.create(runKeys.record(record.runId), this.term.epoch, record, {
        abortSignal: this.term.signal,
      });
      this.active.set(record.runId, { job, doc, seen: undefined });
      this.ctx.telemetry?.runStarted(record);
      return true;
    } catch (err) {
      if (err instanceof ConcurrentUpdateError) return false;
      throw err;
    }
  }

  /**
   * Replaces the run's record. If it fails (another leader wrote it, or the call failed after
   * landing), the cached state is dropped and the error rethrown: the next turn reloads the
   * record and redoes the step, which is safe because every step is idempotent on the record
   * it read.
   */
  async save(run: ActiveRun, next: RunRecord): Promise<void> {
    const key = runKeys.record(next.runId);
    const before = run.doc.value;
    try {
      run.doc = await this.records.replace(key, this.term.epoch, run.doc, next, { abortSignal: this.term.signal });
    } catch (err) {
      this.active.delete(next.runId);
      throw err;
    }
    if (before.firstItemAt === null && next.firstItemAt !== null) this.ctx.telemetry?.firstItemCounted(next);
    for (const wake of this.saveWaiters.get(next.runId) ?? []) wake();
    if (isTerminal(next.state)) {
      this.active.delete(next.runId);
      this.open.delete(next.runId);
      this.stragglers.delete(next.runId);
      // Every end of an open run the leader writes comes through here (finalize, cancel,
      // timeout, a failed plan), and only once: the replaced version was open, and a version
      // is replaced at most once.
      this.ctx.telemetry?.runEnded(next);
    }
  }

  /**
   * Saves `change(latest record)`, one save per run at a time. A run's dispatch and the drains
   * that fold its results run side by side, and each owns its own fields of the record (the
   * cursor; the counts, accumulator and dedupe set): applying each change to the record as the
   * other left it lets both land, where two saves from one snapshot would refuse each other.
   */
  async update(run: ActiveRun, change: (current: RunRecord) => RunRecord): Promise<void> {
    const runId = run.doc.value.runId;
    const earlier = this.saving.get(runId) ?? Promise.resolve();
    const mine = earlier.catch(() => undefined).then(() => this.save(run, change(run.doc.value)));
    this.saving.set(runId, mine);
    try {
      await mine;
    } finally {
      if (this.saving.get(runId) === mine) this.saving.delete(runId);
    }
  }

  /**
   * Resolves true at the run's next save, or false after `ms` or when the term ends. A dispatch
   * whose in-flight window is full waits here for the drains beside it to count results, so it
   * sends again as soon as they do rather than at the next turn.
   */
  nextSave(runId: string, ms: number): Promise<boolean> {
    const { clock } = this.ctx;
    const { signal } = this.term;
    if (signal.aborted || ms <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      let waiters = this.saveWaiters.get(runId);
      if (!waiters) this.saveWaiters.set(runId, (waiters = new Set()));
      const done = (saved: boolean): void => {
        waiters.delete(wake);
        if (waiters.size === 0 && this.saveWaiters.get(runId) === waiters) this.saveWaiters.delete(runId);
        clock.clearTimeout(timer);
        signal.removeEventListener('abort', ended);
        resolve(saved);
      };
      const wake = (): void => done(true);
      const ended = (): void => done(false);
      const timer = clock.setTimeout(ended, ms);
      waiters.add(wake);
      signal.addEventListener('abort', ended, { once: true });
    });
  }

  /**
   * The watch over the run's sent and uncounted messages, or undefined when its job does not
   * hedge or it is not planned yet. A leader adopts every uncounted message before the cursor
   * that its watch does not know (all of them, when it did not lead the run before) as sent now:
   * it does not know when another leader sent them, so their wait starts with this term. Its
   * watch forgets what another leader counted meanwhile.
   */
  stragglersOf(run: ActiveRun): StragglerWatch | undefined {
    const { hedge, itemsPerMessage } = run.job;
    const record = run.doc.value;
    if (!hedge || !run.seen) return undefined;
    let watch = this.stragglers.get(record.runId);
    if (watch && this.watchedThisTerm.has(record.runId)) return watch;
    if (watch) {
      for (const m of watch.tracked()) if (messageCounted(run.seen, m, itemsPerMessage)) watch.forget(m);
    } else {
      watch = new StragglerWatch(this.ctx.clock, {
        floorMs: hedge.minWaitSeconds * 1000,
        fallbackMs: messageBoundSeconds(run.job) * 1000,
      });
    }
    // The record's oldest outstanding messages say when they first went out: kept, so their age
    // does not start again with each leader.
    const { clock } = this.ctx;
    const listed = new Map(record.outstanding.map((o) => [o.message, Date.parse(o.since)]));
    const offset = clock.now() - clock.date().getTime();
    for (let m = 0; m < record.cursor; m++) {
      if (watch.tracks(m) || messageCounted(run.seen, m, itemsPerMessage)) continue;
      const since = listed.get(m);
      watch.sent(m, since === undefined || Number.isNaN(since) ? undefined : since + offset);
    }
    this.stragglers.set(record.runId, watch);
    this.watchedThisTerm.add(record.runId);
    return watch;
  }

  /** Forgets the watches of runs this term does not look after (another leader ended them). */
  pruneStragglers(): void {
    for (const runId of this.stragglers.keys()) if (!this.open.has(runId)) this.stragglers.delete(runId);
  }

  /** The watch over the run's messages, once this term has brought it up to date. */
  watching(runId: string): StragglerWatch | undefined {
    return this.watchedThisTerm.has(runId) ? this.stragglers.get(runId) : undefined;
  }

  /** Forgets the cached copy, so the next lookup reads storage again. */
  drop(runId: string): void {
    this.active.delete(runId);
  }
}

/**
 * The run's oldest sent and uncounted messages, for its record (`outstanding`): from its watch,
 * without those `seen` counts already, each with its items and when it first went out (storage
 * time). Empty when the leader does not watch the run's messages (its job does not hedge).
 */
export function oldestOutstanding(
  clock: EngineContext['clock'],
  watch: StragglerWatch | undefined,
  seen: Bitset,
  itemsPerMessage: number,
): RunRecord['outstanding'] {
  if (!watch) return [];
  const offset = clock.date().getTime() - clock.now();
  return watch
    .oldest(OUTSTANDING_KEPT, (m) => messageCounted(seen, m, itemsPerMessage))
    .map(({ message, since }) => {
      const first = message * itemsPerMessage;
      return {
        message,
        first,
        count: Math.max(0, Math.min(itemsPerMessage, seen.size - first)),
        since: new Date(since + offset).toISOString(),
      };
    });
}

/** Whether every item of work message `m` is counted. */
export function messageCounted(seen: Bitset, m: number, itemsPerMessage: number): boolean {
  const end = Math.min(seen.size, (m + 1) * itemsPerMessage);
  for (let i = m * itemsPerMessage; i < end; i++) if (!seen.has(i)) return false;
  return true;
}

export function decodeSeen(record: RunRecord): Bitset | undefined {
  return record.seen === null ? undefined : Bitset.fromCheckpoint(record.counters.planned, record.seen);
}
