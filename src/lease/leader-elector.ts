import { randomUUID } from 'node:crypto';
import { sleep, timeoutSignal, type TimerHandle } from '../clock/clock';
import { ConcurrentUpdateError, LeaseHeldError, LeaseLostError, TaskAbandonedError, type LeaseLossReason } from '../errors';
import { emitEvent, resolveElectorOptions, type LeaderElectorOptions, type ResolvedElectorOptions } from './elector-options';
import { Handover, type EndingTerm, type HandoverOptions, type HandoverResult } from './handover';
import { HandoverPolicy } from './handover-policy';
import type { LeaderEvent } from './leader-events';
import type { LeaseBeats } from './lease-beats';
import type { LeaseMark, LeaseRecord } from './lease-store';
import { ActiveTerm, bounded, untilAborted, type Leadership, type Term } from './term';

export interface LeaderInfo {
  identity: string | undefined;
  epoch: number;
  acquiredAt: Date | undefined;
}

export type RunIfLeaderResult<T> =
  | { led: true; value: T; epoch: number }
  /** `restingUntil`: the lease is free, and its last holder said nobody needs to lead before then. */
  | { led: false; holder: LeaderInfo | undefined; restingUntil?: Date };

export interface RunOptions {
  /** Aborting ends the task's leadership (its signal aborts), waits for it, then releases. */
  signal?: AbortSignal;
  /** Lead even if the last holder said the lease rests (`Leadership.restUntil`): something came up. */
  wake?: boolean;
}

/** What a leader runs for its term. */
export type Task<T> = (leadership: Leadership) => Promise<T> | T;
type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Leader election on a `LeaseStore`.
 *
 * Guaranteed:
 * - At most one candidate holds the lease at a time, as far as storage is concerned.
 * - Each new holder's epoch is strictly greater than every earlier holder's, across restarts,
 *   and across deletions of the lease record when the store keeps an epoch mark.
 * - A leader that cannot renew before its renew deadline, whose lease is taken or broken, or
 *   whose task stops calling `heartbeat()`, aborts `leadership.signal`, by the local monotonic
 *   clock, before the lease can expire in storage (the deadline is shorter than the lease).
 * - The lease is released only after the task has settled.
 *
 * Not guaranteed:
 * - That only one process *acts* as leader. A paused process (GC, SIGSTOP, frozen VM) learns of
 *   its loss only when it runs again, possibly after another has taken over. Writes must carry
 *   the epoch to storage that checks it (see `FencedDocuments`); that is what makes a stale
 *   leader harmless.
 * - Fairness. Among equal ranks (or without one) whoever tries first after the lease is free
 *   wins. A preferred leader (a higher `rank`) is a wish the others honour, not a lock: the
 *   holder yields at its task's next safe point, a requester that went away leaves a request
 *   that expires, and a reserved or higher-ranked lease is left alone only for a while, so
 *   nobody waits for a candidate that is gone.
 * - Tolerance of a clock that runs at the wrong *rate* by more than the margin between the renew
 *   deadline and the lease (a third of the lease by default). Clock offsets do not matter: only
 *   local durations are used.
 */
export class LeaderElector {
  private readonly options: ResolvedElectorOptions;
  /** This elector's own term, while it leads. */
  private current: LeaderInfo | undefined;
  /**
   * This elector's attempt to lead while it is under way (settles, never rejects). An overlapping
   * call waits for it instead of racing it: otherwise a slow acquire makes a second tick of the
   * same instance read a free lease and lose its own 409 race, or see a holder with no name yet.
   */
  private attempt: Promise<void> | undefined;
  /** Both sides of handovers, for a candidate with a rank. */
  private readonly handover: Handover | undefined;
  /** This elector's own term while it leads, and what settles when that term has ended. */
  private active: EndingTerm | undefined;
  /** The handover under way, so a second call waits for the first. */
  private leaving: Promise<HandoverResult> | undefined;
  /** Crash takeover: the held lease's record version this candidate last saw change, and when. */
  private silence: { version: string; since: number } | undefined;
  /**
   * Until when the lease rests, as this candidate last read it, and when it read that (local
   * monotonic time). A tick trusts it without a read for one lease duration at most: a wake on
   * another instance ends the rest early, and the term it starts may end with work still open
   * and no rest of its own, which only a read shows.
   */
  private restSeen: { until: Date; readAt: number } | undefined;

