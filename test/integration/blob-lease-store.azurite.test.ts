import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { CorruptLeaseError } from '../../src/errors';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import { useAzurite } from '../support/azurite';
import { markDistInUse, projectRoot } from '../support/cluster-process';

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

  it("dates a change of leader by storage's clock, not by a holder whose clock is minutes fast", async () => {
    const name = fixture.uniqueName('fast-clock');
    const store = new BlobLeaseStore(fixture.leaseBlobService, name);
    const first = randomUUID();
    await store.acquire(first, 15);
    await store.bumpEpoch(first, 'on time');
    await store.release(first);
    // The next holder is a process whose clock runs five minutes fast (Azurite's, in this one, is right).
    const release = markDistInUse();
    try {
      const script = [
        'const real = Date; const skew = 5 * 60_000;',
        'globalThis.Date = class extends real { constructor(...a) { super(...(a.length ? a : [real.now() + skew])); } static now() { return real.now() + skew; } };',
        `const { BlobLeaseStore } = require(${JSON.stringify(join(projectRoot, 'dist', 'src', 'lease', 'blob-lease-store.js'))});`,
        `const { createBlobServiceClient } = require(${JSON.stringify(join(projectRoot, 'dist', 'src', 'storage', 'client-factory.js'))});`,
        'const [conn, name] = process.argv.slice(1);',
        "const store = new BlobLeaseStore(createBlobServiceClient({ kind: 'connectionString', connectionString: conn }), name);",
        "const id = require('node:crypto').randomUUID();",
        "store.acquire(id, 15).then(() => store.bumpEpoch(id, 'fast clock')).then(() => store.release(id));",
      ].join('\n');
      await promisify(execFile)(process.execPath, ['-e', script, fixture.azurite.connectionString, name]);
    } finally {
      release();
    }
    const record = await store.read();
    const now = Date.now();
    const [before, after] = (record.changes ?? []).slice(-2);
    expect(after?.holder).toBe('fast clock');
    // Nearer storage's time than half the skew (a loaded machine takes seconds, not minutes), not
    // five minutes ahead, and after the change before it.
    expect(Math.abs((after?.at.getTime() ?? 0) - now)).toBeLessThan(150_000);
    expect(after?.at.getTime() ?? 0).toBeGreaterThanOrEqual(before?.at.getTime() ?? Infinity);
  });

  it("a holder from before ranks inherits neither the last holder's rank nor its reservation", async () => {
    const name = fixture.uniqueName('pre-ranks');
    const store = new BlobLeaseStore(fixture.leaseBlobService, name);
    const a = randomUUID();
    await store.acquire(a, 15);
    await store.bumpEpoch(a, 'ranked', { rank: { version: '2.0.0', priority: 5 } });
    await store.mark(a, { kind: 'reserved', to: { requester: 'next-version', rank: { version: '2.1.0', priority: 0 } } });
    const ranked = await store.read();
    expect(ranked.holderRank).toEqual({ version: '2.0.0', priority: 5 });
    expect(ranked.reservedFor?.requester).toBe('next-version');
    await store.release(a);

    // An older Baton takes the lease: its bump writes the holder, its acquisition and the epoch
    // over the metadata it read, and knows nothing of ranks or reservations.
    const blob = fixture.leaseBlobService.getContainerClient('leases').getBlobClient(name);
    const b = randomUUID();
    await blob.getBlobLeaseClient(b).acquireLease(15);
    const { metadata } = await blob.getProperties();
    await blob.setMetadata(
      {
        ...metadata,
        batonholder: 'pre-ranks',
        batonacquiredat: new Date(Date.now() + 1).toISOString(),
        batonepoch: String(Number(metadata?.batonepoch) + 1),
      },
      { conditions: { leaseId: b } },
    );
    const record = await store.read();
    expect(record.holder).toBe('pre-ranks');
    expect(record.holderRank).toBeUndefined();
    expect(record.reservedFor).toBeUndefined();
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
