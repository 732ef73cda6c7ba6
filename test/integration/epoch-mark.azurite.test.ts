import { describe, expect, it } from 'vitest';
import { createBatonRuntime } from '../../src/app/runtime';
import { CorruptLeaseError } from '../../src/errors';
import { BlobEpochMark } from '../../src/lease/blob-epoch-mark';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { useAzurite } from '../support/azurite';

const fixture = useAzurite();

/**
 * Two instances of one hub, wired as the Functions app wires them, whose lease lives in a
 * container of its own so that deleting it touches no other test.
 */
function twoInstances() {
  const leaseContainer = fixture.uniqueName('leases');
  const env = {
    AzureWebJobsStorage: fixture.azurite.connectionString,
    BATON_HUB: fixture.uniqueName('mark'),
    BATON_LEASE_CONTAINER: leaseContainer,
  };
  const events: LeaderEvent[] = [];
  const make = (identity: string) => createBatonRuntime(env, { identity, onLeaderEvent: (e) => events.push(e) });
  const deleteLeaseContainer = () => fixture.blobService.getContainerClient(leaseContainer).delete();
  return { a: make('instance-a'), b: make('instance-b'), events, deleteLeaseContainer };
}

describe('the epoch mark: a deleted lease record never hands out an epoch twice', () => {
  it('a holder that takes the recreated lease while the first term still leads gets a higher epoch than it', async () => {
    const { a, b, events, deleteLeaseContainer } = twoInstances();
    // The soak's case: the very first term of a hub leads at epoch 1, nothing stored is higher,
    // so no write of the second holder would ever be refused and make it raise.
    const outcome = await a.elector.runIfLeader(async (first) => {
      const firstEpoch = first.epoch;
      await deleteLeaseContainer();
      const second = await b.elector.runIfLeader((l) => l.epoch);
      return { firstEpoch, second };
    });
    expect(outcome.led).toBe(true);
    if (!outcome.led) return;
    const { firstEpoch, second } = outcome.value;
    expect(firstEpoch).toBe(1);
    expect(second).toMatchObject({ led: true });
    if (!second.led) return;
    expect(second.value).toBeGreaterThan(firstEpoch);
    // Above at once, at the acquisition: no write had to be refused first.
    expect(events.filter((e) => e.type === 'acquired').map((e) => [e.identity, e.epoch])).toEqual([
      ['instance-a', 1],
      ['instance-b', 2],
    ]);
    expect(events.some((e) => e.type === 'epoch-raised')).toBe(false);
  });

  it('after five terms and a deleted lease container, the next term acquires at epoch 6', async () => {
    const { a, b, deleteLeaseContainer } = twoInstances();
    for (let term = 1; term <= 5; term++) {
      await expect(a.elector.runIfLeader((l) => l.epoch)).resolves.toMatchObject({ led: true, value: term });
    }
    await deleteLeaseContainer();
    await expect(b.elector.runIfLeader((l) => l.epoch)).resolves.toMatchObject({ led: true, value: 6 });
    await expect(a.elector.runIfLeader((l) => l.epoch)).resolves.toMatchObject({ led: true, value: 7 });
  });
});

describe('BlobEpochMark', () => {
  const markIn = (container: string) => BlobEpochMark.at(fixture.leaseBlobService.getContainerClient(container), 'epoch-mark');

  it('makes its container when there is none, and reads 0 before anything is marked', async () => {
    const mark = markIn(fixture.uniqueName('none'));
    await expect(mark.read()).resolves.toBe(0);
    await expect(mark.advance((m) => m + 1)).resolves.toBe(1);
    await expect(mark.read()).resolves.toBe(1);
  });

  it('gives four concurrent advances four different epochs, each above the mark it replaced', async () => {
    const mark = markIn(fixture.uniqueName('race'));
    await mark.advance((m) => m + 1);
    const epochs = await Promise.all(Array.from({ length: 4 }, () => mark.advance((m) => m + 1)));
    expect([...epochs].sort((x, y) => x - y)).toEqual([2, 3, 4, 5]);
    await expect(mark.read()).resolves.toBe(5);
  });

  it('refuses to fall or stand still, and refuses a damaged mark instead of reading it as 0', async () => {
    const container = fixture.uniqueName('damaged');
    const mark = markIn(container);
    await mark.advance(() => 7);
    await expect(mark.advance((m) => m)).rejects.toBeInstanceOf(RangeError);
    await fixture.blobService
      .getContainerClient(container)
      .getBlockBlobClient('epoch-mark')
      .upload('', 0, { metadata: { batonepochmark: 'seven' } });
    await expect(mark.read()).rejects.toBeInstanceOf(CorruptLeaseError);
    await expect(mark.advance((m) => m + 1)).rejects.toThrow(/batonepochmark is not a non-negative integer/);
  });
});
