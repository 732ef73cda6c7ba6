import { setMaxListeners } from 'node:events';
import { timeoutSignal, type Clock, type TimerHandle } from '../clock/clock';
import { LeaseLostError, type LeaseLossReason } from '../errors';
import { emitEvent, type ResolvedElectorOptions } from './elector-options';
import { checkRaiseAbove, type HandoverClaim, type LeaseHolderBefore } from './lease-store';
import type { BeatRun } from './lease-beats';

/** What a leader's task receives. */
export interface Leadership {
  readonly identity: string;
  /**
   * The epoch, this term's fencing token: strictly greater than every earlier holder's. Pass it
   * with every write, read afresh for each: `raiseEpoch` can raise it during the term.
   */
  readonly epoch: number;
  /** Aborted when leadership ends for any reason; its reason is a `LeaseLostError` on loss. */
  readonly signal: AbortSignal;
  /**
   * Aborted when a higher-ranked candidate asked for the lease. Finish the step in hand, leave
   * your state checkpointed, and return: the elector then names the requester in the lease and
   * releases it. Ignoring it is safe, only slower: the term runs on as usual.
   */
  readonly yieldSignal: AbortSignal;
  /** Tells the watchdog the task is making progress. Call it at least every `stallTimeoutMs`. */
  heartbeat(): void;
  /**
   * Milliseconds until this leader would declare the lease lost if no renewal lands, by the
   * local monotonic clock. Bound storage calls by it.
   */
  remainingMs(): number;
  /**
   * Raises this term's epoch above `above` (a stored epoch that refused a write) with a write to
   * the lease record under this term's lease, and resolves with the new epoch, which `epoch`
   * then reads. A holder whose lease record was deleted restarts at epoch 1, below its hub's
   * documents; this is how it climbs back in the same term. Resolves at once when `epoch` is
   * already above. Rejects with `LeaseLostError` (and the term ends) when storage says this
   * term's lease no longer holds: a stale leader cannot raise.
   */
  raiseEpoch(above: number): Promise<number>;
  /**
   * Says that nothing needs a leader before `at` (by the elector clock's `date()`); undefined
   * takes it back. When the task then returns, the elector writes it into the lease before
   * releasing, and candidates leave the free lease alone until then (`runIfLeader` answers
   * `restingUntil`, after one read, and without one until then) unless they are woken
   * (`RunOptions.wake`). So an idle leader can return
   * between occurrences without every tick electing a leader with nothing to do. It has no
   * effect on a term that hands over, is lost, or ends with `at` already past.
   */
  restUntil(at: Date | undefined): void;
}

/** One won term; `raiseEpoch` changes `epoch` in place, so whoever holds it sees the raised one. */
export interface Term {
  leaseId: string;
  epoch: number;
  startedAt: number;
  /** The holder before this one, and how its lease became free, when the lease record said. */
  after?: LeaseHolderBefore;
}

/** The mutable state of one term of leadership. */
export class ActiveTerm {
  readonly leaseId: string;
  lastRenewAt: number;
  lastHeartbeat: number;
  loss: LeaseLossReason | undefined;
  /**
   * The candidate this term was asked to hand over to, once asked; at the term's end, the one
   * whose request still stood (see `Handover.reserve`), or undefined when none did.
   */
  handoverTo: HandoverClaim | undefined;
  /** Whether the lease says this holder is leaving (then it yields to any candidate's request). */
  leaving = false;
  /** What the task said with `restUntil`. */
  restingUntil: Date | undefined;
  /**
   * When a stopping holder must have the lease back (the elector clock's `now()`), once a
   * handover with a deadline began: the last calls of the term are bounded by it.
   */
  releaseBy: number | undefined;
  /** Whether the lease was released when the term ended; read once `ended` settles. */
  released = false;
  readonly view: Leadership;
  private readonly abort = new AbortController();
  private readonly yielding = new AbortController();
  private readonly stop = new AbortController();
  private readonly abandoning = new AbortController();

  private deadlineTimer: TimerHandle | undefined;
  /**
   * The holder's writes to the record (raises, marks, beats) run one at a time: each but the
   * beat reads before it writes, conditional on what it read, and must not meet its own beat in
   * between; and a second raise sees the first one's epoch before writing.
   */
  private writing: Promise<unknown> = Promise.resolve();
  private beatRun: BeatRun | undefined;

  constructor(
    private readonly term: Term,
    private readonly options: ResolvedElectorOptions,
    private readonly onDeadline: (term: ActiveTerm) => void,
  ) {
    this.leaseId = term.leaseId;
    this.lastRenewAt = term.startedAt;
    this.lastHeartbeat = options.clock.now();
    // The task passes this signal to many storage calls at once, each adding a listener.
    setMaxListeners(0, this.abort.signal);
    this.armDeadline();
    const self = this;
    this.view = {
      identity: options.identity,
      get epoch() {
        return term.epoch;
      },
      raiseEpoch: (above) => self.raise(above),
      restUntil: (at) => {
        self.restingUntil = at ? new Date(at) : undefined;
      },
      signal: this.abort.signal,
      yieldSignal: this.yielding.signal,
      heartbeat: () => {
        self.lastHeartbeat = options.clock.now();
      },
      remainingMs: () => (self.loss ? 0 : Math.max(0, self.deadline - options.clock.now())),
    };
  }

