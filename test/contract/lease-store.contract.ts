import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { ConcurrentUpdateError, LeaseHeldError, LeaseLostError } from '../../src/errors';
import { LEADERSHIP_CHANGES_KEPT, type HandoverClaim, type LeaseStore } from '../../src/lease/lease-store';

const reserved = (to: HandoverClaim) => ({ kind: 'reserved' as const, to });
const LEAVING = { kind: 'leaving' as const };
const resting = (until: Date) => ({ kind: 'resting' as const, until });

export interface LeaseStoreHarness {
  store: LeaseStore;
  /** Breaks the lease as an outside client would (`breakLease(0)`). */
  breakLease(): Promise<void>;
  /** Deletes the lease record, lease and all, as an outside client can (its blob or container). */
  deleteRecord(): Promise<void>;
  /** Lets `ms` pass for the store's lease clock. */
  elapse(ms: number): Promise<void>;
}

/**
 * What every `LeaseStore` must do. The same cases run on the in-memory store (fake clock) and on
 * a blob in Azurite (real time), so the fast unit tests stand on the same ground as production.
 */
export function leaseStoreContract(name: string, makeHarness: () => Promise<LeaseStoreHarness>): void {
  const id = (): string => randomUUID();

  describe(`LeaseStore contract: ${name}`, () => {
    it('starts free, at epoch 0, with no holder', async () => {
      const { store } = await makeHarness();
      await expect(store.read()).resolves.toEqual({
        leased: false,
        holder: undefined,
        epoch: 0,
        acquiredAt: undefined,
        changes: [],
      });
    });

    it('records each change of holder with how the lease was free, and none while the holder stays', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      const takeOver = async (holder: string): Promise<number> => {
        const { freedAs } = await store.read();
        const leaseId = id();
        await store.acquire(leaseId, 15);
        const epoch = await store.bumpEpoch(leaseId, holder, { freedAs });
        await store.release(leaseId);
        return epoch;
      };
      expect(await takeOver('a')).toBe(1);
      expect(await takeOver('a')).toBe(2);
      expect((await store.read()).freedAs).toBe('released');
      expect(await takeOver('b')).toBe(3);
      const c = id();
      await store.acquire(c, 15);
      await store.bumpEpoch(c, 'c');
      await harness.breakLease();
      expect((await store.read()).freedAs).toBe('broken');
      expect(await takeOver('d')).toBe(5);

      const { changes } = await store.read();
      expect(changes?.map(({ at: _at, ...change }) => change)).toEqual([
        { epoch: 1, holder: 'a', previous: undefined, reason: 'first' },
        { epoch: 3, holder: 'b', previous: 'a', reason: 'released' },
        // c bumped without saying how it found the lease.
        { epoch: 4, holder: 'c', previous: 'b', reason: 'unknown' },
        { epoch: 5, holder: 'd', previous: 'c', reason: 'broken' },
      ]);
      for (const change of changes ?? []) expect(change.at).toBeInstanceOf(Date);
    });

    it('records the rank a holder gives with its epoch, and none for a holder that gives none', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a', { rank: { version: '2.0.0-rc.1', priority: 7 } });
      expect(await store.read()).toMatchObject({ holder: 'a', holderRank: { version: '2.0.0-rc.1', priority: 7 } });
      // A raise keeps it: the holder has not changed.
      await store.raiseEpoch(a, 10);
      expect((await store.read()).holderRank).toEqual({ version: '2.0.0-rc.1', priority: 7 });
      await store.release(a);
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, 'b');
      expect((await store.read()).holderRank).toBeUndefined();
    });

    it(`keeps the last ${LEADERSHIP_CHANGES_KEPT} changes of holder, newest last`, async () => {
      const { store } = await makeHarness();
      for (let i = 1; i <= LEADERSHIP_CHANGES_KEPT + 2; i++) {
        const leaseId = id();
        await store.acquire(leaseId, 15);
        await store.bumpEpoch(leaseId, `holder-${i}`, { freedAs: 'released' });
        await store.release(leaseId);
      }
      const { changes } = await store.read();
      expect(changes?.map((c) => c.epoch)).toEqual(Array.from({ length: LEADERSHIP_CHANGES_KEPT }, (_, i) => i + 3));
      expect(changes?.at(-1)).toMatchObject({ holder: `holder-${LEADERSHIP_CHANGES_KEPT + 2}`, reason: 'released' });
    });

    it('lets exactly one of two ids acquire, and the holder acquire again', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await expect(store.acquire(id(), 15)).rejects.toBeInstanceOf(LeaseHeldError);
      await expect(store.acquire(a, 15)).resolves.toBeUndefined();
      expect((await store.read()).leased).toBe(true);
    });

    it('lets exactly one of 16 concurrent candidates acquire', async () => {
      const { store } = await makeHarness();
      const results = await Promise.allSettled(Array.from({ length: 16 }, () => store.acquire(id(), 15)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LeaseHeldError);
    });

    it('renews for the holder and refuses any other id with a conflict', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.renew(a);
      await expect(store.renew(id())).rejects.toMatchObject({ code: 'LeaseLost', reason: 'conflict' });
    });

    it('frees the lease on release by the holder, and refuses release by another id', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await expect(store.release(id())).rejects.toMatchObject({ code: 'LeaseLost', reason: 'conflict' });
      await store.release(a);
      expect((await store.read()).leased).toBe(false);
      await store.acquire(id(), 15);
    });

    it('bumps the epoch under the lease, recording holder and time', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      expect(await store.bumpEpoch(a, 'candidate-a ü')).toBe(1);
      expect(await store.bumpEpoch(a, 'candidate-a ü')).toBe(2);
      const record = await store.read();
      expect(record).toMatchObject({ leased: true, holder: 'candidate-a ü', epoch: 2 });
      expect(record.acquiredAt).toBeInstanceOf(Date);
      expect(Number.isNaN(record.acquiredAt?.getTime())).toBe(false);
    });

    it('refuses an epoch bump by an id that does not hold the lease, leaving the epoch as it was', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      await expect(store.bumpEpoch(id(), 'intruder')).rejects.toBeInstanceOf(LeaseLostError);
      expect(await store.read()).toMatchObject({ epoch: 1, holder: 'a' });
    });

    it('raises the epoch under the lease above both a given epoch and its own, keeping holder and time', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      const bumped = await store.read();
      expect(await store.raiseEpoch(a, 5)).toBe(6);
      expect(await store.raiseEpoch(a, 2)).toBe(7);
      const raised = await store.read();
      expect(raised).toEqual({ ...bumped, epoch: 7, version: expect.any(String) });
      expect(raised.version).not.toBe(bumped.version);
      // The next holder bumps above the raised epoch, as above any other.
      await store.release(a);
      const b = id();
      await store.acquire(b, 15);
      expect(await store.bumpEpoch(b, 'b')).toBe(8);
    });

    it('refuses a raise by an id that no longer holds the lease (a stale leader), leaving the epoch as it was', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      await harness.breakLease();
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, 'b');
      await expect(store.raiseEpoch(a, 10)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(store.raiseEpoch(id(), 10)).rejects.toBeInstanceOf(LeaseLostError);
      await store.release(b);
      await expect(store.raiseEpoch(b, 10)).rejects.toBeInstanceOf(LeaseLostError);
      expect(await store.read()).toMatchObject({ leased: false, holder: 'b', epoch: 2 });
    });

    it('refuses to raise above an epoch that is not a non-negative safe integer, changing nothing', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      for (const above of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER]) {
        await expect(store.raiseEpoch(a, above)).rejects.toBeInstanceOf(RangeError);
      }
      expect(await store.read()).toMatchObject({ epoch: 1 });
    });

    it('increases the epoch strictly across holders', async () => {
      const { store } = await makeHarness();
      const seen: number[] = [];
      for (let i = 0; i < 6; i++) {
        const leaseId = id();
        await store.acquire(leaseId, 15);
        seen.push(await store.bumpEpoch(leaseId, `holder-${i}`));
        await store.release(leaseId);
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it('hands out no epoch twice after the lease record is deleted under its holder', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      const a = id();
      await store.acquire(a, 15);
      expect(await store.bumpEpoch(a, 'a')).toBe(1);
      await harness.deleteRecord();
      expect(await store.read()).toMatchObject({ leased: false, epoch: 0 });
      // The first holder has not noticed; the next one must not get its epoch.
      const b = id();
      await store.acquire(b, 15);
      expect(await store.bumpEpoch(b, 'b')).toBe(2);
      await expect(store.raiseEpoch(a, 5)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(store.bumpEpoch(a, 'a')).rejects.toBeInstanceOf(LeaseLostError);
      expect(await store.read()).toMatchObject({ leased: true, holder: 'b', epoch: 2 });
    });

    it('raises and bumps above every epoch handed out before the lease record was deleted', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      for (let i = 0; i < 3; i++) {
        const leaseId = id();
        await store.acquire(leaseId, 15);
        await store.bumpEpoch(leaseId, `holder-${i}`);
        await store.release(leaseId);
      }
      await harness.deleteRecord();
      const b = id();
      await store.acquire(b, 15);
      // Refused by a stored 1, say: the raise still goes above the 3 handed out before.
      expect(await store.raiseEpoch(b, 1)).toBe(4);
      await store.release(b);
      await harness.deleteRecord();
      const c = id();
      await store.acquire(c, 15);
      expect(await store.bumpEpoch(c, 'c')).toBe(5);
    });

    it('reports a broken lease to its holder, lets another acquire, and refuses the old holder', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      await harness.breakLease();
      expect((await store.read()).leased).toBe(false);
      await expect(store.renew(a)).rejects.toMatchObject({ code: 'LeaseLost', reason: 'broken' });
      const b = id();
      await store.acquire(b, 15);
      expect(await store.bumpEpoch(b, 'b')).toBe(2);
      await expect(store.renew(a)).rejects.toMatchObject({ code: 'LeaseLost', reason: 'conflict' });
      await expect(store.bumpEpoch(a, 'a')).rejects.toBeInstanceOf(LeaseLostError);
      expect(await store.read()).toMatchObject({ holder: 'b', epoch: 2 });
    });

    it('expires an unrenewed lease, after which another id acquires and the old id is refused', async () => {
      const harness = await makeHarness();
      const { store } = harness;
      const a = id();
      await store.acquire(a, 15);
      await harness.elapse(16_000);
      expect(await store.read()).toMatchObject({ leased: false, freedAs: 'expired' });
      const b = id();
      await store.acquire(b, 15);
      await expect(store.renew(a)).rejects.toMatchObject({ code: 'LeaseLost', reason: 'conflict' });
    });

    it("changes the record's version with every write, a holder's beat included, and with no lease operation", async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      const acquired = (await store.read()).version;
      expect(acquired).toEqual(expect.any(String));
      await store.renew(a);
      expect((await store.read()).version).toBe(acquired);
      await store.bumpEpoch(a, 'a');
      const bumped = (await store.read()).version;
      expect(bumped).not.toBe(acquired);
      await store.mark(a, { kind: 'alive' });
      const beat = await store.read();
      expect(beat.version).not.toBe(bumped);
      // A beat says nothing a reader sees but the version.
      expect(beat).toMatchObject({ leased: true, holder: 'a', epoch: 1 });
      expect(beat.leaving).toBeUndefined();
      await expect(store.mark(id(), { kind: 'alive' })).rejects.toBeInstanceOf(LeaseLostError);
    });

    it('records how often a holder beats with its epoch, and none for a holder that does not', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a', { beatsEveryMs: 750 });
      const beating = await store.read();
      expect(beating.beatsEveryMs).toBe(750);
      expect(beating.quietMs).toEqual(expect.any(Number));
      await store.release(a);
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, 'b');
      expect((await store.read()).beatsEveryMs).toBeUndefined();
    });

    it('breaks a held lease only at the version it was read at, and a free lease not at all', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      const seen = (await store.read()).version!;
      // The holder beat since: it lives, and the break is refused.
      await store.mark(a, { kind: 'alive' });
      await expect(store.breakIfUnchanged(seen)).rejects.toBeInstanceOf(ConcurrentUpdateError);
      expect((await store.read()).leased).toBe(true);
      // Nothing written since this read: broken at once, and the old holder is told so.
      const stale = (await store.read()).version!;
      await store.breakIfUnchanged(stale);
      expect(await store.read()).toMatchObject({ leased: false, freedAs: 'broken' });
      await expect(store.renew(a)).rejects.toMatchObject({ code: 'LeaseLost', reason: 'broken' });
      // A second candidate that saw the same stopped holder cannot break the next holder's lease.
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, 'b', { freedAs: 'broken' });
      await expect(store.breakIfUnchanged(stale)).rejects.toBeInstanceOf(ConcurrentUpdateError);
      expect(await store.read()).toMatchObject({ leased: true, holder: 'b', epoch: 2 });
      expect((await store.read()).changes?.at(-1)).toMatchObject({ holder: 'b', previous: 'a', reason: 'broken' });
      // A free lease: nothing to break, and no error.
      await store.release(b);
      await store.breakIfUnchanged((await store.read()).version!);
      expect(await store.read()).toMatchObject({ leased: false, freedAs: 'released' });
    });

    it('lets the holder of a broken lease release it', async () => {
      const harness = await makeHarness();
      const a = id();
      await harness.store.acquire(a, 15);
      await harness.breakLease();
      await harness.store.release(a);
      await harness.store.acquire(id(), 15);
    });

    it('names a reserved next holder in the record, under the lease only, until the next bump', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a', { rank: { version: '1.0.0', priority: 0 } });
      const claim = { requester: 'b;with;semicolons', rank: { version: '2.0.0-rc.1', priority: 3 } };
      await store.mark(a, reserved(claim));
      expect(await store.read()).toMatchObject({ leased: true, holder: 'a', epoch: 1, reservedFor: claim });
      await store.release(a);
      expect(await store.read()).toMatchObject({ leased: false, freedAs: 'released', reservedFor: claim });
      await expect(store.mark(a, reserved(claim))).rejects.toBeInstanceOf(LeaseLostError);
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, claim.requester, { rank: claim.rank, freedAs: 'released' });
      const after = await store.read();
      expect(after.reservedFor).toBeUndefined();
      expect(after).toMatchObject({ holder: claim.requester, holderRank: claim.rank, epoch: 2 });
    });

    it('says the holder is leaving, under the lease only, until the next bump', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a', { rank: { version: '1.0.0', priority: 0 } });
      expect((await store.read()).leaving).toBeUndefined();
      await expect(store.mark(id(), LEAVING)).rejects.toBeInstanceOf(LeaseLostError);
      expect((await store.read()).leaving).toBeUndefined();
      await store.mark(a, LEAVING);
      expect(await store.read()).toMatchObject({ leased: true, holder: 'a', epoch: 1, leaving: true });
      // A reservation written after it keeps it, and the other way round.
      const claim = { requester: 'b', rank: { version: '1.0.0', priority: 0 } };
      await store.mark(a, reserved(claim));
      expect(await store.read()).toMatchObject({ leaving: true, reservedFor: claim });
      await store.release(a);
      await expect(store.mark(a, LEAVING)).rejects.toBeInstanceOf(LeaseLostError);
      const b = id();
      await store.acquire(b, 15);
      await store.bumpEpoch(b, 'b', { freedAs: 'released' });
      const after = await store.read();
      expect(after.leaving).toBeUndefined();
      expect(after).toMatchObject({ holder: 'b', epoch: 2 });
    });

    it('keeps a rest mark, written under the lease only, past the release until the next bump', async () => {
      const { store } = await makeHarness();
      const a = id();
      const until = new Date('2030-01-02T03:04:05.000Z');
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      expect((await store.read()).restingUntil).toBeUndefined();
      await expect(store.mark(id(), resting(until))).rejects.toBeInstanceOf(LeaseLostError);
      expect((await store.read()).restingUntil).toBeUndefined();
      await store.mark(a, resting(until));
      expect(await store.read()).toMatchObject({ leased: true, restingUntil: until });
      await store.release(a);
      expect(await store.read()).toMatchObject({ leased: false, freedAs: 'released', restingUntil: until });
      await expect(store.mark(a, resting(until))).rejects.toBeInstanceOf(LeaseLostError);
      const b = id();
      await store.acquire(b, 15);
      expect((await store.read()).restingUntil).toEqual(until);
      await store.bumpEpoch(b, 'b', { freedAs: 'released' });
      const after = await store.read();
      expect(after.restingUntil).toBeUndefined();
      expect(after).toMatchObject({ holder: 'b', epoch: 2 });
    });

    it('rejects every call whose abort signal has fired, changing nothing', async () => {
      const { store } = await makeHarness();
      const a = id();
      await store.acquire(a, 15);
      await store.bumpEpoch(a, 'a');
      const aborted = AbortSignal.abort(new Error('caller gave up'));
      const opts = { abortSignal: aborted };
      await expect(store.acquire(id(), 15, opts)).rejects.toThrow();
      await expect(store.renew(a, opts)).rejects.toThrow();
      await expect(store.bumpEpoch(a, 'a', opts)).rejects.toThrow();
      await expect(store.raiseEpoch(a, 5, opts)).rejects.toThrow();
      await expect(store.release(a, opts)).rejects.toThrow();
      await expect(store.read(opts)).rejects.toThrow();
      await expect(store.mark(a, reserved({ requester: 'b', rank: { version: '1', priority: 0 } }), opts)).rejects.toThrow();
      await expect(store.mark(a, LEAVING, opts)).rejects.toThrow();
      await expect(store.mark(a, resting(new Date()), opts)).rejects.toThrow();
      expect(await store.read()).toMatchObject({ leased: true, epoch: 1, holder: 'a' });
      expect((await store.read()).reservedFor).toBeUndefined();
      expect((await store.read()).leaving).toBeUndefined();
      expect((await store.read()).restingUntil).toBeUndefined();
    });
  });
}
