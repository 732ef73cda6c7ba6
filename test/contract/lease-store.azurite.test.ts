import { setTimeout as delay } from 'node:timers/promises';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { useAzurite } from '../support/azurite';
import { leaseStoreContract } from './lease-store.contract';

const fixture = useAzurite();

leaseStoreContract('BlobLeaseStore on Azurite', async () => {
  const name = fixture.uniqueName('hub');
  const store = new BlobLeaseStore(fixture.leaseBlobService, name);
  return {
    store,
    breakLease: async () => {
      await fixture.blobService.getContainerClient('leases').getBlobClient(name).getBlobLeaseClient().breakLease(0);
    },
    elapse: (ms) => delay(ms),
  };
});