  get epoch(): number {
    return this.term.epoch;
  }

  /** A higher-ranked candidate asked: the task should return at its next safe point. */
  yieldTo(claim: HandoverClaim): void {
    if (this.handoverTo) return;
    this.handoverTo = { requester: claim.requester, rank: { ...claim.rank } };
    this.yielding.abort(new DOMException(`handover requested by ${claim.requester}`, 'AbortError'));
  }

  get deadline(): number {
    return this.lastRenewAt + this.options.renewDeadlineMs;
  }

  raise(above: number): Promise<number> {
    return this.serially(() => this.raiseNow(above));
  }

  /** Holder writes go through it while beats come from elsewhere (see `LeaseBeats`). */
  beatsFrom(run: BeatRun): void {
    this.beatRun = run;
  }

  /** Runs `write` once the holder's earlier writes have settled (see `writing`). */
  serially<T>(write: () => Promise<T>): Promise<T> {
    const done = this.writing.then(() => (this.beatRun ? this.beatRun.exclusive(write) : write()));
    this.writing = done.catch(() => undefined);
    return done;
  }

  private async raiseNow(above: number): Promise<number> {
    checkRaiseAbove(above);
    const from = this.term.epoch;
    if (from > above) return from;
    this.abort.signal.throwIfAborted();
    const { store, clock, identity } = this.options;
    // Bounded like every call of the term: past the deadline the lease may be someone else's.
    try {
      const epoch = await bounded(
        clock,
        Math.max(0, this.deadline - clock.now()),
        (abortSignal) => store.raiseEpoch(this.leaseId, above, { abortSignal }),
        this.abort.signal,
      );
      // A term that ended meanwhile must not hand out an epoch it no longer fences with.
      this.abort.signal.throwIfAborted();
      this.term.epoch = epoch;
      emitEvent(this.options, { type: 'epoch-raised', identity, epoch, from, above });
      return epoch;
    } catch (error) {
      if (error instanceof LeaseLostError) this.declareLost(error.reason, error);
      throw error;
    }
  }

  /** Ends the term as lost, once, and reports it. */
  declareLost(reason: LeaseLossReason, error?: unknown): void {
    if (this.loss) return;
    const sinceLastRenewMs = this.options.clock.now() - this.lastRenewAt;
    this.lose(reason);
    emitEvent(this.options, {
      type: 'lost',
      identity: this.options.identity,
      epoch: this.epoch,
      reason,
      sinceLastRenewMs,
      error,
    });
  }

  get stopSignal(): AbortSignal {
    return this.stop.signal;
  }

  /** Aborted when the term must end now, whether or not its task has returned (see `abandon`). */
  get abandonSignal(): AbortSignal {
    return this.abandoning.signal;
  }

  /**
   * Gives up on the task at once instead of after `abandonTaskAfterMs`: a stopping holder out of
   * time releases without it. Safe, because every write the task may still make is fenced by
   * this term's epoch, which the next holder's bump puts below its own.
   */
  abandon(): void {
    this.end(undefined);
    this.abandoning.abort();
  }

  /**
   * How long one of the term's last storage calls (a reservation, a rest mark, the release) may
   * take: `upToMs`, cut to what is left before `releaseBy` (never below `MIN_LAST_CALL_MS`, so a
   * holder out of time still tries to give the lease back).
   */
  lastCallMs(upToMs: number): number {
    if (this.releaseBy === undefined) return upToMs;
    return Math.min(upToMs, Math.max(MIN_LAST_CALL_MS, this.releaseBy - this.options.clock.now()));
  }

  renewed(startedAt: number): void {
    this.lastRenewAt = startedAt;
    this.armDeadline();
  }

  lose(reason: LeaseLossReason): void {
    if (this.loss) return;
    this.loss = reason;
    this.stopRenewing();
    this.abort.abort(new LeaseLostError(reason));
  }

  stopRenewing(): void {
    if (this.deadlineTimer) this.options.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    this.stop.abort();
  }

  /**
   * The deadline fires on its own timer, not only when the renew loop wakes: a renew call
   * that never returns must not keep the signal alive past the deadline.
   */
  private armDeadline(): void {
    if (this.stop.signal.aborted) return;
    if (this.deadlineTimer) this.options.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = this.options.clock.setTimeout(() => this.onDeadline(this), this.deadline - this.options.clock.now());
  }

  /** Ends the term's signal without a loss (normal end or the caller's abort). */
  end(reason: unknown): void {
    if (!this.abort.signal.aborted) this.abort.abort(reason ?? new DOMException('leadership ended', 'AbortError'));
  }
}

/** The shortest bound a stopping holder's last storage call gets: about one round trip to Azure storage under load. */
export const MIN_LAST_CALL_MS = 150;

/** Settles with `promise`, or rejects as soon as `signal` aborts, whichever comes first. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** One storage call, given up after `ms` (or when `signal` fires), whether or not the store heeds its signal. */
export async function bounded<T>(
  clock: Clock,
  ms: number,
  call: (abortSignal: AbortSignal) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const bound = timeoutSignal(clock, ms, signal);
  try {
    return await untilAborted(call(bound.signal), bound.signal);
  } finally {
    bound.dispose();
  }
}
