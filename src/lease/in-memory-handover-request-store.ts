import { systemClock, type Clock } from '../clock/clock';
import { ConcurrentUpdateError } from '../errors';
import type { HandoverRequest, HandoverRequestStore, StoredHandoverRequest } from './handover-request-store';
import { claimCopy, type LeaseCallOptions } from './lease-store';

/**
 * Handover requests in memory, aged on an injected clock: for tests on a `FakeClock`, beside an
 * `InMemoryLeaseStore`. It passes the same contract suite as `BlobHandoverRequestStore`.
 */
export class InMemoryHandoverRequestStore implements HandoverRequestStore {
  readonly description: string;
  private readonly clock: Clock;
  private request: { value: HandoverRequest; writtenAt: number; version: string } | undefined;
  private versions = 0;

  constructor(options: { clock?: Clock; name?: string } = {}) {
    this.clock = options.clock ?? systemClock;
    this.description = `memory:${options.name ?? 'lease'}.handover-request`;
  }

  async readRequest(options?: LeaseCallOptions): Promise<StoredHandoverRequest | undefined> {
    options?.abortSignal?.throwIfAborted();
    const stored = this.request;
    if (!stored) return undefined;
    const { value } = stored;
    return { ...claimCopy(value), ttlMs: value.ttlMs, ageMs: this.clock.now() - stored.writtenAt, version: stored.version };
  }

  async writeRequest(request: HandoverRequest, options?: LeaseCallOptions & { replacing?: string }): Promise<string> {
    options?.abortSignal?.throwIfAborted();
    if (this.request?.version !== options?.replacing) throw new ConcurrentUpdateError(this.description);
    const version = `v${++this.versions}`;
    this.request = { value: { ...claimCopy(request), ttlMs: request.ttlMs }, writtenAt: this.clock.now(), version };
    return version;
  }

  async deleteRequest(version: string, options?: LeaseCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    if (this.request?.version === version) this.request = undefined;
  }
}