  constructor(options: LeaderElectorOptions) {
    this.options = resolveElectorOptions(options);
    const { identity, rank, handover, clock } = this.options;
    this.handover = rank
      ? new Handover(
          { options: this.options, tryAcquire: (signal, read) => this.tryAcquire(signal, read), emit: (e) => this.emit(e) },
          new HandoverPolicy(identity, rank, handover, clock),
        )
      : undefined;
  }

  get identity(): string {
    return this.options.identity;
  }

  /**
   * One attempt to lead, as a timer tick makes. Wins → runs `task`, releases when it settles,
   * and returns its value. The lease is held by someone else (including an earlier call of this
   * elector that still runs) → `{ led: false, holder }` at the cost of one storage read. A call
   * made while an earlier call of this elector is still acquiring waits for that attempt first,
   * and makes no storage call when the attempt wins.
   * Leadership lost while the task ran → throws `LeaseLostError` once the task has settled.
   */
  async runIfLeader<T>(task: Task<T>, options: RunOptions = {}): Promise<RunIfLeaderResult<T>> {
    const attempt = await this.acquireIfFree(options.signal, options.wake);
    if (!attempt.term) {
      return { led: false, holder: attempt.holder, ...(attempt.restingUntil ? { restingUntil: attempt.restingUntil } : {}) };
    }
    const value = await this.lead(attempt.term, task, options.signal);
    return { led: true, value, epoch: attempt.term.epoch };
  }

  /**
   * Waits until this candidate leads, retrying every `acquireRetryMs` (jittered) and riding out
   * storage errors, then runs `task` as `runIfLeader` does. Rejects with the signal's reason
   * when `options.signal` aborts first.
   */
  async runWhenLeader<T>(task: Task<T>, options: RunOptions = {}): Promise<T> {
    const { acquireRetryMs, random, clock } = this.options;
    for (;;) {
      let term: Term | undefined;
      try {
        term = (await this.acquireIfFree(options.signal, true)).term;
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        this.emit({ type: 'acquire-failed', identity: this.identity, error });
      }
      if (term) return this.lead(term, task, options.signal);
      await sleep(clock, acquireRetryMs * (0.75 + 0.25 * random()), options.signal);
    }
  }

  /**
   * Make-before-break, for a candidate about to stop (a shutdown, a deploy): it says in the lease
   * that it is leaving and goes on leading while it waits. The first candidate to ask (any rank,
   * on its next look at the lease) is yielded to as a higher-ranked one would be: the task
   * returns at its next safe point (`yieldSignal`; it gets up to `waitMs` more to reach it), the
   * lease is reserved for the requester and released, and the requester, polling, takes it.
   * Nobody asks within `waitMs` (or `signal` aborts) → the term ends as a caller's abort ends it,
   * with a plain release. Resolves once the term has ended, within twice `waitMs` and the task's
   * abandonment bound; at once with `{ led: false }` when this candidate does not lead (also while
   * it is still acquiring: that term is then ended by the caller's abort). Never rejects. A
   * candidate without a rank cannot say it is leaving: its term just ends. `to` names whom the
   * lease was reserved for; the reservation is a hint, and a failed one leaves the release plain.
   */
  handOver(options: HandoverOptions): Promise<HandoverResult> {
    const active = this.active;
    if (!active) return Promise.resolve({ led: false });
    this.leaving ??= this.leave(active, options).finally(() => (this.leaving = undefined));
    return this.leaving;
  }

