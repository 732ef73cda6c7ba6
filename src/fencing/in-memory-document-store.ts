import { ConcurrentUpdateError, type StaleEpochError } from '../errors';
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

/** A `DocumentStore` in a `Map`, for fast tests; it passes the same contract as the blob one. */
export class InMemoryDocumentStore implements DocumentStore {
  private readonly documents = new Map<string, StoredDocument>();
  private version = 0;

  readonly onStaleEpoch: ((refusal: StaleEpochError) => void) | undefined;

  /** `onStaleEpoch` hears of each write fencing refuses on this store: see `DocumentStore`. */
  constructor(options: { onStaleEpoch?: (refusal: StaleEpochError) => void } = {}) {
    this.onStaleEpoch = options.onStaleEpoch;
  }

  async read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    options?.abortSignal?.throwIfAborted();
    const doc = this.documents.get(key);
    return doc && { ...doc };
  }

  async write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }> {
    options?.abortSignal?.throwIfAborted();
    const current = this.documents.get(key);
    const ok =
      'ifMatch' in condition ? current?.etag === condition.ifMatch : 'ifNoneMatch' in condition ? current === undefined : true;
    if (!ok) throw new ConcurrentUpdateError(key);
    const etag = `"mem-${++this.version}"`;
    this.documents.set(key, { body, etag });
    return { etag };
  }

  async delete(key: string, options?: DeleteOptions): Promise<boolean> {
    options?.abortSignal?.throwIfAborted();
    const current = this.documents.get(key);
    if (options?.ifMatch !== undefined && current?.etag !== options.ifMatch) throw new ConcurrentUpdateError(key);
    return this.documents.delete(key);
  }

  async *list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string> {
    options?.abortSignal?.throwIfAborted();
    const keys = [...this.documents.keys()].filter((k) => k.startsWith(prefix)).sort();
    yield* keys;
  }

  async listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    options.abortSignal?.throwIfAborted();
    const { names, continuation } = pageOf(
      [...this.documents.keys()].filter((k) => k.startsWith(prefix)),
      options,
    );
    return { keys: names, etags: names.map((key) => this.documents.get(key)?.etag ?? ''), continuation };
  }

  async listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage> {
    options.abortSignal?.throwIfAborted();
    const folders = new Set<string>();
    for (const key of this.documents.keys()) {
      const slash = key.startsWith(prefix) ? key.indexOf('/', prefix.length) : -1;
      if (slash >= 0) folders.add(key.slice(0, slash + 1));
    }
    const { names, continuation } = pageOf([...folders], options);
    return { folders: names, continuation };
  }

  /** Every key, for inspection in tests. */
  keys(): string[] {
    return [...this.documents.keys()];
  }
}

/** One page of `names` in lexical order; the continuation is the page's last name, as Azurite's marker is. */
function pageOf(names: string[], options: ListPageOptions): { names: string[]; continuation: string | undefined } {
  const from = options.continuation ?? '';
  const after = names.filter((name) => name > from).sort();
  const page = after.slice(0, options.pageSize);
  return { names: page, continuation: after.length > page.length ? page.at(-1) : undefined };
}
