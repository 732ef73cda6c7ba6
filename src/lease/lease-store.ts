import type { LeaderRank } from './leader-rank';

/**
 * The storage port under leader election: one named lease with an epoch beside it.
 *
 * Implementations must keep these promises (the contract suite in `test/contract` checks them
 * on every implementation):
 * - `acquire` succeeds for exactly one caller while the lease is free; others get
 *   `LeaseHeldError`. Acquiring again with the id you hold renews.
 * - `renew` and `release` with a lease id that is no longer current throw `LeaseLostError`
 *   (`conflict`, or `broken` after `breakLease`).
 * - `bumpEpoch` writes `epoch + 1`, the holder (with its rank, when given) and the acquisition time, and succeeds only while
 *   `leaseId` holds the lease and nothing changed the record since it was read. When the holder
 *   differs from the recorded one, the same write appends a `LeadershipChange` to `changes`.
 * - `read` of a lease that is not leased says how it became free (`freedAs`) once it has been
 *   held: released, expired or broken. So the epoch
 *   strictly increases across holders, and a holder whose bump succeeded is the only one with
 *   that epoch.
 * - `raiseEpoch` writes an epoch above both the current one and `above`, and succeeds only while
 *   `leaseId` holds the lease and nothing changed the record since it was read. It is how a
 *   holder whose epoch restarted (the lease blob or its container was deleted) climbs back above
 *   the epochs its documents carry; a holder that lost the lease cannot raise, so the only epoch
 *   that can climb is the current holder's, and every later holder bumps above it.
 * - With an epoch mark (`BlobEpochMark`; the in-memory store always has one), an epoch once handed
 *   out is never handed out again, even after the lease record was deleted under its holder: each
 *   bump or raise goes above every earlier one.
 * - `reserve` succeeds only while `leaseId` holds the lease; `bumpEpoch` clears the reservation.
 * - `markLeaving` likewise succeeds only while `leaseId` holds the lease, and `bumpEpoch` clears it.
 * - `markResting` likewise; the mark outlives the release (that is its point) until `bumpEpoch`.
 * - A handover request is created only when none exists and replaced only at the version read,
 *   so of two candidates writing at once exactly one succeeds.
 * - Any other failure (timeouts, 5xx, aborts) is thrown as is; callers treat it as transient.
 */
export interface LeaseStore {
  /** A readable name for logs, such as the blob URL without query string. */
  readonly description: string;

  acquire(leaseId: string, durationSeconds: number, options?: LeaseCallOptions): Promise<void>;
  renew(leaseId: string, options?: LeaseCallOptions): Promise<void>;
  release(leaseId: string, options?: LeaseCallOptions): Promise<void>;
  /** The current record. `leased` is false when the lease is free, expired or broken. */
  read(options?: LeaseCallOptions): Promise<LeaseRecord>;
  /** Increments the epoch under the lease and records the holder; returns the new epoch. */
  bumpEpoch(leaseId: string, holder: string, options?: BumpOptions): Promise<number>;
  /**
   * Sets the epoch to `max(current, above) + 1` under the lease and returns it; holder and
   * acquisition time stay as they are. `above` must be a non-negative integer.
   */
  raiseEpoch(leaseId: string, above: number, options?: LeaseCallOptions): Promise<number>;
  /**
   * Under the lease: names the candidate the holder is handing the lease to, in the record that
   * every candidate reads (`LeaseRecord.reservedFor`). The next `bumpEpoch` clears it.
   */
  reserve(leaseId: string, reservation: HandoverClaim, options?: LeaseCallOptions): Promise<void>;
  /**
   * Under the lease: says in the record that every candidate reads (`LeaseRecord.leaving`) that
   * the holder is about to stop and hands over to the first candidate that asks, whatever its
   * rank. The next `bumpEpoch` clears it.
   */
  markLeaving(leaseId: string, options?: LeaseCallOptions): Promise<void>;
  /**
   * Under the lease, just before releasing it: says in the record that every candidate reads
   * (`LeaseRecord.restingUntil`) that nothing needs a leader before `until`, so candidates leave
   * the free lease alone until then. The next `bumpEpoch` clears it.
   */
  markResting(leaseId: string, until: Date, options?: LeaseCallOptions): Promise<void>;
  /**
   * The handover request stored beside the lease (the lease record itself cannot be written
   * without the lease id), or undefined when there is none. Its age is measured by the store's
   * own clock, so candidates whose clocks disagree agree on whether it still stands.
   */
  readRequest(options?: LeaseCallOptions): Promise<StoredHandoverRequest | undefined>;
  /**
   * Writes a handover request and returns its version. With `replacing`, only while the stored
   * request still has that version; without, only when there is none. Otherwise throws
   * `ConcurrentUpdateError`: another candidate wrote first.
   */
  writeRequest(request: HandoverRequest, options?: LeaseCallOptions & { replacing?: string }): Promise<string>;
  /** Deletes the handover request if it still has `version`; quietly does nothing otherwise. */
  deleteRequest(version: string, options?: LeaseCallOptions): Promise<void>;
}

