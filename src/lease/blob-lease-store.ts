import type { BlobServiceClient, BlockBlobClient, ContainerClient } from '@azure/storage-blob';
import { ConcurrentUpdateError, CorruptLeaseError, LeaseHeldError, LeaseLostError } from '../errors';
import { storageErrorOf } from '../storage/rest-error';
import type { BlobEpochMark } from './blob-epoch-mark';
import { formatRank, parseRank, type LeaderRank } from './leader-rank';
import { safeDecode } from './metadata-text';
import {
  checkRaiseAbove,
  raisedEpoch,
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

const META_EPOCH = 'batonepoch';
const META_HOLDER = 'batonholder';
const META_ACQUIRED = 'batonacquiredat';
const META_CHANGES = 'batonchanges';
const META_RANK = 'batonrank';
const META_RESERVED = 'batonreservedfor';
/**
 * The acquisition (its `batonacquiredat`) that wrote the rank, and the one that made the
 * reservation. A holder from before ranks bumps the epoch and its own acquisition but leaves the
 * previous holder's rank and reservation in place: they count only for the acquisition that
 * wrote them.
 */
const META_RANK_OF = 'batonrankof';
const META_RESERVED_OF = 'batonreservedof';
/** The acquisition whose holder said it is leaving (a `leaving` mark); like the two above, it counts for that one only. */
const META_LEAVING_OF = 'batonleavingof';
/** Until when the holder said nothing needs a leader (a `resting` mark), and the acquisition that said it. */
const META_REST_UNTIL = 'batonrestuntil';
const META_REST_OF = 'batonrestof';
/**
 * How often the holder beats (crash takeover), and the acquisition that said so: a holder from
 * before beats leaves it unwritten, and is never taken for a stopped one.
 */
const META_BEAT = 'batonbeatms';
const META_BEAT_OF = 'batonbeatof';
/** Metadata is at most 8 KiB per blob; the history gives up its oldest entries to stay well inside. */
const MAX_CHANGES_CHARS = 4096;

export interface BlobLeaseStoreOptions {
  /** Container of lease blobs. Default `leases`. */
  containerName?: string;
  /**
   * Where the highest epoch ever handed out is kept, in another container (the hub's). With it,
   * every bump and raise goes above the mark first, so a lease blob or container that was
   * deleted does not restart the count: no two holders ever share an epoch. Without it, a
   * deleted lease record restarts at 0 and its next holders climb back only as stored epochs
   * refuse their writes (see `Leadership.raiseEpoch`).
   */
  epochMark?: BlobEpochMark;
}

/**
 * A `LeaseStore` on one Azure blob: the blob lease is the lease, and the blob's metadata holds
 * the epoch, the holder and the acquisition time. The container and blob are created on first
 * use without races (`If-None-Match: *`), so any number of instances can start at once.
 *
 * Give it a client whose retries are short (see `LEASE_RETRY_OPTIONS`): the elector bounds
 * every call by the time left on the lease and retries on its own schedule.
 */
export class BlobLeaseStore implements LeaseStore {
  readonly description: string;
  private readonly container: ContainerClient;
  private readonly blob: BlockBlobClient;
  private readonly epochMark: BlobEpochMark | undefined;

  constructor(blobService: BlobServiceClient, leaseName: string, options: BlobLeaseStoreOptions = {}) {
    this.container = blobService.getContainerClient(options.containerName ?? 'leases');
    this.blob = this.container.getBlockBlobClient(leaseName);
    this.epochMark = options.epochMark;
    this.description = this.blob.url.split('?')[0] ?? leaseName;
  }

  async acquire(leaseId: string, durationSeconds: number, options?: LeaseCallOptions): Promise<void> {
    const attempt = (): Promise<unknown> =>
      this.blob.getBlobLeaseClient(leaseId).acquireLease(durationSeconds, { abortSignal: options?.abortSignal });
    try {
      await attempt();
    } catch (err) {
      const info = storageErrorOf(err);
      if (info?.status === 409) throw new LeaseHeldError(undefined, { cause: err });
      if (info?.status !== 404) throw err;
      // First use, or someone deleted the blob or its container: create it and try once more.
      await this.ensureBlob(options);
      try {
        await attempt();
      } catch (retryErr) {
        if (storageErrorOf(retryErr)?.status === 409) throw new LeaseHeldError(undefined, { cause: retryErr });
        throw retryErr;
      }
    }
  }

  async renew(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    try {
      await this.blob.getBlobLeaseClient(leaseId).renewLease({ abortSignal: options?.abortSignal });
    } catch (err) {
      throw asLeaseLoss(err, 'renew') ?? err;
    }
  }

  async release(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    try {
      await this.blob.getBlobLeaseClient(leaseId).releaseLease({ abortSignal: options?.abortSignal });
    } catch (err) {
      throw asLeaseLoss(err, 'release') ?? err;
    }
  }

  async read(options?: LeaseCallOptions): Promise<LeaseRecord> {
    try {
      const props = await this.blob.getProperties({ abortSignal: options?.abortSignal });
      // A lease that is breaking still excludes everyone else until the break period ends.
      const leased = props.leaseState === 'leased' || props.leaseState === 'breaking';
      const meta = parseMetadata(this.description, props.metadata);
      // 'available' is both "released" and "never leased": only a record with a holder was released.
      const freedAs = leased ? undefined : freedAsOf(props.leaseState, meta.holder);
      const quietMs =
        props.date && props.lastModified ? Math.max(0, props.date.getTime() - props.lastModified.getTime()) : undefined;
      return {
        leased,
        ...meta,
        ...(freedAs ? { freedAs } : {}),
        ...(props.etag ? { version: props.etag } : {}),
        ...(quietMs !== undefined ? { quietMs } : {}),
      };
    } catch (err) {
      if (storageErrorOf(err)?.status === 404)
        return { leased: false, holder: undefined, epoch: 0, acquiredAt: undefined, changes: [] };
      throw err;
    }
  }

  async bumpEpoch(leaseId: string, holder: string, options?: BumpOptions): Promise<number> {
    return this.writeEpoch(
      leaseId,
      'bump the epoch',
      (epoch) => epoch + 1,
      options,
      (stored, epoch, storageNow) => {
        // Storage's time, as every instance reads it: a holder whose clock is minutes off must
        // not date its change in the future, or order the history wrongly.
        const at = storageNow ?? new Date();
        const changes = withLeadershipChange(stored.changes ?? [], stored.holder, holder, epoch, at, options?.freedAs);
        return {
          [META_HOLDER]: encodeURIComponent(holder),
          [META_ACQUIRED]: at.toISOString(),
          [META_CHANGES]: encodeChanges(changes),
          // Always written, so a holder that gives no rank does not inherit the last one's.
          [META_RANK]: options?.rank ? encodeURIComponent(formatRank(options.rank)) : '',
          [META_RANK_OF]: at.toISOString(),
          [META_BEAT]: options?.beatsEveryMs ? String(options.beatsEveryMs) : undefined,
          [META_BEAT_OF]: options?.beatsEveryMs ? at.toISOString() : undefined,
          // A reservation is for the next holder only: this one.
          [META_RESERVED]: undefined,
          [META_RESERVED_OF]: undefined,
          [META_LEAVING_OF]: undefined,
          [META_REST_UNTIL]: undefined,
          [META_REST_OF]: undefined,
        };
      },
    );
  }

  async raiseEpoch(leaseId: string, above: number, options?: LeaseCallOptions): Promise<number> {
    checkRaiseAbove(above);
    return this.writeEpoch(leaseId, 'raise the epoch', (epoch) => raisedEpoch(epoch, above), options);
  }

  async mark(leaseId: string, mark: LeaseMark, options?: LeaseCallOptions): Promise<void> {
    switch (mark.kind) {
      case 'reserved':
        return this.stampUnderLease(
          leaseId,
          'reserve the lease',
          { [META_RESERVED]: encodeURIComponent(encodeClaim(mark.to)) },
          META_RESERVED_OF,
          options,
        );
      case 'leaving':
        return this.stampUnderLease(leaseId, 'mark the lease as leaving', {}, META_LEAVING_OF, options);
      case 'alive':
        // Set Blob Properties with none: one write, no read, that changes the ETag and leaves
        // the metadata (epoch, holder, marks) as it is.
        await this.underLease('beat', () =>
          this.blob.setHTTPHeaders({}, { abortSignal: options?.abortSignal, conditions: { leaseId } }),
        );
        return;
      case 'resting':
        return this.stampUnderLease(
          leaseId,
          'mark the lease as resting',
          { [META_REST_UNTIL]: mark.until.toISOString() },
          META_REST_OF,
          options,
        );
    }
  }

  async breakIfUnchanged(version: string, options?: LeaseCallOptions): Promise<void> {
    try {
      // Lease Blob takes If-Match: a break at a version nobody wrote past, or none. A break
      // period of 0 frees the lease at once.
      await this.blob.getBlobLeaseClient().breakLease(0, { abortSignal: options?.abortSignal, conditions: { ifMatch: version } });
    } catch (err) {
      const info = storageErrorOf(err);
      if (info?.status === 412) throw new ConcurrentUpdateError(this.description, { cause: err });
      // Nothing to break: the lease was free (or the blob gone), which is what the break wanted.
      if (info?.code === 'LeaseNotPresentWithLeaseOperation' || info?.status === 404) return;
      throw err;
    }
  }

  /**
   * Writes `values` into the metadata under the lease, with `stampKey` set to this acquisition's
   * time: what they say then holds for this holder only, and the next bump leaves it behind.
   */
  private async stampUnderLease(
    leaseId: string,
    action: string,
    values: Record<string, string>,
    stampKey: string,
    options: LeaseCallOptions | undefined,
  ): Promise<void> {
    const abortSignal = options?.abortSignal;
    const props = await this.underLease(action, () => this.blob.getProperties({ abortSignal, conditions: { leaseId } }));
    const metadata = { ...props.metadata, ...values, [stampKey]: props.metadata?.[META_ACQUIRED] ?? '' };
    await this.underLease(action, () =>
      this.blob.setMetadata(metadata, { abortSignal, conditions: { leaseId, ifMatch: props.etag } }),
    );
  }

  /**
   * Reads the epoch and writes `next(epoch)` beside the rest of the metadata, under the lease.
   * With an epoch mark, `next` starts from the higher of the lease's epoch and the mark, and the
   * new epoch is marked before the lease records it: a failure between the two leaves the mark
   * ahead, which only makes the next epoch skip a number.
   */
  private async writeEpoch(
    leaseId: string,
    action: string,
    next: (epoch: number) => number,
    options: LeaseCallOptions | undefined,
    extra: (
      stored: Omit<LeaseRecord, 'leased'>,
      epoch: number,
      storageNow: Date | undefined,
    ) => Record<string, string | undefined> = () => ({}),
  ): Promise<number> {
    const props = await this.underLease(action, () =>
      this.blob.getProperties({ abortSignal: options?.abortSignal, conditions: { leaseId } }),
    );
    const record = parseMetadata(this.description, props.metadata);
    const stored = record.epoch;
    // The mark's own failures are not this lease's: they keep their errors.
    const epoch = this.epochMark
      ? await this.epochMark.advance((marked) => next(Math.max(stored, marked)), options)
      : next(stored);
    const metadata: Record<string, string> = {};
    // An undefined value removes the key.
    // The answer's Date header: storage's time when it read the record, a moment before the write.
    for (const [key, value] of Object.entries({ ...props.metadata, ...extra(record, epoch, props.date) })) {
      if (value !== undefined) metadata[key] = value;
    }
    await this.underLease(action, () =>
      this.blob.setMetadata(
        { ...metadata, [META_EPOCH]: String(epoch) },
        // The lease keeps other writers out; the ETag makes the change exact even so.
        { abortSignal: options?.abortSignal, conditions: { leaseId, ifMatch: props.etag } },
      ),
    );
    return epoch;
  }

  /** Runs a call on the lease blob, answering "this lease id no longer holds" as `LeaseLostError`. */
  private async underLease<T>(action: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (storageErrorOf(err)?.code === 'ConditionNotMet') throw new ConcurrentUpdateError(this.description, { cause: err });
      throw asLeaseLoss(err, action) ?? err;
    }
  }

  private async ensureBlob(options?: LeaseCallOptions): Promise<void> {
    const abortSignal = options?.abortSignal;
    await this.container.createIfNotExists({ abortSignal });
    try {
      await this.blob.upload('', 0, { abortSignal, conditions: { ifNoneMatch: '*' } });
    } catch (err) {
      const status = storageErrorOf(err)?.status;
      // Someone else created it first (409/412), which is just as good.
      if (status !== 409 && status !== 412) throw err;
    }
  }
}

