import { afterAll, beforeAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { BlobServiceClient } from '@azure/storage-blob';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { createBlobServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';

export interface AzuriteFixture {
  readonly azurite: RunningAzurite;
  /** A client with the SDK's default retries, for setup and for plain document writes. */
  readonly blobService: BlobServiceClient;
  /** A client with the short retries lease calls use in production. */
  readonly leaseBlobService: BlobServiceClient;
  /** A name no other test in this file uses. */
  uniqueName(prefix: string): string;
}

/** One in-memory Azurite per test file, on free ports (Azurite slows as its queues grow). */
export function useAzurite(): AzuriteFixture {
  let azurite: RunningAzurite | undefined;
  let blobService: BlobServiceClient | undefined;
  let leaseBlobService: BlobServiceClient | undefined;
  beforeAll(async () => {
    azurite = await startAzurite();
    const settings = { kind: 'connectionString', connectionString: azurite.connectionString } as const;
    blobService = createBlobServiceClient(settings);
    leaseBlobService = createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS });
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
    uniqueName: (prefix) => `${prefix}-${randomUUID().slice(0, 8)}`,
  };
}
