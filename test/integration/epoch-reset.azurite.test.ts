import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { LeaseLostError, StaleEpochError } from '../../src/errors';
import type { RunOutput } from '../../src/hub/run-output';
import { requestRun } from '../../src/hub/requests';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { runKeys } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { ScriptedLeaseStore } from '../support/scripted-lease-store';
import { patience } from '../support/slowdown';

const fixture = useAzurite();
const ITEMS = 40;

/**
 * A hub whose lease lives in a container of its own (so deleting it touches no other test), with
 * one open run, led by five terms without workers: the run is planned and dispatched, and each
 * term's takeover wrote its record under that term's epoch, 1 to 5.
 */
async function hubAtEpochFive() {
  const base = azuritePorts(fixture, 'reset');
  const leaseContainer = fixture.uniqueName('leases');
  const leaseStore = () => new BlobLeaseStore(fixture.leaseBlobService, base.hub, { containerName: leaseContainer });
  const ports = { ...base, leases: leaseStore };
  const engine = buildEngine(ports, [sumJob({ items: ITEMS })]);
  const runId = await requestRun(ports.docs, 'sum');
  const first = engine.elector('first');
  // Each term long enough to take over, plan and dispatch, however busy the machine.
  const termMs = patience(300);
  for (let term = 1; term <= 5; term++) {
    const result = await first.runIfLeader((l) => engine.coordinator.lead(l, { termMs }));
    expect(result).toMatchObject({ led: true, epoch: term });
  }
  const record = await engine.records.read(runKeys.record(runId));
  expect(record).toMatchObject({ epoch: 5, value: { state: 'running' } });
  const container = fixture.blobService.getContainerClient(leaseContainer);
  return { ports, engine, runId, leaseStore, container, hub: base.hub };
}

describe('the epoch stays monotonic when the lease record is deleted', () => {
  it.each([
    {
      what: 'the lease blob',
      remove: (hub: Awaited<ReturnType<typeof hubAtEpochFive>>) => hub.container.getBlobClient(hub.hub).delete(),
    },
    { what: 'the lease container', remove: (hub: Awaited<ReturnType<typeof hubAtEpochFive>>) => hub.container.delete() },
  ])(
    'after $what is deleted, the next leader starts at epoch 1, raises above the stored 5 and finishes the run in one term',
    async ({ remove }) => {
      const hub = await hubAtEpochFive();
      const { engine, runId, leaseStore } = hub;
      await remove(hub);
      expect((await leaseStore().read()).epoch).toBe(0);

      const events: LeaderEvent[] = [];
      const successor = new LeaderElector({ store: leaseStore(), identity: 'successor', onEvent: (e) => events.push(e) });
      const stopWorkers = engine.startWorkers(2);
      const result = await successor
        .runIfLeader((l) => engine.coordinator.lead(l, { termMs: 120_000, returnWhenIdle: true }))
        .finally(stopWorkers);

      expect(result.led).toBe(true);
      expect(events.find((e) => e.type === 'acquired')).toMatchObject({ epoch: 1 });
      expect(events.filter((e) => e.type === 'epoch-raised')).toEqual([
        { type: 'epoch-raised', identity: 'successor', from: 1, epoch: 6, above: 5 },
      ]);
      expect(result).toMatchObject({ led: true, epoch: 6 });
      const record = await engine.records.read(runKeys.record(runId));
      expect(record).toMatchObject({ epoch: 6, value: { state: 'succeeded', counters: { planned: ITEMS, succeeded: ITEMS } } });
      expect((await engine.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(ITEMS));
      // The raise is in the lease record, so the next holder bumps above it.
      expect(await leaseStore().read()).toMatchObject({ leased: false, holder: 'successor', epoch: 6 });
      await expect(engine.elector('next').runIfLeader((l) => l.epoch)).resolves.toMatchObject({ value: 7 });
    },
  );

  it('a stale leader, whose lease another holds, cannot raise: its term ends and changes nothing', async () => {
    const hub = await hubAtEpochFive();
    const { engine, runId, leaseStore } = hub;
    await hub.container.getBlobClient(hub.hub).delete();
    const before = await engine.records.read(runKeys.record(runId));

    // A 60 s lease renews every 20 s, so the stale leader meets the refusal before its renewal could tell it.
    const staleStore = new ScriptedLeaseStore(leaseStore());
    const stale = new LeaderElector({ store: staleStore, identity: 'stale', leaseDurationSeconds: 60 });
    const current = leaseStore();
    const currentId = randomUUID();
    const outcome = await stale
      .runIfLeader(async (l) => {
        expect(l.epoch).toBe(1);
        // Superseded without noticing: its lease is broken and taken by another holder at epoch 2.
        await hub.container.getBlobClient(hub.hub).getBlobLeaseClient().breakLease(0);
        await current.acquire(currentId, 60);
        expect(await current.bumpEpoch(currentId, 'current')).toBe(2);
        return engine.coordinator.lead(l, { termMs: 60_000, returnWhenIdle: true });
      })
      .catch((err: unknown) => err);
    await current.release(currentId);

    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect((outcome as LeaseLostError).reason).toBe('conflict');
    expect((outcome as LeaseLostError).cause).toBeInstanceOf(StaleEpochError);
    expect((outcome as LeaseLostError).cause).toMatchObject({ writerEpoch: 1, storedEpoch: 5 });
    expect(staleStore.count('raiseEpoch')).toBe(1);
    expect(await leaseStore().read()).toMatchObject({ holder: 'current', epoch: 2 });
    expect((await engine.records.read(runKeys.record(runId)))?.etag).toBe(before?.etag);
  });
});
