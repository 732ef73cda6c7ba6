import { setTimeout as delay } from 'node:timers/promises';
import { BlobHandoverRequestStore } from '../../src/lease/blob-handover-request-store';
import { useAzurite } from '../support/azurite';
import { handoverRequestStoreContract } from './handover-request-store.contract';

const fixture = useAzurite();

handoverRequestStoreContract('BlobHandoverRequestStore on Azurite', async () => {
  // A container of its own that nobody created: the first write makes room, as on a new hub.
  const containerName = fixture.uniqueName('leases');
  return {
    store: new BlobHandoverRequestStore(fixture.leaseBlobService, fixture.uniqueName('hub'), { containerName }),
    elapse: (ms) => delay(ms),
  };
});
