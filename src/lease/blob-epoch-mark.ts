import type { BlockBlobClient, ContainerClient } from '@azure/storage-blob';
import { ConcurrentUpdateError, CorruptLeaseError } from '../errors';
import { storageErrorOf } from '../storage/rest-error';
import type { LeaseCallOptions } from './lease-store';

const META_MARK = 'batonepochmark';
/** Only holders (a current one, or a stale one mid-raise) move the mark, so a race is rare. */
const MAX_ATTEMPTS = 5;

/**
 * The highest epoch a lease has ever handed out, kept in a blob outside the lease's container.
 *
 * The lease blob's own epoch restarts at 0 when the blob or its container is deleted; on its
 * own, the next holder would then take an epoch an earlier holder (possibly still leading, not
 * knowing it lost) already has, and the fence lets an equal epoch through. So each new epoch is
 * first written here, above everything here, with a compare-and-swap, and only then used: two
 * holders can never be handed the same epoch, and each is above every earlier one, for as long
 * as this blob lives. Keep it beside the documents the epochs fence (the hub's container): if
 * that container goes, the documents go with it, and nothing is left to fence.
 */
export class BlobEpochMark {
  readonly description: string;

  constructor(
    private readonly container: ContainerClient,
    private readonly blob: BlockBlobClient,
  ) {
    this.description = blob.url.split('?')[0] ?? blob.name;
  }

  static at(container: ContainerClient, blobName: string): BlobEpochMark {
    return new BlobEpochMark(container, container.getBlockBlobClient(blobName));
  }

  /** The highest epoch marked so far; 0 when nothing is. */
  async read(options?: LeaseCallOptions): Promise<number> {
    return (await this.readVersion(options)).epoch;
  }

  /**
   * Moves the mark to `next(marked)`, which must be above `marked`, and returns it once it is
   * stored. Retries when another holder moved it meanwhile, so the epoch returned is above every
   * epoch any caller was ever given.
   */
  async advance(next: (marked: number) => number, options?: LeaseCallOptions): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      const { epoch: marked, etag } = await this.readVersion(options);
      const epoch = next(marked);
      if (!(epoch > marked)) throw new RangeError(`the epoch mark must rise: ${epoch} is not above ${marked}`);
      try {
        await this.blob.upload('', 0, {
          metadata: { [META_MARK]: String(epoch) },
          conditions: etag === undefined ? { ifNoneMatch: '*' } : { ifMatch: etag },
          abortSignal: options?.abortSignal,
        });
        return epoch;
      } catch (err) {
        const info = storageErrorOf(err);
        if (attempt >= MAX_ATTEMPTS) {
          if (info?.status === 409 || info?.status === 412) throw new ConcurrentUpdateError(this.description, { cause: err });
          throw err;
        }
        // The hub's container is gone (deleted, or never made): make it and write afresh.
        if (info?.code === 'ContainerNotFound') await this.container.createIfNotExists({ abortSignal: options?.abortSignal });
        else if (info?.status !== 409 && info?.status !== 412) throw err;
      }
    }
  }

  private async readVersion(options?: LeaseCallOptions): Promise<{ epoch: number; etag: string | undefined }> {
    try {
      const props = await this.blob.getProperties({ abortSignal: options?.abortSignal });
      const raw = props.metadata?.[META_MARK];
      const epoch = Number(raw);
      // Reading a damaged mark as 0 would let the next holder reuse epochs; refuse instead.
      if (raw === undefined || !/^\d+$/.test(raw) || !Number.isSafeInteger(epoch)) {
        throw new CorruptLeaseError(this.description, `metadata ${META_MARK} is not a non-negative integer`);
      }
      return { epoch, etag: props.etag };
    } catch (err) {
      if (storageErrorOf(err)?.status === 404) return { epoch: 0, etag: undefined };
      throw err;
    }
  }
}
