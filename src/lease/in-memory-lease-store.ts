import { systemClock, type Clock } from '../clock/clock';
import { ConcurrentUpdateError, LeaseHeldError, LeaseLostError } from '../errors';
import type { LeaderRank } from './leader-rank';
import {
  checkRaiseAbove,
  raisedEpoch,
  claimCopy,
  withLeadershipChange,
  type BumpOptions,
  type HandoverClaim,
  type LeaseCallOptions,
  type LeaseFreedAs,
  type LeaseMark,
  type LeaseRecord,
  type LeaseStore,
  type LeadershipChange,
} from './lease-store';

/**
 * A `LeaseStore` in memory, with lease expiry on an injected clock: fast and deterministic for
 * tests on a `FakeClock`. It passes the same contract suite as `BlobLeaseStore` with an epoch
 * mark. It also offers `breakLease()` and `deleteRecord()`, as an outside client can do to a
 * blob lease.
 */
export class InMemoryLeaseStore implements LeaseStore {
  readonly description: string;
  private readonly clock: Clock;
  private leaseId: string | undefined;
  private expiresAt = 0;
  private broken = false;
  private epoch = 0;
  /** The highest epoch handed out, which outlives the record, as `BlobEpochMark` does. */
  private epochMark = 0;
  private holder: string | undefined;
  private holderRank: LeaderRank | undefined;
  private beatsEveryMs: number | undefined;
  private acquiredAt: Date | undefined;
  private durationMs = 0;
  /** Set by a release; a lapsed or broken lease says so itself. */
  private released = false;
  private changes: LeadershipChange[] = [];
  private reservedFor: HandoverClaim | undefined;
  private leaving = false;
  private restingUntil: Date | undefined;
  /** Counts writes to the record: its `version`. */
  private writes = 0;
  /** Whether the record exists, as a blob does from its first acquire until it is deleted. */
  private exists = false;
  /** When the record was last written (or created), for `quietMs`. */
  private writtenAt = 0;

  constructor(options: { clock?: Clock; name?: string } = {}) {
    this.clock = options.clock ?? systemClock;
    this.description = `memory:${options.name ?? 'lease'}`;
  }

  async acquire(leaseId: string, durationSeconds: number, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    if (this.isLeased() && this.leaseId !== leaseId) throw new LeaseHeldError(this.holder);
    if (!this.exists) this.writtenAt = this.clock.now();
    this.exists = true;
    this.leaseId = leaseId;
    this.broken = false;
    this.released = false;
    this.expiresAt = this.clock.now() + durationSeconds * 1000;
    this.durationMs = durationSeconds * 1000;
  }

  async renew(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    this.checkHolder(leaseId, 'renew');
    this.expiresAt = this.clock.now() + this.durationMs;
  }

  async release(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    // Azure lets the holder of a broken lease release it; nobody else can.
    if (this.leaseId === leaseId && this.broken) {
      this.leaseId = undefined;
      this.broken = false;
      this.released = true;
      return;
    }
    this.checkHolder(leaseId, 'release');
    this.leaseId = undefined;
    this.expiresAt = 0;
    this.released = true;
  }

  async read(options?: LeaseCallOptions): Promise<LeaseRecord> {
    options?.abortSignal?.throwIfAborted();
    const leased = this.isLeased();
    return {
      leased,
      holder: this.holder,
      ...(this.holderRank ? { holderRank: { ...this.holderRank } } : {}),
      ...(this.beatsEveryMs ? { beatsEveryMs: this.beatsEveryMs } : {}),
      epoch: this.epoch,
      acquiredAt: this.acquiredAt,
      ...(leased ? {} : { freedAs: this.freedAs() }),
      changes: this.changes.map((c) => ({ ...c, at: new Date(c.at) })),
      ...(this.reservedFor ? { reservedFor: claimCopy(this.reservedFor) } : {}),
      ...(this.leaving ? { leaving: true } : {}),
      ...(this.restingUntil ? { restingUntil: new Date(this.restingUntil) } : {}),
      ...(this.exists ? { version: String(this.writes), quietMs: this.clock.now() - this.writtenAt } : {}),
    };
  }