function parseMetadata(where: string, metadata: Record<string, string> | undefined): Omit<LeaseRecord, 'leased'> {
  const raw = metadata?.[META_EPOCH];
  const epoch = raw === undefined ? 0 : Number(raw);
  // Reading a damaged epoch as 0 would let the next leader reuse old epochs; refuse instead.
  if (!/^\d+$/.test(raw ?? '0') || !Number.isSafeInteger(epoch)) {
    throw new CorruptLeaseError(where, `metadata ${META_EPOCH} is not a non-negative integer`);
  }
  const acquired = metadata?.[META_ACQUIRED];
  const holder = metadata?.[META_HOLDER];
  // Written by this acquisition, or left over from the one before it (see META_RANK_OF).
  const ours = (stamp: string | undefined) => acquired !== undefined && stamp === acquired;
  return {
    epoch,
    holder: holder ? safeDecode(holder) : undefined,
    ...(ours(metadata?.[META_RANK_OF]) ? rankOf(metadata?.[META_RANK]) : {}),
    acquiredAt: acquired ? new Date(acquired) : undefined,
    changes: decodeChanges(metadata?.[META_CHANGES]),
    ...(ours(metadata?.[META_RESERVED_OF]) ? reservationOf(metadata?.[META_RESERVED]) : {}),
    ...(ours(metadata?.[META_LEAVING_OF]) ? { leaving: true } : {}),
    ...(ours(metadata?.[META_REST_OF]) ? restOf(metadata?.[META_REST_UNTIL]) : {}),
    ...(ours(metadata?.[META_BEAT_OF]) ? beatOf(metadata?.[META_BEAT]) : {}),
  };
}

