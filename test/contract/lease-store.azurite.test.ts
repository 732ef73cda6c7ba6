import { setTimeout as delay } from 'node:timers/promises';
import { BlobEpochMark } from '../../src/lease/blob-epoch-mark';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { useAzurite } from '../support/azurite';
import { leaseStoreContract } from './lease-store.contract';

const fixture = useAzurite();

leaseStoreContract('BlobLeaseStore on Azurite', async () => {
  const name = fixture.uniqueName('hub');
  // A container of its own, so deleting it touches no other test; the mark lives elsewhere.
  const containerName = fixture.uniqueName('leases');
  const epochMark = BlobEpochMark.at(fixture.leaseBlobService.getContainerClient(fixture.uniqueName('hub')), 'epoch-mark');
  const store = new BlobLeaseStore(fixture.leaseBlobService, name, { containerName, epochMark });
  return {
    store,
    breakLease: async () => {
      await fixture.blobService.getContainerClient(containerName).getBlobClient(name).getBlobLeaseClient().breakLease(0);
    },
    deleteRecord: async () => {
      await fixture.blobService.getContainerClient(containerName).delete();
    },
    elapse: (ms) => delay(ms),
  };
});
