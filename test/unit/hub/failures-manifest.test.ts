import { describe, expect, it } from 'vitest';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { appendFailures } from '../../../src/hub/failure-log';
import { firstFailures, readFailures, readFailuresManifest, writeFailuresManifest } from '../../../src/hub/failures-manifest';
import type { FailureEntry } from '../../../src/hub/fold';
import { runKeys } from '../../../src/hub/run-record';

const RUN = 'sum/manual-m';
const entry = (item: number): FailureEntry => ({ item, reason: `bad ${item}`, attempts: 3 });

async function all(iterable: AsyncIterable<FailureEntry>): Promise<FailureEntry[]> {
  const out: FailureEntry[] = [];
  for await (const e of iterable) out.push(e);
  return out;
}

describe('the failures manifest', () => {
  it('names the failure log, reads every failure back in the order counted, and stops early when asked', async () => {
    const docs = new InMemoryDocumentStore();
    let roots: string[] = [];
    for (let part = 0; part < 40; part++) {
      roots = await appendFailures(docs, { runId: RUN, epoch: 2, roots, failures: [entry(2 * part), entry(2 * part + 1)] });
    }
    await writeFailuresManifest(docs, {
      runId: RUN,
      state: 'failed',
      failedCount: 80,
      failureParts: roots,
      missing: [],
      missingCount: 0,
    });
    const manifest = await readFailuresManifest(docs, RUN);
    expect(manifest).toEqual({ runId: RUN, state: 'failed', failedCount: 80, failureParts: roots, missing: [], missingCount: 0 });
    expect(await all(readFailures(docs, manifest!))).toEqual(Array.from({ length: 80 }, (_, i) => entry(i)));
    expect(await firstFailures(docs, manifest!, 3)).toEqual({ failed: [entry(0), entry(1), entry(2)], unreadableParts: [] });
  });

  it('reads a manifest written before the failure log, with its count, its inline failures and the parts it lost', async () => {
    const docs = new InMemoryDocumentStore();
    const old = {
      runId: RUN,
      state: 'succeeded',
      failed: [entry(1), entry(5)],
      missing: [],
      missingCount: 0,
      unreadableParts: ['runs/sum/manual-m/failures/e1-000000-gone.ndjson'],
    };
    await docs.write(runKeys.manifest(RUN), JSON.stringify(old), { ifNoneMatch: '*' });
    const manifest = await readFailuresManifest(docs, RUN);
    expect(manifest).toEqual({ ...old, failedCount: 2 });
    const missing: string[] = [];
    expect(await all(readFailures(docs, manifest!, { onMissing: (key) => missing.push(key) }))).toEqual([entry(1), entry(5)]);
    expect(missing).toEqual(old.unreadableParts);
  });

  it('skips a part or index storage lost, naming it, and reads the rest', async () => {
    const docs = new InMemoryDocumentStore();
    let roots: string[] = [];
    for (let part = 0; part < 17; part++)
      roots = await appendFailures(docs, { runId: RUN, epoch: 1, roots, failures: [entry(part)] });
    expect(roots).toHaveLength(2); // an index of the first 16 parts, and the 17th
    await docs.delete(roots[1]!);
    const manifest = { runId: RUN, state: 'failed' as const, failedCount: 17, failureParts: roots, missing: [], missingCount: 0 };
    expect(await firstFailures(docs, manifest, 100)).toEqual({
      failed: Array.from({ length: 16 }, (_, i) => entry(i)),
      unreadableParts: [roots[1]],
    });
  });

  it('says what is wrong with a manifest that cannot be read', async () => {
    const docs = new InMemoryDocumentStore();
    expect(await readFailuresManifest(docs, RUN)).toBeUndefined();
    await docs.write(runKeys.manifest(RUN), '{"runId":', {});
    await expect(readFailuresManifest(docs, RUN)).rejects.toThrow(`${runKeys.manifest(RUN)} is not JSON`);
    await docs.write(runKeys.manifest(RUN), JSON.stringify({ runId: RUN, state: 'done' }), {});
    await expect(readFailuresManifest(docs, RUN)).rejects.toThrow(/is not a failures manifest/);
  });
});
