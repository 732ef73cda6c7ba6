import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { useAzurite } from '../support/azurite';
import { fencedDocumentsContract } from './fenced-documents.contract';

const fixture = useAzurite();

fencedDocumentsContract(
  'BlobDocumentStore on Azurite',
  () => new BlobDocumentStore(fixture.blobService.getContainerClient(fixture.uniqueName('fenced'))),
);
