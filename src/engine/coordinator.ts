import { setMaxListeners } from 'node:events';
import { sleep } from '../clock/clock';
import type { Leadership } from '../lease/term';
import { manualRunId, runKeys, transition } from '../hub/run-record';
import { DEFAULT_TUNING, type EngineContext, type EngineTuning, type TermContext } from './engine-context';
import { dispatchSlice } from './dispatcher';
import { fenceAtTermEpoch, raiseAboveRefusal } from './epoch-raise';
import { drainPoison, drainResults, type DrainStats } from './drain';
import { abortRun, completeEnding, failRun, finalizeRun } from './finalizer';
import { jobStateKey, jobStateSchema, type JobState } from '../hub/job-state';
import { hedgeStragglers } from './hedger';
import { planRun } from './planner';
import { adoptOpenRuns, cancelRun, forgetRun, jobStates, reconcileJob, startManualRun } from './reconcile';
import { pendingRequests } from '../hub/requests';
import { dueAfterCheck, nextDueAt } from '../hub/occurrence-ledger';
import { RetentionPace, retentionSlice } from '../hub/retention';
import { retryLater } from './retry-later';
import { RunBook, type ActiveRun } from './run-book';
import { readJobStatesHandoff, writeJobStatesHandoff } from './job-state-handoff';
import type { StragglerWatch } from './straggler-watch';
import { moveStrandedWork } from './stranded-work';
import { messageOf } from '../errors';

export interface LeadOptions {
  /** Longest time to lead before giving the lease back (the next tick may take it again). */
  termMs: number;
  /**
   * Give the lease back as soon as nothing is open instead of holding it, idle, for the rest
   * of the term. Default false: a leader that stays leads without re-election churn, polling
   * less and less often while idle.
   */
  returnWhenIdle?: boolean;
  /**
   * Return when nothing is open and no occurrence is due for a while, having said in the lease
   * when a leader is next needed (`Leadership.restUntil`), so an idle hub runs no coordinator
   * invocation between occurrences; candidates lead again from then, or when woken. `wakeAt`
   * maps the next occurrence (wall-time ms) to when a leader must be back for it: early enough
   * for the tick source that brings one. Default: an idle leader holds the lease for the term.
   */
  restWhenIdle?: { wakeAt(dueAt: number): number };
}

export interface LeadSummary {
  turns: number;
  started: string[];
  folded: number;
  duplicates: number;
  stray: number;
  malformed: number;
  /** Steps that failed and will be retried (a run failing this often in a row ends failed). */
  stepErrors: number;
}

const RECONCILE_EVERY_MS = 1000;
const REQUESTS_EVERY_MS = 2000;
/** An idle leader's polls back off to this, so holding the lease costs few storage calls. */
const MAX_IDLE_POLL_MS = 5000;
/** The first wait after an empty drain while a dispatch slice is under way; it doubles from here. */
const FIRST_EMPTY_DRAIN_WAIT_MS = 20;
/** How often the drain passes of one turn look at the poison queues. */
const POISON_EVERY_MS = 1000;
/**
 * With no run open there is nothing to fold, only late duplicates and malformed messages to
 * clear away, so an idle leader drains its results and poison queues this seldom: two requests
 * per shard per 30 s rather than per turn.
 */
const IDLE_DRAIN_EVERY_MS = 30_000;
/**
 * How long a run or cancel request for a job the leader does not run waits for a leader that does
 * (a rolling deploy brings one within minutes) before it is dropped.
 */
export const REQUEST_WAIT_MS = 60 * 60_000;
/** No retention slice starts this close to an occurrence: a slice may take a second or so. */
const RETENTION_CLEARANCE_MS = 3000;
/**
 * The shortest rest. Each one costs an election when it ends (a few storage requests, two
 * leadership events), so a hub whose occurrences come every few seconds keeps its leader, and
 * one that rests does so at most twice a minute.
 */
export const MIN_REST_MS = 30_000;
/**
 * The longest rest: the chores of an idle leader (late duplicates and poison to clear, retention
 * slices, new queue shards) come round at least this often.
 */
