/**
 * Retention (src/hub/retention.ts): runs past their horizon lose exactly what the policy says,
 * open and newer runs nothing; every deletion is fenced, resumable and done in small slices.
 * The same sweep runs on Azurite in test/integration/retention.azurite.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { StaleEpochError } from '../../../src/errors';
import type {
  DeleteOptions,
  DocumentCallOptions,
  DocumentStore,
  FolderPage,
  KeyPage,
  ListPageOptions,
  StoredDocument,
} from '../../../src/fencing/document-store';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import {
  RETENTION_END_GRACE_MS,
  RETENTION_TRIES,
  RetentionPace,
  retentionSlice,
  type RetentionPolicy,
  type RetentionSliceResult,
} from '../../../src/hub/retention';
import { ENDED_RUN_TTL_MS, RunStateCache } from '../../../src/engine/run-state-cache';
import { FakeClock } from '../../../src/clock/fake-clock';
import { indexRun, listRuns, runIndexKeys } from '../../../src/hub/run-index';
import { newRunRecord, runKeys, manualRunId, type RunRecord } from '../../../src/hub/run-record';
import { renderShow } from '../../../src/cli/format';
import { showView } from '../../../src/hub/read-model';
import { readRunDetails } from '../../../src/hub/status';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { blobsOf, DAY, keysUnder, seedRun, type SeededRun } from '../../support/retention-runs';

const NOW = new Date('2026-06-30T12:00:00.000Z');
const HOUR = 3_600_000;

/** Slices until one says there is no more, as an idle leader calls them; the results of each. */
async function sweep(docs: DocumentStore, policy: RetentionPolicy, epoch = 5) {
  const slices: RetentionSliceResult[] = [];
  do slices.push(await retentionSlice(docs, { epoch, now: NOW, policy }));
  while (slices.at(-1)!.more && slices.length < 100);
  return slices;
}

const records = (docs: InMemoryDocumentStore | ForwardingDocumentStore) => new FencedDocuments<RunRecord>(docs);

async function recordOf(docs: InMemoryDocumentStore, run: SeededRun): Promise<RunRecord | undefined> {
  return (await records(docs).read(runKeys.record(run.runId)))?.value;
}