/** A damaged beat is no beat: such a holder is left to its lease's expiry. */
function beatOf(raw: string | undefined): { beatsEveryMs?: number } {
  const ms = raw === undefined ? NaN : Number(raw);
  return Number.isSafeInteger(ms) && ms > 0 ? { beatsEveryMs: ms } : {};
}

/** A damaged rest mark is no rest: it must never keep candidates away. */
function restOf(raw: string | undefined): { restingUntil?: Date } {
  const at = raw ? new Date(raw) : undefined;
  return at && Number.isFinite(at.getTime()) ? { restingUntil: at } : {};
}

function reservationOf(raw: string | undefined): { reservedFor?: HandoverClaim } {
  const claim = raw ? decodeClaim(safeDecode(raw)) : undefined;
  return claim ? { reservedFor: claim } : {};
}

/** `<rank>;<requester>`: the rank first, as the requester's name may hold anything. */
function encodeClaim(claim: HandoverClaim): string {
  return `${formatRank(claim.rank)};${claim.requester}`;
}

function decodeClaim(raw: string): HandoverClaim | undefined {
  const parts = raw.split(';');
  if (parts.length < 3) return undefined;
  const rank = parseRank(`${parts[0]};${parts[1]}`);
  const requester = parts.slice(2).join(';');
  return rank && requester ? { requester, rank } : undefined;
}

