import type { DurableOrchestrationContext, Task } from 'durable-functions';

/** How one task ended: its result, or the error Durable reported for it. */
export type Settled = { ok: true; result: unknown } | { ok: false; error: Error };

/**
 * Waits for every task, never failing on one, and hands each outcome to `onSettled` in task
 * order. `Task.all` would throw on the first failure; this collects them all.
 *
 * Why not "yield `Task.any` on the tasks still pending" in a loop: durable-functions 3.5.0
 * sends a new `Task.any` with the actions of every task in it, including those scheduled
 * before, and the extension schedules them again (azure-functions-durable-js#574; shown by
 * `test/unit/durable/durable-orchestrator.test.ts`). Each loop would also cost O(pending) to build, so
 * a replay would cost O(n²). Instead:
 * - one `Task.any` over all tasks schedules each task exactly once (one action each);
 * - then the tasks are taken in order: a settled one is read where it stands (`isCompleted`,
 *   `isFaulted`, `result`), and only an unsettled one is yielded. Yielding an already
 *   scheduled task adds no action, and reading instead of yielding settled tasks keeps the
 *   SDK from recursing once per settled task (deep stacks on big fan-outs).
 *
 * Deterministic on replay: a task's state at any point is fixed by the history events before
 * it, and the order tasks are visited in is fixed by the caller. The price is that a caller
 * learns of a settled task only once every task before it has settled.
 */
export function* settleAll(
  df: Pick<DurableOrchestrationContext, 'Task'>,
  tasks: readonly Task[],
  onSettled: (index: number, outcome: Settled) => void,
): Generator<Task, void, unknown> {
  if (tasks.length === 0) return;
  yield df.Task.any([...tasks]);
  for (const [index, task] of tasks.entries()) {
    if (!task.isCompleted && !task.isFaulted) {
      try {
        yield task;
      } catch {
        // Read below, like any other failed task.
      }
    }
    onSettled(index, outcomeOf(task));
  }
}

function outcomeOf(task: Task): Settled {
  if (task.isCompleted) return { ok: true, result: task.result };
  const error = task.result instanceof Error ? task.result : new Error(String(task.result));
  return { ok: false, error };
}

/**
 * A one-line reason from a Durable task failure: the activity's own message when the host sent
 * failure details (`ErrorType: message`), else the first line of `Reason \n Details`.
 */
export function failureReason(error: Error): string {
  const details = (error as { failureDetails?: { errorMessage?: unknown } }).failureDetails;
  if (details && typeof details.errorMessage === 'string' && details.errorMessage) return details.errorMessage;
  return (error.message.split('\n')[0] ?? '').trim() || error.name;
}
