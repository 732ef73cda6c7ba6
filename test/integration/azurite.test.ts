import { describe, expect, it, vi } from 'vitest';
import { Agent, get as httpGet } from 'node:http';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';
import { startAzurite } from '../../src/local/azurite';
import { patience } from '../support/slowdown';

// Azurite's own copy of LokiJS, the one its stores build their collections from. A batch removal
// ends in ensureAllIndexes(true): a full re-sort of every index, however little it removed; a
// batch update, in a rebuild of every index it marked dirty.
const { Collection, Resultset } = createRequire(import.meta.url)('lokijs') as {
  Collection: {
    prototype: {
      ensureAllIndexes(force?: boolean): void;
      prepareFullDocIndex(): number[];
      remove(doc: unknown): void;
      name: string;
    };
  };
  Resultset: { prototype: { find(query?: object, firstOnly?: boolean): unknown; collection: { name: string } } };
};

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

  it('keeps an idle connection open past the 5 s at which Node closes one, so a client that paused reuses it', async () => {
    const azurite = await startAzurite();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ reused: boolean; socket: Socket }>((resolve, reject) => {
        const req = httpGet(`${azurite.blobEndpoint}?comp=list`, { agent }, (res) => {
          res.resume();
          res.once('end', () => resolve({ reused: req.reusedSocket, socket: req.socket as Socket }));
        });
        req.once('error', reject);
      });
    try {
      const first = await get();
      let closed = false;
      first.socket.once('close', () => (closed = true));
      // Absence is what is asserted: with Node's default the server closes this idle socket at 5 s,
      // and a request sent just then fails with "socket hang up".
      await new Promise((resolve) => setTimeout(resolve, 7000));
      expect(closed).toBe(false);
      expect((await get()).reused).toBe(true);
    } finally {
      agent.destroy();
      await azurite.close();
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

  it('looks blobs and messages up by their own indexed key first, and still by every key', async () => {
    const azurite = await startAzurite();
    const finds = vi.spyOn(Resultset.prototype, 'find');
    // The first key of each whole query (LokiJS then splits it into one find per key, in order).
    const firstKeys = (collection: string) =>
      finds.mock.calls.flatMap(([query], i) =>
        (finds.mock.contexts[i] as { collection: { name: string } }).collection.name === collection &&
        query &&
        Object.keys(query).length > 1
          ? [Object.keys(query)[0]]
          : [],
      );
    try {
      const blobs = BlobServiceClient.fromConnectionString(azurite.connectionString);
      // The same blob name in two containers: the container must still pick the blob.
      for (const name of ['left', 'right']) {
        await blobs.getContainerClient(name).create();
        await blobs.getContainerClient(name).getBlockBlobClient('same').upload(name, name.length);
      }
      finds.mockClear();
      expect((await blobs.getContainerClient('left').getBlockBlobClient('same').downloadToBuffer()).toString()).toBe('left');
      expect((await blobs.getContainerClient('right').getBlockBlobClient('same').downloadToBuffer()).toString()).toBe('right');
      // Azurite queries by account first, which every blob shares: a scan of every blob.
      expect(firstKeys('$BLOBS_COLLECTION$')).toContain('name');
      expect(firstKeys('$BLOBS_COLLECTION$')).not.toContain('accountName');

      const queues = QueueServiceClient.fromConnectionString(azurite.connectionString);
      const [one, two] = [queues.getQueueClient('one'), queues.getQueueClient('two')];
      await Promise.all([one.create(), two.create()]);
      await Promise.all([one.sendMessage('a'), two.sendMessage('b')]);
      finds.mockClear();
      const [received] = (await one.receiveMessages()).receivedMessageItems;
      expect(received?.messageText).toBe('a');
      await one.deleteMessage(received!.messageId, received!.popReceipt);
      expect(firstKeys('$MESSAGES_COLLECTION$')).not.toContain('accountName');
      expect((await two.peekMessages()).peekedMessageItems.map((m) => m.messageText)).toEqual(['b']);
      expect((await one.peekMessages()).peekedMessageItems).toEqual([]);
    } finally {
      finds.mockRestore();
      await azurite.close();
    }
  });

  describe('removals and updates that leave the store indexes in place', () => {
    it('hands out received messages without rebuilding every index over every message', async () => {
      const azurite = await startAzurite();
      // Every index LokiJS builds from scratch starts from a list of every document.
      const rebuilds = vi.spyOn(Collection.prototype, 'prepareFullDocIndex');
      const messageRebuilds = () =>
        rebuilds.mock.contexts.filter((c) => (c as { name: string }).name === '$MESSAGES_COLLECTION$').length;
      try {
        const queues = QueueServiceClient.fromConnectionString(azurite.connectionString);
        const [work, other] = [queues.getQueueClient('work'), queues.getQueueClient('other')];
        await Promise.all([work.create(), other.create()]);
        for (let i = 0; i < 5; i++) await work.sendMessage(`m${i}`);
        await other.sendMessage('elsewhere');
        rebuilds.mockClear();
        // Stock Azurite updates the messages a receive hands out as one LokiJS batch, which ends
        // in a rebuild of every index of every queue's messages, one receive at a time.
        const first = (await work.receiveMessages({ numberOfMessages: 3, visibilityTimeout: 1 })).receivedMessageItems;
        const second = (await work.receiveMessages({ numberOfMessages: 3, visibilityTimeout: 60 })).receivedMessageItems;
        expect(messageRebuilds()).toBe(0);
        // Oldest first, each handed out once, each counted once.
        expect(first.map((m) => m.messageText)).toEqual(['m0', 'm1', 'm2']);
        expect(second.map((m) => m.messageText)).toEqual(['m3', 'm4']);
        expect([...first, ...second].map((m) => m.dequeueCount)).toEqual([1, 1, 1, 1, 1]);
        // The indexes still find them: the first three come back when their second is up, with
        // receipts that delete them, and the other queue's message was never touched.
        await vi.waitFor(
          async () => {
            const again = (await work.receiveMessages({ numberOfMessages: 5, visibilityTimeout: 60 })).receivedMessageItems;
            expect(again.map((m) => [m.messageText, m.dequeueCount])).toEqual([
              ['m0', 2],
              ['m1', 2],
              ['m2', 2],
            ]);
            for (const m of again) await work.deleteMessage(m.messageId, m.popReceipt);
          },
          { timeout: patience(30_000), interval: 250 },
        );
        expect((await work.peekMessages()).peekedMessageItems).toEqual([]);
        expect((await other.peekMessages()).peekedMessageItems.map((m) => [m.messageText, m.dequeueCount])).toEqual([
          ['elsewhere', 0],
        ]);
      } finally {
        rebuilds.mockRestore();
        await azurite.close();
      }
    });

    it('expires messages without re-sorting the message indexes on every queue call', async () => {
      const azurite = await startAzurite();
      const resorts = vi.spyOn(Collection.prototype, 'ensureAllIndexes');
      try {
        const queue = QueueServiceClient.fromConnectionString(azurite.connectionString).getQueueClient('expiry');
        await queue.create();
        await queue.sendMessage('short', { messageTimeToLive: 1 });
        await queue.sendMessage('kept');
        const idle = QueueServiceClient.fromConnectionString(azurite.connectionString).getQueueClient('idle');
        await idle.create();
        resorts.mockClear();
        // Stock Azurite re-sorts every index of the account's messages before each of these calls,
        // though none has anything to expire: the polling of every idle queue trigger.
        for (let i = 0; i < 20; i++) {
          await idle.receiveMessages({ numberOfMessages: 16 });
          await queue.peekMessages();
        }
        expect(resorts.mock.calls.filter(([force]) => force === true)).toHaveLength(0);
        // The expired one still goes: the count covers expired messages until a sweep removes them.
        await vi.waitFor(
          async () => {
            await queue.peekMessages();
            expect((await queue.getProperties()).approximateMessagesCount).toBe(1);
          },
          { timeout: patience(30_000), interval: 200 },
        );
        expect((await queue.peekMessages()).peekedMessageItems.map((m) => m.messageText)).toEqual(['kept']);
      } finally {
        resorts.mockRestore();
        await azurite.close();
      }
    });

    it('sweeps the extents of overwritten blobs one by one, without re-sorting', async () => {
      const azurite = await startAzurite({ gcIntervalMs: 200 });
      const resorts = vi.spyOn(Collection.prototype, 'ensureAllIndexes');
      const removals = vi.spyOn(Collection.prototype, 'remove');
      try {
        const container = BlobServiceClient.fromConnectionString(azurite.connectionString).getContainerClient('sweep');
        await container.create();
        const blob = container.getBlockBlobClient('doc.json');
        for (let i = 0; i < 5; i++) await blob.upload(`{"v":${i}}`, `{"v":${i}}`.length);
        resorts.mockClear();
        const extentRemovals = () =>
          removals.mock.contexts.filter((c) => (c as { name: string }).name === '$EXTENTS_COLLECTION$').length;
        // Four bodies were overwritten; each has an extent that only the sweep frees.
        await vi.waitFor(() => expect(extentRemovals()).toBeGreaterThanOrEqual(4), { timeout: patience(30_000), interval: 100 });
        expect(resorts.mock.calls.filter(([force]) => force === true)).toHaveLength(0);
        expect((await blob.downloadToBuffer()).toString()).toBe('{"v":4}');
      } finally {
        resorts.mockRestore();
        removals.mockRestore();
        await azurite.close();
      }
    });
  });
});
