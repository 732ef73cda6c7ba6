import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { fencedDocumentsContract } from './fenced-documents.contract';

fencedDocumentsContract('InMemoryDocumentStore', () => new InMemoryDocumentStore());
