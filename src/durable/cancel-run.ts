import type { InstanceView } from './client-port';
import { runInstanceId } from './instance-ids';
import { endDurableRun, recordOfInstance, stopRunInstances, type RunEndDeps } from './run-end';
import { ForeignRunError } from './run-records';

/**
 * Cancels a durable run (overlap `replace`). The record says `cancelled` (with its manifest)
 * before anything is terminated, so a crash or a failed terminate in between leaves a cancelled
 * run whose orchestration the next tick stops, never a terminated orchestration beside a
 * `running` record; the finalize activity reports an ended run as it is. Then its orchestration
 * and its chunks' are terminated (terminating a parent does not stop its sub-orchestrations).
 * As in the queue engine, a run already finalizing is left to finish. A run whose orchestration
 * has not planned yet gets a cancelled record, which its split then finds. A queue-engine
 * leader's record is not ours to end; its orchestration can do nothing with it, so it is only
 * stopped. Returns whether the record was cancelled.
 */
export async function cancelDurableRun(
  deps: RunEndDeps,
  open: readonly InstanceView[],
  runId: string,
  reason: string,
  timeoutSeconds: number,
): Promise<boolean> {
  const instance = runInstanceId(runId);
  const view = open.find((v) => v.instanceId === instance);
  try {
    const cancelled = await endDurableRun(deps, runId, 'cancelled', reason, {
      keepFinalizing: true,
      progress: view?.customStatus,
      create: view ? recordOfInstance(runId, runId.slice(0, runId.indexOf('/')), view, timeoutSeconds, deps.now) : undefined,
    });
    if (!cancelled) return false;
  } catch (err) {
    if (!(err instanceof ForeignRunError)) throw err;
    await stopRunInstances(deps, instance, open, reason, { run: true });
    return false;
  }
  await stopRunInstances(deps, instance, open, reason, { run: true });
  return true;
}