function rankOf(raw: string | undefined): { holderRank?: LeaderRank } {
  const rank = parseRank(raw === undefined ? undefined : safeDecode(raw));
  return rank ? { holderRank: rank } : {};
}

function freedAsOf(state: string | undefined, holder: string | undefined): LeaseFreedAs | undefined {
  if (state === 'expired') return 'expired';
  if (state === 'broken') return 'broken';
  return state === 'available' && holder !== undefined ? 'released' : undefined;
}

type EncodedChange = [at: string, epoch: number, holder: string, previous: string | null, reason: LeadershipChange['reason']];

function encodeChanges(changes: readonly LeadershipChange[]): string {
  let kept = [...changes];
  for (;;) {
    const encoded = encodeURIComponent(
      JSON.stringify(kept.map((c): EncodedChange => [c.at.toISOString(), c.epoch, c.holder, c.previous ?? null, c.reason])),
    );
    if (encoded.length <= MAX_CHANGES_CHARS || kept.length <= 1) return encoded;
    kept = kept.slice(1);
  }
}

const REASONS = new Set<string>(['first', 'released', 'expired', 'broken', 'unknown']);

/** The history is for people to read: a damaged one reads as empty rather than failing the lease. */
function decodeChanges(raw: string | undefined): LeadershipChange[] {
  if (!raw) return [];
  try {
    const parsed = JSON.parse(decodeURIComponent(raw)) as unknown;
    if (!Array.isArray(parsed)) return [];
    return parsed.flatMap((entry: unknown): LeadershipChange[] => {
      if (!Array.isArray(entry) || entry.length !== 5) return [];
      const [at, epoch, holder, previous, reason] = entry as unknown[];
      const when = typeof at === 'string' ? new Date(at) : undefined;
      if (!when || Number.isNaN(when.getTime()) || typeof epoch !== 'number' || typeof holder !== 'string') return [];
      if (typeof reason !== 'string' || !REASONS.has(reason)) return [];
      return [
        {
          at: when,
          epoch,
          holder,
          previous: typeof previous === 'string' ? previous : undefined,
          reason: reason as LeadershipChange['reason'],
        },
      ];
    });
  } catch {
    return [];
  }
}

/** Maps the service's answers that mean "this lease id no longer holds the lease". */
export function asLeaseLoss(err: unknown, action: string): LeaseLostError | undefined {
  const info = storageErrorOf(err);
  if (!info) return undefined;
  const detail = `cannot ${action}: ${info.status} ${info.code ?? ''}`.trim();
  if (info.code === 'LeaseIsBrokenAndCannotBeRenewed' || info.code === 'LeaseIsBreakingAndCannotBeAcquired') {
    return new LeaseLostError('broken', detail, { cause: err });
  }
  if (info.code === 'LeaseLost') return new LeaseLostError('deadline', detail, { cause: err });
  if (info.status === 409 || info.status === 412 || info.status === 404) {
    return new LeaseLostError('conflict', detail, { cause: err });
  }
  return undefined;
}
