/**
 * The storage behaviour Baton relies on, as Azure documents it, pinned on the Azurite the suite
 * runs (3.37.0) through the real SDK clients. Where Azurite answers otherwise, one test shows raw
 * Azurite's answer (it fails once an Azurite fixes it: then drop the correction) and one shows
 * the same call behind test/support/azure-behaviour.ts answering as Azure does; the contract
 * suites run behind that layer. docs/testing.md has the table.
 *
 * Leases last at least 15 s, so every case that needs an expired lease takes its lease when the
 * file starts and runs last: the one expiry covers them all while the other cases run.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { BlobServiceClient, BlockBlobClient, ContainerClient } from '@azure/storage-blob';
import type { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { storageErrorOf } from '../../src/storage/rest-error';
import { useAzurite } from '../support/azurite';
import { useAzureBehaviour } from '../support/azure-behaviour';
import { waitFor } from '../support/edge-support';
import { patience } from '../support/slowdown';

const fixture = useAzurite();
const azure = useAzureBehaviour(fixture);

/** The status and service error code of a call that must be refused. */
async function refusal(call: Promise<unknown>): Promise<{ status: number; code: string | undefined }> {
  const outcome = await call.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (outcome === undefined) throw new Error('the call succeeded; a refusal was expected');
  const info = storageErrorOf(outcome);
  if (!info) throw outcome;
  return info;
}

const refused = (status: number, code: string) => ({ status, code });

async function leaseStateOf(blob: BlockBlobClient): Promise<string | undefined> {
  return (await blob.getProperties()).leaseState;
}

async function newBlob(service: BlobServiceClient, container: string, text = 'original'): Promise<BlockBlobClient> {
  const containerClient: ContainerClient = service.getContainerClient(container);
  await containerClient.createIfNotExists();
  const blob = containerClient.getBlockBlobClient(fixture.uniqueName('blob'));
  await blob.upload(text, Buffer.byteLength(text));
  return blob;
}

async function newQueue(service: QueueServiceClient): Promise<QueueClient> {
  const queue = service.getQueueClient(fixture.uniqueName('q'));
  await queue.create();
  return queue;
}

/** A lease taken as the file starts, for a case that needs it expired. */
interface Expiring {
  blob: BlockBlobClient;
  leaseId: string;
}

const EXPIRING = [
  'unchanged',
  'modified',
  'leasedAgain',
  'writtenUnderIt',
  'copiedRaw',
  'copiedLayer',
  'otherIdRaw',
  'otherIdLayer',
] as const;
const expiring = {} as Record<(typeof EXPIRING)[number], Expiring>;

beforeAll(async () => {
  const container = fixture.uniqueName('expiring');
  await Promise.all(
    EXPIRING.map(async (name) => {
      // The layer learns a lease from its acquire, so the layer's cases take theirs through it.
      const service = name.endsWith('Layer') ? azure.leaseBlobService : fixture.leaseBlobService;
      const blob = await newBlob(service, container);
      const leaseId = randomUUID();
      await blob.getBlobLeaseClient(leaseId).acquireLease(15);
      expiring[name] = { blob, leaseId };
    }),
  );
});

/** Waits until the lease has expired; the first case waits out the 15 s, the rest find it done. */
async function expired(name: (typeof EXPIRING)[number]): Promise<Expiring> {
  const taken = expiring[name];
  await waitFor(`the lease on ${name} to expire`, async () => (await leaseStateOf(taken.blob)) === 'expired', 30_000, 100);
  return taken;
}

