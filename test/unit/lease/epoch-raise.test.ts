import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { FakeClock } from '../../../src/clock/fake-clock';
import { LeaseLostError, StaleEpochError } from '../../../src/errors';
import { requestRun } from '../../../src/hub/requests';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { withEpochRaises } from '../../../src/lease/epoch-refusal';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store';
import { LeaderElector } from '../../../src/lease/leader-elector';
import type { LeaderEvent } from '../../../src/lease/leader-events';
import { runKeys } from '../../../src/hub/run-record';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { sumJob } from '../../support/sample-jobs';
import { ScriptedLeaseStore } from '../../support/scripted-lease-store';
import { patience } from '../../support/slowdown';

function electorOn(store: ScriptedLeaseStore | InMemoryLeaseStore, clock?: FakeClock) {
  const events: LeaderEvent[] = [];
  const elector = new LeaderElector({ store, identity: 'leader', onEvent: (e) => events.push(e), ...(clock ? { clock } : {}) });
  return { elector, events };
}

describe('Leadership.raiseEpoch', () => {
  it('raises the term epoch above a stored one under the lease: the task, the result, the record and the next holder all see it', async () => {
    const clock = new FakeClock();
    const memory = new InMemoryLeaseStore({ clock });
    const store = new ScriptedLeaseStore(memory);
    const { elector, events } = electorOn(store, clock);
    const result = await elector.runIfLeader(async (l) => {
      const seen = [l.epoch];
      // Two callers at once: the second waits for the first and finds its epoch already above.
      const raised = await Promise.all([l.raiseEpoch(5), l.raiseEpoch(3)]);
      seen.push(...raised, l.epoch, await l.raiseEpoch(2));
      return seen;
    });
    expect(result).toEqual({ led: true, value: [1, 6, 6, 6, 6], epoch: 6 });
    expect(store.count('raiseEpoch')).toBe(1);
    expect(events.filter((e) => e.type === 'epoch-raised')).toEqual([
      { type: 'epoch-raised', identity: 'leader', from: 1, epoch: 6, above: 5 },
    ]);
    expect(events.find((e) => e.type === 'released')).toMatchObject({ epoch: 6 });
    expect(await memory.read()).toMatchObject({ leased: false, holder: 'leader', epoch: 6 });
    await expect(elector.runIfLeader((l) => l.epoch)).resolves.toMatchObject({ value: 7 });
  });

  it('a stale term cannot raise: storage refuses its lease id, the term ends lost, the epoch stays the holder’s', async () => {
    const clock = new FakeClock();
    const memory = new InMemoryLeaseStore({ clock });
    const store = new ScriptedLeaseStore(memory);
    const { elector, events } = electorOn(store, clock);
    const outcome = await elector
      .runIfLeader(async (l) => {
        memory.breakLease();
        const other = randomUUID();
        await memory.acquire(other, 15);
        await memory.bumpEpoch(other, 'other');
        const refused = await l.raiseEpoch(10).catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(LeaseLostError);
        expect(l.signal.aborted).toBe(true);
        expect(l.epoch).toBe(1);
        // Ended: a later raise makes no storage call.
        await expect(l.raiseEpoch(10)).rejects.toBeInstanceOf(LeaseLostError);
        expect(store.count('raiseEpoch')).toBe(1);
        return 'went on';
      })
      .catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect((outcome as LeaseLostError).reason).toBe('conflict');
    expect(events.filter((e) => e.type === 'epoch-raised')).toEqual([]);
    expect(events.filter((e) => e.type === 'lost')).toHaveLength(1);
    expect(await memory.read()).toMatchObject({ leased: true, holder: 'other', epoch: 2 });
  });
});

describe('the coordinator after the lease record restarted its count', () => {
  it('leads on in the same term: raises above the stored epoch, then fences every open run under the new one', async () => {
    const ports = memoryPorts();
    const jobs = [sumJob({ name: 'a-job', items: 3 }), sumJob({ name: 'b-job', items: 3 })];
    const both = buildEngine(ports, jobs);
    // A leader with only b-job leaves a-job's run alone, so the two runs carry different epochs.
    const onlyB = buildEngine(ports, [jobs[1]!]);
    const before = new InMemoryLeaseStore();
    // A term long enough to create, plan and dispatch a 3-item run, however busy the machine.
    const termMs = patience(300);
    const lead = (engine: typeof both, store: InMemoryLeaseStore) =>
      electorOn(store).elector.runIfLeader((l) => engine.coordinator.lead(l, { termMs }));

    const runA = await requestRun(ports.docs, 'a-job');
    await expect(lead(both, before)).resolves.toMatchObject({ epoch: 1 });
    const runB = await requestRun(ports.docs, 'b-job');
    for (let epoch = 2; epoch <= 5; epoch++) await expect(lead(onlyB, before)).resolves.toMatchObject({ epoch });
    const epochOf = async (runId: string) => (await both.records.read(runKeys.record(runId)))?.epoch;
    // Both dispatched, no workers: nothing left to write but the takeover's fencing write.
    expect((await both.readRun(runA))?.state).toBe('running');
    expect((await both.readRun(runB))?.state).toBe('running');
    expect([await epochOf(runA), await epochOf(runB)]).toEqual([1, 5]);

    // The lease record is gone: a new one starts at epoch 1. The takeover writes a-job's run at
    // 1 (not refused), is refused at b-job's 5, raises to 6 and fences both again.
    const after = new InMemoryLeaseStore();
    const { elector, events } = electorOn(after);
    const result = await elector.runIfLeader((l) => both.coordinator.lead(l, { termMs }));
    expect(result).toMatchObject({ led: true, epoch: 6 });
    expect(events.filter((e) => e.type === 'epoch-raised')).toMatchObject([{ from: 1, epoch: 6, above: 5 }]);
    expect([await epochOf(runA), await epochOf(runB)]).toEqual([6, 6]);
    // So the stale leader at 5 is refused on a-job's run too, which it would have overwritten at 1.
    const late = await both.records
      .update(runKeys.record(runA), 5, (r) => r && { ...r, endReason: 'stale' })
      .catch((err: unknown) => err);
    expect(late).toBeInstanceOf(StaleEpochError);
  });
});

describe('withEpochRaises', () => {
  it('runs the work again under the raised epoch after a refusal, and rethrows the refusal of a stale term', async () => {
    const docs = new FencedDocuments<{ by: string }>(memoryPorts().docs);
    await docs.create('job.json', 5, { by: 'old' });
    const memory = new InMemoryLeaseStore();
    const epochs: number[] = [];
    const led = await electorOn(memory).elector.runIfLeader((l) =>
      withEpochRaises(l, async (epoch) => {
        epochs.push(epoch);
        return docs.update('job.json', epoch, () => ({ by: 'new' }));
      }),
    );
    expect(epochs).toEqual([1, 6]);
    expect(led).toMatchObject({ led: true, epoch: 6, value: { epoch: 6, value: { by: 'new' } } });

    const staleStore = new InMemoryLeaseStore();
    const stale = await electorOn(staleStore)
      .elector.runIfLeader(async (l) => {
        // Superseded before it wrote: its raise is refused and the refusal stands.
        staleStore.breakLease();
        await staleStore.acquire(randomUUID(), 15);
        return withEpochRaises(l, (epoch) => docs.update('job.json', epoch, () => ({ by: 'stale' })));
      })
      .catch((err: unknown) => err);
    expect(stale).toBeInstanceOf(LeaseLostError);
    expect((stale as LeaseLostError).cause).toBeInstanceOf(StaleEpochError);
    expect((await docs.read('job.json'))?.value).toEqual({ by: 'new' });
  });
});
