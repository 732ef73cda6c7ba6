import type { FailureEntry } from '../hub/fold';
import { callHook } from '../jobs/call-hook';
import { errorText } from '../jobs/error-text';
import type { JobDefinition } from '../jobs/job-definition';
import type { EngineContext } from './engine-context';
import { messageOf } from '../errors';

// A job's `onItemFailed`, called for the failures a landed checkpoint counted. The drain hands
// them over and goes on: the calls run beside the leader's work, a few at a time, each bounded
// by the job's own timeout, and nothing a hook does (throw, hang) reaches the run. What is
// guaranteed is at most once per failed item (docs/jobs.md): a call still waiting when the
// process stops, or past the backlog, is not made.

/** `onItemFailed` calls under way at once per engine, and how many may wait (more are dropped, logged). */
const HOOK_LANES = 4;
const HOOK_BACKLOG = 10_000;
const hookQueues = new WeakMap<EngineContext, { waiting: (() => Promise<void>)[]; running: number; idle: (() => void)[] }>();
/** Never aborts: a call may outlive its term, bounded by its own timeout. */
const detached = new AbortController().signal;

/**
 * Starts (or queues) the job's `onItemFailed` for each failure a landed checkpoint counted, and
 * returns at once: the calls run beside the leader's work, each bounded by the job's
 * `itemFailedSeconds` (then `graceSeconds`); what one throws or that it timed out is logged.
 */
export function tellFailures(ctx: EngineContext, job: JobDefinition, runId: string, failures: readonly FailureEntry[]): void {
  const hook = job.onItemFailed;
  if (!hook) return;
  let q = hookQueues.get(ctx);
  if (!q) hookQueues.set(ctx, (q = { waiting: [], running: 0, idle: [] }));
  const { itemFailedSeconds, graceSeconds } = job.hookTimeouts;
  let dropped = 0;
  for (const { item, reason, attempts } of failures) {
    if (q.waiting.length >= HOOK_BACKLOG) {
      dropped++;
      continue;
    }
    q.waiting.push(() =>
      callHook((signal) => hook({ item, reason, attempts }, { runId, job: job.name, signal }), {
        hook: 'onItemFailed',
        timeoutMs: itemFailedSeconds * 1000,
        graceMs: graceSeconds * 1000,
        clock: ctx.clock,
        signal: detached,
      }).then(
        () => undefined,
        (err: unknown) => ctx.log.warn(`run ${runId}: onItemFailed for item ${item} failed: ${errorText(messageOf(err))}`),
      ),
    );
  }
  if (dropped > 0) ctx.log.warn(`run ${runId}: onItemFailed not called for ${dropped} item(s): ${HOOK_BACKLOG} calls wait`);
  pumpHooks(q);
}

function pumpHooks(q: NonNullable<ReturnType<typeof hookQueues.get>>): void {
  while (q.running < HOOK_LANES && q.waiting.length > 0) {
    q.running++;
    void (q.waiting.shift() as () => Promise<void>)().finally(() => {
      q.running--;
      pumpHooks(q);
      if (q.running === 0 && q.waiting.length === 0) for (const wake of q.idle.splice(0)) wake();
    });
  }
}

/** Resolves once no `onItemFailed` call of the engine runs or waits. */
export function failureHooksIdle(ctx: EngineContext): Promise<void> {
  const q = hookQueues.get(ctx);
  if (!q || (q.running === 0 && q.waiting.length === 0)) return Promise.resolve();
  return new Promise((resolve) => q.idle.push(resolve));
}