export const MAX_REST_MS = 10 * 60_000;
/** The longest a leader's hand-off of its job states may hold up the end of its term. */
const HANDOFF_WRITE_MS = 2000;
/** A run whose step fails this many times in a row ends failed instead of stalling every turn. */
const MAX_STEP_FAILURES = 5;

/**
 * The leader's work: on each turn it starts due runs, applies requests, moves every open run
 * one step (plan, dispatch, finalize, or end it on cancel or timeout), and drains results and
 * poison. It returns when the term is over, when its signal aborts, or as soon as there is
 * nothing open, so an idle leader does not sit on the lease, and between turns once a
 * higher-ranked candidate has asked for the lease (`Leadership.yieldSignal`). One run's trouble never stops the
 * others: a failing step is retried on later turns and, if it keeps failing, ends that run.
 */
export class Coordinator {
  readonly ctx: EngineContext;
  private queuesReady = false;
  /** The deletes of the last drain pass, still under way (see `drainPass`). */
  private deleting: Promise<void> = Promise.resolve();
  /** Requests left for a leader that runs their job, each logged once. */
  private readonly leftRequests = new Set<string>();
  /** Requests this leader applied but could not delete (see `applyRequests`). */
  private readonly undeletableRequests = new Set<string>();
  /** When an idle turn next runs a retention slice; kept across this process's terms. */
  private readonly retention: RetentionPace;
  /** Each open run's straggler watch (hedged dispatch), kept across this process's terms. */
  private readonly stragglers = new Map<string, StragglerWatch>();

  constructor(ctx: Omit<EngineContext, 'tuning'> & { tuning?: Partial<EngineTuning> }) {
    this.ctx = { ...ctx, tuning: { ...DEFAULT_TUNING, ...ctx.tuning } };
    this.retention = new RetentionPace(ctx.clock);
  }

  async lead(leadership: Leadership, options: LeadOptions): Promise<LeadSummary> {
    try {
      return await this.leadTerm(leadership, options);
    } finally {
      // The last pass's deletes: the term's work is done only when they are.
      await this.deleting;
    }
  }

  private async leadTerm(leadership: Leadership, options: LeadOptions): Promise<LeadSummary> {
    const { ctx } = this;
    const term: TermContext = { leadership, epoch: leadership.epoch, signal: leadership.signal };
    // Dispatch and drain pass this signal to dozens of storage calls at once.
    setMaxListeners(0, leadership.signal);
    const summary: LeadSummary = { turns: 0, started: [], folded: 0, duplicates: 0, stray: 0, malformed: 0, stepErrors: 0 };
    const endAt = ctx.clock.now() + options.termMs;
    await this.ensureQueues(term.signal);
    const book = new RunBook(ctx, term, this.stragglers);
    const untrack = ctx.telemetry?.trackOpenRuns(() => book.open.size);
    try {
      return await this.leadTurns(term, book, summary, options, endAt);
    } finally {
      ctx.itemGate?.leave();
      untrack?.();
      // Not after losing the lease: a successor may be leading already.
      if (!term.signal.aborted) {
        await writeJobStatesHandoff(ctx.docs, term.epoch, book.versionedJobStates(), {
          abortSignal: AbortSignal.timeout(HANDOFF_WRITE_MS),
        }).catch(() => undefined);
      }
    }
  }

