import { describe, expect, it } from 'vitest';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';

describe('FencedDocuments envelope checks', () => {
  it('rejects a body that is not a fenced document, naming the key', async () => {
    const store = new InMemoryDocumentStore();
    await store.write('bad.json', '{"value":1}', { ifNoneMatch: '*' });
    await expect(new FencedDocuments(store).read('bad.json')).rejects.toThrow(/bad\.json is not a fenced document/);
  });

  it('checks values with the parse option', async () => {
    const store = new InMemoryDocumentStore();
    const d = new FencedDocuments<number>(store, {
      parse: (v) => {
        if (typeof v !== 'number') throw new TypeError('expected a number');
        return v;
      },
    });
    await new FencedDocuments<unknown>(store).create('n.json', 1, 'text');
    await expect(d.read('n.json')).rejects.toThrow('expected a number');
  });
});
