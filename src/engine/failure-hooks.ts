import { callHook } from '../jobs/call-hook';
import { errorText } from '../jobs/error-text';
import type { JobDefinition } from '../jobs/job-definition';
import type { FailureEntry } from '../hub/fold';
import type { EngineContext } from './engine-context';

/** `onItemFailed` calls under way at once, per engine. */
export const FAILURE_HOOK_LANES = 4;
/** Calls that may wait for a lane; past it, new ones are dropped (and logged), never the run's work held up. */
export const FAILURE_HOOK_BACKLOG = 10_000;

interface Call {
  job: JobDefinition;
  runId: string;
  failure: FailureEntry;
}

/** A signal that never aborts: a call outlives the term that started it, bounded by its own timeout. */
const detached = new AbortController().signal;

/**
 * The job's `onItemFailed` calls, made beside the leader's work rather than in it: the drain
 * hands over the failures of a checkpoint once that checkpoint has landed, and returns at once.
 * Each call is bounded by the job's `hookTimeouts.itemFailedSeconds` (and `graceSeconds` for a
 * hook that ignores its signal); what a call throws, or that it timed out, is logged and is the
 * end of it. A failure is handed over by the one checkpoint that counted it, so it is called at
 * most once.
 */
export class FailureHooks {
  private readonly waiting: Call[] = [];
  private running = 0;
  private readonly idleWaiters: (() => void)[] = [];
  /** Calls dropped because the backlog was full. */
  dropped = 0;

  constructor(private readonly ctx: EngineContext) {}

  /** Starts (or queues) one call per failure; never throws, never waits. */
  enqueue(job: JobDefinition, runId: string, failures: readonly FailureEntry[]): void {
    if (!job.onItemFailed) return;
    let dropped = 0;
    for (const failure of failures) {
      if (this.waiting.length >= FAILURE_HOOK_BACKLOG) dropped++;
      else this.waiting.push({ job, runId, failure });
    }
    if (dropped > 0) {
      this.dropped += dropped;
      this.ctx.log.warn(
        `run ${runId}: onItemFailed not called for ${dropped} failed item(s): ${FAILURE_HOOK_BACKLOG} calls already wait (see baton failures)`,
      );
    }
    this.pump();
  }

  /** Resolves once no call runs or waits. */
  idle(): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < FAILURE_HOOK_LANES && this.waiting.length > 0) {
      const call = this.waiting.shift() as Call;
      this.running++;
      void this.call(call).finally(() => {
        this.running--;
        this.pump();
        if (this.running === 0 && this.waiting.length === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      });
    }
  }

  private async call({ job, runId, failure }: Call): Promise<void> {
    const hook = job.onItemFailed;
    if (!hook) return;
    const { itemFailedSeconds, graceSeconds } = job.hookTimeouts;
    try {
      await callHook(
        (signal) =>
          hook({ item: failure.item, reason: failure.reason, attempts: failure.attempts }, { runId, job: job.name, signal }),
        {
          hook: 'onItemFailed',
          timeoutMs: itemFailedSeconds * 1000,
          graceMs: graceSeconds * 1000,
          clock: this.ctx.clock,
          signal: detached,
        },
      );
    } catch (err) {
      const why = errorText(err instanceof Error ? err.message : String(err));
      this.ctx.log.warn(`run ${runId}: onItemFailed for item ${failure.item} failed: ${why}`);
    }
  }
}

const byEngine = new WeakMap<EngineContext, FailureHooks>();

/** The engine's one `FailureHooks`: every term of a leader shares its lanes and backlog. */
export function failureHooksOf(ctx: EngineContext): FailureHooks {
  let hooks = byEngine.get(ctx);
  if (!hooks) byEngine.set(ctx, (hooks = new FailureHooks(ctx)));
  return hooks;
}
