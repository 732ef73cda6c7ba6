import { sleep, timeoutSignal } from '../clock/clock';
import { ConcurrentUpdateError } from '../errors';
import type { ResolvedElectorOptions } from './elector-options';
import type { StoredHandoverRequest } from './handover-request-store';
import type { HandoverPolicy } from './handover-policy';
import { LEAVING_POLL_MS, nextCheckDelay } from './handover-timing';
import type { LeaderEvent } from './leader-events';
import type { HandoverClaim, LeaseRecord } from './lease-store';
import { bounded, type ActiveTerm, type Term } from './term';

/** What `handOver` did: whether this candidate led, and whom it handed the lease to. */
export type HandoverResult =
  | { led: false }
  /**
   * `to`: the successor the lease was reserved for; undefined when nobody asked in time (a plain
   * release). `released`: whether the lease was given back; if not, it expires.
   */
  | { led: true; epoch: number; to: string | undefined; waitedMs: number; released: boolean };

export interface HandoverOptions {
  /**
   * How long to lead on while waiting for a candidate to ask, and then for the task to reach a
   * safe point; fit it inside the host's shutdown grace. Past it the term ends as an abort would.
   */
  waitMs: number;
  /**
   * When the lease must be back, counted from the call, for a host that kills the process a
   * fixed time after asking it to stop. The wait and the task's safe point are cut short to
   * leave the last calls their share; a task still running then is abandoned (its writes stay
   * fenced by the epoch) and each last call is bounded by what is left. Default: no bound but
   * `waitMs` and `abandonTaskAfterMs`.
   */
  deadlineMs?: number;
  /** Aborting ends the wait: the term then ends at once, as with nobody asking. */
  signal?: AbortSignal;
}

/** What the two sides of a handover need of the elector, and no more. */
export interface HandoverContext {
  readonly options: ResolvedElectorOptions;
  /**
   * One acquire of the free lease with a new epoch (the elector's own, so a term it wins is its
   * term); `read` is the free lease as read just before, which says how it was freed and by whom.
   */
  tryAcquire(signal: AbortSignal | undefined, read?: LeaseRecord): Promise<Term | undefined>;
  emit(event: LeaderEvent): void;
}

/** A term of this elector, and what settles once it has ended. */
export interface EndingTerm {
  term: ActiveTerm;
  ended: Promise<void>;
}

/**
 * Handover between ranked candidates (Bully semantics over one lease), both sides of it:
 * - a candidate that outranks the holder asks for the lease with a request beside it
 *   (`HandoverRequestStore`), and polls the lease while the request stands;
 * - the holder looks for requests on a cadence and yields at its task's next safe point,
 *   naming the requester in the lease record (a reservation) before it releases;
 * - a holder that is leaving says so in the lease and yields to any candidate that asks;
 * - a candidate leaves a free lease, for a while, to a last holder that outranks it, to the
 *   candidate it was reserved for, or to a candidate that outranks it and asked while the last
 *   holder was releasing anyway (its term ended before it saw the request).
 * Equal ranks never ask and never defer, so ties elect as before: whoever tries first. The
 * decisions are `HandoverPolicy`'s; this does the storage calls and the waiting.
 */
export class Handover {
  /** The free-lease claim this candidate last said it defers to, so it says so once. */
  private deferredTo: string | undefined;

  constructor(
    private readonly ctx: HandoverContext,
    readonly policy: HandoverPolicy,
  ) {}

  private get options(): ResolvedElectorOptions {
    return this.ctx.options;
  }

  private get requests() {
    // Set whenever the rank, and so this, is (see resolveElectorOptions).
    return this.options.requests!;
  }

  private bounded<T>(call: (abortSignal: AbortSignal) => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    return bounded(this.options.clock, this.options.renewDeadlineMs, call, signal);
  }

  // --- the candidate's side -----------------------------------------------------------------

  /**
   * The handover request beside a free lease (one read). A failed read is no request: it must
   * not keep anyone from leading.
   */
  async standingRequest(signal: AbortSignal | undefined): Promise<StoredHandoverRequest | undefined> {
    try {
      return await this.bounded((abortSignal) => this.requests.readRequest({ abortSignal }), signal);
    } catch {
      signal?.throwIfAborted();
      return undefined;
    }
  }

