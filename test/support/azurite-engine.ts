import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { AzureQueue } from '../../src/queue/azure-queue';
import type { AzuriteFixture } from './azurite';
import type { EnginePorts } from './engine-harness';

/** Engine ports on Azurite under a fresh hub name, so tests in one file don't share state. */
export function azuritePorts(fixture: AzuriteFixture, hubPrefix = 'hub'): EnginePorts & { hub: string } {
  const hub = fixture.uniqueName(hubPrefix);
  return {
    hub,
    docs: new BlobDocumentStore(fixture.blobService.getContainerClient(`${hub}-runs`)),
    work: new AzureQueue(fixture.queueService, `${hub}-work`),
    results: new AzureQueue(fixture.queueService, `${hub}-results`),
    poison: new AzureQueue(fixture.queueService, `${hub}-work-poison`),
    leases: () => new BlobLeaseStore(fixture.leaseBlobService, hub),
  };
}