describe('retention: which runs lose what', () => {
  const policies: Array<{ name: string; policy: RetentionPolicy }> = [
    { name: 'one horizon (30 days)', policy: { runDays: 30, outputDays: 30 } },
    { name: 'outputs kept 7 days, runs 30', policy: { runDays: 30, outputDays: 7 } },
    { name: 'runs kept 7 days, outputs 30', policy: { runDays: 7, outputDays: 30 } },
  ];

  it.each(policies)(
    '$name: ended runs past the later horizon are gone whole; open and newer runs untouched',
    async ({ policy }) => {
      const docs = new InMemoryDocumentStore();
      const old = [
        await seedRun(docs, { job: 'alpha', name: 'old-45', now: NOW, age: 45 * DAY }),
        await seedRun(docs, { job: 'beta', name: 'old-32', now: NOW, age: 32 * DAY }),
      ];
      const openOld = await seedRun(docs, { job: 'alpha', name: 'open-45', now: NOW, age: 45 * DAY, open: true });
      const young = [
        await seedRun(docs, { job: 'alpha', name: 'young-1', now: NOW, age: HOUR }),
        await seedRun(docs, { job: 'beta', name: 'young-6', now: NOW, age: 6 * DAY }),
      ];
      const before = new Map<string, string | undefined>();
      for (const run of [openOld, ...young]) for (const key of run.keys) before.set(key, (await docs.read(key))?.etag);

      const slices = await sweep(docs, policy);

      for (const run of old) expect(await blobsOf(docs, run)).toEqual([]);
      expect(slices.flatMap((s) => s.deleted).sort()).toEqual(old.map((r) => r.runId).sort());
      expect(slices.flatMap((s) => s.open)).toContain(openOld.runId);
      for (const run of [openOld, ...young]) {
        expect(await blobsOf(docs, run)).toEqual(run.keys);
        for (const key of run.keys) expect((await docs.read(key))?.etag, key).toBe(before.get(key));
      }
      const listed = (await listRuns(docs, { limit: 100 })).runs.map((r) => r.runId);
      expect(listed.sort()).toEqual([openOld, ...young].map((r) => r.runId).sort());
    },
  );

  it('a run is deleted once the whole day it was created on is past the horizon', async () => {
    const docs = new InMemoryDocumentStore();
    // Noon now: 30 days and 11 hours ago is the day that ended 29.5 days ago; 31 days ago, 30.5.
    const kept = await seedRun(docs, { job: 'alpha', name: 'day-30', now: NOW, age: 30 * DAY + 11 * HOUR });
    const gone = await seedRun(docs, { job: 'alpha', name: 'day-31', now: NOW, age: 31 * DAY });
    await sweep(docs, { runDays: 30, outputDays: 30 });
    expect(await blobsOf(docs, kept)).toEqual(kept.keys);
    expect(await blobsOf(docs, gone)).toEqual([]);
  });

  it('outputs kept 7 days: a 10-day-old run loses its output only, and stays listed saying so', async () => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'ten', now: NOW, age: 10 * DAY });
    await sweep(docs, { runDays: 30, outputDays: 7 });
    expect(await blobsOf(docs, run)).toEqual(run.keys.filter((k) => k !== runKeys.output(run.runId)));
    const record = await recordOf(docs, run);
    expect(record?.outputKey).toBeNull();
    expect(record?.pruned).toEqual({ output: NOW.toISOString(), details: null, run: null, pending: null });
    expect((await listRuns(docs)).runs.map((r) => r.runId)).toEqual([run.runId]);
  });

  it('runs kept 7 days, outputs 30: a 10-day-old run keeps its record and output, and loses the rest', async () => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'ten', now: NOW, age: 10 * DAY });
    await sweep(docs, { runDays: 7, outputDays: 30 });
    expect(await blobsOf(docs, run)).toEqual(
      run.keys.filter(
        (k) => !k.startsWith(runKeys.prefix(run.runId)) || k === runKeys.record(run.runId) || k === runKeys.output(run.runId),
      ),
    );
    const record = await recordOf(docs, run);
    expect(record).toMatchObject({ manifestKey: null, failureParts: [], seen: null, outputKey: runKeys.output(run.runId) });
    expect(record?.counters.failed).toBe(1);
    expect(record?.pruned?.details).toBe(NOW.toISOString());
    expect((await listRuns(docs)).runs.map((r) => r.runId)).toEqual([run.runId]);
  });

  it.each([
    { policy: { runDays: 30, outputDays: 7 }, line: /^output +deleted by retention 2026-06-30T12:00:00\.000Z/m },
    {
      policy: { runDays: 7, outputDays: 30 },
      line: /^failures +1 failed; the list was deleted by retention 2026-06-30T12:00:00\.000Z/m,
    },
  ])('baton show says what retention deleted, and when ($policy.outputDays-day outputs)', async ({ policy, line }) => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'ten', now: NOW, age: 10 * DAY });
    await sweep(docs, policy);
    const details = await readRunDetails(docs, run.runId);
    expect(renderShow(showView('baton', 'baton-runs', details!), NOW)).toMatch(line);
  });

  it('the partial pass keeps its place: a second slice reads no pruned run again', async () => {
    const inner = new InMemoryDocumentStore();
    for (let i = 0; i < 12; i++) await seedRun(inner, { job: 'alpha', name: `r${i}`, now: NOW, age: (10 + i) * DAY });
    const docs = new CountingStore(inner);
    const first = await sweep(docs, { runDays: 30, outputDays: 7 });
    expect(first.flatMap((s) => s.pruned)).toHaveLength(12);
    docs.reads = 0;
    const again = await sweep(docs, { runDays: 30, outputDays: 7 });
    expect(again.flatMap((s) => s.pruned)).toEqual([]);
    // The cursor, and no run record.
    expect(docs.reads).toBe(1);
  });

  it('removes index entries that name no run, or another run of the same id, and nothing else', async () => {
    const docs = new InMemoryDocumentStore();
    const at = new Date(NOW.getTime() - 40 * DAY);
    // A creation that lost its race: the entry was written, the record never was.
    const lost = newRunRecord({
      runId: manualRunId('alpha', 'lost'),
      job: 'alpha',
      trigger: 'manual',
      occurrence: undefined,
      now: at,
      timeoutSeconds: 60,
    });
    await indexRun(docs, 1, lost);
    // A keyed run id used again after its old run's record was deleted: the old entry remains.
    const reused = await seedRun(docs, { job: 'beta', name: 'k-same', now: NOW, age: HOUR });
    const stale = {
      ...newRunRecord({
        runId: reused.runId,
        job: 'beta',
        trigger: 'manual',
        occurrence: undefined,
        now: at,
        timeoutSeconds: 60,
      }),
    };
    await indexRun(docs, 1, stale);
    const slices = await sweep(docs, { runDays: 30, outputDays: 30 });
    expect(slices.reduce((n, s) => n + s.strayEntries, 0)).toBe(2);
    expect(await keysUnder(docs, 'index/')).toEqual(reused.keys.filter((k) => k.startsWith('index/')));
    expect(await blobsOf(docs, reused)).toEqual(reused.keys);
  });
});

