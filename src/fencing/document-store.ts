import type { StaleEpochError } from '../errors';

/**
 * The storage port under fenced documents: small JSON documents replaced whole, each change a
 * compare-and-swap on an opaque version tag (a blob ETag).
 *
 * Contract (checked on every implementation by `test/contract`):
 * - `read` returns the body and the tag of the current version, or undefined when absent.
 * - `write` with `ifMatch` succeeds only if the tag is still current; with `ifNoneMatch: '*'`
 *   only if the document does not exist. Otherwise it throws `ConcurrentUpdateError` and
 *   changes nothing. With no condition it always writes.
 * - `delete` removes a document and `list` finds keys by prefix.
 * - Every successful write returns a tag no earlier version had.
 */
export interface DocumentStore {
  read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined>;
  write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }>;
  /**
   * Removes the document; false when it was already gone. With `ifMatch`, only that version:
   * `ConcurrentUpdateError` when that is not the current one (another, or none, as HTTP's
   * If-Match has it), and nothing is removed.
   */
  delete(key: string, options?: DeleteOptions): Promise<boolean>;
  /** Keys under `prefix`, in lexical order. */
  list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string>;
  /**
   * One page of the keys under `prefix`, in lexical order, from where `continuation` (a page's
   * own) left off: one storage request whatever the number of keys. A page may hold fewer than
   * `pageSize` keys and still have a continuation; no continuation means the listing is done.
   * Each key comes with the tag of its current version, for a conditional `delete`.
   */
  listPage(prefix: string, options: ListPageOptions): Promise<KeyPage>;
  /**
   * One page of the folders directly under `prefix` (each name is the prefix plus one segment
   * and a `/`), in lexical order: what a delimiter listing returns, one storage request whatever
   * the number of keys inside them. Same paging rules as `listPage`.
   */
  listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage>;
  /**
   * Sabotage for the chaos suite's broken run only: `FencedDocuments` on this store skip the
   * epoch check and write without `If-Match`, as an unfenced coordinator would, so the checker
   * can show it notices. Set through `BlobDocumentStore`'s `unsafeUnfenced`; never in an app.
   */
  readonly unsafeUnfenced?: boolean;
  /**
   * Told of each write that fencing on this store refuses because a newer epoch wrote the
   * document, just before its `StaleEpochError` is thrown. Refusals are decided in one place
   * (`refuseStale`), whichever engine or leader wrote, so the fencing metric counts each once
   * and costs no storage request. It must not throw; it is called inside the refused write.
   */
  readonly onStaleEpoch?: (refusal: StaleEpochError) => void;
}

/** `{}` writes unconditionally: only for blobs nobody else writes, such as a term's own plan chunks. */
export type WriteCondition = { ifMatch: string } | { ifNoneMatch: '*' } | Record<string, never>;

export interface StoredDocument {
  body: string;
  etag: string;
}

export interface DocumentCallOptions {
  abortSignal?: AbortSignal;
}

export interface ListPageOptions extends DocumentCallOptions {
  /** At most this many keys (1 to 5000). */
  pageSize: number;
  /** Where the previous page of the same prefix ended; opaque, from `KeyPage.continuation`. */
  continuation?: string;
}

export interface DeleteOptions extends DocumentCallOptions {
  /** Delete only this version (a tag from `read`, `write` or `listPage`). */
  ifMatch?: string;
}

export interface KeyPage {
  keys: string[];
  /** The tag of each key's version when listed, in the same order. */
  etags: string[];
  /** Pass it back for the next page; undefined when there is no more. */
  continuation: string | undefined;
}

export interface FolderPage {
  /** Each folder's full name, ending in `/`. */
  folders: string[];
  /** Pass it back for the next page; undefined when there is no more. */
  continuation: string | undefined;
}