  private async leave(active: EndingTerm, options: HandoverOptions): Promise<HandoverResult> {
    const { clock } = this.options;
    const { term } = active;
    const startedAt = clock.now();
    const epoch = term.epoch;
    // With a deadline, the wait and the safe point end early enough to leave the last calls
    // (a reservation, the release) their share of it; past that the task is abandoned.
    const cut =
      options.deadlineMs === undefined
        ? undefined
        : timeoutSignal(clock, Math.max(1, options.deadlineMs - lastCallsShare(options.deadlineMs)), options.signal);
    if (options.deadlineMs !== undefined) term.releaseBy = startedAt + options.deadlineMs;
    try {
      // A candidate without a rank cannot say it is leaving: its term just ends.
      if (this.handover) await this.handover.leave(active, cut ? { ...options, signal: cut.signal } : options);
      term.end(new DOMException(term.handoverTo ? 'handed over' : 'leaving', 'AbortError'));
      if (cut) {
        await Promise.race([active.ended, whenAborted(cut.signal)]);
        term.abandon();
      }
    } finally {
      cut?.dispose();
    }
    await active.ended;
    return { led: true, epoch, to: term.handoverTo?.requester, waitedMs: clock.now() - startedAt, released: term.released };
  }

  /** The current holder, or undefined when nobody holds the lease. */
  async getLeader(options: { abortSignal?: AbortSignal } = {}): Promise<LeaderInfo | undefined> {
    const record = await this.boundedRead(options.abortSignal);
    return record.leased ? holderOf(record) : undefined;
  }

  /** One read, given up after the renew deadline (or when `signal` fires). */
  private boundedRead(signal: AbortSignal | undefined): Promise<LeaseRecord> {
    const { clock, renewDeadlineMs, store } = this.options;
    return bounded(clock, renewDeadlineMs, (abortSignal) => store.read({ abortSignal }), signal);
  }

  /**
   * Reads first, so a tick that finds the lease held costs one read and makes no 409 noise;
   * only a free lease is worth an acquire.
   */
  private async acquireIfFree(signal: AbortSignal | undefined, wake = false): Promise<Attempt> {
    signal?.throwIfAborted();
    if (this.attempt) await (signal ? untilAborted(this.attempt, signal) : this.attempt);
    if (this.current) return { holder: { ...this.current } };
    const rest = this.restSeen;
    const { clock, leaseMs } = this.options;
    const trusted = rest && clock.now() - rest.readAt < leaseMs && clock.date().getTime() < rest.until.getTime();
    if (!wake && trusted) return { restingUntil: rest.until };
    const attempt = this.readThenAcquire(signal, wake);
    const settled = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.attempt = settled;
    try {
      return await attempt;
    } finally {
      if (this.attempt === settled) this.attempt = undefined;
    }
  }

  private async readThenAcquire(signal: AbortSignal | undefined, wake: boolean): Promise<Attempt> {
    this.restSeen = undefined;
    const record = await this.boundedRead(signal);
    let term: Term | undefined;
    if (record.leased && (await this.brokeStoppedHolder(record, signal))) {
      term = await this.tryAcquire(signal, { ...record, leased: false, freedAs: 'broken' });
    } else if (record.leased) {
      term = this.handover?.policy.shouldAsk(record) ? await this.handover.ask(record, signal) : undefined;
      if (!term) return { holder: holderOf(record) };
    } else {
      const resting = record.restingUntil;
      const rests = resting && !this.handover?.policy.outranksLastHolder(record);
      if (!wake && rests && this.options.clock.date().getTime() < resting.getTime()) {
        this.restSeen = { until: resting, readAt: this.options.clock.now() };
        return { restingUntil: resting };
      }
      if (this.handover?.deferring(record, await this.handover.standingRequest(signal))) return {};
      term = await this.tryAcquire(signal, record);
    }
    if (!term) return {};
    return this.won(term);
  }

