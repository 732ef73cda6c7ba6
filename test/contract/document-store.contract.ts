import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError } from '../../src/errors';
import type { DocumentStore } from '../../src/fencing/document-store';

/** What every `DocumentStore` must do; runs on the in-memory store and on Azurite blobs. */
export function documentStoreContract(name: string, makeStore: () => Promise<DocumentStore>): void {
  describe(`DocumentStore contract: ${name}`, () => {
    it('reads an absent document as undefined', async () => {
      const store = await makeStore();
      await expect(store.read('runs/none.json')).resolves.toBeUndefined();
    });

    it('creates only when absent', async () => {
      const store = await makeStore();
      const { etag } = await store.write('a/doc.json', '{"n":1}', { ifNoneMatch: '*' });
      await expect(store.write('a/doc.json', '{"n":2}', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      await expect(store.read('a/doc.json')).resolves.toEqual({ body: '{"n":1}', etag });
    });

    it('replaces only the version it names, with a new tag each time', async () => {
      const store = await makeStore();
      const first = await store.write('b.json', 'v1', { ifNoneMatch: '*' });
      const second = await store.write('b.json', 'v2', { ifMatch: first.etag });
      expect(second.etag).not.toBe(first.etag);
      await expect(store.write('b.json', 'v3', { ifMatch: first.etag })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      await expect(store.read('b.json')).resolves.toEqual({ body: 'v2', etag: second.etag });
    });

    it('lets exactly one of 16 writers replace the same version', async () => {
      const store = await makeStore();
      const { etag } = await store.write('race.json', 'start', { ifNoneMatch: '*' });
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) => store.write('race.json', `writer-${i}`, { ifMatch: etag })),
      );
      const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      expect(winners).toHaveLength(1);
      expect((await store.read('race.json'))?.body).toBe(`writer-${winners[0]}`);
    });

    it('lets exactly one of 16 creators create the same document', async () => {
      const store = await makeStore();
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) => store.write('create-race.json', `creator-${i}`, { ifNoneMatch: '*' })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    });

    it('writes unconditionally when given no condition', async () => {
      const store = await makeStore();
      await store.write('plain.json', 'one', {});
      await store.write('plain.json', 'two', {});
      expect((await store.read('plain.json'))?.body).toBe('two');
    });

    it('deletes, and lists keys by prefix in order', async () => {
      const store = await makeStore();
      for (const key of ['p/b.json', 'p/a.json', 'p/sub/c.json', 'q/d.json']) await store.write(key, '{}', { ifNoneMatch: '*' });
      const listed: string[] = [];
      for await (const key of store.list('p/')) listed.push(key);
      expect(listed).toEqual(['p/a.json', 'p/b.json', 'p/sub/c.json']);
      expect(await store.delete('p/a.json')).toBe(true);
      expect(await store.delete('p/a.json')).toBe(false);
      await expect(store.read('p/a.json')).resolves.toBeUndefined();
    });

    it('lists by the page: each page in order, none repeated or skipped, and no continuation after the last', async () => {
      const store = await makeStore();
      const keys = Array.from({ length: 7 }, (_, i) => `pg/${String(i).padStart(2, '0')}.json`);
      for (const key of [...keys].reverse()) await store.write(key, '{}', { ifNoneMatch: '*' });
      await store.write('pgx/outside.json', '{}', { ifNoneMatch: '*' });
      const pages: string[][] = [];
      let continuation: string | undefined;
      do {
        const page = await store.listPage('pg/', { pageSize: 3, ...(continuation ? { continuation } : {}) });
        expect(page.keys.length).toBeLessThanOrEqual(3);
        pages.push(page.keys);
        continuation = page.continuation;
      } while (continuation !== undefined && pages.length < 10);
      expect(pages.flat()).toEqual(keys);
      expect(pages[0]).toEqual(keys.slice(0, 3));
      await expect(store.listPage('none/', { pageSize: 3 })).resolves.toEqual({ keys: [], etags: [], continuation: undefined });
    });

    it('lists each key with the tag of its version, and deletes only the version a condition names', async () => {
      const store = await makeStore();
      const first = await store.write('cd/a.json', 'v1', { ifNoneMatch: '*' });
      const listed = await store.listPage('cd/', { pageSize: 5 });
      expect(listed).toEqual({ keys: ['cd/a.json'], etags: [first.etag], continuation: undefined });
      const second = await store.write('cd/a.json', 'v2', { ifMatch: first.etag });
      await expect(store.delete('cd/a.json', { ifMatch: first.etag })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      expect((await store.read('cd/a.json'))?.body).toBe('v2');
      expect(await store.delete('cd/a.json', { ifMatch: second.etag })).toBe(true);
      await expect(store.delete('cd/a.json', { ifMatch: second.etag })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      expect(await store.delete('cd/a.json')).toBe(false);
    });

    it('lists the folders directly under a prefix, by the page, each once', async () => {
      const store = await makeStore();
      const keys = ['fd/03/a.json', 'fd/01/a.json', 'fd/01/b.json', 'fd/02/x/y.json', 'fd/top.json', 'fdx/04/a.json'];
      for (const key of keys) await store.write(key, '{}', { ifNoneMatch: '*' });
      const pages: string[][] = [];
      let continuation: string | undefined;
      do {
        const page = await store.listFolders('fd/', { pageSize: 2, ...(continuation ? { continuation } : {}) });
        pages.push(page.folders);
        continuation = page.continuation;
      } while (continuation !== undefined && pages.length < 10);
      expect(pages.flat()).toEqual(['fd/01/', 'fd/02/', 'fd/03/']);
      await expect(store.listFolders('none/', { pageSize: 2 })).resolves.toEqual({ folders: [], continuation: undefined });
    });

    it('keeps unicode bodies intact', async () => {
      const store = await makeStore();
      const body = JSON.stringify({ name: 'résumé ✓ 日本' });
      await store.write('u.json', body, { ifNoneMatch: '*' });
      expect((await store.read('u.json'))?.body).toBe(body);
    });
  });
}