// https://learn.microsoft.com/en-us/rest/api/storageservices/lease-blob ("Outcomes of lease
// operations on blobs by lease state") and the codes in
// https://learn.microsoft.com/en-us/rest/api/storageservices/blob-service-error-codes
describe('Lease Blob, as Azure documents it', () => {
  it('acquires with the proposed id (201); another id gets 409 LeaseAlreadyPresent; the holder may acquire again', async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('leases'));
    const a = randomUUID();
    const acquired = await blob.getBlobLeaseClient(a).acquireLease(15);
    expect(acquired._response.status).toBe(201);
    expect(acquired.leaseId).toBe(a);
    expect(await refusal(blob.getBlobLeaseClient(randomUUID()).acquireLease(15))).toEqual(refused(409, 'LeaseAlreadyPresent'));
    expect((await blob.getBlobLeaseClient(a).acquireLease(15)).leaseId).toBe(a);
    expect(await leaseStateOf(blob)).toBe('leased');
  });

  it('renews and releases for the holder only (409 LeaseIdMismatchWithLeaseOperation); after a release a renew is refused', async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('leases'));
    const a = randomUUID();
    const other = randomUUID();
    await blob.getBlobLeaseClient(a).acquireLease(15);
    expect((await blob.getBlobLeaseClient(a).renewLease()).leaseId).toBe(a);
    const mismatch = refused(409, 'LeaseIdMismatchWithLeaseOperation');
    expect(await refusal(blob.getBlobLeaseClient(other).renewLease())).toEqual(mismatch);
    expect(await refusal(blob.getBlobLeaseClient(other).releaseLease())).toEqual(mismatch);
    expect((await blob.getBlobLeaseClient(a).releaseLease())._response.status).toBe(200);
    expect(await leaseStateOf(blob)).toBe('available');
    // Since version 2012-02-12 a released lease cannot be renewed (the page's "Changes" list).
    expect(await refusal(blob.getBlobLeaseClient(a).renewLease())).toEqual(mismatch);
    expect((await blob.getBlobLeaseClient(other).acquireLease(15)).leaseId).toBe(other);
  });

  it("breaks at once with period 0: the holder's renew (409) and writes (412) are refused, another id acquires", async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('leases'));
    const a = randomUUID();
    await blob.getBlobLeaseClient(a).acquireLease(15);
    expect((await blob.getBlobLeaseClient().breakLease(0))._response.status).toBe(202);
    expect(await leaseStateOf(blob)).toBe('broken');
    expect(await refusal(blob.getBlobLeaseClient(a).renewLease())).toEqual(refused(409, 'LeaseIsBrokenAndCannotBeRenewed'));
    expect(await refusal(blob.setMetadata({ late: '1' }, { conditions: { leaseId: a } }))).toEqual(
      refused(412, 'LeaseNotPresentWithBlobOperation'),
    );
    const b = randomUUID();
    expect((await blob.getBlobLeaseClient(b).acquireLease(15)).leaseId).toBe(b);
    expect(await refusal(blob.getBlobLeaseClient(a).renewLease())).toEqual(refused(409, 'LeaseIdMismatchWithLeaseOperation'));
  });

  it('lets the holder of a broken lease release it (200), freeing the blob', async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('leases'));
    const a = randomUUID();
    await blob.getBlobLeaseClient(a).acquireLease(15);
    await blob.getBlobLeaseClient().breakLease(0);
    expect((await blob.getBlobLeaseClient(a).releaseLease())._response.status).toBe(200);
    expect(await leaseStateOf(blob)).toBe('available');
  });

  it('keeps a lease broken with a period breaking until the period ends: others cannot acquire, then can', async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('leases'));
    const a = randomUUID();
    const b = randomUUID();
    // Long enough that the checks below all land inside the break period however busy the machine.
    const breakSeconds = Math.min(60, Math.ceil(patience(5_000) / 1000));
    await blob.getBlobLeaseClient(a).acquireLease(60);
    expect((await blob.getBlobLeaseClient().breakLease(breakSeconds))._response.status).toBe(202);
    expect(await leaseStateOf(blob)).toBe('breaking');
    expect(await refusal(blob.getBlobLeaseClient(b).acquireLease(15))).toEqual(refused(409, 'LeaseAlreadyPresent'));
    expect(await refusal(blob.getBlobLeaseClient(a).renewLease())).toEqual(refused(409, 'LeaseIsBrokenAndCannotBeRenewed'));
    // While breaking, the holder's writes still succeed ("Write using (A)" under "Breaking (A)").
    await blob.setMetadata({ during: 'break' }, { conditions: { leaseId: a } });
    await waitFor('the break period to end', async () => (await leaseStateOf(blob)) === 'broken', 15_000);
    expect((await blob.getBlobLeaseClient(b).acquireLease(15)).leaseId).toBe(b);
  });
});

