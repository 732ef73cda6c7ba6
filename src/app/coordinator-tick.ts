import type { InvocationContext, Timer } from '@azure/functions';
import { describeThrown, LeaseLostError, messageOf } from '../errors';
import { redactSecrets } from '../redact';
import type { Leadership } from '../lease/term';
import type { BatonRuntime } from './runtime';
import type { TickMessage } from '../engine/messages';

/** The leader's work for one tick. */
export type LeaderWork = (leadership: Leadership, context: InvocationContext) => Promise<void>;

export type TickOutcome =
  | { led: true; epoch: number }
  /**
   * `epoch`: the holder's, when the lease is held; `stopping`: this instance is shutting down and
   * did not look; `restingUntil`: nobody holds the lease, and its last leader said nothing needs
   * one before then.
   */
  | { led: false; holder: string | undefined; epoch?: number; stopping?: true; restingUntil?: Date }
  | { led: 'lost'; reason: string };

/**
 * The coordinator timer's handler: every instance's tick makes one attempt to lead, and only
 * the winner runs `work`. A tick that loses the race, or finds an earlier tick of its own
 * instance still leading, returns after one storage read.
 */
export function createCoordinatorTick(runtime: BatonRuntime, work: LeaderWork) {
  /** `wake`: lead even while the lease rests (a wake tick: a request came). */
  return async (timer: Timer, context: InvocationContext, options: { wake?: boolean } = {}): Promise<TickOutcome> => {
    if (timer.isPastDue) context.info('coordinator tick is past due; leading once for it');
    try {
      if (runtime.shutdownSignal.aborted) return { led: false, holder: undefined, stopping: true };
      const before = runtime.storageRequests.total;
      // Not the shutdown signal: at shutdown a leader leads on until its successor has asked.
      const result = await runtime.elector.runIfLeader((leadership) => work(leadership, context), {
        signal: runtime.stepDownSignal,
        ...(options.wake ? { wake: true } : {}),
      });
      if (result.led) {
        // The cost metric, once per term: every storage request this instance sent meanwhile, its worker's too.
        context.info(
          `led epoch ${result.epoch}: this instance sent ${runtime.storageRequests.total - before} storage requests during the term (leader and worker)`,
        );
        return { led: true, epoch: result.epoch };
      }
      const holder = result.holder?.identity;
      const why = result.holder
        ? `held by ${holder ?? 'another candidate'}`
        : result.restingUntil
          ? `the lease rests until ${result.restingUntil.toISOString()}`
          : 'the lease is free';
      context.debug(`not leading this tick: ${why}`);
      if (result.restingUntil) runtime.telemetry.restingTick();
      return {
        led: false,
        holder,
        ...(result.holder ? { epoch: result.holder.epoch } : {}),
        ...(result.restingUntil ? { restingUntil: result.restingUntil } : {}),
      };
    } catch (err) {
      // A lost lease is the elector doing its job, not a function failure to retry.
      if (err instanceof LeaseLostError) {
        context.warn(err.message);
        return { led: 'lost', reason: err.reason };
      }
      // Shutting down: the leader stopped its work and gave the lease back.
      if (runtime.shutdownSignal.aborted) return { led: false, holder: undefined };
      // SDK errors carry request details (headers included); the host gets a clean one-liner.
      throw new Error(redactSecrets(describeThrown(err)));
    }
  };
}

/** What a tick message's receiver hands the coordinator tick in place of the timer's schedule. */
const BEACON_TIMER: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: false },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};

/**
 * The handler for tick messages (see `TickBeacon`): runs the coordinator tick as the timer
 * would, then keeps the beacon going when nobody else will:
 * - this instance led, or a newer term holds the lease: that term has its own beacon; done;
 * - the lease is still held by the term that sent it: that leader lives (the beacon surfaced
 *   before its renewal postponed it): hide a copy until its lease could have expired;
 * - the lease rests (its idle leader said nothing needs one before some time): hide it until
 *   then, when it wakes the next leader; a wake tick (`wake`) leads through the rest instead,
 *   and one that finds a leader looks once more a tick later;
 * - nobody holds the lease (deferring to a reserved candidate, a lost race, a failed tick):
 *   tick again after `retrySeconds`, until someone leads.
 * A failed tick is not rethrown: the host would retry the message and finally poison it.
 */
export function createTickMessageHandler(
  tick: (timer: Timer, context: InvocationContext, options?: { wake?: boolean }) => Promise<TickOutcome>,
  beacon: {
    resend(message: TickMessage, seconds: number): Promise<void>;
    hiddenSeconds: number;
    retrySeconds: number;
    secondsUntil(at: Date): number;
  },
) {
  return async (message: TickMessage, context: InvocationContext): Promise<TickOutcome | undefined> => {
    let outcome: TickOutcome | undefined;
    try {
      outcome = await tick(BEACON_TIMER, context, message.wake ? { wake: true } : {});
    } catch (err) {
      context.warn(`tick from a message failed, ticking again in ${beacon.retrySeconds} s: ${messageOf(err)}`);
    }
    if (outcome?.led === true) return outcome;
    // This instance is stopping and may still poll the queue: a second later another takes it.
    if (outcome?.led === false && outcome.stopping) {
      await beacon.resend(message, 1);
      return outcome;
    }
    if (outcome?.led === false && outcome.epoch !== undefined) {
      if (outcome.epoch === message.epoch) await beacon.resend(message, beacon.hiddenSeconds);
      // A wake that found a leader: that leader applies the request, unless it was in its last
      // turn before resting, whose look at the requests came first. A tick later it rests: look once more.
      else if (message.wake && !message.retried) await beacon.resend({ ...message, retried: true }, beacon.retrySeconds);
      return outcome;
    }
    // One beacon for the rest's end is enough, so a resent copy is a plain tick.
    if (outcome?.led === false && outcome.restingUntil) {
      const { wake: _wake, retried: _retried, ...tickOnly } = message;
      await beacon.resend(tickOnly, Math.max(1, beacon.secondsUntil(outcome.restingUntil)));
      return outcome;
    }
    await beacon.resend(message, beacon.retrySeconds);
    return outcome;
  };
}
