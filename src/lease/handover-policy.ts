import type { Clock } from '../clock/clock';
import type { HandoverTiming } from './handover-timing';
import { requestStands, type StoredHandoverRequest } from './handover-request-store';
import { compareRanks, type LeaderRank } from './leader-rank';
import type { HandoverClaim, LeaseRecord } from './lease-store';

/** A request the holder did not answer is not repeated to the same term for this many TTLs. */
const UNANSWERED_BACKOFF_TTLS = 5;
/**
 * After a term of its own failed, a candidate asks no holder for the lease for this many TTLs,
 * doubling with each failure in a row up to `FAILED_BACKOFF_MAX_TTLS`: its rank says it should
 * lead, its failures say it cannot, and each handover to it costs the hub a term.
 */
const FAILED_BACKOFF_TTLS = 5;
const FAILED_BACKOFF_MAX_TTLS = 80;

/** What one candidate knows to decide handovers: who it is and its rank. */
export class HandoverPolicy {
  /** The free-lease claim this candidate is deferring to, and since when (local monotonic time). */
  private deferral: { key: string; since: number } | undefined;
  /** The term whose holder did not answer this candidate's last request, and until when to leave it be. */
  private unanswered: { epoch: number; until: number } | undefined;
  /** Terms of this candidate that failed in a row, and until when it claims no precedence (monotonic). */
  private failed = { inARow: 0, until: 0 };

  constructor(
    readonly identity: string,
    readonly rank: LeaderRank,
    readonly timing: HandoverTiming,
    private readonly clock: Clock,
  ) {}

  /**
   * Whether this candidate should ask the holder of `record` (leased) to hand over: it outranks
   * the holder, or the holder said it is leaving (then any candidate may be its successor).
   */
  shouldAsk(record: LeaseRecord): boolean {
    if (!record.leased || record.holder === undefined || record.holder === this.identity) return false;
    if (this.backingOff()) return false;
    // A holder that gave no rank cannot be compared, and may not know about requests at all.
    const outranks = record.holderRank !== undefined && compareRanks(this.rank, record.holderRank) > 0;
    if (!outranks && !record.leaving) return false;
    const quiet = this.unanswered;
    return !(quiet && quiet.epoch === record.epoch && this.clock.now() < quiet.until);
  }

  /**
   * Whether this candidate outranks whoever held the lease last: then it does not wait out that
   * holder's rest, as a newer version may run jobs the resting leader did not know of.
   */
  outranksLastHolder(record: LeaseRecord): boolean {
    if (record.holder === undefined || record.holder === this.identity || record.holderRank === undefined) return false;
    return !this.backingOff() && compareRanks(this.rank, record.holderRank) > 0;
  }

  /**
   * Notes how a term of this candidate ended: `failed` when its task threw or stalled on its own
   * (not when the term was ended for it). Until the back-off is over it asks for no handover.
   */
  termEnded(failed: boolean): void {
    if (!failed) {
      this.failed = { inARow: 0, until: 0 };
      return;
    }
    const inARow = this.failed.inARow + 1;
    const ttls = Math.min(FAILED_BACKOFF_MAX_TTLS, FAILED_BACKOFF_TTLS * 2 ** (inARow - 1));
    this.failed = { inARow, until: this.clock.now() + ttls * this.timing.requestTtlMs };
  }

  private backingOff(): boolean {
    return this.clock.now() < this.failed.until;
  }

  /** Whether a standing request from someone else keeps this candidate from asking. */
  yieldsTo(request: StoredHandoverRequest | undefined): boolean {
    if (!request || !requestStands(request) || request.requester === this.identity) return false;
    return compareRanks(request.rank, this.rank) >= 0;
  }

  /** Notes that the holder of `epoch` let this candidate's request stand unanswered. */
  unansweredBy(epoch: number): void {
    this.unanswered = { epoch, until: this.clock.now() + UNANSWERED_BACKOFF_TTLS * this.timing.requestTtlMs };
  }

  /**
   * Whether to leave the free lease in `record` alone for now: it was reserved for another
   * candidate that ranks at least as high, its last holder outranks this one, or `request` (the
   * standing request, if read) is one the holder would have honoured. Only for `deferMs` after
   * this candidate first saw it so, by its own clock: a reserved candidate, a higher-ranked
   * holder or a requester that went away must not leave the lease to nobody.
   */
  defers(record: LeaseRecord, request?: StoredHandoverRequest): HandoverClaim | undefined {
    const found = this.claimOver(record, request);
    if (!found) return this.clear();
    const key = `${record.epoch}|${found.kind}|${found.claim.requester}`;
    const now = this.clock.now();
    if (this.deferral?.key !== key) this.deferral = { key, since: now };
    return now - this.deferral.since < this.timing.deferMs ? found.claim : undefined;
  }

  /** The claim on a free lease that outranks this candidate, if any (see `defers`). */
  private claimOver(
    record: LeaseRecord,
    request: StoredHandoverRequest | undefined,
  ): { kind: 'reserved' | 'held' | 'asked'; claim: HandoverClaim } | undefined {
    if (record.reservedFor?.requester === this.identity) return undefined;
    const claim = claimOn(record);
    // A last holder that said it was leaving (stopping, or its term failed) is not coming back.
    const gone = !record.reservedFor && record.leaving === true;
    if (claim && !gone && claim.requester !== this.identity) {
      const order = compareRanks(claim.rank, this.rank);
      if (record.reservedFor ? order >= 0 : order > 0) return { kind: record.reservedFor ? 'reserved' : 'held', claim };
    }
    // A holder whose term ended just as the request came released without naming anyone; the
    // request still says who should lead next, so a candidate it outranks leaves the lease to it.
    if (this.honours(request)) return { kind: 'asked', claim: { requester: request.requester, rank: request.rank } };
    return undefined;
  }

  /**
   * Whether the holder should yield to `request`: one that outranks it, or, once the holder is
   * `leaving`, any candidate's.
   */
  honours(request: StoredHandoverRequest | undefined, leaving = false): request is StoredHandoverRequest {
    return (
      request !== undefined &&
      requestStands(request) &&
      request.requester !== this.identity &&
      (leaving || compareRanks(request.rank, this.rank) > 0)
    );
  }

  private clear(): undefined {
    this.deferral = undefined;
    return undefined;
  }
}

function claimOn(record: LeaseRecord): HandoverClaim | undefined {
  if (record.reservedFor) return record.reservedFor;
  return record.holder !== undefined && record.holderRank ? { requester: record.holder, rank: record.holderRank } : undefined;
}