describe('retention: small slices, fenced and resumable', () => {
  it('deletes 25 old runs ten at a time, saying there is more until there is not', async () => {
    const docs = new InMemoryDocumentStore();
    for (let i = 0; i < 25; i++)
      await seedRun(docs, { job: 'alpha', name: `r${i}`, now: NOW, age: (40 + (i % 3)) * DAY + i * 60_000 });
    const slices = await sweep(docs, { runDays: 30, outputDays: 30 });
    expect(slices.map((s) => s.deleted.length)).toEqual([10, 10, 5]);
    expect(slices.map((s) => s.more)).toEqual([true, true, false]);
    // Only the sweep's own place is left.
    expect(await keysUnder(docs, '')).toEqual(['index/retention.json']);
  });

  it('a slice cut short by a failing delete leaves what the next slice finishes', async () => {
    const inner = new InMemoryDocumentStore();
    const runs = [];
    for (let i = 0; i < 3; i++)
      runs.push(await seedRun(inner, { job: 'alpha', name: `r${i}`, now: NOW, age: 40 * DAY + i * 60_000 }));
    const kept = await seedRun(inner, { job: 'alpha', name: 'young', now: NOW, age: DAY });
    // Every number of deletes before the failure, so the cut falls at every step of a run.
    for (let cut = 0; cut < 40; cut++) {
      const docs = new FailingDeletes(inner, cut);
      await retentionSlice(docs, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } }).catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'injected delete failure') throw err;
      });
    }
    await sweep(inner, { runDays: 30, outputDays: 30 });
    for (const run of runs) expect(await blobsOf(inner, run)).toEqual([]);
    expect(await keysUnder(inner, '')).toEqual([...kept.keys, 'index/retention.json'].sort());
  });

  it('a leader whose epoch a newer one overtook on a run deletes nothing of it', async () => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'old', now: NOW, age: 40 * DAY, epoch: 9 });
    await expect(retentionSlice(docs, { epoch: 3, now: NOW, policy: { runDays: 30, outputDays: 30 } })).rejects.toBeInstanceOf(
      StaleEpochError,
    );
    expect(await blobsOf(docs, run)).toEqual(run.keys);
    await expect(retentionSlice(docs, { epoch: 3, now: NOW, policy: { runDays: 30, outputDays: 7 } })).rejects.toBeInstanceOf(
      StaleEpochError,
    );
    expect(await blobsOf(docs, run)).toEqual(run.keys);
  });

  it.each([
    { name: 'outputs first', policy: { runDays: 30, outputDays: 7 } },
    { name: 'details first', policy: { runDays: 7, outputDays: 30 } },
  ])('$name: a slice cut short at any delete leaves a part the next slice finishes', async ({ policy }) => {
    const inner = new InMemoryDocumentStore();
    const runs = [];
    for (let i = 0; i < 3; i++)
      runs.push(await seedRun(inner, { job: 'alpha', name: `r${i}`, now: NOW, age: 10 * DAY + i * 60_000 }));
    for (let cut = 0; cut < 12; cut++) {
      await retentionSlice(new FailingDeletes(inner, cut), { epoch: 5, now: NOW, policy }).catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'injected delete failure') throw err;
      });
    }
    await sweep(inner, policy);
    for (const run of runs) {
      const kept =
        policy.outputDays < policy.runDays
          ? run.keys.filter((k) => k !== runKeys.output(run.runId))
          : run.keys.filter(
              (k) =>
                !k.startsWith(runKeys.prefix(run.runId)) || k === runKeys.record(run.runId) || k === runKeys.output(run.runId),
            );
      expect(await blobsOf(inner, run)).toEqual(kept);
      expect((await recordOf(inner, run))?.pruned?.pending).toBeNull();
    }
  });

  it('a deletion resumed after a newer leader marked the run is refused too', async () => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'old', now: NOW, age: 40 * DAY });
    // A newer leader (epoch 9) began deleting the run and was cut short after its mark.
    const marked = (await records(docs).read(runKeys.record(run.runId)))!;
    await records(docs).replace(runKeys.record(run.runId), 9, marked, {
      ...marked.value,
      pruned: { output: null, details: null, run: NOW.toISOString(), pending: null },
    });
    await expect(retentionSlice(docs, { epoch: 3, now: NOW, policy: { runDays: 30, outputDays: 30 } })).rejects.toBeInstanceOf(
      StaleEpochError,
    );
    expect(await blobsOf(docs, run)).toEqual(run.keys);
    await sweep(docs, { runDays: 30, outputDays: 30 }, 9);
    expect(await blobsOf(docs, run)).toEqual([]);
  });

  it.each(['before', 'after'] as const)(
    'a leader that stalls while a newer one deletes the run and a keyed trigger makes it again (%s its listing) deletes nothing of the new run',
    async (when) => {
      const inner = new InMemoryDocumentStore();
      const old = await seedRun(inner, { job: 'alpha', name: 'k-same', now: NOW, age: 40 * DAY });
      let fresh: SeededRun | undefined;
      const stall = async () => {
        // The newer leader deletes the old run whole; the key then makes a new, open run.
        await sweep(inner, { runDays: 30, outputDays: 30 }, 9);
        fresh = await seedRun(inner, { job: 'alpha', name: 'k-same', now: NOW, age: 0, open: true, epoch: 9 });
      };
      const stale = new (class extends ForwardingDocumentStore {
        stalled = false;
        override async listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
          const stallHere = prefix === runKeys.prefix(old.runId) && !this.stalled;
          if (stallHere && when === 'before') {
            this.stalled = true;
            await stall();
          }
          const page = await super.listPage(prefix, options);
          if (stallHere && when === 'after') {
            this.stalled = true;
            await stall();
          }
          return page;
        }
      })(inner);
      const slice = await retentionSlice(stale, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } });
      expect(slice.deleted).toEqual([]);
      expect(fresh).toBeDefined();
      expect(await blobsOf(inner, fresh!)).toEqual(fresh!.keys);
      expect((await recordOf(inner, fresh!))?.state).toBe('running');
    },
  );

  it('old runs still open, however many, hold up no other: the pass goes round them', async () => {
    const docs = new InMemoryDocumentStore();
    for (let i = 0; i < 10; i++)
      await seedRun(docs, { job: 'alpha', name: `open-${i}`, now: NOW, age: 50 * DAY + i, open: true });
    const ended = await seedRun(docs, { job: 'alpha', name: 'ended', now: NOW, age: 40 * DAY });
    // Three idle pauses' worth of slices.
    const slices = [
      ...(await sweep(docs, { runDays: 30, outputDays: 30 })),
      ...(await sweep(docs, { runDays: 30, outputDays: 30 })),
    ];
    expect(slices.flatMap((s) => s.deleted)).toEqual([ended.runId]);
    expect(await blobsOf(docs, ended)).toEqual([]);
    // The next pass looks at the open runs again, once each.
    const again = await sweep(docs, { runDays: 30, outputDays: 30 });
    expect(again.flatMap((s) => s.open)).toHaveLength(10);
  });

  it('a run that ended less than an hour ago is left alone, however old', async () => {
    const docs = new InMemoryDocumentStore();
    const run = await seedRun(docs, { job: 'alpha', name: 'long', now: NOW, age: 40 * DAY });
    const doc = (await records(docs).read(runKeys.record(run.runId)))!;
    const endedAt = new Date(NOW.getTime() - 30 * 60_000).toISOString();
    await records(docs).replace(runKeys.record(run.runId), 1, doc, { ...doc.value, endedAt });
    const slice = await retentionSlice(docs, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } });
    expect(slice.open).toEqual([run.runId]);
    expect(await blobsOf(docs, run)).toEqual(run.keys);
    const later = new Date(NOW.getTime() + 31 * 60_000);
    await retentionSlice(docs, { epoch: 5, now: later, policy: { runDays: 30, outputDays: 30 } });
    expect(await blobsOf(docs, run)).toEqual([]);
  });

  it(`a run it cannot delete holds the sweep up ${RETENTION_TRIES} slices, then is passed by; it is logged once`, async () => {
    const inner = new InMemoryDocumentStore();
    // The oldest run's blobs are under a legal hold: every delete of one is refused.
    const held = await seedRun(inner, { job: 'alpha', name: 'held', now: NOW, age: 42 * DAY });
    const after = [];
    for (let i = 0; i < 3; i++) after.push(await seedRun(inner, { job: 'alpha', name: `r${i}`, now: NOW, age: 40 * DAY + i }));
    class LegalHold extends ForwardingDocumentStore {
      override delete(key: string, options?: DeleteOptions): Promise<boolean> {
        if (key.startsWith(runKeys.prefix(held.runId)))
          return Promise.reject(
            new Error('409 BlobImmutableDueToPolicy: This operation is not permitted as the blob is immutable due to a policy.'),
          );
        return super.delete(key, options);
      }
    }
    const docs = new LegalHold(inner);
    const pace = new RetentionPace({ now: () => 0 });
    const warned: string[] = [];
    let passedBy = 0;
    const slices: RetentionSliceResult[] = [];
    // A slice after each pause, as an idle leader runs them.
    for (let k = 0; k < RETENTION_TRIES; k++) {
      const slice = await retentionSlice(docs, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } });
      pace.report(slice, { info: () => undefined, warn: (m) => warned.push(m) }, () => passedBy++);
      slices.push(slice);
    }
    expect(slices.map((s) => s.failures.map((f) => [f.runId, f.tries, f.passedBy]))).toEqual([
      [[held.runId, 1, false]],
      [[held.runId, 2, false]],
      [[held.runId, 3, true]],
    ]);
    // Held up until it was passed by, then the runs after it went.
    expect(slices.map((s) => s.deleted.length)).toEqual([0, 0, 3]);
    for (const run of after) expect(await blobsOf(inner, run)).toEqual([]);
    expect(passedBy).toBe(1);
    expect(warned).toEqual([
      expect.stringMatching(/^retention: could not clear alpha\/manual-held, will try again .*BlobImmutableDueToPolicy/),
      expect.stringMatching(/^retention: passed alpha\/manual-held by after 3 tries, to try again next pass: /),
    ]);
    // The next pass tries it again, and a later failure of it is not logged again.
    const again = await retentionSlice(docs, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } });
    pace.report(again, { info: () => undefined, warn: (m) => warned.push(m) }, () => passedBy++);
    expect(again.failures.map((f) => f.runId)).toEqual([held.runId]);
    expect(warned).toHaveLength(2);
  });

  it('a record it cannot read is noted and passed by; the other runs go', async () => {
    const docs = new InMemoryDocumentStore();
    const broken = await seedRun(docs, { job: 'alpha', name: 'broken', now: NOW, age: 41 * DAY });
    await docs.write(runKeys.record(broken.runId), '{"epoch":1,"value":{"v":1}}', {});
    const fine = await seedRun(docs, { job: 'alpha', name: 'fine', now: NOW, age: 40 * DAY });
    const slices = await sweep(docs, { runDays: 30, outputDays: 30 });
    expect(slices.flatMap((s) => s.failures)).toEqual([
      { runId: 'alpha/manual-broken', reason: expect.any(String), tries: 1, passedBy: true },
    ]);
    expect(await blobsOf(docs, fine)).toEqual([]);
    expect(await blobsOf(docs, broken)).toEqual(broken.keys);
  });

  it('looks at one listing of days and nothing else when no run is old enough', async () => {
    const inner = new InMemoryDocumentStore();
    for (let i = 0; i < 5; i++) await seedRun(inner, { job: 'alpha', name: `r${i}`, now: NOW, age: i * DAY });
    const docs = new CountingStore(inner);
    const slice = await retentionSlice(docs, { epoch: 5, now: NOW, policy: { runDays: 30, outputDays: 30 } });
    expect(slice).toEqual({ deleted: [], pruned: [], open: [], strayEntries: 0, failures: [], more: false });
    expect({ reads: docs.reads, listings: docs.listings, deletes: docs.deletes }).toEqual({ reads: 0, listings: 1, deletes: 0 });
    expect(runIndexKeys.all).toBe('index/runs/');
  });
});