/** Who a holder hands over to, or who asks for the lease, with the rank that entitles it. */
export interface HandoverClaim {
  requester: string;
  rank: LeaderRank;
}

/** A candidate's request that the holder hand the lease over, standing for `ttlMs` after it is written. */
export interface HandoverRequest extends HandoverClaim {
  ttlMs: number;
}

export interface StoredHandoverRequest extends HandoverRequest {
  /** Milliseconds since it was written, by the store's clock. */
  ageMs: number;
  /** For `writeRequest({ replacing })` and `deleteRequest`. */
  version: string;
}

/** Whether a stored request still stands. */
export function requestStands(request: StoredHandoverRequest): boolean {
  return request.ageMs < request.ttlMs;
}

export interface LeaseCallOptions {
  abortSignal?: AbortSignal;
}

export interface BumpOptions extends LeaseCallOptions {
  /** How the lease was free when this holder read it before acquiring (`LeaseRecord.freedAs`). */
  freedAs?: LeaseFreedAs | undefined;
  /** The new holder's rank, recorded beside its name (`LeaseRecord.holderRank`). */
  rank?: LeaderRank | undefined;
}

/** How a lease that nobody holds became free, as storage reports it. */
export type LeaseFreedAs = 'released' | 'expired' | 'broken';

/**
 * One change of holder, recorded by the new holder's epoch bump in the same write, so the
 * history costs no request: `reason` says how the lease was free when it read it, `first` when
 * there was no earlier holder, `unknown` when it could not tell.
 */
export interface LeadershipChange {
  at: Date;
  epoch: number;
  holder: string;
  previous: string | undefined;
  reason: LeaseFreedAs | 'first' | 'unknown';
}

/** Changes of holder a lease record keeps, newest last. */
export const LEADERSHIP_CHANGES_KEPT = 10;

/** The history after `holder` took over at `epoch`: unchanged when the holder did not change. */
export function withLeadershipChange(
  changes: readonly LeadershipChange[],
  previous: string | undefined,
  holder: string,
  epoch: number,
  at: Date,
  freedAs: LeaseFreedAs | undefined,
): LeadershipChange[] {
  if (previous === holder) return [...changes];
  const reason: LeadershipChange['reason'] = previous === undefined ? 'first' : (freedAs ?? 'unknown');
  return [...changes, { at, epoch, holder, previous, reason }].slice(-LEADERSHIP_CHANGES_KEPT);
}

export interface LeaseRecord {
  leased: boolean;
  /** The last holder that bumped the epoch; it may have lost the lease since. */
  holder: string | undefined;
  /** That holder's rank, when it gave one. */
  holderRank?: LeaderRank | undefined;
  epoch: number;
  acquiredAt: Date | undefined;
  /** How the lease became free, when it is not leased and storage says (a new record has none). */
  freedAs?: LeaseFreedAs | undefined;
  /** The last changes of holder, oldest first (at most `LEADERSHIP_CHANGES_KEPT`). */
  changes?: readonly LeadershipChange[];
  /** The candidate the last holder handed the lease to, until the next holder bumps the epoch. */
  reservedFor?: HandoverClaim | undefined;
  /** The holder said it is leaving (`markLeaving`), until the next holder bumps the epoch. */
  leaving?: boolean;
  /**
   * The last holder said nothing needs a leader before this time (`markResting`), by storage's
   * clock as its leader read it; it counts only while the lease is free.
   */
  restingUntil?: Date | undefined;
}

/** Refuses a bad `above` for `raiseEpoch`: a caller's bug, refused before any storage call. */
export function checkRaiseAbove(above: number): void {
  if (!Number.isSafeInteger(above) || above < 0 || above >= Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`cannot raise the epoch above ${above}: not a non-negative integer below Number.MAX_SAFE_INTEGER`);
  }
}

/** The epoch `raiseEpoch` writes. */
export function raisedEpoch(current: number, above: number): number {
  checkRaiseAbove(above);
  return Math.max(current, above) + 1;
}