  /**
   * Crash takeover (`breakAfterMs`): whether this read shows the same record version as one at
   * least `breakAfterMs` ago, and the lease was broken at that version. Anyone who wrote since
   * (the holder's beat, a new holder's bump) makes the break fail, and the silence starts again.
   */
  private async brokeStoppedHolder(record: LeaseRecord, signal: AbortSignal | undefined): Promise<boolean> {
    const { takeover, clock, store, renewDeadlineMs, identity } = this.options;
    // A holder that does not beat (another version, or takeover off there) waits out its lease.
    if (!takeover || record.version === undefined || !record.beatsEveryMs) return false;
    // Four of the holder's own beats at least, whatever this candidate's setting.
    const breakAfterMs = Math.max(takeover.breakAfterMs, 4 * record.beatsEveryMs);
    const now = clock.now();
    if (this.silence?.version !== record.version) this.silence = { version: record.version, since: now };
    const { version, since } = this.silence;
    // What this candidate saw, or what storage says, less its clock's whole-second resolution.
    const silentMs = Math.max(now - since, (record.quietMs ?? 0) - QUIET_RESOLUTION_MS);
    if (silentMs < breakAfterMs) return false;
    this.silence = undefined;
    try {
      await bounded(clock, renewDeadlineMs, (abortSignal) => store.breakIfUnchanged(version, { abortSignal }), signal);
    } catch (error) {
      if (error instanceof ConcurrentUpdateError) return false;
      throw error;
    }
    this.emit({ type: 'broke', identity, holder: record.holder, epoch: record.epoch, silentMs });
    return true;
  }

  private won(term: Term): Attempt {
    // Known before the attempt settles, so a call waiting on it sees this term, not a free lease.
    // The epoch is read through, as the term may raise it.
    this.current = {
      identity: this.options.identity,
      get epoch() {
        return term.epoch;
      },
      acquiredAt: this.options.clock.date(),
    };
    return { term };
  }

  private async tryAcquire(signal: AbortSignal | undefined, read?: LeaseRecord): Promise<Term | undefined> {
    const freedAs = read?.freedAs;
    const { store, clock, leaseDurationSeconds, renewDeadlineMs, identity } = this.options;
    const leaseId = randomUUID();
    // The term is counted from before the request: storage may start the lease any time after.
    const startedAt = clock.now();
    const bound = timeoutSignal(clock, renewDeadlineMs, signal);
    try {
      await untilAborted(store.acquire(leaseId, leaseDurationSeconds, { abortSignal: bound.signal }), bound.signal);
      const epoch = await untilAborted(
        store.bumpEpoch(leaseId, identity, {
          abortSignal: bound.signal,
          freedAs,
          rank: this.options.rank,
          beatsEveryMs: this.options.takeover?.beatMs,
        }),
        bound.signal,
      );
      return { leaseId, epoch, startedAt, ...(read?.holder !== undefined ? { after: { holder: read.holder, freedAs } } : {}) };
    } catch (err) {
      if (err instanceof LeaseHeldError) return undefined;
      // Without a new epoch this holder could not fence its writes, so it must not lead. And a
      // failed acquire may still have taken the lease (a "ghost" success whose reply was lost),
      // so give back whatever this lease id might hold.
      await this.releaseQuietly(leaseId, -1);
      if (err instanceof LeaseLostError || err instanceof ConcurrentUpdateError) return undefined;
      throw err;
    } finally {
      bound.dispose();
    }
  }

