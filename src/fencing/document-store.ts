/**
 * The storage port under fenced documents: small JSON documents replaced whole, each change a
 * compare-and-swap on an opaque version tag (a blob ETag).
 *
 * Contract (checked on every implementation by `test/contract`):
 * - `read` returns the body and the tag of the current version, or undefined when absent.
 * - `write` with `ifMatch` succeeds only if the tag is still current; with `ifNoneMatch: '*'`
 *   only if the document does not exist. Otherwise it throws `ConcurrentUpdateError` and
 *   changes nothing.
 * - Every successful write returns a tag no earlier version had.
 */
export interface DocumentStore {
  read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined>;
  write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }>;
}

export type WriteCondition = { ifMatch: string } | { ifNoneMatch: '*' };

export interface StoredDocument {
  body: string;
  etag: string;
}

export interface DocumentCallOptions {
  abortSignal?: AbortSignal;
}
