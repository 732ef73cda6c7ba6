import { ConcurrentUpdateError, StaleEpochError } from '../errors';
import type { DocumentCallOptions, DocumentStore } from './document-store';

/** A document as read: its value, the epoch of the leader that last wrote it, its version tag. */
export interface FencedDocument<T> {
  value: T;
  epoch: number;
  etag: string;
}

interface Envelope {
  epoch: number;
  value: unknown;
}

export interface FencedDocumentsOptions<T> {
  /** Checks and types a stored value (for example a zod schema's `parse`). */
  parse?: (value: unknown) => T;
}

/**
 * Documents that only the current leader can change (Kleppmann's fencing token, enforced by
 * the writer against the store's compare-and-swap).
 *
 * Each document stores the epoch of its last writer. A write reads the current version, refuses
 * with `StaleEpochError` when that version's epoch is higher than the writer's, and otherwise
 * replaces exactly that version (`If-Match` its ETag; `If-None-Match: *` to create). So a write
 * can never replace a version written by a newer epoch: if a newer leader writes between the
 * read and the write, the ETag no longer matches and the retry sees the newer epoch.
 *
 * What it does not do: refuse a stale leader whose epoch is still the newest one *on this
 * document*. A new leader fences a document by writing it once.
 */
export class FencedDocuments<T> {
  private readonly parse: (value: unknown) => T;
  /** Off only on a store the chaos suite sabotages (`DocumentStore.unsafeUnfenced`). */
  private readonly fencing: boolean;

  constructor(
    private readonly store: DocumentStore,
    options: FencedDocumentsOptions<T> = {},
  ) {
    this.parse = options.parse ?? ((value) => value as T);
    this.fencing = store.unsafeUnfenced !== true;
  }

  async read(key: string, options?: DocumentCallOptions): Promise<FencedDocument<T> | undefined> {
    const stored = await this.store.read(key, options);
    if (!stored) return undefined;
    const envelope = parseEnvelope(key, stored.body);
    return { value: this.parse(envelope.value), epoch: envelope.epoch, etag: stored.etag };
  }

  /** Creates the document; `ConcurrentUpdateError` if it already exists. */
  async create(key: string, epoch: number, value: T, options?: DocumentCallOptions): Promise<FencedDocument<T>> {
    const { etag } = await this.store.write(key, serialize(epoch, value), { ifNoneMatch: '*' }, options);
    return { value, epoch, etag };
  }

  /**
   * Replaces the version `current` (as read) with `value`. `StaleEpochError` when `current` was
   * written by a newer epoch; `ConcurrentUpdateError` when the document changed since it was read.
   */
  async replace(
    key: string,
    epoch: number,
    current: FencedDocument<T>,
    value: T,
    options?: DocumentCallOptions,
  ): Promise<FencedDocument<T>> {
    if (this.fencing && current.epoch > epoch) throw refuseStale(this.store, key, epoch, current.epoch);
    const { etag } = await this.store.write(key, serialize(epoch, value), this.fencing ? { ifMatch: current.etag } : {}, options);
    return { value, epoch, etag };
  }

  /**
   * Read, change and write until the write lands. `mutate` gets the current value (undefined if
   * absent) and returns the new one, or `undefined` to leave the document as it is. It can run
   * several times, so it must not have side effects.
   */
  async update(
    key: string,
    epoch: number,
    mutate: (current: T | undefined) => T | undefined,
    options: DocumentCallOptions & { maxAttempts?: number } = {},
  ): Promise<FencedDocument<T> | undefined> {
    const maxAttempts = options.maxAttempts ?? 10;
    for (let attempt = 1; ; attempt++) {
      const current = await this.read(key, options);
      if (this.fencing && current && current.epoch > epoch) throw refuseStale(this.store, key, epoch, current.epoch);
      const next = mutate(current?.value);
      if (next === undefined) return current;
      try {
        return current ? await this.replace(key, epoch, current, next, options) : await this.create(key, epoch, next, options);
      } catch (err) {
        if (!(err instanceof ConcurrentUpdateError) || attempt >= maxAttempts) throw err;
      }
    }
  }
}

/**
 * The refusal of a write by `writerEpoch` to `key`, which `storedEpoch` (newer) wrote: told to
 * the store's `onStaleEpoch`, then returned for the caller to throw. Every fenced refusal is
 * made here, so each is counted once, where it happens, however it travels afterwards (a
 * retry, an epoch raise, the end of a term).
 */
export function refuseStale(store: DocumentStore, key: string, writerEpoch: number, storedEpoch: number): StaleEpochError {
  const refusal = new StaleEpochError(key, writerEpoch, storedEpoch);
  try {
    store.onStaleEpoch?.(refusal);
  } catch {
    // An observer's failure must not turn a refusal into another error.
  }
  return refusal;
}

function serialize(epoch: number, value: unknown): string {
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new RangeError(`epoch must be a non-negative integer, got ${epoch}`);
  const envelope: Envelope = { epoch, value };
  return JSON.stringify(envelope);
}

function parseEnvelope(key: string, body: string): Envelope {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (err) {
    throw new Error(`${key} is not a fenced document: not JSON`, { cause: err });
  }
  const epoch = (parsed as Partial<Envelope> | null)?.epoch;
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 0 || !('value' in (parsed as object))) {
    throw new Error(`${key} is not a fenced document: missing epoch or value`);
  }
  return parsed as Envelope;
}
