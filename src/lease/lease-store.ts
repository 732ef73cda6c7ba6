import type { LeaderRank } from './leader-rank';

/**
 * What readers of a lease need (status, the HTTP API, the client, the CLI): its name and its
 * record. Only an elector takes the whole `LeaseStore`.
 */
export interface LeaseReader {
  /** A readable name for logs, such as the blob URL without query string. */
  readonly description: string;
  /** The current record. `leased` is false when the lease is free, expired or broken. */
  read(options?: LeaseCallOptions): Promise<LeaseRecord>;
}

/**
 * The storage port under leader election: one named lease with an epoch beside it. The
 * handover request candidates leave beside it is a port of its own (`HandoverRequestStore`).
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
 * - `mark` succeeds only while `leaseId` holds the lease, and `bumpEpoch` clears every mark; a
 *   `resting` mark outlives the release (that is its point) until then.
 * - `version` changes with every write (bump, raise, mark) and with no lease operation;
 *   `breakIfUnchanged` breaks a held lease only at the version it names, so of candidates that
 *   saw the same stopped holder, a break can never hit a lease someone took since.
 * - Any other failure (timeouts, 5xx, aborts) is thrown as is; callers treat it as transient.
 */
export interface LeaseStore extends LeaseReader {
  acquire(leaseId: string, durationSeconds: number, options?: LeaseCallOptions): Promise<void>;
  renew(leaseId: string, options?: LeaseCallOptions): Promise<void>;
  release(leaseId: string, options?: LeaseCallOptions): Promise<void>;
  /** Increments the epoch under the lease and records the holder; returns the new epoch. */
  bumpEpoch(leaseId: string, holder: string, options?: BumpOptions): Promise<number>;
  /**
   * Sets the epoch to `max(current, above) + 1` under the lease and returns it; holder and
   * acquisition time stay as they are. `above` must be a non-negative integer.
   */
  raiseEpoch(leaseId: string, above: number, options?: LeaseCallOptions): Promise<number>;
  /**
   * Under the lease: says something about this holder's term in the record every candidate
   * reads (see `LeaseMark`). The next `bumpEpoch` clears it.
   */
  mark(leaseId: string, mark: LeaseMark, options?: LeaseCallOptions): Promise<void>;
  /**
   * Breaks the lease at once, whoever holds it, if the record is still at `version` (as a
   * `read` gave it): for a candidate that saw the holder's beats stop. Rejects with
   * `ConcurrentUpdateError` when anything wrote the record since (a beat: the holder lives; a
   * bump: someone else took over); resolves, doing nothing, when the lease is not held.
   */
  breakIfUnchanged(version: string, options?: LeaseCallOptions): Promise<void>;
}

/**
 * What a holder can say in the lease record, for the candidates that read it:
 * - `reserved`: it hands the lease to `to` (`LeaseRecord.reservedFor`);
 * - `leaving`: it is about to stop and hands over to the first candidate that asks, whatever its
 *   rank (`LeaseRecord.leaving`);
 * - `resting`: just before it releases, nothing needs a leader before `until`, so candidates
 *   leave the free lease alone until then (`LeaseRecord.restingUntil`);
 * - `alive`: a beat, so that candidates can tell a holder that stopped (`breakIfUnchanged`).
 */
export type LeaseMark =
  | { kind: 'reserved'; to: HandoverClaim }
  | { kind: 'leaving' }
  | { kind: 'resting'; until: Date }
  /** The holder is alive: a write that changes the record's `version` and nothing a reader sees. */
  | { kind: 'alive' };

/** Who a holder hands over to, or who asks for the lease, with the rank that entitles it. */
export interface HandoverClaim {
  requester: string;
  rank: LeaderRank;
}

/** A copy a caller cannot change under the store (the in-memory stores keep what they are given). */
export function claimCopy(claim: HandoverClaim): HandoverClaim {
  return { requester: claim.requester, rank: { ...claim.rank } };
}

export interface LeaseCallOptions {
  abortSignal?: AbortSignal;
}

export interface BumpOptions extends LeaseCallOptions {
  /** How the lease was free when this holder read it before acquiring (`LeaseRecord.freedAs`). */
  freedAs?: LeaseFreedAs | undefined;
  /** The new holder's rank, recorded beside its name (`LeaseRecord.holderRank`). */
  rank?: LeaderRank | undefined;
  /** How often the new holder beats (`LeaseRecord.beatsEveryMs`), when it does. */
  beatsEveryMs?: number | undefined;
}

/** How a lease that nobody holds became free, as storage reports it. */
export type LeaseFreedAs = 'released' | 'expired' | 'broken';

/** Who held the lease before a term, and how the lease became free (see `LeaseRecord.freedAs`). */
export interface LeaseHolderBefore {
  holder: string;
  freedAs: LeaseFreedAs | undefined;
}

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
  /** The holder said it is leaving (a `leaving` mark), until the next holder bumps the epoch. */
  leaving?: boolean;
  /**
   * The last holder said nothing needs a leader before this time (a `resting` mark), by storage's
   * clock as its leader read it; it counts only while the lease is free.
   */
  restingUntil?: Date | undefined;
  /**
   * Changes with every write to the record (a bump, a raise, any mark, the holder's beats) and
   * with nothing else: two reads with the same version saw nothing written between them.
   * Opaque (a blob's ETag); absent from a record that does not exist yet.
   */
  version?: string | undefined;
  /**
   * How long the record had gone unwritten when it was read, by storage's own clock (a blob's
   * `Date` less its `Last-Modified`, both to the second): a candidate's first read can already
   * tell that the holder's beats stopped. Absent when storage does not say.
   */
  quietMs?: number | undefined;
  /**
   * How often this holder said it beats (an `alive` mark), recorded by its bump; absent for a
   * holder that does not, which candidates never take for a stopped one.
   */
  beatsEveryMs?: number | undefined;
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
