import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError } from '../../src/errors';
import { requestStands, type HandoverRequestStore } from '../../src/lease/handover-request-store';

export interface HandoverRequestStoreHarness {
  store: HandoverRequestStore;
  /** Lets `ms` pass for the store's own clock. */
  elapse(ms: number): Promise<void>;
}

/**
 * What every `HandoverRequestStore` must do. The same cases run in memory (fake clock) and on a
 * blob in Azurite (real time), so the elector's handover tests stand on the same ground as
 * production.
 */
export function handoverRequestStoreContract(name: string, makeHarness: () => Promise<HandoverRequestStoreHarness>): void {
  describe(`HandoverRequestStore contract: ${name}`, () => {
    it('keeps one handover request: created once, replaced and deleted only at the version read', async () => {
      const { store } = await makeHarness();
      expect(await store.readRequest()).toBeUndefined();
      const b = { requester: 'b;with;semicolons', rank: { version: '2.0.0', priority: 0 }, ttlMs: 60_000 };
      const first = await store.writeRequest(b);
      await expect(store.writeRequest({ ...b, requester: 'c' })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      const read = await store.readRequest();
      expect(read).toMatchObject({ requester: b.requester, rank: b.rank, ttlMs: 60_000, version: first });
      expect(read && requestStands(read)).toBe(true);
      const c = { requester: 'c', rank: { version: '2.0.0-rc.1', priority: 9 }, ttlMs: 30_000 };
      const second = await store.writeRequest(c, { replacing: first });
      expect(second).not.toBe(first);
      await expect(store.writeRequest(b, { replacing: first })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      await store.deleteRequest(first);
      expect(await store.readRequest()).toMatchObject({ requester: 'c', rank: c.rank, ttlMs: 30_000 });
      await store.deleteRequest(second);
      expect(await store.readRequest()).toBeUndefined();
      // Gone already: nothing to do.
      await store.deleteRequest(second);
    });

    it('lets exactly one of 8 concurrent candidates create the request', async () => {
      const { store } = await makeHarness();
      const rank = { version: '2.0.0', priority: 0 };
      const writes = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => store.writeRequest({ requester: `c${i}`, rank, ttlMs: 60_000 })),
      );
      expect(writes.filter((w) => w.status === 'fulfilled')).toHaveLength(1);
      for (const w of writes) if (w.status === 'rejected') expect(w.reason).toBeInstanceOf(ConcurrentUpdateError);
    });

    it("ages a handover request by the store's clock, so it lapses after its ttl", async () => {
      const harness = await makeHarness();
      const { store } = harness;
      await store.writeRequest({ requester: 'b', rank: { version: '2.0.0', priority: 0 }, ttlMs: 1500 });
      const fresh = await store.readRequest();
      expect(fresh && requestStands(fresh)).toBe(true);
      await harness.elapse(2600);
      const stale = await store.readRequest();
      expect(stale?.ageMs).toBeGreaterThanOrEqual(1500);
      expect(stale && requestStands(stale)).toBe(false);
    });

    it('rejects every call whose abort signal has fired, changing nothing', async () => {
      const { store } = await makeHarness();
      const opts = { abortSignal: AbortSignal.abort(new Error('caller gave up')) };
      const request = { requester: 'b', rank: { version: '1', priority: 0 }, ttlMs: 1000 };
      await expect(store.writeRequest(request, opts)).rejects.toThrow();
      await expect(store.readRequest(opts)).rejects.toThrow();
      expect(await store.readRequest()).toBeUndefined();
      const version = await store.writeRequest(request);
      await expect(store.deleteRequest(version, opts)).rejects.toThrow();
      expect((await store.readRequest())?.version).toBe(version);
    });
  });
}