  /** Whether to leave a free lease alone for now (see `HandoverPolicy.defers`); says so once per claim. */
  deferring(record: LeaseRecord, request?: StoredHandoverRequest): boolean {
    const claim = this.policy.defers(record, request);
    if (!claim) return false;
    const key = `${record.epoch}|${claim.requester}`;
    if (this.deferredTo !== key) {
      this.deferredTo = key;
      this.ctx.emit({
        type: 'deferred',
        identity: this.options.identity,
        to: claim.requester,
        reserved: record.reservedFor !== undefined,
        forMs: this.options.handover.deferMs,
      });
    }
    return true;
  }

  /**
   * Asks the holder in `record`, whom this candidate outranks (or who is leaving), to hand over,
   * and waits for the lease while the request stands, reading it every `pollMs`: the holder
   * releases at its next safe point, and this candidate should be the one to take it. Gives up
   * when someone at least as high asked first, when the holder changes, or when the request
   * lapses unanswered (then it leaves that term alone for a while).
   */
  async ask(record: LeaseRecord, signal: AbortSignal | undefined): Promise<Term | undefined> {
    const { identity, handover } = this.options;
    let version: string;
    try {
      const standing = await this.bounded((abortSignal) => this.requests.readRequest({ abortSignal }), signal);
      if (this.policy.yieldsTo(standing)) return undefined;
      const request = { requester: identity, rank: this.policy.rank, ttlMs: handover.requestTtlMs };
      version = await this.bounded(
        (abortSignal) =>
          this.requests.writeRequest(request, { abortSignal, ...(standing ? { replacing: standing.version } : {}) }),
        signal,
      );
    } catch (error) {
      signal?.throwIfAborted();
      // Another candidate wrote first, or storage failed: this tick is over; the next may ask.
      if (!(error instanceof ConcurrentUpdateError)) this.ctx.emit({ type: 'acquire-failed', identity, error });
      return undefined;
    }
    this.ctx.emit({ type: 'handover-asked', identity, holder: record.holder ?? '', epoch: record.epoch });
    try {
      return await this.awaitHandover(record, signal);
    } finally {
      // Taken, given up or stopped: a request left standing would keep others deferring to a
      // candidate that is not waiting. Not with the caller's signal, which may be what stopped it.
      await this.bounded((abortSignal) => this.requests.deleteRequest(version, { abortSignal }), undefined).catch(
        () => undefined,
      );
    }
  }

  /**
   * Reads the lease every `pollMs` (every `LEAVING_POLL_MS` while its holder is leaving) while this
   * candidate's request stands, and takes it once it is free and not left to someone else.
   */
  private async awaitHandover(record: LeaseRecord, signal: AbortSignal | undefined): Promise<Term | undefined> {
    const { clock, handover, store } = this.options;
    const askedAt = clock.now();
    let leaving = record.leaving === true;
    while (clock.now() - askedAt < handover.requestTtlMs) {
      await sleep(clock, leaving ? Math.min(handover.pollMs, LEAVING_POLL_MS) : handover.pollMs, signal);
      let now: LeaseRecord;
      try {
        now = await this.bounded((abortSignal) => store.read({ abortSignal }), signal);
      } catch {
        signal?.throwIfAborted();
        continue;
      }
      if (now.leased) {
        // Someone else took over meanwhile: ask again on a later tick if this one still outranks it.
        if (now.epoch !== record.epoch) return undefined;
        // A holder asked by a higher rank may start leaving meanwhile (a deploy drains it).
        leaving ||= now.leaving === true;
        continue;
      }
      if (this.deferring(now)) return undefined;
      // Ours now, if the acquire wins; the request has done its work either way.
      return await this.ctx.tryAcquire(signal, now);
    }
    this.policy.unansweredBy(record.epoch);
    return undefined;
  }

  // --- the holder's side --------------------------------------------------------------------