  private async lead<T>(term: Term, task: Task<T>, callerSignal: AbortSignal | undefined): Promise<T> {
    const { clock, identity } = this.options;
    // `current` was set when the term was won (see readThenAcquire); it is cleared below.
    const leadership = new ActiveTerm(term, this.options, (self) => this.lose(self, 'deadline'));
    const onCallerAbort = (): void => leadership.end(callerSignal?.reason);
    let ended!: () => void;
    this.active = { term: leadership, ended: new Promise<void>((resolve) => (ended = resolve)) };
    try {
      // The caller may have aborted after the lease was taken: hand it back without running.
      if (callerSignal?.aborted) {
        await this.releaseQuietly(term.leaseId, term.epoch);
        throw callerSignal.reason;
      }
      callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
      this.emit({
        type: 'acquired',
        identity,
        epoch: term.epoch,
        leaseId: term.leaseId,
        ...(term.after ? { after: term.after } : {}),
      });
      const renewing = this.keepRenewing(leadership);
      const beating = this.keepBeating(leadership);
      const watching = this.handover?.watch(leadership);
      const outcome = await this.settleOrAbandon(task, leadership);
      // Failed on its own: it threw with its term still standing, or stalled. Not a term ended
      // for it (a handover, a stop, a lost lease), whose task may well throw an abort.
      const endedForIt = leadership.view.signal.aborted && leadership.loss !== 'stalled';
      const failed = leadership.loss === 'stalled' || (!outcome.ok && !endedForIt);
      // Order matters: the task has settled; stop renewing and end the term's signal (so work
      // the task left running stops too), and only then release.
      leadership.stopRenewing();
      await Promise.all([renewing, beating, watching]);
      leadership.end(undefined);
      const loss = leadership.loss;
      this.handover?.policy.termEnded(failed);
      if (loss === undefined || loss === 'deadline' || loss === 'stalled') {
        // Asked for and not lost: name the requester, so the others leave the lease to it.
        const asked = loss === undefined ? leadership.handoverTo : undefined;
        const to = asked && this.handover ? await this.handover.reserve(leadership, asked) : asked;
        leadership.handoverTo = to;
        const rest = loss === undefined && !to ? leadership.restingUntil : undefined;
        const restingUntil =
          rest &&
          rest.getTime() > clock.date().getTime() &&
          (await this.markQuietly(leadership, { kind: 'resting', until: rest }));
        // Said in the lease, so candidates this one outranks do not leave the free lease to it.
        if (failed && !to && !restingUntil && this.handover && !leadership.leaving) {
          await this.markQuietly(leadership, { kind: 'leaving' });
        }
        // After a deadline or stall loss the lease may still be ours; giving it back lets the
        // next leader start now instead of after expiry.
        const released = await this.releaseQuietly(term.leaseId, term.epoch, leadership.lastCallMs(this.options.renewDeadlineMs));
        leadership.released = released;
        if (released) {
          const ledMs = clock.now() - term.startedAt;
          this.emit({
            type: 'released',
            identity,
            epoch: term.epoch,
            ledMs,
            ...(to ? { to: to.requester } : {}),
            ...(restingUntil ? { restingUntil: rest } : {}),
          });
        }
      }
      if (loss !== undefined) {
        throw new LeaseLostError(loss, undefined, outcome.ok ? undefined : { cause: outcome.error });
      }
      if (!outcome.ok) throw outcome.error;
      return outcome.value;
    } finally {
      leadership.stopRenewing();
      leadership.end(undefined);
      callerSignal?.removeEventListener('abort', onCallerAbort);
      this.current = undefined;
      this.active = undefined;
      ended();
    }
  }

