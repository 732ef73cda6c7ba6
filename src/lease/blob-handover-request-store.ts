import type { BlobServiceClient, BlockBlobClient, ContainerClient } from '@azure/storage-blob';
import { ConcurrentUpdateError } from '../errors';
import { storageErrorOf } from '../storage/rest-error';
import type { HandoverRequest, HandoverRequestStore, StoredHandoverRequest } from './handover-request-store';
import { formatRank, parseRank } from './leader-rank';
import type { LeaseCallOptions } from './lease-store';
import { safeDecode } from './metadata-text';

const META_REQUESTER = 'batonrequester';
const META_RANK = 'batonrank';
const META_TTL = 'batonttlms';

export interface BlobHandoverRequestStoreOptions {
  /** Container of lease blobs, as the lease's store has it. Default `leases`. */
  containerName?: string;
}

/**
 * Handover requests in an empty blob beside the lease blob (`<lease>.handover-request`, in the
 * lease's container): the requester, its rank and the request's ttl in its metadata, its age by
 * storage's own clock (the reply's `Date` less the blob's `Last-Modified`), and its ETag as the
 * version that `If-Match` and `If-None-Match: *` make every write conditional on.
 */
export class BlobHandoverRequestStore implements HandoverRequestStore {
  readonly description: string;
  private readonly container: ContainerClient;
  private readonly blob: BlockBlobClient;

  constructor(blobService: BlobServiceClient, leaseName: string, options: BlobHandoverRequestStoreOptions = {}) {
    this.container = blobService.getContainerClient(options.containerName ?? 'leases');
    this.blob = this.container.getBlockBlobClient(`${leaseName}.handover-request`);
    this.description = this.blob.url.split('?')[0] ?? `${leaseName}.handover-request`;
  }

  async readRequest(options?: LeaseCallOptions): Promise<StoredHandoverRequest | undefined> {
    let props;
    try {
      props = await this.blob.getProperties({ abortSignal: options?.abortSignal });
    } catch (err) {
      if (storageErrorOf(err)?.status === 404) return undefined;
      throw err;
    }
    // Both times are storage's (second resolution), so no candidate's clock enters into it.
    const written = props.lastModified?.getTime() ?? 0;
    const now = props.date?.getTime() ?? written;
    const ageMs = Math.max(0, now - written);
    const version = props.etag ?? '';
    const meta = props.metadata ?? {};
    const rank = parseRank(safeDecode(meta[META_RANK] ?? ''));
    const requester = safeDecode(meta[META_REQUESTER] ?? '');
    const ttlMs = Number(meta[META_TTL]);
    // A damaged request stands for nothing, and can be replaced at its version.
    if (!rank || !requester || !Number.isSafeInteger(ttlMs) || ttlMs < 0) {
      return { requester: '', rank: { version: '0', priority: 0 }, ttlMs: 0, ageMs, version };
    }
    return { requester, rank, ttlMs, ageMs, version };
  }

  async writeRequest(request: HandoverRequest, options?: LeaseCallOptions & { replacing?: string }): Promise<string> {
    const metadata = {
      [META_REQUESTER]: encodeURIComponent(request.requester),
      [META_RANK]: encodeURIComponent(formatRank(request.rank)),
      [META_TTL]: String(Math.round(request.ttlMs)),
    };
    const abortSignal = options?.abortSignal;
    const conditions = options?.replacing === undefined ? { ifNoneMatch: '*' } : { ifMatch: options.replacing };
    const write = async (): Promise<string> => (await this.blob.upload('', 0, { abortSignal, metadata, conditions })).etag ?? '';
    try {
      try {
        return await write();
      } catch (err) {
        // Asked before anyone leased (or after the container was deleted): make room and ask once more.
        if (storageErrorOf(err)?.code !== 'ContainerNotFound') throw err;
        await this.container.createIfNotExists({ abortSignal });
        return await write();
      }
    } catch (err) {
      const status = storageErrorOf(err)?.status;
      if (status === 409 || status === 412) throw new ConcurrentUpdateError(this.description, { cause: err });
      throw err;
    }
  }

  async deleteRequest(version: string, options?: LeaseCallOptions): Promise<void> {
    try {
      await this.blob.delete({ abortSignal: options?.abortSignal, conditions: { ifMatch: version } });
    } catch (err) {
      const status = storageErrorOf(err)?.status;
      // Gone already, or someone else's request now: either way not ours to delete.
      if (status !== 404 && status !== 412) throw err;
    }
  }
}