  private async leadTurns(
    term: TermContext,
    book: RunBook,
    summary: LeadSummary,
    options: LeadOptions,
    endAt: number,
  ): Promise<LeadSummary> {
    const { ctx } = this;
    const { leadership } = term;
    const failures = new Map<string, number>();
    const fence = (): Promise<number> => fenceAtTermEpoch(term, () => this.takeOver(term, book, summary));
    let fencedAt = await fence();
    let lastReconcile = Number.NEGATIVE_INFINITY;
    let lastRequests = Number.NEGATIVE_INFINITY;
    let lastDrain = Number.NEGATIVE_INFINITY;
    let idlePoll = ctx.tuning.idlePollMs;
    /** The next scheduled occurrence of any job (wall time): an idle wait ends for it. */
    let nextDueAt = Number.POSITIVE_INFINITY;
    // An idle wait ends early when a higher-ranked candidate asks for the lease.
    const wake = AbortSignal.any([term.signal, leadership.yieldSignal]);
    for (;;) {
      term.signal.throwIfAborted();
      // The safe point: the last turn's steps are checkpointed and its deletes are under way
      // (`lead` waits for them). Return, and the elector hands the lease to the requester.
      if (leadership.yieldSignal.aborted) return summary;
      leadership.heartbeat();
      if (term.epoch !== fencedAt) fencedAt = await fence();
      summary.turns++;
      const errorsBefore = summary.stepErrors;
      let busy = false;
      const every = (ms: number) => Math.max(ms, idlePoll);
      if (ctx.clock.now() - lastReconcile >= every(RECONCILE_EVERY_MS) || ctx.clock.date().getTime() >= nextDueAt) {
        const passFrom = ctx.clock.date();
        for (const job of ctx.jobs.values()) {
          await this.guard(term, summary, `reconcile ${job.name}`, async () => {
            summary.started.push(...(await reconcileJob(ctx, term, book, job)));
          });
        }
        lastReconcile = ctx.clock.now();
        nextDueAt = this.nextOccurrenceAt(book, passFrom);
        ctx.itemGate?.lead(nextDueAt);
      }
      const checkRequests = async (): Promise<void> => {
        await this.guard(term, summary, 'requests', async () => {
          busy = (await this.applyRequests(term, book)) || busy;
        });
        lastRequests = ctx.clock.now();
      };
      let requestsChecked = false;
      if (ctx.clock.now() - lastRequests >= every(REQUESTS_EVERY_MS)) {
        await checkRequests();
        requestsChecked = true;
      }
      const settle = async (runId: string, ok: boolean): Promise<void> => {
        if (ok) failures.delete(runId);
        else await this.countFailure(term, book, runId, failures);
      };
      // Dispatch slices run beside this turn's drains, so results are folded while work goes out.
      const dispatches: Promise<{ runId: string; ok: boolean } | { err: unknown }>[] = [];
      for (const runId of [...book.open]) {
        let dispatch: ActiveRun | undefined;
        // The read is guarded too: one unreadable record must not end the term for every run.
        const ok = await this.guard(term, summary, `run ${runId}`, async () => {
          const run = await book.get(runId);
          if (!run || 'terminal' in run || 'unregistered' in run) return;
          const stepped = await this.step(term, book, run, endAt);
          if (stepped === 'dispatch') dispatch = run;
          else busy = stepped || busy;
        });
        if (!ok || !dispatch) {
          await settle(runId, ok);
          continue;
        }
        const run = dispatch;
        const until = Math.min(endAt, ctx.clock.now() + ctx.tuning.sliceMs);
        const slice = this.guard(term, summary, `run ${runId}`, async () => {
          // Nothing sent means the in-flight window is full: not busy, so an empty drain may wait.
          busy = (await dispatchSlice(ctx, term, book, run, until)) > 0 || busy;
        });
        dispatches.push(
          slice.then(
            (sliceOk) => ({ runId, ok: sliceOk }),
            (err: unknown) => ({ err }),
          ),
        );
      }
      let dispatched = dispatches.length === 0;
      const dispatching = Promise.all(dispatches).finally(() => (dispatched = true));
      // A new term looks afresh for shards past its own count: someone may have changed it.
      await this.guard(term, summary, 'find queue shards', () =>
        ctx.queues.discover({ abortSignal: term.signal, force: summary.turns === 1 }),
      );
      const drainNow = book.open.size > 0 || ctx.clock.now() - lastDrain >= IDLE_DRAIN_EVERY_MS;
      if (drainNow) lastDrain = ctx.clock.now();
      if (drainNow) {
        await this.guard(term, summary, 'move stranded work', async () => {
          busy = (await moveStrandedWork(ctx, term)) > 0 || busy;
        });
      }
      if (drainNow) {
        // Drain for as long as a dispatch slice runs: a slice whose window is full sends again
        // only once a drain counts results. An empty pass waits a little longer each time, up to
        // the idle poll, or until the slices end.
        let wait = FIRST_EMPTY_DRAIN_WAIT_MS;
        let poisonAt = Number.NEGATIVE_INFINITY;
        for (;;) {
          // The poison queues hardly ever hold anything: while results flow, look at them once
          // a second rather than on every pass.
          const poison = ctx.clock.now() - poisonAt >= POISON_EVERY_MS;
          if (poison) poisonAt = ctx.clock.now();
          const received = await this.drainPass(term, book, summary, poison);
          busy = busy || received;
          if (dispatched) break;
          if (received) {
            wait = FIRST_EMPTY_DRAIN_WAIT_MS;
            continue;
          }
          await Promise.race([dispatching, sleep(ctx.clock, wait, term.signal).catch(() => undefined)]);
          term.signal.throwIfAborted();
          wait = Math.min(wait * 2, ctx.tuning.idlePollMs);
        }
      }
      for (const settled of await dispatching) {
        if ('err' in settled) throw settled.err;
        await settle(settled.runId, settled.ok);
      }
      // With this turn's results counted: copies of the messages that wait far longer than the rest.
      book.pruneStragglers();
      for (const runId of [...book.open]) {
        const run = book.active.get(runId);
        if (!run) continue;
        await this.guard(term, summary, `hedge run ${runId}`, async () => {
          busy = (await hedgeStragglers(ctx, term, book, run)) > 0 || busy;
        });
      }
      let idle = book.open.size === 0 && !busy;
      if (idle && (await this.retentionTurn(term, summary, nextDueAt))) {
        // More old runs to delete: come back soon rather than backing off.
        idle = false;
        busy = true;
      }
      if (idle && options.returnWhenIdle) return summary;
      // A turn with a failed step may have left a due run unstarted or a request unread: no rest.
      // Nor without a look at the requests in this very turn: a trigger's wake that arrives while
      // this term still holds the lease finds a leader, and only this look sees its request.
      if (idle && options.restWhenIdle && summary.stepErrors === errorsBefore) {
        if (!requestsChecked) await checkRequests();
        if (!busy && summary.stepErrors === errorsBefore && this.rest(leadership, options.restWhenIdle, nextDueAt))
          return summary;
      }
      if (ctx.clock.now() >= endAt) return summary;
      if (busy) idlePoll = ctx.tuning.idlePollMs;
      else {
        // An idle leader backs off, but never past an occurrence: runs start on time.
        const untilDue = Math.max(0, nextDueAt - ctx.clock.date().getTime());
        await sleep(ctx.clock, Math.min(idlePoll, untilDue, Math.max(0, endAt - ctx.clock.now())), wake).catch((err: unknown) => {
          if (term.signal.aborted) throw err;
        });
        if (idle) idlePoll = Math.min(MAX_IDLE_POLL_MS, idlePoll * 2);
      }
    }
  }

