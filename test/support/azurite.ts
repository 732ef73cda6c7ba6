import { afterAll, beforeAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { BlobServiceClient } from '@azure/storage-blob';
import type { QueueServiceClient } from '@azure/storage-queue';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';

export interface AzuriteFixture {
  readonly azurite: RunningAzurite;
  /** A client with the SDK's default retries, for setup and for plain document writes. */
  readonly blobService: BlobServiceClient;
  /** A client with the short retries lease calls use in production. */
  readonly leaseBlobService: BlobServiceClient;
  /** A queue client with the SDK's default retries. */
  readonly queueService: QueueServiceClient;
  /** A name no other test in this file uses. */
  uniqueName(prefix: string): string;
}

/** One in-memory Azurite per test file, on free ports (Azurite slows as its queues grow). */
export function useAzurite(): AzuriteFixture {
  let azurite: RunningAzurite | undefined;
  let blobService: BlobServiceClient | undefined;
  let leaseBlobService: BlobServiceClient | undefined;
  let queueService: QueueServiceClient | undefined;
  beforeAll(async () => {
    azurite = await startAzurite();
    const settings = { kind: 'connectionString', connectionString: azurite.connectionString } as const;
    blobService = createBlobServiceClient(settings);
    leaseBlobService = createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS });
    queueService = createQueueServiceClient(settings);
  });
  afterAll(async () => {
    await azurite?.close();
  });
  const need = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('Azurite is not started: use the fixture inside tests');
    return value;
  };
  return {
    get azurite() {
      return need(azurite);
    },
    get blobService() {
      return need(blobService);
    },
    get leaseBlobService() {
      return need(leaseBlobService);
    },
    get queueService() {
      return need(queueService);
    },
    uniqueName: (prefix) => `${prefix}-${randomUUID().slice(0, 8)}`,
  };
}
