import { setMaxListeners } from 'node:events';
import { sleep } from '../clock/clock';
import type { Leadership } from '../lease/leader-elector';
import { DEFAULT_TUNING, type EngineContext, type EngineTuning, type TermContext } from './engine-context';
import { dispatchSlice } from './dispatcher';
import { drainPoison, drainResults } from './drain';
import { abortRun, finalizeRun } from './finalizer';
import { jobStateKey } from './job-state';
import { planRun } from './planner';
import { cancelRun, jobStates, reconcileJob, startManualRun } from './reconcile';
import { pendingRequests } from './requests';
import { RunBook, type ActiveRun } from './run-book';

export interface LeadOptions {
  /** Longest time to lead before giving the lease back (the next tick may take it again). */
  termMs: number;
}

export interface LeadSummary {
  turns: number;
  started: string[];
  folded: number;
  duplicates: number;
  stray: number;
  malformed: number;
}

const RECONCILE_EVERY_MS = 1000;
const REQUESTS_EVERY_MS = 2000;

/**
 * The leader's work: on each turn it starts due runs, applies requests, moves every open run
 * one step (plan, dispatch, finalize, or end it on cancel or timeout), and drains results and
 * poison. It returns when the term is over, when its signal aborts, or as soon as there is
 * nothing open, so an idle leader does not sit on the lease.
 */
export class Coordinator {
  readonly ctx: EngineContext;
  private queuesReady = false;

  constructor(ctx: Omit<EngineContext, 'tuning'> & { tuning?: Partial<EngineTuning> }) {
    this.ctx = { ...ctx, tuning: { ...DEFAULT_TUNING, ...ctx.tuning } };
  }

  async lead(leadership: Leadership, options: LeadOptions): Promise<LeadSummary> {
    const { ctx } = this;
    const term: TermContext = { leadership, epoch: leadership.epoch, signal: leadership.signal };
    // Dispatch and drain pass this signal to dozens of storage calls at once.
    setMaxListeners(0, leadership.signal);
    const summary: LeadSummary = { turns: 0, started: [], folded: 0, duplicates: 0, stray: 0, malformed: 0 };
    const endAt = ctx.clock.now() + options.termMs;
    await this.ensureQueues(term.signal);
    const book = new RunBook(ctx, term);
    await this.loadOpenRuns(term, book);
    let lastReconcile = Number.NEGATIVE_INFINITY;
    let lastRequests = Number.NEGATIVE_INFINITY;
    for (;;) {
      term.signal.throwIfAborted();
      leadership.heartbeat();
      summary.turns++;
      let busy = false;
      if (ctx.clock.now() - lastReconcile >= RECONCILE_EVERY_MS) {
        for (const job of ctx.jobs.values()) summary.started.push(...(await reconcileJob(ctx, term, book, job)));
        lastReconcile = ctx.clock.now();
      }
      if (ctx.clock.now() - lastRequests >= REQUESTS_EVERY_MS) {
        busy = (await this.applyRequests(term, book)) || busy;
        lastRequests = ctx.clock.now();
      }
      for (const run of [...book.active.values()]) busy = (await this.step(term, book, run, endAt)) || busy;
      for (const drain of [drainResults, drainPoison]) {
        const stats = await drain(ctx, term, book);
        summary.folded += stats.folded;
        summary.duplicates += stats.duplicates;
        summary.stray += stats.stray;
        summary.malformed += stats.malformed;
        busy = busy || stats.received > 0;
      }
      if (book.active.size === 0 && !busy) return summary;
      if (ctx.clock.now() >= endAt) return summary;
      if (!busy) await sleep(ctx.clock, ctx.tuning.idlePollMs, term.signal);
    }
  }

  /** One step for one run; true if it did something. */
  private async step(term: TermContext, book: RunBook, run: ActiveRun, endAt: number): Promise<boolean> {
    const { ctx } = this;
    const record = run.doc.value;
    if (record.cancelRequested) {
      await abortRun(ctx, term, book, run, 'cancelled', record.endReason ?? 'cancelled');
      return true;
    }
    if (ctx.clock.date().getTime() > Date.parse(record.deadlineAt)) {
      await abortRun(ctx, term, book, run, 'timed-out', `still ${record.state} at its deadline ${record.deadlineAt}`);
      return true;
    }
    switch (record.state) {
      case 'planning':
        await planRun(ctx, term, book, run);
        return true;
      case 'dispatching':
        await dispatchSlice(ctx, term, book, run, Math.min(endAt, ctx.clock.now() + ctx.tuning.sliceMs));
        return true;
      case 'running':
      case 'finalizing':
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
    for await (const { key, request } of pendingRequests(ctx.docs, { abortSignal: term.signal })) {
      if (!request) ctx.log.warn(`ignored malformed request ${key}`);
      else if (request.kind === 'run') {
        const job = ctx.jobs.get(request.job);
        if (job) ctx.log.info(`manual run ${await startManualRun(ctx, term, book, job, request.id)} requested`);
        else ctx.log.warn(`ignored a run request for unknown job ${request.job}`);
      } else if (!(await cancelRun(ctx, book, request.runId, request.reason))) {
        ctx.log.warn(`ignored a cancel request for ${request.runId}: not an open run`);
      }
      await ctx.docs.delete(key, { abortSignal: term.signal });
      applied = true;
    }
    return applied;
  }

  private async loadOpenRuns(term: TermContext, book: RunBook): Promise<void> {
    const states = jobStates(this.ctx);
    for (const job of this.ctx.jobs.values()) {
      const state = await states.read(jobStateKey(job.name), { abortSignal: term.signal });
      for (const runId of state?.value.active ?? []) await book.get(runId);
    }
  }

  private async ensureQueues(signal: AbortSignal): Promise<void> {
    if (this.queuesReady) return;
    const { work, results, poison } = this.ctx;
    await Promise.all([work, results, poison].map((q) => q.ensure({ abortSignal: signal })));
    this.queuesReady = true;
  }
}