  /**
   * One retention slice, when one is due and no occurrence is close; true when it found more to
   * delete right away. Only an idle leader runs it, so deleting history never delays a run.
   */
  private async retentionTurn(term: TermContext, summary: LeadSummary, nextDueAt: number): Promise<boolean> {
    const { ctx } = this;
    const policy = ctx.retention;
    if (!policy || !this.retention.due || term.leadership.yieldSignal.aborted) return false;
    if (nextDueAt - ctx.clock.date().getTime() < RETENTION_CLEARANCE_MS) return false;
    this.retention.started();
    let more = false;
    await this.guard(term, summary, 'retention', async () => {
      const slice = await retentionSlice(ctx.docs, {
        epoch: term.epoch,
        now: ctx.clock.date(),
        policy,
        abortSignal: term.signal,
      });
      this.retention.report(slice, ctx.log, () => ctx.telemetry?.retentionPassedBy?.());
      this.retention.ran(slice);
      more = slice.more;
    });
    return more;
  }

  /** Says in the lease until when nothing needs a leader, when that is worth a rest; true when it did. */
  private rest(leadership: Leadership, rest: { wakeAt(dueAt: number): number }, nextDueAt: number): boolean {
    const now = this.ctx.clock.date().getTime();
    const wakeAt = Math.min(Number.isFinite(nextDueAt) ? rest.wakeAt(nextDueAt) : Infinity, now + MAX_REST_MS);
    if (!(wakeAt - now >= MIN_REST_MS)) return false;
    // The elector's release says so in the log (`restingUntil=`).
    leadership.restUntil(new Date(wakeAt));
    return true;
  }

