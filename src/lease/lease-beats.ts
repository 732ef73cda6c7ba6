import type { LeaseLostError } from '../errors';

/**
 * Sends a holder's beats (see `LeaderElectorOptions.breakAfterMs`) from outside the holder's
 * event loop. Beats from the loop stop whenever a task holds it: an item that computes for
 * seconds on the leader's instance looks, to a candidate, exactly like a crash, and the lease is
 * broken needlessly. Beats from a thread stop only when the whole process does (a crash, a kill,
 * SIGSTOP, a frozen VM), which is what a takeover is for. A loop held for longer than the lease
 * still loses it: renewals stay on the loop, so the lease duration bounds how long a holder that
 * does nothing may keep it.
 */
export interface LeaseBeats {
  /** Begins beating the lease `leaseId` holds, every `everyMs`, until the run stops. */
  start(leaseId: string, options: BeatOptions): BeatRun;
}

/** How a run beats (the elector passes a quarter of `breakAfterMs`, and `breakAfterMs` as the bound). */
export interface BeatOptions {
  /** The time between beats. */
  everyMs: number;
  /** The bound on each beat. */
  timeoutMs: number;
  /**
   * Storage refused a beat: the lease is not held by `leaseId` any more, or someone else holds
   * it. Called on the holder's loop, so late if the loop is held.
   */
  onRefused(error: LeaseLostError): void;
}

/** One term's beats. */
export interface BeatRun {
  /**
   * Runs a holder write with no beat in flight, and lets none start until it settles: a beat
   * changes the ETag that the holder's other writes are conditional on.
   */
  exclusive<T>(write: () => Promise<T>): Promise<T>;
  /** Stops beating; settles once no beat is in flight, so a write after it meets none. */
  stop(): Promise<void>;
}