// https://learn.microsoft.com/en-us/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations
// and the codes in https://learn.microsoft.com/en-us/rest/api/storageservices/blob-service-error-codes
describe('Conditional and leased writes, as Azure documents them', () => {
  it("creates with If-None-Match:'*' only where no blob is: 409 BlobAlreadyExists, and one of 16 racers wins", async () => {
    const existing = await newBlob(fixture.blobService, fixture.uniqueName('writes'));
    expect(await refusal(existing.upload('again', 5, { conditions: { ifNoneMatch: '*' } }))).toEqual(
      refused(409, 'BlobAlreadyExists'),
    );
    const contested = fixture.blobService
      .getContainerClient(existing.containerName)
      .getBlockBlobClient(fixture.uniqueName('race'));
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) =>
        contested.upload(`racer ${i}`, `racer ${i}`.length, { conditions: { ifNoneMatch: '*' } }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results)
      if (r.status === 'rejected') expect(storageErrorOf(r.reason)).toEqual(refused(409, 'BlobAlreadyExists'));
  });

  it('refuses a write or delete with a stale If-Match with 412 ConditionNotMet, and takes the current ETag', async () => {
    const blob = await newBlob(fixture.blobService, fixture.uniqueName('writes'));
    const stale = (await blob.getProperties()).etag;
    const current = (await blob.setMetadata({ v: '2' }, { conditions: { ifMatch: stale } })).etag;
    expect(current).not.toBe(stale);
    const notMet = refused(412, 'ConditionNotMet');
    expect(await refusal(blob.setMetadata({ v: '3' }, { conditions: { ifMatch: stale } }))).toEqual(notMet);
    expect(await refusal(blob.upload('x', 1, { conditions: { ifMatch: stale } }))).toEqual(notMet);
    expect(await refusal(blob.delete({ conditions: { ifMatch: stale } }))).toEqual(notMet);
    expect((await blob.getProperties()).metadata).toEqual({ v: '2' });
    await blob.delete({ conditions: { ifMatch: current } });
    expect(await blob.exists()).toBe(false);
  });

  it('refuses writes to a leased blob without its lease id (412 LeaseIdMissing) or with another (412 LeaseIdMismatchWithBlobOperation)', async () => {
    const blob = await newBlob(fixture.leaseBlobService, fixture.uniqueName('writes'));
    const a = randomUUID();
    await blob.getBlobLeaseClient(a).acquireLease(15);
    expect(await refusal(blob.setMetadata({ by: 'nobody' }))).toEqual(refused(412, 'LeaseIdMissing'));
    // The error codes page lists 412 for this; Lease Blob's table says 409. Baton takes either as lease loss.
    expect(await refusal(blob.setMetadata({ by: 'other' }, { conditions: { leaseId: randomUUID() } }))).toEqual(
      refused(412, 'LeaseIdMismatchWithBlobOperation'),
    );
    await blob.setMetadata({ by: 'holder' }, { conditions: { leaseId: a } });
    expect((await blob.getProperties()).metadata).toEqual({ by: 'holder' });
  });
});