  /**
   * When the registered jobs' next occurrence is due to start (wall-time ms), each job's counted
   * from where its state says it was checked up to. Not from the end of the pass: a pass over
   * many jobs takes time, and an occurrence of a job checked early in it can fall due before it
   * ends. A job without a state in the book is counted from the pass's start.
   */
  private nextOccurrenceAt(book: RunBook, passFrom: Date): number {
    let next = Number.POSITIVE_INFINITY;
    for (const job of this.ctx.jobs.values()) {
      const checked = book.jobStates.get(job.name)?.lastChecked;
      const at = checked ? dueAfterCheck(job, new Date(checked)) : nextDueAt(job, passFrom);
      if (at !== undefined && at < next) next = at;
    }
    return next;
  }

  /**
   * Runs one piece of a turn. Losing the lease ends the term (rethrown); a newer stored epoch
   * does too, unless the term can raise its own above it; a record someone else wrote is
   * reloaded next turn; anything else is logged and retried next turn. Returns whether the
   * piece succeeded.
   */
  private async guard(term: TermContext, summary: LeadSummary, what: string, work: () => Promise<void>): Promise<boolean> {
    try {
      await work();
      return true;
    } catch (err) {
      const left = await raiseAboveRefusal(this.ctx, term, err);
      if (left === undefined) return false;
      retryLater(this.ctx, term, `${what} failed, will retry`, left);
      summary.stepErrors++;
      return false;
    }
  }

  private async countFailure(term: TermContext, book: RunBook, runId: string, failures: Map<string, number>): Promise<void> {
    const count = (failures.get(runId) ?? 0) + 1;
    failures.set(runId, count);
    if (count < MAX_STEP_FAILURES) return;
    failures.delete(runId);
    await this.guard(term, { stepErrors: 0 } as LeadSummary, `end run ${runId}`, async () => {
      const run = await book.get(runId);
      if (!run || 'terminal' in run || 'unregistered' in run) return;
      await failRun(this.ctx, term, book, run, `its step failed ${MAX_STEP_FAILURES} times in a row; see the leader's log`);
    });
  }

  /**
   * Drains results, then (when `poison`) the poison queues, once; true if either brought any
   * message. The pass's deletes go on behind it, and the next pass waits for them only once it
   * has folded its own: at most two passes' deletes are out at a time.
   */
  private async drainPass(term: TermContext, book: RunBook, summary: LeadSummary, poison: boolean): Promise<boolean> {
    let received = false;
    const deletes: Promise<void>[] = [];
    for (const drain of poison ? [drainResults, drainPoison] : [drainResults]) {
      await this.guard(term, summary, drain.name, async () => {
        const stats: DrainStats = await drain(this.ctx, term, book, { deleteBehind: (d) => deletes.push(d) });
        summary.folded += stats.folded;
        summary.duplicates += stats.duplicates;
        summary.stray += stats.stray;
        summary.malformed += stats.malformed;
        received = received || stats.received > 0;
      });
    }
    const earlier = this.deleting;
    this.deleting = Promise.all(deletes).then(() => undefined);
    await earlier;
    return received;
  }

