import type { InvocationContext, Timer } from '@azure/functions';
import { LeaseLostError } from '../errors';
import { redactSecrets } from '../redact';
import type { Leadership } from '../lease/leader-elector';
import type { BatonRuntime } from './runtime';

/** The leader's work for one tick. */
export type LeaderWork = (leadership: Leadership, context: InvocationContext) => Promise<void>;

export type TickOutcome =
  { led: true; epoch: number } | { led: false; holder: string | undefined } | { led: 'lost'; reason: string };

/**
 * The coordinator timer's handler: every instance's tick makes one attempt to lead, and only
 * the winner runs `work`. A tick that loses the race, or finds an earlier tick of its own
 * instance still leading, returns after one storage read.
 */
export function createCoordinatorTick(runtime: BatonRuntime, work: LeaderWork) {
  return async (timer: Timer, context: InvocationContext): Promise<TickOutcome> => {
    if (timer.isPastDue) context.info('coordinator tick is past due; leading once for it');
    try {
      if (runtime.shutdownSignal.aborted) return { led: false, holder: undefined };
      const before = runtime.storageRequests.total;
      const result = await runtime.elector.runIfLeader((leadership) => work(leadership, context), {
        signal: runtime.shutdownSignal,
      });
      if (result.led) {
        // The cost metric, once per term: every storage request this instance sent meanwhile, its worker's too.
        context.info(
          `led epoch ${result.epoch}: this instance sent ${runtime.storageRequests.total - before} storage requests during the term (leader and worker)`,
        );
        return { led: true, epoch: result.epoch };
      }
      const holder = result.holder?.identity;
      context.debug(`not leading this tick: held by ${holder ?? 'another candidate'}`);
      return { led: false, holder };
    } catch (err) {
      // A lost lease is the elector doing its job, not a function failure to retry.
      if (err instanceof LeaseLostError) {
        context.warn(err.message);
        return { led: 'lost', reason: err.reason };
      }
      // Shutting down: the leader stopped its work and gave the lease back.
      if (runtime.shutdownSignal.aborted) return { led: false, holder: undefined };
      // SDK errors carry request details (headers included); the host gets a clean one-liner.
      throw new Error(redactSecrets(err instanceof Error ? `${err.name}: ${err.message}` : String(err)));
    }
  };
}