// https://learn.microsoft.com/en-us/rest/api/storageservices/get-messages,
// https://learn.microsoft.com/en-us/rest/api/storageservices/delete-message2,
// https://learn.microsoft.com/en-us/rest/api/storageservices/update-message,
// https://learn.microsoft.com/en-us/rest/api/storageservices/put-message
describe('Queue messages, as Azure documents them', () => {
  it('hides a received message for its visibility timeout, then delivers it again with a new receipt', async () => {
    const queue = await newQueue(fixture.queueService);
    await queue.sendMessage('again');
    const hiddenFrom = Date.now();
    const [first] = (await queue.receiveMessages({ visibilityTimeout: 1 })).receivedMessageItems;
    expect(first?.dequeueCount).toBe(1);
    let again;
    let seenAt = 0;
    await waitFor('the message to reappear', async () => {
      [again] = (await queue.receiveMessages({ visibilityTimeout: 30 })).receivedMessageItems;
      seenAt = Date.now();
      return again !== undefined;
    });
    // Azurite runs in this process, on this clock: it hid the message no earlier than `hiddenFrom`,
    // so a delivery within 1 s of that came before the timeout ended.
    expect(seenAt - hiddenFrom).toBeGreaterThanOrEqual(1000);
    expect(again).toMatchObject({ messageId: first?.messageId, messageText: 'again', dequeueCount: 2 });
    expect(again!.popReceipt).not.toBe(first?.popReceipt);
  });

  it('keeps a receipt valid after the visibility ended until the message is received again: update and delete succeed', async () => {
    const queue = await newQueue(fixture.queueService);
    await queue.sendMessage('updated late');
    await queue.sendMessage('deleted late');
    const received = (await queue.receiveMessages({ numberOfMessages: 2, visibilityTimeout: 1 })).receivedMessageItems;
    expect(received).toHaveLength(2);
    // Peeking changes neither visibility nor receipts: it only shows the visibility has ended.
    await waitFor(
      'both messages to be visible again',
      async () => (await queue.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.length === 2,
    );
    const toUpdate = received.find((m) => m.messageText === 'updated late')!;
    const toDelete = received.find((m) => m.messageText === 'deleted late')!;
    const updated = await queue.updateMessage(toUpdate.messageId, toUpdate.popReceipt, undefined, 30);
    expect(updated.popReceipt).toBeDefined();
    expect((await queue.deleteMessage(toDelete.messageId, toDelete.popReceipt))._response.status).toBe(204);
    // Hidden again by the update, and the deleted one gone: nothing to receive, one message left.
    expect((await queue.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 })).receivedMessageItems).toEqual([]);
    expect((await queue.getProperties()).approximateMessagesCount).toBe(1);
  });

  /** A message received twice: the first receipt is stale, the second current. */
  async function receivedTwice(queue: QueueClient) {
    await queue.sendMessage('contended');
    const [stale] = (await queue.receiveMessages({ visibilityTimeout: 1 })).receivedMessageItems;
    let current;
    await waitFor('the message to be received again', async () => {
      [current] = (await queue.receiveMessages({ visibilityTimeout: 30 })).receivedMessageItems;
      return current !== undefined;
    });
    return { stale: stale!, current: current! };
  }

  it('no Azurite issue found: raw Azurite 3.37 refuses a stale receipt with 400 PopReceiptMismatch where Azure answers 404', async () => {
    const queue = await newQueue(fixture.queueService);
    const { stale } = await receivedTwice(queue);
    const azuriteAnswer = refused(400, 'PopReceiptMismatch');
    expect(await refusal(queue.deleteMessage(stale.messageId, stale.popReceipt))).toEqual(azuriteAnswer);
    expect(await refusal(queue.updateMessage(stale.messageId, stale.popReceipt, undefined, 30))).toEqual(azuriteAnswer);
  });

  it('behind the layer, refuses a stale receipt on delete and update with 404 MessageNotFound, keeping the message for its holder', async () => {
    const queue = await newQueue(azure.queueService);
    const { stale, current } = await receivedTwice(queue);
    // Delete Message documents the 404; the service answers Update Message's the same way.
    const azureAnswer = refused(404, 'MessageNotFound');
    expect(await refusal(queue.deleteMessage(stale.messageId, stale.popReceipt))).toEqual(azureAnswer);
    expect(await refusal(queue.updateMessage(stale.messageId, stale.popReceipt, undefined, 30))).toEqual(azureAnswer);
    expect((await queue.getProperties()).approximateMessagesCount).toBe(1);
    const renewed = await queue.updateMessage(current.messageId, current.popReceipt, undefined, 30);
    // A receipt an update replaced is just as stale.
    expect(await refusal(queue.deleteMessage(current.messageId, current.popReceipt))).toEqual(azureAnswer);
    await queue.deleteMessage(current.messageId, renewed.popReceipt!);
    expect((await queue.getProperties()).approximateMessagesCount).toBe(0);
  });

  it('takes a message of 64 KiB and round-trips it; one byte more is refused with 413 RequestBodyTooLarge', async () => {
    const queue = await newQueue(fixture.queueService);
    const limit = 'x'.repeat(64 * 1024);
    await queue.sendMessage(limit);
    // Put Message says "400 (Bad Request)" for a message too large; the service sends 413 RequestBodyTooLarge.
    expect(await refusal(queue.sendMessage(`${limit}x`))).toEqual(refused(413, 'RequestBodyTooLarge'));
    const [message] = (await queue.receiveMessages({ visibilityTimeout: 30 })).receivedMessageItems;
    expect(message?.messageText).toBe(limit);
    expect((await queue.getProperties()).approximateMessagesCount).toBe(1);
  });
});