  /**
   * One step for one run; true if it did something. A run that is dispatching gets `'dispatch'`:
   * the turn runs its slice beside the drains.
   */
  private async step(term: TermContext, book: RunBook, run: ActiveRun, endAt: number): Promise<boolean | 'dispatch'> {
    const { ctx } = this;
    const record = run.doc.value;
    // Once its end is recorded, the output or manifest may already exist: it ends that way.
    if (record.ending) {
      await completeEnding(ctx, term, book, run);
      return true;
    }
    if (record.state !== 'finalizing') {
      if (record.cancelRequested) {
        await abortRun(ctx, term, book, run, 'cancelled', record.endReason ?? 'cancelled');
        return true;
      }
      if (ctx.clock.date().getTime() > Date.parse(record.deadlineAt)) {
        await abortRun(ctx, term, book, run, 'timed-out', `still ${record.state} at its deadline ${record.deadlineAt}`);
        return true;
      }
    }
    switch (record.state) {
      case 'planning':
        await planRun(ctx, term, book, run, Math.min(endAt, ctx.clock.now() + ctx.tuning.sliceMs));
        return true;
      case 'dispatching':
        return 'dispatch';
      case 'running':
      case 'finalizing':
        // Its straggler watch is brought up to date before this turn's drains tell it what they count.
        if (record.state === 'running') book.stragglersOf(run);
        if (record.state === 'finalizing' || (run.seen && run.seen.count() === record.counters.planned)) {
          await finalizeRun(ctx, term, book, run);
          return true;
        }
        return false;
      default:
        return false;
    }
  }

  private async applyRequests(term: TermContext, book: RunBook): Promise<boolean> {
    const { ctx } = this;
    let applied = false;
    for await (const { key, request, madeAt } of pendingRequests(ctx.docs, { abortSignal: term.signal })) {
      if (this.undeletableRequests.has(key)) continue;
      if (!request) ctx.log.warn(`ignored malformed request ${key}`);
      else if (request.kind === 'run') {
        const job = ctx.jobs.get(request.job);
        if (job && request.ifActive === 'wait' && (await this.waitsForOpenRun(term, book, key, job.name, request.id))) continue;
        if (job) ctx.log.info(`manual run ${await startManualRun(ctx, term, book, job, request.id)} requested`);
        else if (this.leaveForAnother(key, madeAt, `a run request for job ${request.job}, which this leader does not run`))
          continue;
      } else {
        // A run of a job this leader does not have is another version's to end, not a run that is gone.
        const found = await book.get(request.runId);
        const elsewhere = found && 'unregistered' in found ? found.unregistered.job : undefined;
        if (
          elsewhere &&
          this.leaveForAnother(
            key,
            madeAt,
            `a cancel request for ${request.runId}, of job ${elsewhere}, which this leader does not run`,
          )
        )
          continue;
        if (!(await cancelRun(ctx, book, request.runId, request.reason))) {
          ctx.log.warn(`ignored a cancel request for ${request.runId}: not an open run this leader can end`);
        }
      }
      applied = true;
      try {
        await ctx.docs.delete(key, { abortSignal: term.signal });
      } catch (err) {
        term.signal.throwIfAborted();
        // Applied, and every request is safe to apply twice (a keyed run, a cancel): pass it by
        // for this leader, or a lease or hold on the one that sorts first would keep every
        // later trigger and cancel waiting behind it. A later leader applies it once more.
        this.undeletableRequests.add(key);
        ctx.log.warn(`applied request ${key} but could not delete it; passing it by: ${messageOf(err)}`);
      }
    }
    return applied;
  }

  /**
   * Whether a run request that waits for the job's open runs must wait on: the job state says
   * which runs are open (the leader drops a run from it when it ends the run), and the leader ends them, so the request is applied on the first turn
   * after the last one ends. Its own run (already started, if a keyed request came twice) does
   * not count.
   */
  private async waitsForOpenRun(term: TermContext, book: RunBook, key: string, job: string, requestId: string): Promise<boolean> {
    // The job state as this term last read or wrote it (each turn's reconcile has), else storage's.
    const state =
      book.jobStates.get(job) ?? (await jobStates(this.ctx).read(jobStateKey(job), { abortSignal: term.signal }))?.value;
    const own = manualRunId(job, requestId);
    const open = (state?.active ?? []).filter((runId) => runId !== own);
    if (open.length === 0) {
      this.leftRequests.delete(key);
      return false;
    }
    if (!this.leftRequests.has(key)) {
      this.leftRequests.add(key);
      this.ctx.log.info(`left a run request for job ${job} until ${open.join(', ')} ends`);
    }
    return true;
  }

