import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { CorruptLeaseError } from '../../src/errors';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import { useAzurite } from '../support/azurite';

const fixture = useAzurite();

/** Azure behaviours the in-memory store has no counterpart for. */
describe('BlobLeaseStore on Azurite', () => {
  it('counts a breaking lease as held until its break period ends', async () => {
    const name = fixture.uniqueName('breaking');
    const store = new BlobLeaseStore(fixture.leaseBlobService, name);
    await store.acquire(randomUUID(), 15);
    await fixture.blobService.getContainerClient('leases').getBlobClient(name).getBlobLeaseClient().breakLease(30);
    expect((await store.read()).leased).toBe(true);
  });

  it('continues the epoch in a new store instance, as after a process restart', async () => {
    const name = fixture.uniqueName('restart');
    const before = new BlobLeaseStore(fixture.leaseBlobService, name);
    const a = randomUUID();
    await before.acquire(a, 15);
    await before.bumpEpoch(a, 'first process');
    await before.release(a);
    const after = new BlobLeaseStore(fixture.leaseBlobService, name);
    const b = randomUUID();
    await after.acquire(b, 15);
    expect(await after.bumpEpoch(b, 'second process')).toBe(2);
  });

  it('recreates a deleted container and blob on the next acquire', async () => {
    const container = fixture.uniqueName('gone');
    const store = new BlobLeaseStore(fixture.leaseBlobService, 'hub', { containerName: container });
    const a = randomUUID();
    await store.acquire(a, 15);
    await store.release(a);
    await fixture.blobService.getContainerClient(container).delete();
    await store.acquire(randomUUID(), 15);
    expect((await store.read()).leased).toBe(true);
  });

  it('refuses to lead on a damaged epoch instead of restarting it, and gives the lease back', async () => {
    const name = fixture.uniqueName('corrupt');
    const store = new BlobLeaseStore(fixture.leaseBlobService, name);
    const a = randomUUID();
    await store.acquire(a, 15);
    await store.bumpEpoch(a, 'a');
    await store.release(a);
    await fixture.blobService.getContainerClient('leases').getBlobClient(name).setMetadata({ batonepoch: 'garbage' });
    await expect(store.read()).rejects.toBeInstanceOf(CorruptLeaseError);
    const elector = new LeaderElector({ store, identity: 'careful' });
    const err = await elector.runIfLeader(() => 'never').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptLeaseError);
    expect((err as Error).message).toContain(name);
    const props = await fixture.blobService.getContainerClient('leases').getBlobClient(name).getProperties();
    expect(props.leaseState).not.toBe('leased');
  });
});
