import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { documentStoreContract } from './document-store.contract';

documentStoreContract('InMemoryDocumentStore', async () => new InMemoryDocumentStore());
