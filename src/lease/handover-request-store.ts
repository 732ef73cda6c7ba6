import type { HandoverClaim, LeaseCallOptions } from './lease-store';

/**
 * The storage port for handover requests: one request at a time, beside the lease (whose record
 * cannot be written without the lease id), that a candidate leaves for the holder to find.
 *
 * Implementations must keep these promises (the contract suite in `test/contract` checks them
 * on every implementation):
 * - A request is created only when none exists and replaced only at the version read, so of
 *   two candidates writing at once exactly one succeeds; the other gets `ConcurrentUpdateError`.
 * - `deleteRequest` deletes only the version given, and quietly does nothing otherwise.
 * - A request's age is measured by the store's own clock, so candidates whose clocks disagree
 *   agree on whether it still stands.
 * - Any other failure (timeouts, 5xx, aborts) is thrown as is; callers treat it as transient.
 */
export interface HandoverRequestStore {
  /** A readable name for logs, such as the blob URL without query string. */
  readonly description: string;
  /** The standing request, or undefined when there is none. */
  readRequest(options?: LeaseCallOptions): Promise<StoredHandoverRequest | undefined>;
  /**
   * Writes a handover request and returns its version. With `replacing`, only while the stored
   * request still has that version; without, only when there is none. Otherwise throws
   * `ConcurrentUpdateError`: another candidate wrote first.
   */
  writeRequest(request: HandoverRequest, options?: LeaseCallOptions & { replacing?: string }): Promise<string>;
  /** Deletes the handover request if it still has `version`; quietly does nothing otherwise. */
  deleteRequest(version: string, options?: LeaseCallOptions): Promise<void>;
}

/** A candidate's request that the holder hand the lease over, standing for `ttlMs` after it is written. */
export interface HandoverRequest extends HandoverClaim {
  ttlMs: number;
}

export interface StoredHandoverRequest extends HandoverRequest {
  /** Milliseconds since it was written, by the store's clock. */
  ageMs: number;
  /** For `writeRequest({ replacing })` and `deleteRequest`. */
  version: string;
}

/** Whether a stored request still stands. */
export function requestStands(request: StoredHandoverRequest): boolean {
  return request.ageMs < request.ttlMs;
}
