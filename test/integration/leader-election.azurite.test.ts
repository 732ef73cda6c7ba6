import { describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { LeaseLostError, StaleEpochError } from '../../src/errors';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { BlobHandoverRequestStore } from '../../src/lease/blob-handover-request-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import type { Leadership } from '../../src/lease/term';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { useAzurite } from '../support/azurite';
import { patience } from '../support/slowdown';

const fixture = useAzurite();
const LEASE_MS = 15_000;
const ACQUIRE_RETRY_MS = 2000;

/** Heartbeats until `done()` or the leadership signal aborts. */
async function hold(leadership: Leadership, done: () => boolean): Promise<void> {
  while (!done() && !leadership.signal.aborted) {
    leadership.heartbeat();
    await delay(250);
  }
}

describe('leader election on Azurite', () => {
  it('five racing electors: one leads, keeps leading past 3x the lease, and hands over by releasing', async () => {
    const leaseName = fixture.uniqueName('race');
    const events: LeaderEvent[] = [];
    const electors = Array.from(
      { length: 5 },
      (_, i) =>
        new LeaderElector({
          store: new BlobLeaseStore(fixture.leaseBlobService, leaseName),
          identity: `candidate-${i}`,
          acquireRetryMs: ACQUIRE_RETRY_MS,
          onEvent: (e) => events.push(e),
        }),
    );
    const stopAll = new AbortController();
    const terms: Array<{ identity: string; epoch: number; start: number; end?: number }> = [];
    let active = 0;
    let maxActive = 0;

    const task = async (leadership: Leadership): Promise<void> => {
      active++;
      maxActive = Math.max(maxActive, active);
      const term: { identity: string; epoch: number; start: number; end?: number } = {
        identity: leadership.identity,
        epoch: leadership.epoch,
        start: performance.now(),
      };
      terms.push(term);
      if (terms.length === 1) {
        await hold(leadership, () => performance.now() - term.start >= 3 * LEASE_MS + 1000);
      } else {
        stopAll.abort(new Error('test over'));
      }
      term.end = performance.now();
      active--;
    };

    const runs = electors.map((e) => e.runWhenLeader(task, { signal: stopAll.signal }).catch((err: unknown) => err));
    const outcomes = await Promise.all(runs);

    expect(terms).toHaveLength(2);
    const [first, second] = terms as [(typeof terms)[0], (typeof terms)[0]];
    expect(maxActive).toBe(1);
    expect((first.end ?? 0) - first.start).toBeGreaterThanOrEqual(3 * LEASE_MS);
    expect(events.filter((e) => e.type === 'lost')).toEqual([]);
    expect(events.filter((e) => e.type === 'renewed' && e.identity === first.identity).length).toBeGreaterThanOrEqual(8);
    expect(second.identity).not.toBe(first.identity);
    expect(second.epoch).toBeGreaterThan(first.epoch);
    const handoverMs = second.start - (first.end ?? Infinity);
    console.log(`handover after the task ended: ${Math.round(handoverMs)} ms`);
    // The handover went through the release, not the lease's expiry: the first leader released
    // its epoch, and the next acquire came after it. How fast a handover is (within a retry
    // interval) is a figure measured by the graceful-handover benchmark against its floor; here
    // only a bound a busy machine meets too: well inside the lease the release gave up.
    const released = events.findIndex((e) => e.type === 'released' && e.identity === first.identity);
    const acquired = events.findIndex((e) => e.type === 'acquired' && e.identity === second.identity);
    expect(events[released]).toMatchObject({ epoch: first.epoch });
    expect(acquired).toBeGreaterThan(released);
    expect(handoverMs).toBeLessThan(LEASE_MS);
    // Two ran their task (values undefined); the other three stopped on the abort.
    expect(outcomes.filter((o) => o === undefined)).toHaveLength(2);
  });

  it('a broken lease: the old leader aborts within one renew interval, the next has a higher epoch, the old epoch is fenced out', async () => {
    const leaseName = fixture.uniqueName('broken');
    const docs = new FencedDocuments<{ writer: string }>(
      new BlobDocumentStore(fixture.blobService.getContainerClient(fixture.uniqueName('runs'))),
    );
    const key = 'job/occurrence/run.json';
    const make = (identity: string) =>
      new LeaderElector({ store: new BlobLeaseStore(fixture.leaseBlobService, leaseName), identity });
    const old = make('old-leader');

    let oldEpoch = -1;
    let abortedAt = -1;
    let wrote!: () => void;
    const oldWrote = new Promise<void>((resolve) => (wrote = resolve));
    const oldRun = old
      .runIfLeader(async (leadership) => {
        oldEpoch = leadership.epoch;
        await docs.update(key, leadership.epoch, () => ({ writer: 'old-leader' }));
        wrote();
        await hold(leadership, () => false);
        abortedAt = performance.now();
      })
      .catch((err: unknown) => err);

    await oldWrote;
    await delay(1000);
    const brokeAt = performance.now();
    await fixture.blobService.getContainerClient('leases').getBlobClient(leaseName).getBlobLeaseClient().breakLease(0);

    const outcome = await oldRun;
    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect((outcome as LeaseLostError).reason).toBe('broken');
    const detectMs = abortedAt - brokeAt;
    console.log(`old leader saw the broken lease after ${Math.round(detectMs)} ms`);
    expect(detectMs).toBeLessThanOrEqual(LEASE_MS / 3 + 250);

    const next = await make('next-leader').runIfLeader(async (leadership) => {
      await docs.update(key, leadership.epoch, () => ({ writer: 'next-leader' }));
      return leadership.epoch;
    });
    if (!next.led) throw new Error('the next leader did not lead');
    expect(next.value).toBeGreaterThan(oldEpoch);

    const late = await docs.update(key, oldEpoch, () => ({ writer: 'old-leader, late' })).catch((err: unknown) => err);
    expect(late).toBeInstanceOf(StaleEpochError);
    expect(await docs.read(key)).toMatchObject({ value: { writer: 'next-leader' }, epoch: next.value });
  });

  it('a newer version asks a leading older one, which yields between steps; the newer one leads at a higher epoch', async () => {
    const leaseName = fixture.uniqueName('handover');
    const events: LeaderEvent[] = [];
    const candidate = (identity: string, version: string) =>
      new LeaderElector({
        store: new BlobLeaseStore(fixture.leaseBlobService, leaseName),
        requests: new BlobHandoverRequestStore(fixture.leaseBlobService, leaseName),
        identity,
        rank: { version, priority: 0 },
        handover: { checkMs: 1000, pollMs: 100 },
        onEvent: (e) => events.push(e),
      });
    const v1 = candidate('v1', '1.0.0');
    const v2 = candidate('v2', '2.0.0');
    const steps: string[] = [];
    const leading = v1.runIfLeader(async (leadership) => {
      for (let step = 0; !leadership.yieldSignal.aborted; step++) {
        leadership.heartbeat();
        steps.push(`start ${step}`);
        await delay(200);
        steps.push(`checkpoint ${step}`);
      }
      return 'yielded';
    });
    // Vitest's default cap on a poll, 1 s, for this machine.
    await expect
      .poll(() => events.some((e) => e.type === 'acquired' && e.identity === 'v1'), { timeout: patience(1_000) })
      .toBe(true);
    // v2 finds v1 leading, asks, and waits for the lease: this one call returns once it has led.
    const asked = await v2.runIfLeader(async (leadership) => {
      steps.push(`v2 leads at epoch ${leadership.epoch}`);
      return leadership.epoch;
    });
    expect(await leading).toEqual({ led: true, value: 'yielded', epoch: 1 });
    expect(asked).toEqual({ led: true, value: 2, epoch: 2 });
    expect(steps.at(-1)).toBe('v2 leads at epoch 2');
    expect(steps.filter((s) => s.startsWith('start'))).toHaveLength(steps.filter((s) => s.startsWith('checkpoint')).length);
    expect(events.find((e) => e.type === 'released' && e.identity === 'v1')).toMatchObject({ to: 'v2' });
    const store = new BlobLeaseStore(fixture.leaseBlobService, leaseName);
    const record = await store.read();
    expect(record).toMatchObject({ holder: 'v2', holderRank: { version: '2.0.0', priority: 0 }, epoch: 2 });
    expect(record.reservedFor).toBeUndefined();
    expect(record.changes?.at(-1)).toMatchObject({ holder: 'v2', previous: 'v1', reason: 'released' });
    // The request was the requester's to clear once it led.
    expect(await new BlobHandoverRequestStore(fixture.leaseBlobService, leaseName).readRequest()).toBeUndefined();
  });
});