  /**
   * Whether to leave a request this leader cannot apply for a leader that can, as the drains
   * leave such results queued: in a rolling deploy the old version may lead while a new job's
   * first trigger is made. Until it is `REQUEST_WAIT_MS` old (since `madeAt`, by storage's time);
   * after that no version that runs the job is coming, and it is dropped with a warning.
   */
  private leaveForAnother(key: string, madeAt: Date | undefined, what: string): boolean {
    const age = madeAt ? this.ctx.clock.date().getTime() - madeAt.getTime() : 0;
    if (age < REQUEST_WAIT_MS) {
      if (!this.leftRequests.has(key)) {
        this.leftRequests.add(key);
        this.ctx.log.info(`left ${what} for a leader that does`);
      }
      return true;
    }
    this.leftRequests.delete(key);
    this.ctx.log.warn(`dropped ${what}: no leader ran it for ${REQUEST_WAIT_MS / 60_000} minutes after it was made`);
    return false;
  }

  /**
   * Start of a term: load every open run of every job in storage, and fence each registered
   * one by writing it once with this term's epoch, so a stale leader's next write to it fails.
   * Runs of jobs this leader does not have are left alone until past their deadline, then end
   * timed-out: nobody else will end them. Job by job: a job whose runs cannot be read this time
   * is retried by the turns' reconcile, and the others go on. A job's state the last leader
   * handed over (`job-state-handoff.ts`) is taken as handed where the listing shows it unchanged
   * since; every other state is read.
   */
  private async takeOver(term: TermContext, book: RunBook, summary: LeadSummary): Promise<void> {
    const { ctx } = this;
    const states = jobStates(ctx);
    const signal = { abortSignal: term.signal };
    const handed = await readJobStatesHandoff(ctx.docs, signal).catch(() => undefined);
    let continuation: string | undefined;
    do {
      const page = await ctx.docs.listPage('jobs/', {
        pageSize: 5000,
        ...(continuation === undefined ? {} : { continuation }),
        ...signal,
      });
      for (const [k, key] of page.keys.entries()) {
        const same = handed?.get(key);
        const state =
          same !== undefined && same.etag === page.etags[k] ? same : await states.read(key, signal).catch(() => undefined);
        if (!state || !jobStateSchema.safeParse(state.value).success) continue;
        await this.guard(term, summary, `take over ${state.value.job}`, () => this.adoptJob(term, book, state));
      }
      continuation = page.continuation;
    } while (continuation !== undefined);
  }

  private async adoptJob(term: TermContext, book: RunBook, doc: { value: JobState; etag: string }): Promise<void> {
    const { ctx } = this;
    const state = doc.value;
    const job = ctx.jobs.get(state.job);
    if (job) {
      book.keepJobState(job.name, state, doc.etag);
      for (const runId of await adoptOpenRuns(ctx, book, job, state.active)) {
        const run = await book.get(runId);
        if (run && !('terminal' in run) && !('unregistered' in run)) {
          await book.save(run, { ...run.doc.value, updatedAt: ctx.clock.date().toISOString() });
        }
      }
      return;
    }
    for (const runId of state.active) {
      const found = await book.get(runId);
      if (!found || !('unregistered' in found)) continue;
      const record = found.unregistered;
      if (ctx.clock.date().getTime() <= Date.parse(record.deadlineAt)) continue;
      const reason = `job ${record.job} is not registered on the leader`;
      const ended = await book.records.replace(
        runKeys.record(runId),
        term.epoch,
        found.doc,
        transition(record, 'timed-out', ctx.clock.date(), reason),
        {
          abortSignal: term.signal,
        },
      );
      // Not through `book.save` (its job has no definition here), so reported here.
      ctx.telemetry?.runEnded(ended.value);
      book.dropJobState(record.job);
      await forgetRun(ctx, term, record.job, runId);
      ctx.log.warn(`run ${runId} timed out: its job ${record.job} is not registered here`);
    }
  }

  private async ensureQueues(signal: AbortSignal): Promise<void> {
    if (this.queuesReady) return;
    await this.ctx.queues.ensure({ abortSignal: signal });
    this.queuesReady = true;
  }
}
