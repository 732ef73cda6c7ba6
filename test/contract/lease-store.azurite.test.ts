import { setTimeout as delay } from 'node:timers/promises';
import { BlobEpochMark } from '../../src/lease/blob-epoch-mark';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { useAzurite } from '../support/azurite';
import { useAzureBehaviour } from '../support/azure-behaviour';
import { leaseStoreContract } from './lease-store.contract';

const fixture = useAzurite();
// Every client here answers as Azure does where Azurite 3.37 does not (docs/testing.md).
const azure = useAzureBehaviour(fixture);

leaseStoreContract('BlobLeaseStore on Azurite', async () => {
  const name = fixture.uniqueName('hub');
  // A container of its own, so deleting it touches no other test; the mark lives elsewhere.
  const containerName = fixture.uniqueName('leases');
  const epochMark = BlobEpochMark.at(azure.leaseBlobService.getContainerClient(fixture.uniqueName('hub')), 'epoch-mark');
  const store = new BlobLeaseStore(azure.leaseBlobService, name, { containerName, epochMark });
  return {
    store,
    breakLease: async () => {
      await azure.blobService.getContainerClient(containerName).getBlobClient(name).getBlobLeaseClient().breakLease(0);
    },
    deleteRecord: async () => {
      await azure.blobService.getContainerClient(containerName).delete();
    },
    elapse: (ms) => delay(ms),
  };
});