  async bumpEpoch(leaseId: string, holder: string, options?: BumpOptions): Promise<number> {
    options?.abortSignal?.throwIfAborted();
    this.checkHolder(leaseId, 'bump the epoch');
    // Unlike renew, a write needs a live lease (Azure answers 412 LeaseLost).
    if (!this.isLeased()) throw new LeaseLostError('deadline', 'cannot bump the epoch: the lease has expired');
    this.epoch = Math.max(this.epoch, this.epochMark) + 1;
    this.epochMark = this.epoch;
    this.wrote();
    this.acquiredAt = this.clock.date();
    this.changes = withLeadershipChange(this.changes, this.holder, holder, this.epoch, this.acquiredAt, options?.freedAs);
    this.holder = holder;
    this.holderRank = options?.rank ? { ...options.rank } : undefined;
    this.beatsEveryMs = options?.beatsEveryMs;
    this.reservedFor = undefined;
    this.leaving = false;
    this.restingUntil = undefined;
    return this.epoch;
  }

  async mark(leaseId: string, mark: LeaseMark, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    const action = mark.kind === 'reserved' ? 'reserve the lease' : `mark the lease as ${mark.kind}`;
    this.checkHolder(leaseId, action);
    if (!this.isLeased()) throw new LeaseLostError('deadline', `cannot ${action}: the lease has expired`);
    this.wrote();
    if (mark.kind === 'reserved') this.reservedFor = claimCopy(mark.to);
    else if (mark.kind === 'leaving') this.leaving = true;
    else if (mark.kind === 'resting') this.restingUntil = new Date(mark.until);
  }

  async breakIfUnchanged(version: string, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    if (version !== String(this.writes)) throw new ConcurrentUpdateError(this.description);
    if (this.isLeased()) this.breakLease();
  }

  async raiseEpoch(leaseId: string, above: number, options?: LeaseCallOptions): Promise<number> {
    checkRaiseAbove(above);
    options?.abortSignal?.throwIfAborted();
    this.checkHolder(leaseId, 'raise the epoch');
    if (!this.isLeased()) throw new LeaseLostError('deadline', 'cannot raise the epoch: the lease has expired');
    this.epoch = raisedEpoch(Math.max(this.epoch, this.epochMark), above);
    this.epochMark = this.epoch;
    this.wrote();
    return this.epoch;
  }

  /** Breaks the current lease at once, as `BlobLeaseClient.breakLease(0)` does. */
  breakLease(): void {
    if (this.leaseId !== undefined) this.broken = true;
    this.expiresAt = 0;
  }

  /** Deletes the lease record, lease and all, as deleting its blob or container does; the mark stays. */
  deleteRecord(): void {
    this.leaseId = undefined;
    this.expiresAt = 0;
    this.broken = false;
    this.released = false;
    this.epoch = 0;
    this.holder = undefined;
    this.holderRank = undefined;
    this.beatsEveryMs = undefined;
    this.acquiredAt = undefined;
    this.changes = [];
    this.reservedFor = undefined;
    this.leaving = false;
    this.restingUntil = undefined;
    this.wrote();
    this.exists = false;
  }

  private wrote(): void {
    this.writes++;
    this.writtenAt = this.clock.now();
  }

  private freedAs(): LeaseFreedAs | undefined {
    if (this.broken) return 'broken';
    if (this.leaseId !== undefined) return 'expired';
    return this.released && this.holder !== undefined ? 'released' : undefined;
  }

  private isLeased(): boolean {
    return this.leaseId !== undefined && !this.broken && this.clock.now() < this.expiresAt;
  }

  private checkHolder(leaseId: string, action: string): void {
    if (this.leaseId === leaseId && this.broken) {
      throw new LeaseLostError('broken', `cannot ${action}: the lease was broken`);
    }
    // A lapsed lease that nobody took is still ours to renew, as on Azure Storage.
    if (this.leaseId !== leaseId || this.broken) {
      throw new LeaseLostError('conflict', `cannot ${action}: lease id ${leaseId} does not hold the lease`);
    }
  }
}