// https://learn.microsoft.com/en-us/rest/api/storageservices/lease-blob: "Once a lease has
// expired, the lease ID is maintained by the Blob service until the blob is modified or leased
// again", and "Renew (A)" under "Expired (A)": "Leased (A), if blob has not been modified. Fails
// (409) if blob has been modified"; "Renew (B)": "Fails (409)" in every state.
describe('An expired lease, as Azure documents it', () => {
  const mismatch = refused(409, 'LeaseIdMismatchWithLeaseOperation');

  it('renews (200) for its own id while the blob is unchanged, leased again under that id', async () => {
    const { blob, leaseId } = await expired('unchanged');
    const renewed = await blob.getBlobLeaseClient(leaseId).renewLease();
    expect(renewed.leaseId).toBe(leaseId);
    expect(await leaseStateOf(blob)).toBe('leased');
  });

  it('refuses the renew (409) once a write without the lease (Set Blob Metadata) modified the blob', async () => {
    const { blob, leaseId } = await expired('modified');
    await blob.setMetadata({ by: 'someone else' });
    expect(await refusal(blob.getBlobLeaseClient(leaseId).renewLease())).toEqual(mismatch);
    expect(await leaseStateOf(blob)).toBe('available');
  });

  it('refuses the renew (409) once another id acquired the lease', async () => {
    const { blob, leaseId } = await expired('leasedAgain');
    const b = randomUUID();
    await blob.getBlobLeaseClient(b).acquireLease(15);
    expect(await refusal(blob.getBlobLeaseClient(leaseId).renewLease())).toEqual(mismatch);
    await blob.setMetadata({ by: 'b' }, { conditions: { leaseId: b } });
  });

  it("refuses a write under the expired lease's id (412), which leaves the lease renewable", async () => {
    const { blob, leaseId } = await expired('writtenUnderIt');
    // "Write using (A)" under "Expired (A)": "Fails (412)".
    expect(await refusal(blob.setMetadata({ late: '1' }, { conditions: { leaseId } }))).toEqual(
      refused(412, 'LeaseNotPresentWithBlobOperation'),
    );
    expect((await blob.getBlobLeaseClient(leaseId).renewLease()).leaseId).toBe(leaseId);
  });

  /** Rewrites the blob with an asynchronous Copy Blob, a write Azurite does not count as one. */
  async function copyOnto(blob: BlockBlobClient, service: BlobServiceClient): Promise<void> {
    const source = await newBlob(service, blob.containerName, 'copied');
    const target = service.getContainerClient(blob.containerName).getBlockBlobClient(blob.name);
    await (await target.beginCopyFromURL(source.url)).pollUntilDone();
    expect((await target.downloadToBuffer()).toString()).toBe('copied');
  }

  it('Azurite#2352: raw Azurite 3.37 still renews an expired lease (200) after Copy Blob rewrote the blob', async () => {
    const { blob, leaseId } = await expired('copiedRaw');
    const before = (await blob.getProperties()).etag;
    await copyOnto(blob, fixture.blobService);
    expect((await blob.getProperties()).etag).not.toBe(before);
    expect(await leaseStateOf(blob)).toBe('expired');
    expect((await blob.getBlobLeaseClient(leaseId).renewLease()).leaseId).toBe(leaseId);
    expect(await leaseStateOf(blob)).toBe('leased');
  });

  it('behind the layer, refuses the renew (409) after Copy Blob rewrote the blob, as Azure does', async () => {
    const { blob, leaseId } = await expired('copiedLayer');
    await copyOnto(blob, azure.blobService);
    expect(await refusal(blob.getBlobLeaseClient(leaseId).renewLease())).toEqual(mismatch);
    expect(await leaseStateOf(blob)).toBe('expired');
  });

  it("no Azurite issue found: raw Azurite 3.37 renews an expired lease for another id (200), answering with the old lease's id", async () => {
    const { blob, leaseId } = await expired('otherIdRaw');
    const other = randomUUID();
    const renewed = await blob.getBlobLeaseClient(other).renewLease();
    expect(renewed.leaseId).toBe(leaseId);
    expect(await leaseStateOf(blob)).toBe('leased');
    expect(await refusal(blob.setMetadata({ by: 'other' }, { conditions: { leaseId: other } }))).toEqual(
      refused(412, 'LeaseIdMismatchWithBlobOperation'),
    );
  });

  it('behind the layer, refuses a renew with another id (409) and leaves the lease renewable by its own', async () => {
    const { blob, leaseId } = await expired('otherIdLayer');
    expect(await refusal(blob.getBlobLeaseClient(randomUUID()).renewLease())).toEqual(mismatch);
    expect(await leaseStateOf(blob)).toBe('expired');
    expect((await blob.getBlobLeaseClient(leaseId).renewLease()).leaseId).toBe(leaseId);
  });
});