  /**
   * One last mark before the release, while the lease is still this term's; false when it could
   * not be written, which only loses the hint: without a rest mark candidates lead at their next
   * tick (more churn, no harm), without a leaving mark they defer for `deferMs`.
   */
  private async markQuietly(term: ActiveTerm, mark: LeaseMark): Promise<boolean> {
    const { store, clock, renewDeadlineMs } = this.options;
    const ms = term.lastCallMs(Math.min(renewDeadlineMs, Math.max(1, term.deadline - clock.now())));
    try {
      await bounded(clock, ms, (abortSignal) => term.serially(() => store.mark(term.leaseId, mark, { abortSignal })));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The task's outcome. A task that has not settled `abandonTaskAfterMs` after its term's signal
   * aborted is abandoned: otherwise one that ignores its signal (a hung hook) would keep this
   * candidate's term current, and every later attempt would answer "held by itself", forever.
   */
  private settleOrAbandon<T>(task: Task<T>, term: ActiveTerm): Promise<Outcome<T>> {
    const { clock, abandonTaskAfterMs, identity } = this.options;
    const settled = (async (): Promise<Outcome<T>> => {
      try {
        return { ok: true, value: await task(term.view) };
      } catch (error) {
        return { ok: false, error };
      }
    })();
    const signal = term.view.signal;
    return new Promise<Outcome<T>>((resolve) => {
      let timer: TimerHandle | undefined;
      const onEnd = (): void => {
        const endedAt = clock.now();
        timer = clock.setTimeout(() => {
          this.emit({ type: 'task-abandoned', identity, epoch: term.epoch, waitedMs: clock.now() - endedAt });
          resolve({ ok: false, error: new TaskAbandonedError(abandonTaskAfterMs, signal.reason) });
        }, abandonTaskAfterMs);
      };
      // A stopping holder out of time gives up on the task now (see `ActiveTerm.abandon`).
      const onAbandon = (): void => {
        if (timer) clock.clearTimeout(timer);
        this.emit({ type: 'task-abandoned', identity, epoch: term.epoch, waitedMs: 0 });
        resolve({ ok: false, error: new TaskAbandonedError(0, signal.reason) });
      };
      if (signal.aborted) onEnd();
      else signal.addEventListener('abort', onEnd, { once: true });
      term.abandonSignal.addEventListener('abort', onAbandon, { once: true });
      // `settled` never rejects (the task's error is caught into its outcome above), so nothing is lost.
      void settled.then((outcome) => {
        signal.removeEventListener('abort', onEnd);
        term.abandonSignal.removeEventListener('abort', onAbandon);
        if (timer) clock.clearTimeout(timer);
        resolve(outcome);
      });
    });
  }

  private async keepRenewing(term: ActiveTerm): Promise<void> {
    const { clock, store, renewIntervalMs, stallTimeoutMs, identity } = this.options;
    // Count from the start of the acquire: a slow epoch bump must not push the first renewal late.
    let delay = this.alignedDelay(Math.max(0, term.lastRenewAt + renewIntervalMs - clock.now()));
    for (;;) {
      try {
        await sleep(clock, delay, term.stopSignal);
      } catch {
        return; // the task settled, or the term was lost
      }
      const now = clock.now();
      if (now - term.lastHeartbeat > stallTimeoutMs) return this.lose(term, 'stalled');
      const left = term.deadline - now;
      if (left <= 0) return this.lose(term, 'deadline');
      const startedAt = now;
      try {
        // Raced against the bound too, so a store that ignores its signal cannot hold the loop.
        await bounded(clock, left, (abortSignal) => store.renew(term.leaseId, { abortSignal }), term.stopSignal);
        if (term.stopSignal.aborted) return;
        const latencyMs = clock.now() - startedAt;
        term.renewed(startedAt);
        this.emit({ type: 'renewed', identity, epoch: term.epoch, latencyMs });
        delay = this.alignedDelay(Math.max(0, renewIntervalMs - latencyMs));
      } catch (error) {
        if (term.stopSignal.aborted) return;
        if (error instanceof LeaseLostError) return this.lose(term, error.reason, error);
        this.emit({ type: 'renew-failed', identity, epoch: term.epoch, error, sinceLastRenewMs: clock.now() - term.lastRenewAt });
        // Retry faster than the interval, but never past the deadline.
        delay = Math.max(0, Math.min(renewIntervalMs / 4, term.deadline - clock.now()));
      }
    }
  }

  /**
   * With crash takeover on: a beat every `beatMs`, each one write, so that candidates can tell
   * this holder lives (see `breakAfterMs`). Beats keep their cadence however long storage takes
   * to answer one (one at a time, each given up to `breakAfterMs`): slow storage delays them, it
   * does not cancel them. A missed beat costs nothing until enough of them have; one refused
   * because the lease is gone ends the term at once, sooner than the next renewal after a break.
   */
  private async keepBeating(term: ActiveTerm): Promise<void> {
    const { clock, store, takeover, beats } = this.options;
    if (!takeover) return;
    if (beats) return this.beatFromElsewhere(term, beats, takeover);
    let beating: Promise<void> | undefined;
    for (;;) {
      try {
        await sleep(clock, takeover.beatMs, term.stopSignal);
      } catch {
        return;
      }
      const left = term.deadline - clock.now();
      if (left <= 0) return; // the renew loop declares the loss
      if (beating) continue;
      beating = bounded(
        clock,
        Math.min(left, takeover.breakAfterMs),
        (abortSignal) => term.serially(() => store.mark(term.leaseId, { kind: 'alive' }, { abortSignal })),
        term.stopSignal,
      ).then(
        () => undefined,
        (error: unknown) => (!term.stopSignal.aborted && error instanceof LeaseLostError ? this.confirmLoss(term) : undefined),
      );
      void beating.finally(() => (beating = undefined));
    }
  }

  /**
   * Beats from `beats` for the whole term: they keep their cadence while a task holds this
   * loop. Storage's refusals arrive here when the loop is free, and are confirmed as below.
   */
  private async beatFromElsewhere(
    term: ActiveTerm,
    beats: LeaseBeats,
    takeover: { breakAfterMs: number; beatMs: number },
  ): Promise<void> {
    const run = beats.start(term.leaseId, {
      everyMs: takeover.beatMs,
      timeoutMs: takeover.breakAfterMs,
      onRefused: () => {
        if (!term.stopSignal.aborted) void this.confirmLoss(term);
      },
    });
    term.beatsFrom(run);
    const stopped = term.stopSignal;
    if (!stopped.aborted)
      await new Promise<void>((resolve) => stopped.addEventListener('abort', () => resolve(), { once: true }));
    // Settles once no beat is in flight: the reservation or rest mark written next meets none.
    await run.stop();
  }

  /**
   * A refused beat says the lease is gone, but a write cannot tell a broken lease from one
   * someone else holds; a renewal can, and is the loss the term reports. One that succeeds
   * says the lease still holds (the beat met something else), and the term goes on.
   */
  private async confirmLoss(term: ActiveTerm): Promise<void> {
    const { clock, store } = this.options;
    try {
      await bounded(
        clock,
        Math.max(1, term.deadline - clock.now()),
        (abortSignal) => store.renew(term.leaseId, { abortSignal }),
        term.stopSignal,
      );
    } catch (error) {
      if (!term.stopSignal.aborted && error instanceof LeaseLostError) this.lose(term, error.reason, error);
    }
  }

  /**
   * The wait before the next renewal: `delay`, or a little less so that the renewed lease would
   * expire just before one of the followers' tick instants (see `expiryAlignment`).
   */
  private alignedDelay(delay: number): number {
    const { expiryAlignment: grid, clock, leaseMs, renewIntervalMs } = this.options;
    if (!grid) return delay;
    const wallNow = clock.date().getTime();
    const target = wallNow + delay;
    const early = mod(target + leaseMs + grid.marginMs - grid.offsetMs, grid.periodMs);
    // Just short of an aligned instant: wait the few ms for it rather than renewing a whole
    // period early (a renewal a little late is harmless; the deadline is seconds away).
    const late = grid.periodMs - early;
    // Never when the renewal is already due: only an on-time renewal may wait for the grid.
    if (delay > 0 && late <= ALIGN_LATE_MS) return delay + late;
    return early <= renewIntervalMs / 2 && early <= delay ? delay - early : delay;
  }

  private lose(term: ActiveTerm, reason: LeaseLossReason, error?: unknown): void {
    term.declareLost(reason, error);
  }

  private async releaseQuietly(leaseId: string, epoch: number, withinMs = this.options.renewDeadlineMs): Promise<boolean> {
    const { store, clock, identity } = this.options;
    try {
      await bounded(clock, withinMs, (abortSignal) => store.release(leaseId, { abortSignal }));
      return true;
    } catch (error) {
      if (epoch >= 0) this.emit({ type: 'release-failed', identity, epoch, error });
      return false;
    }
  }

  private emit(event: LeaderEvent): void {
    emitEvent(this.options, event);
  }
}

/** One attempt to lead: the term won, or who holds the lease, or until when it rests. */
interface Attempt {
  term?: Term;
  holder?: LeaderInfo;
  restingUntil?: Date;
}

/** `LeaseRecord.quietMs` comes from two times to the second: it may be up to this much long. */
const QUIET_RESOLUTION_MS = 1000;

/** Resolves once `signal` aborts. */
function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

function holderOf(record: LeaseRecord): LeaderInfo {
  return { identity: record.holder, epoch: record.epoch, acquiredAt: record.acquiredAt };
}

/**
 * Of a handover's deadline, what is kept for the term's last calls (a reservation and the
 * release, each about one storage round trip): the wait and the task's safe point end before it.
 */
function lastCallsShare(deadlineMs: number): number {
  return Math.min(600, deadlineMs / 4);
}

/** How late a renewal may come to land on the followers' grid. */
const ALIGN_LATE_MS = 100;

function mod(value: number, period: number): number {
  return ((value % period) + period) % period;
}
