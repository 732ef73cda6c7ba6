import { sleep, timeoutSignal, type Clock } from '../clock/clock';
import { compareRanks, type LeaderRank } from './leader-rank';
import { requestStands, type HandoverClaim, type LeaseRecord, type LeaseStore, type StoredHandoverRequest } from './lease-store';

/**
 * Handover between ranked candidates (Bully semantics over one lease), the parts that are not
 * the elector's own loop:
 * - a candidate that outranks the holder asks for the lease with a request beside it;
 * - the holder looks for requests on a cadence and yields at its task's next safe point,
 *   naming the requester in the lease record (a reservation) before it releases;
 * - a candidate leaves a free lease, for a while, to a last holder that outranks it, to the
 *   candidate it was reserved for, or to a candidate that outranks it and asked while the last
 *   holder was releasing anyway (its term ended before it saw the request).
 * Equal ranks never ask and never defer, so ties elect as before: whoever tries first.
 */
export interface HandoverTiming {
  /** How often the holder looks for a request. */
  checkMs: number;
  /** How long a request stands after it is written; the requester waits for it that long. */
  requestTtlMs: number;
  /** How often a requester reads the lease while its request stands. */
  pollMs: number;
  /** How long a candidate leaves a free lease to a higher-ranked last holder or the reserved candidate. */
  deferMs: number;
}

/** After the wall-clock grid instant the others tick on, the holder looks this much later. */
export const CHECK_LAG_MS = 250;
/**
 * How often a requester reads the lease once its holder is leaving (at most; `pollMs` when
 * shorter): its wait after the release is the leaderless gap. It polls this fast only while a
 * holder that said it is leaving still holds the lease: until the holder releases, a few seconds,
 * or until its lease expires if it died meanwhile (300 reads at most on a 15 s lease).
 */
export const LEAVING_POLL_MS = 50;
/** A request the holder did not answer is not repeated to the same term for this many TTLs. */
const UNANSWERED_BACKOFF_TTLS = 5;

export function defaultHandoverTiming(acquireRetryMs: number): HandoverTiming {
  const checkMs = 2000;
  return { checkMs, requestTtlMs: 3 * checkMs + 2000, pollMs: 100, deferMs: 3 * acquireRetryMs };
}

/** What one candidate knows to decide handovers: who it is and its rank. */
export class HandoverPolicy {
  /** The free-lease claim this candidate is deferring to, and since when (local monotonic time). */
  private deferral: { key: string; since: number } | undefined;
  /** The term whose holder did not answer this candidate's last request, and until when to leave it be. */
  private unanswered: { epoch: number; until: number } | undefined;

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
    return compareRanks(this.rank, record.holderRank) > 0;
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
    if (claim && claim.requester !== this.identity) {
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

/**
 * The holder's side: reads the request every `cadence.everyMs` (on a wall-clock grid, just after
 * the instants the other candidates tick on, when there is one) until `stop` aborts, and calls
 * `onRequest` once for the first request the holder should honour (any candidate's once it is
 * `leaving`). A failed read is tried again at the next check: a request is a wish, never a
 * reason to end the term.
 */
export async function watchForRequests(
  store: LeaseStore,
  policy: HandoverPolicy,
  clock: Clock,
  cadence: { everyMs: number; grid?: { periodMs: number; offsetMs: number } | undefined; leaving?: boolean },
  stop: AbortSignal,
  boundMs: () => number,
  onRequest: (request: StoredHandoverRequest) => void,
): Promise<void> {
  for (;;) {
    try {
      await sleep(clock, nextCheckDelay(clock.date().getTime(), cadence.everyMs, cadence.grid), stop);
    } catch {
      return;
    }
    const bound = timeoutSignal(clock, Math.max(1, boundMs()), stop);
    let request: StoredHandoverRequest | undefined;
    try {
      request = await store.readRequest({ abortSignal: bound.signal });
    } catch {
      if (stop.aborted) return;
      continue;
    } finally {
      bound.dispose();
    }
    if (stop.aborted) return;
    if (policy.honours(request, cadence.leaving)) {
      onRequest(request);
      return;
    }
  }
}

/**
 * The wait before the next check: `checkMs` on average. On a grid, the check lands `CHECK_LAG_MS`
 * after one of its instants, when requesters have just written (they ask on their ticks).
 */
export function nextCheckDelay(
  wallNow: number,
  checkMs: number,
  grid: { periodMs: number; offsetMs: number } | undefined,
): number {
  if (!grid || checkMs < grid.periodMs) return checkMs;
  const earliest = wallNow + checkMs - grid.periodMs / 2;
  const phase = (grid.offsetMs + CHECK_LAG_MS) % grid.periodMs;
  const into = (((earliest - phase) % grid.periodMs) + grid.periodMs) % grid.periodMs;
  const at = into === 0 ? earliest : earliest + grid.periodMs - into;
  return at - wallNow;
}
