/**
 * The storage request counter in the client factory, on real SDK clients against Azurite: every
 * operation is counted once under a stable name, retry options and credentials still apply, and
 * clients built without a counter are untouched.
 */
import { describe, expect, it } from 'vitest';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';
import { StorageRequestCounter, sumRequestCounts } from '../../src/storage/request-counter';
import { useAzurite } from '../support/azurite';
import { closedPort } from '../support/cli-harness';

const az = useAzurite();

describe('the storage request counter', () => {
  it('names and counts blob, container and lease operations', async () => {
    const counter = new StorageRequestCounter();
    const settings = { kind: 'connectionString', connectionString: az.azurite.connectionString } as const;
    const blobs = createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS, requestCounter: counter });
    const container = blobs.getContainerClient(az.uniqueName('counted'));
    await container.create();
    const blob = container.getBlockBlobClient('a.json');
    await blob.upload('{}', 2);
    await blob.upload('{"b":1}', 7);
    await blob.getProperties();
    await blob.download();
    const lease = blob.getBlobLeaseClient();
    await lease.acquireLease(15);
    await lease.renewLease();
    await lease.releaseLease();
    await blob.setMetadata({ k: 'v' });
    for await (const page of container.listBlobsFlat().byPage({ maxPageSize: 10 }))
      expect(page.segment.blobItems).toHaveLength(1);
    await blob.delete();

    expect(counter.snapshot()).toEqual({
      'blob.delete': 1,
      'blob.get': 1,
      'blob.head': 1,
      'blob.lease.acquire': 1,
      'blob.lease.release': 1,
      'blob.lease.renew': 1,
      'blob.metadata': 1,
      'blob.put': 2,
      'container.list': 1,
      'container.put': 1,
    });
    expect(counter.total).toBe(11);
    // Only the uploads send a body: their Content-Length, 2 and 7 bytes.
    expect(counter.bytesSnapshot()).toEqual({ 'blob.put': 9 });
    expect(counter.totalBytes).toBe(9);
  });

  it('names and counts queue operations, and several counters add up', async () => {
    const counter = new StorageRequestCounter();
    const settings = { kind: 'connectionString', connectionString: az.azurite.connectionString } as const;
    const queues = createQueueServiceClient(settings, { requestCounter: counter });
    const queue = queues.getQueueClient(az.uniqueName('counted'));
    await queue.create();
    await queue.sendMessage('one');
    await queue.sendMessage('two');
    const peeked = await queue.peekMessages();
    expect(peeked.peekedMessageItems).toHaveLength(1);
    const received = await queue.receiveMessages({ numberOfMessages: 2, visibilityTimeout: 30 });
    expect(received.receivedMessageItems).toHaveLength(2);
    const [first, second] = received.receivedMessageItems;
    await queue.updateMessage(first!.messageId, first!.popReceipt, undefined, 1);
    await queue.deleteMessage(second!.messageId, second!.popReceipt);
    await queue.clearMessages();
    await queue.delete();

    const snapshot = counter.snapshot();
    expect(snapshot).toEqual({
      'queue.delete': 1,
      'queue.messages.clear': 1,
      'queue.messages.delete': 1,
      'queue.messages.peek': 1,
      'queue.messages.receive': 1,
      'queue.messages.send': 2,
      'queue.messages.update': 1,
      'queue.put': 1,
    });
    expect(sumRequestCounts(snapshot, { 'queue.put': 2, 'blob.get': 1 })).toMatchObject({ 'queue.put': 3, 'blob.get': 1 });
    // A send's body is the message in its XML envelope: a little more than the text, and more for a longer text.
    const sent = counter.bytesSnapshot();
    expect(Object.keys(sent)).toEqual(['queue.messages.send']);
    expect(sent['queue.messages.send']).toBeGreaterThan('one'.length + 'two'.length);
    const longer = new StorageRequestCounter();
    const counted = createQueueServiceClient(settings, { requestCounter: longer }).getQueueClient(az.uniqueName('sized'));
    await counted.create();
    await counted.sendMessage('x'.repeat(1000));
    await counted.delete();
    expect(longer.bytesSnapshot()['queue.messages.send']).toBeGreaterThan(1000);
    expect(longer.bytesSnapshot()['queue.messages.send']).toBeLessThan(1200);
  });

  it('counts a failed operation too', async () => {
    const counter = new StorageRequestCounter();
    const settings = { kind: 'connectionString', connectionString: az.azurite.connectionString } as const;
    const blobs = createBlobServiceClient(settings, { requestCounter: counter });
    const missing = blobs.getContainerClient(az.uniqueName('absent')).getBlockBlobClient('x');
    await expect(missing.getProperties()).rejects.toMatchObject({ statusCode: 404 });
    expect(counter.snapshot()).toEqual({ 'blob.head': 1 });
  });

  it('counts an operation once however often the SDK retries it', async () => {
    const port = await closedPort();
    const key = az.azurite.connectionString.match(/AccountKey=([^;]+)/)![1];
    const connectionString = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${key};BlobEndpoint=http://127.0.0.1:${port}/devstoreaccount1;`;
    const counter = new StorageRequestCounter();
    const blobs = createBlobServiceClient(
      { kind: 'connectionString', connectionString },
      { requestCounter: counter, retryOptions: { maxTries: 3, retryDelayInMs: 10, maxRetryDelayInMs: 20 } },
    );
    await expect(blobs.getContainerClient('c').getBlockBlobClient('x').getProperties()).rejects.toThrow();
    expect(counter.snapshot()).toEqual({ 'blob.head': 1 });
  });

  it('leaves a client built without a counter as the SDK builds it', () => {
    const settings = { kind: 'connectionString', connectionString: az.azurite.connectionString } as const;
    const counter = new StorageRequestCounter();
    const plain = createBlobServiceClient(settings);
    const counted = createBlobServiceClient(settings, { requestCounter: counter });
    expect(counted.url).toBe(plain.url);
    expect(counted.accountName).toBe(plain.accountName);
  });
});