  /**
   * Looks for requests until `stop` aborts, and yields to the first it should honour: by default
   * once per handover check, on the followers' grid (just after the instants they tick on,
   * when they ask), for the whole term; while leaving, every `pollMs`, for any candidate. A
   * failed read is tried again at the next check: a request is a wish, never a reason to end
   * the term.
   */
  async watch(
    term: ActiveTerm,
    stop: AbortSignal = term.stopSignal,
    cadence: { everyMs: number; leaving?: boolean } = { everyMs: this.options.handover.checkMs },
  ): Promise<void> {
    const { clock, expiryAlignment, identity } = this.options;
    const grid = cadence.leaving ? undefined : expiryAlignment;
    for (;;) {
      try {
        await sleep(clock, nextCheckDelay(clock.date().getTime(), cadence.everyMs, grid), stop);
      } catch {
        return;
      }
      let request: StoredHandoverRequest | undefined;
      try {
        request = await bounded(
          clock,
          Math.max(1, term.view.remainingMs()),
          (abortSignal) => this.requests.readRequest({ abortSignal }),
          stop,
        );
      } catch {
        if (stop.aborted) return;
        continue;
      }
      if (stop.aborted) return;
      if (this.policy.honours(request, cadence.leaving)) {
        this.ctx.emit({ type: 'handover-requested', identity, epoch: term.epoch, requester: request.requester });
        term.yieldTo(request);
        return;
      }
    }
  }

  /**
   * Make-before-break (see `LeaderElector.handOver`): says in the lease that this holder is
   * leaving, goes on leading while it waits for any candidate to ask, and ends the term once
   * one has and the task has reached its safe point, or once the wait is over.
   */
  async leave(active: EndingTerm, options: HandoverOptions): Promise<void> {
    const { clock, store, identity, handover } = this.options;
    const { term } = active;
    // No wait: nobody could ask in time, so the term just ends (and says nothing of leaving).
    if (options.waitMs <= 0) return;
    const waiting = timeoutSignal(clock, options.waitMs, options.signal);
    // Aborted by the caller or when the wait is over; the term's own end stops it too.
    const stop = AbortSignal.any([waiting.signal, term.stopSignal]);
    try {
      if (!stop.aborted) {
        this.ctx.emit({ type: 'leaving', identity, epoch: term.epoch, waitMs: options.waitMs });
        const marked = await this.bounded(
          (abortSignal) => term.serially(() => store.mark(term.leaseId, { kind: 'leaving' }, { abortSignal })),
          stop,
        ).then(
          () => true,
          () => false,
        );
        if (marked) {
          term.leaving = true;
          await this.watch(term, stop, { everyMs: handover.pollMs, leaving: true });
        }
      }
      // Asked: the task returns at its next safe point, and gets as long again as the wait to
      // reach it, however late in the wait the request came.
      if (term.handoverTo) {
        await Promise.race([active.ended, sleep(clock, options.waitMs, options.signal).catch(() => undefined)]);
      }
    } finally {
      waiting.dispose();
    }
  }

  /**
   * Names the successor in the lease under the term's lease, while it still holds, and returns
   * it. `asked` is the request the holder saw, a check and up to a step ago: its requester may
   * have given up since (then every other candidate would leave the lease to nobody for
   * `deferMs`) or been displaced by a higher one. So the request standing now decides: it, if
   * the holder would honour it; nobody (a plain release) if none stands. A failed read keeps
   * `asked`, and a failed mark only loses the hint.
   */
  async reserve(term: ActiveTerm, asked: HandoverClaim): Promise<HandoverClaim | undefined> {
    const { store, clock } = this.options;
    const left = () => term.deadline - clock.now();
    if (left() <= 0) return asked;
    let to: HandoverClaim | undefined = asked;
    try {
      // A third of what is left, so a slow read still leaves the mark and the release theirs.
      const standing = await bounded(clock, Math.max(1, term.lastCallMs(left()) / 3), (abortSignal) =>
        this.requests.readRequest({ abortSignal }),
      );
      to = this.policy.honours(standing, term.leaving) ? { requester: standing.requester, rank: standing.rank } : undefined;
    } catch {
      // Unknown: the request seen is the best guess, and a stale one costs at most `deferMs`.
    }
    if (!to || left() <= 0) return to;
    try {
      await bounded(clock, term.lastCallMs(left()), (abortSignal) =>
        term.serially(() => store.mark(term.leaseId, { kind: 'reserved', to }, { abortSignal })),
      );
    } catch {
      // The release still lets the requester, polling, take the lease; it only races the others.
    }
    return to;
  }
}
