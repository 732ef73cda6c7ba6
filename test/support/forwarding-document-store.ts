import type {
  DocumentCallOptions,
  DocumentStore,
  DeleteOptions,
  FolderPage,
  KeyPage,
  ListPageOptions,
  StoredDocument,
  WriteCondition,
} from '../../src/fencing/document-store';

/** Passes every call to another store; tests extend it to hide or break one kind of document. */
export class ForwardingDocumentStore implements DocumentStore {
  constructor(protected readonly inner: DocumentStore) {}
  read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    return this.inner.read(key, options);
  }
  write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }> {
    return this.inner.write(key, body, condition, options);
  }
  delete(key: string, options?: DeleteOptions): Promise<boolean> {
    return this.inner.delete(key, options);
  }
  list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string> {
    return this.inner.list(prefix, options);
  }
  listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    return this.inner.listPage(prefix, options);
  }
  listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage> {
    return this.inner.listFolders(prefix, options);
  }
}
