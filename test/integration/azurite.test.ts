import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';
import { startAzurite } from '../../src/local/azurite';

describe('startAzurite', () => {
  it('starts blob and queue in memory on free ports, usable through the real SDK clients', async () => {
    const [one, two] = await Promise.all([startAzurite(), startAzurite()]);
    try {
      expect(one!.blobPort).toBeGreaterThan(0);
      expect(new Set([one!.blobPort, one!.queuePort, two!.blobPort, two!.queuePort]).size).toBe(4);
      const blobs = BlobServiceClient.fromConnectionString(one!.connectionString);
      await blobs.getContainerClient('box').create();
      await blobs.getContainerClient('box').getBlockBlobClient('b').upload('hello', 5);
      const queues = QueueServiceClient.fromConnectionString(one!.connectionString);
      await queues.getQueueClient('jobs').create();
      await queues.getQueueClient('jobs').sendMessage('m');
      // Separate instances do not share state.
      const other = BlobServiceClient.fromConnectionString(two!.connectionString);
      expect(await other.getContainerClient('box').exists()).toBe(false);
    } finally {
      await Promise.all([one!.close(), two!.close()]);
    }
  });

  it('persists to a folder, so a restart on the same ports finds blobs and messages', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'baton-azurite-'));
    try {
      const first = await startAzurite({ persistTo: folder });
      const { blobPort, queuePort } = first;
      await BlobServiceClient.fromConnectionString(first.connectionString).getContainerClient('keep').create();
      await BlobServiceClient.fromConnectionString(first.connectionString)
        .getContainerClient('keep')
        .getBlockBlobClient('doc.json')
        .upload('{"kept":true}', 13);
      const queue = QueueServiceClient.fromConnectionString(first.connectionString).getQueueClient('work');
      await queue.create();
      await queue.sendMessage('survives');
      await first.close();

      const second = await startAzurite({ persistTo: folder, blobPort, queuePort });
      try {
        expect(second.connectionString).toBe(first.connectionString);
        const body = await BlobServiceClient.fromConnectionString(second.connectionString)
          .getContainerClient('keep')
          .getBlockBlobClient('doc.json')
          .downloadToBuffer();
        expect(body.toString()).toBe('{"kept":true}');
        const peeked = await QueueServiceClient.fromConnectionString(second.connectionString)
          .getQueueClient('work')
          .peekMessages();
        expect(peeked.peekedMessageItems.map((m) => m.messageText)).toEqual(['survives']);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('close() is idempotent and frees the ports', async () => {
    const azurite = await startAzurite();
    await azurite.close();
    await azurite.close();
    const again = await startAzurite({ blobPort: azurite.blobPort, queuePort: azurite.queuePort });
    await again.close();
  });
});
