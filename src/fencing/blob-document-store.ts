import type { ContainerClient } from '@azure/storage-blob';
import { ConcurrentUpdateError, type StaleEpochError } from '../errors';
import { storageErrorOf } from '../storage/rest-error';
import type {
  DocumentCallOptions,
  DocumentStore,
  DeleteOptions,
  FolderPage,
  KeyPage,
  ListPageOptions,
  StoredDocument,
  WriteCondition,
} from './document-store';

/** A `DocumentStore` on block blobs in one container; the blob ETag is the version tag. */
export class BlobDocumentStore implements DocumentStore {
  readonly unsafeUnfenced: boolean;
  readonly onStaleEpoch: ((refusal: StaleEpochError) => void) | undefined;

  /**
   * `unsafeUnfenced` turns fencing off for the documents on this store, and `onStaleEpoch` hears
   * of each refused write: see `DocumentStore`.
   */
  constructor(
    private readonly container: ContainerClient,
    options: { unsafeUnfenced?: boolean; onStaleEpoch?: (refusal: StaleEpochError) => void } = {},
  ) {
    this.unsafeUnfenced = options.unsafeUnfenced === true;
    this.onStaleEpoch = options.onStaleEpoch;
  }

  async read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    try {
      // One GET returns body and ETag from the same version.
      const response = await this.container.getBlockBlobClient(key).download(0, undefined, {
        abortSignal: options?.abortSignal,
      });
      const body = await streamToString(response.readableStreamBody);
      if (!response.etag) throw new Error(`storage returned no ETag for ${key}`);
      return { body, etag: response.etag };
    } catch (err) {
      if (storageErrorOf(err)?.status === 404) return undefined;
      throw err;
    }
  }

  async delete(key: string, options?: DeleteOptions): Promise<boolean> {
    try {
      await this.container.getBlockBlobClient(key).delete({
        abortSignal: options?.abortSignal,
        ...(options?.ifMatch ? { conditions: { ifMatch: options.ifMatch } } : {}),
      });
      return true;
    } catch (err) {
      const error = storageErrorOf(err);
      if (error?.status === 404) return false;
      if (options?.ifMatch && isConcurrentUpdate(error)) throw new ConcurrentUpdateError(key, { cause: err });
      throw err;
    }
  }

  async *list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string> {
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix, abortSignal: options?.abortSignal })) yield blob.name;
    } catch (err) {
      if (storageErrorOf(err)?.status === 404) return; // no container yet: nothing listed
      throw err;
    }
  }

  async listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    const value = await firstPage(this.container.listBlobsFlat({ prefix, abortSignal: options.abortSignal }), options);
    const blobs: Array<{ name: string; properties: { etag?: string } }> = value?.segment.blobItems ?? [];
    return {
      keys: blobs.map((blob) => blob.name),
      // A listing gives tags bare; reads and writes give them quoted, as `ifMatch` sends them.
      etags: blobs.map((blob) => quotedEtag(blob.properties.etag ?? '')),
      continuation: value?.continuationToken || undefined,
    };
  }

  async listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage> {
    const value = await firstPage(
      this.container.listBlobsByHierarchy('/', { prefix, abortSignal: options.abortSignal }),
      options,
    );
    return {
      folders: (value?.segment.blobPrefixes ?? []).map((folder: { name: string }) => folder.name),
      continuation: value?.continuationToken || undefined,
    };
  }

  async write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }> {
    const upload = () =>
      this.container.getBlockBlobClient(key).upload(body, Buffer.byteLength(body), {
        abortSignal: options?.abortSignal,
        conditions: condition,
        blobHTTPHeaders: { blobContentType: 'application/json' },
      });
    try {
      let response: Awaited<ReturnType<typeof upload>>;
      try {
        response = await upload();
      } catch (err) {
        // Created only when missing, not before every first write: a writer that may put blobs
        // but not create containers (a deployer steering through requests/) never needs to.
        if (storageErrorOf(err)?.code !== 'ContainerNotFound') throw err;
        await this.container.createIfNotExists({ abortSignal: options?.abortSignal });
        response = await upload();
      }
      if (!response.etag) throw new Error(`storage returned no ETag for ${key}`);
      return { etag: response.etag };
    } catch (err) {
      if (isConcurrentUpdate(storageErrorOf(err))) throw new ConcurrentUpdateError(key, { cause: err });
      throw err;
    }
  }
}

/**
 * Only these refusals mean another writer got there first: the document exists (409
 * BlobAlreadyExists, for If-None-Match: *) or changed (412 ConditionNotMet, for If-Match). A
 * 409 or 412 for anything else (a lease someone holds on the blob, a container being deleted)
 * is a storage error: taken for a concurrent update, a write-once output would count as written.
 */
function isConcurrentUpdate(error: { status: number; code: string | undefined } | undefined): boolean {
  if (error?.status === 409) return error.code === 'BlobAlreadyExists';
  if (error?.status === 412) return error.code === undefined || error.code === 'ConditionNotMet';
  return false;
}

/** The page a listing's `byPage` gives from `options.continuation`; undefined when the container does not exist yet. */
async function firstPage<P>(
  listing: { byPage(settings: { maxPageSize: number; continuationToken?: string }): AsyncIterator<P> },
  options: ListPageOptions,
): Promise<P | undefined> {
  const pages = listing.byPage({
    maxPageSize: options.pageSize,
    ...(options.continuation ? { continuationToken: options.continuation } : {}),
  });
  try {
    return (await pages.next()).value ?? undefined;
  } catch (err) {
    if (storageErrorOf(err)?.status === 404) return undefined;
    throw err;
  }
}

function quotedEtag(etag: string): string {
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

export async function streamToString(stream: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!stream) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}