class CountingStore extends ForwardingDocumentStore {
  reads = 0;
  listings = 0;
  deletes = 0;
  override read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    this.reads++;
    return super.read(key, options);
  }
  override delete(key: string, options?: DeleteOptions): Promise<boolean> {
    this.deletes++;
    return super.delete(key, options);
  }
  override listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    this.listings++;
    return super.listPage(prefix, options);
  }
  override listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage> {
    this.listings++;
    return super.listFolders(prefix, options);
  }
}

/** Fails the delete after `allowed` deletes have gone through. */
class FailingDeletes extends ForwardingDocumentStore {
  constructor(
    inner: InMemoryDocumentStore,
    private allowed: number,
  ) {
    super(inner);
  }
  override delete(key: string, options?: DeleteOptions): Promise<boolean> {
    if (this.allowed-- <= 0) return Promise.reject(new Error('injected delete failure'));
    return super.delete(key, options);
  }
}

describe('retention and the workers: a keyed run id used again', () => {
  it('a worker that saw the old run end reads the run again well before retention may delete it', async () => {
    const docs = new InMemoryDocumentStore();
    const clock = new FakeClock();
    const cache = new RunStateCache(docs, { clock });
    const old = await seedRun(docs, { job: 'alpha', name: 'k-same', now: NOW, age: 40 * DAY });
    expect((await cache.get(old.runId))?.state).toBe('succeeded');
    // Retention deletes the old run no sooner than an hour after it ended; a keyed trigger then
    // makes a new run under the same id, which the worker must not take for the old one.
    expect(ENDED_RUN_TTL_MS).toBeLessThan(RETENTION_END_GRACE_MS);
    await docs.delete(runKeys.record(old.runId));
    await seedRun(docs, { job: 'alpha', name: 'k-same', now: NOW, age: 0, open: true });
    await clock.advance(ENDED_RUN_TTL_MS - 1);
    expect((await cache.get(old.runId))?.state).toBe('succeeded');
    await clock.advance(1);
    expect((await cache.get(old.runId))?.state).toBe('running');
  });
});
