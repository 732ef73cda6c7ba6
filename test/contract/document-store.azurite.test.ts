import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { useAzurite } from '../support/azurite';
import { documentStoreContract } from './document-store.contract';

const fixture = useAzurite();

documentStoreContract(
  'BlobDocumentStore on Azurite',
  async () => new BlobDocumentStore(fixture.blobService.getContainerClient(fixture.uniqueName('docs'))),
);
