import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError, StaleEpochError } from '../../src/errors';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import type { DocumentStore } from '../../src/fencing/document-store';

interface Counter {
  n: number;
  by: string;
}

/** What fenced documents guarantee, on any `DocumentStore`. */
export function fencedDocumentsContract(name: string, makeStore: () => DocumentStore): void {
  describe(`FencedDocuments contract: ${name}`, () => {
    const docs = () => new FencedDocuments<Counter>(makeStore());

    it('creates with the writer epoch and reads it back', async () => {
      const d = docs();
      await d.create('r/1.json', 3, { n: 1, by: 'a' });
      await expect(d.read('r/1.json')).resolves.toMatchObject({ value: { n: 1, by: 'a' }, epoch: 3 });
    });

    it('lets the same or a newer epoch replace, and refuses an older one without writing', async () => {
      const d = docs();
      let current = await d.create('r/2.json', 2, { n: 1, by: 'epoch-2' });
      current = await d.replace('r/2.json', 2, current, { n: 2, by: 'epoch-2' });
      current = await d.replace('r/2.json', 5, current, { n: 3, by: 'epoch-5' });
      await expect(d.replace('r/2.json', 4, current, { n: 99, by: 'epoch-4' })).rejects.toBeInstanceOf(StaleEpochError);
      await expect(d.read('r/2.json')).resolves.toMatchObject({ value: { n: 3, by: 'epoch-5' }, epoch: 5 });
    });

    it('never overwrites a newer leader that wrote between its read and its write', async () => {
      const d = docs();
      await d.create('r/3.json', 1, { n: 0, by: 'old' });
      const staleRead = await d.read('r/3.json');
      if (!staleRead) throw new Error('missing');
      await d.update('r/3.json', 2, (c) => c && { n: c.n + 1, by: 'new' });
      // The stale leader's CAS fails on the ETag...
      await expect(d.replace('r/3.json', 1, staleRead, { n: 100, by: 'old' })).rejects.toBeInstanceOf(ConcurrentUpdateError);
      // ...and its read-modify-write loop then meets the newer epoch.
      const err = await d.update('r/3.json', 1, (c) => c && { n: c.n + 100, by: 'old' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StaleEpochError);
      expect(err).toMatchObject({ writerEpoch: 1, storedEpoch: 2, code: 'StaleEpoch' });
      await expect(d.read('r/3.json')).resolves.toMatchObject({ value: { n: 1, by: 'new' }, epoch: 2 });
    });

    it('update retries on contention so that no increment is lost', async () => {
      const d = docs();
      await Promise.all(
        Array.from({ length: 8 }, () => d.update('r/4.json', 1, (c) => ({ n: (c?.n ?? 0) + 1, by: 'x' }), { maxAttempts: 50 })),
      );
      await expect(d.read('r/4.json')).resolves.toMatchObject({ value: { n: 8 } });
    });

    it('update leaves the document alone when mutate returns undefined', async () => {
      const d = docs();
      const created = await d.create('r/5.json', 1, { n: 1, by: 'a' });
      const result = await d.update('r/5.json', 1, () => undefined);
      expect(result?.etag).toBe(created.etag);
    });
  });
}
