import { sleep, type Clock } from '../../src/clock/clock';
import type { HandoverRequest, HandoverRequestStore, StoredHandoverRequest } from '../../src/lease/handover-request-store';
import type { BumpOptions, LeaseCallOptions, LeaseMark, LeaseRecord, LeaseStore } from '../../src/lease/lease-store';

type Operation =
  | 'acquire'
  | 'renew'
  | 'release'
  | 'read'
  | 'bumpEpoch'
  | 'raiseEpoch'
  | 'reserve'
  | 'markLeaving'
  | 'markResting'
  | 'markAlive'
  | 'breakIfUnchanged'
  | 'readRequest'
  | 'writeRequest'
  | 'deleteRequest';

const MARK_OPERATION = {
  reserved: 'reserve',
  leaving: 'markLeaving',
  resting: 'markResting',
  alive: 'markAlive',
} as const satisfies Record<LeaseMark['kind'], Operation>;

/**
 * What to do with one call: fail it; hang until its signal aborts (`hang`) or for good
 * (`hang-forever`, a store that ignores signals); apply it and then fail (`fail-after`, a reply
 * lost on the way back); or apply it after a delay on the test's clock.
 */
export type Fault =
  | { kind: 'fail'; error: unknown }
  | { kind: 'hang' }
  | { kind: 'hang-forever' }
  | { kind: 'fail-after'; error: unknown }
  | { kind: 'delay'; ms: number; clock: Clock };

/**
 * Wraps a real lease store and, for ranked candidates, a real request store, records every call
 * in order, and injects faults per operation (each kind of mark is its own operation). The
 * wrapped stores still decide the semantics; this only adds what networks do.
 */
export class ScriptedLeaseStore implements LeaseStore, HandoverRequestStore {
  readonly description = 'scripted';
  readonly calls: Operation[] = [];
  private readonly faults = new Map<Operation, () => Fault | undefined>();

  constructor(
    private readonly inner: LeaseStore,
    private readonly requests?: HandoverRequestStore,
  ) {}

  /** Every later call of `operation` meets `fault` (until `heal`). */
  inject(operation: Operation, fault: Fault | (() => Fault | undefined)): void {
    this.faults.set(operation, typeof fault === 'function' ? fault : () => fault);
  }

  heal(operation: Operation): void {
    this.faults.delete(operation);
  }

  count(operation: Operation): number {
    return this.calls.filter((c) => c === operation).length;
  }

  acquire(leaseId: string, durationSeconds: number, options?: LeaseCallOptions): Promise<void> {
    return this.run('acquire', options, () => this.inner.acquire(leaseId, durationSeconds, options));
  }

  renew(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    return this.run('renew', options, () => this.inner.renew(leaseId, options));
  }

  release(leaseId: string, options?: LeaseCallOptions): Promise<void> {
    return this.run('release', options, () => this.inner.release(leaseId, options));
  }

  read(options?: LeaseCallOptions): Promise<LeaseRecord> {
    return this.run('read', options, () => this.inner.read(options));
  }

  bumpEpoch(leaseId: string, holder: string, options?: BumpOptions): Promise<number> {
    return this.run('bumpEpoch', options, () => this.inner.bumpEpoch(leaseId, holder, options));
  }

  raiseEpoch(leaseId: string, above: number, options?: LeaseCallOptions): Promise<number> {
    return this.run('raiseEpoch', options, () => this.inner.raiseEpoch(leaseId, above, options));
  }

  mark(leaseId: string, mark: LeaseMark, options?: LeaseCallOptions): Promise<void> {
    const operation = MARK_OPERATION[mark.kind];
    return this.run(operation, options, () => this.inner.mark(leaseId, mark, options));
  }

  breakIfUnchanged(version: string, options?: LeaseCallOptions): Promise<void> {
    return this.run('breakIfUnchanged', options, () => this.inner.breakIfUnchanged(version, options));
  }

  readRequest(options?: LeaseCallOptions): Promise<StoredHandoverRequest | undefined> {
    return this.run('readRequest', options, () => this.requestStore().readRequest(options));
  }

  writeRequest(request: HandoverRequest, options?: LeaseCallOptions & { replacing?: string }): Promise<string> {
    return this.run('writeRequest', options, () => this.requestStore().writeRequest(request, options));
  }

  deleteRequest(version: string, options?: LeaseCallOptions): Promise<void> {
    return this.run('deleteRequest', options, () => this.requestStore().deleteRequest(version, options));
  }

  private requestStore(): HandoverRequestStore {
    if (!this.requests) throw new Error('this scripted store was given no request store');
    return this.requests;
  }

  private async run<T>(operation: Operation, options: LeaseCallOptions | undefined, call: () => Promise<T>): Promise<T> {
    this.calls.push(operation);
    const fault = this.faults.get(operation)?.();
    if (fault?.kind === 'fail') throw fault.error;
    if (fault?.kind === 'hang-forever') return new Promise<T>(() => undefined);
    if (fault?.kind === 'fail-after') {
      await call();
      throw fault.error;
    }
    if (fault?.kind === 'delay') await sleep(fault.clock, fault.ms);
    if (fault?.kind === 'hang') {
      return new Promise<T>((_, reject) => {
        const signal = options?.abortSignal;
        if (!signal) return; // hangs for good, as a call without a bound would
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    return call();
  }
}

/** A stand-in for the SDK's RestError on a 503. */
export function serverBusy(): Error {
  return Object.assign(new Error('Service Unavailable'), { name: 'RestError', statusCode: 503, code: 'ServerBusy' });
}
