/**
 * The run index (src/hub/run-index.ts): a page of runs costs one listing and a read per run,
 * whatever the history, and the listing stays right as runs are created, end, are deleted, and
 * when two leaders race to create the same run.
 */
import { describe, expect, it } from 'vitest';
import type { DocumentCallOptions, KeyPage, ListPageOptions, StoredDocument } from '../../../src/fencing/document-store';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { listRuns, parseRunIndexEntry, runIndexEntries, runIndexKeys } from '../../../src/hub/run-index';
import { manualRunId, newRunRecord, runKeys, scheduledRunId, transition, type RunRecord } from '../../../src/hub/run-record';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { runsRoute } from '../../support/runs-route';
import { sumJob } from '../../support/sample-jobs';
import { unitEngine, type UnitEngine } from '../../support/unit-engine';

/** Counts what reaches storage: listings (each page one request) and reads. */
class CountingStore extends ForwardingDocumentStore {
  reads = 0;
  listings = 0;
  override read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    this.reads++;
    return super.read(key, options);
  }
  override async *list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string> {
    this.listings++;
    yield* super.list(prefix, options);
  }
  override listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    this.listings++;
    return super.listPage(prefix, options);
  }
  reset(): void {
    this.reads = 0;
    this.listings = 0;
  }
}

const JOBS = [sumJob({ name: 'alpha', items: 1 }), sumJob({ name: 'beta', items: 1 })];

/** A hub of `count` manual runs made by the leader's own create, one a minute, alternating jobs. */
async function hubOf(count: number): Promise<{ engine: UnitEngine; ids: string[] }> {
  const engine = unitEngine(JOBS);
  const { book } = engine.book(1);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const job = JOBS[i % 2]!;
    const runId = manualRunId(job.name, `r${i}`);
    const now = engine.clock.date();
    await book.create(
      job,
      newRunRecord({ runId, job: job.name, trigger: 'manual', occurrence: undefined, now, timeoutSeconds: 60 }),
    );
    ids.push(runId);
    await engine.clock.advance(60_000);
  }
  return { engine, ids };
}

async function getRuns(get: ReturnType<typeof runsRoute>, query: Record<string, string>) {
  const { status, body } = await get(query);
  expect(status, JSON.stringify(body)).toBe(200);
  return body as { runs: Array<{ runId: string; state: string }>; next: string | null };
}

describe('a page of runs costs a page', () => {
  it.each([100, 2000])(
    'on a hub of %i runs: GET runs?limit=20, its next page and one job each cost one listing and 20 reads',
    async (count) => {
      const { engine, ids } = await hubOf(count);
      const store = new CountingStore(engine.docs);
      const route = runsRoute(store);
      const newestFirst = [...ids].reverse();

      const first = await getRuns(route, { limit: '20' });
      expect(first.runs.map((r) => r.runId)).toEqual(newestFirst.slice(0, 20));
      expect({ listings: store.listings, reads: store.reads }).toEqual({ listings: 1, reads: 20 });

      store.reset();
      const second = await getRuns(route, { limit: '20', after: first.next! });
      expect(second.runs.map((r) => r.runId)).toEqual(newestFirst.slice(20, 40));
      expect({ listings: store.listings, reads: store.reads }).toEqual({ listings: 1, reads: 20 });

      store.reset();
      const beta = await getRuns(route, { limit: '20', job: 'beta' });
      expect(beta.runs.map((r) => r.runId)).toEqual(newestFirst.filter((id) => id.startsWith('beta/')).slice(0, 20));
      expect({ listings: store.listings, reads: store.reads }).toEqual({ listings: 1, reads: 20 });
    },
  );

  it('pages through every run exactly once, newest first, and says when there are no more', async () => {
    const { engine, ids } = await hubOf(45);
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await listRuns(engine.docs, { limit: 20, ...(after ? { after } : {}) });
      seen.push(...page.runs.map((r) => r.runId));
      after = page.next;
      pages++;
    } while (after !== undefined && pages < 10);
    expect(seen).toEqual([...ids].reverse());
    expect(pages).toBe(3);
  });
});

describe('the index stays right', () => {
  it('shows an ended run as it ended, and skips a run whose record is gone', async () => {
    const { engine, ids } = await hubOf(3);
    const { book } = engine.book(1);
    const ended = await book.get(ids[1]!);
    if (!ended || !('doc' in ended)) throw new Error('no run');
    await book.records.replace(
      runKeys.record(ids[1]!),
      1,
      ended.doc,
      transition(ended.doc.value, 'cancelled', engine.clock.date(), 'test'),
    );
    await engine.docs.delete(runKeys.record(ids[0]!));
    const page = await listRuns(engine.docs, { limit: 5 });
    expect(page.runs.map((r) => [r.runId, r.state])).toEqual([
      [ids[2], 'planning'],
      [ids[1], 'cancelled'],
    ]);
    expect(page.next).toBeUndefined();
  });

  it('lists a run once when two leaders race to create it: the loser leaves an entry no reader shows', async () => {
    const engine = unitEngine(JOBS);
    const occurrence = new Date('2026-01-01T00:00:00Z');
    const runId = scheduledRunId('alpha', occurrence);
    const record = (now: Date): RunRecord =>
      newRunRecord({ runId, job: 'alpha', trigger: 'schedule', occurrence, now, timeoutSeconds: 60 });
    const old = engine.book(1).book;
    const newer = engine.book(2).book;
    expect(await newer.create(JOBS[0]!, record(engine.clock.date()))).toBe(true);
    await engine.clock.advance(1500);
    expect(await old.create(JOBS[0]!, record(engine.clock.date()))).toBe(false);

    const entries: string[] = [];
    for await (const key of engine.docs.list(runIndexKeys.all)) entries.push(key);
    expect(entries).toHaveLength(2);
    expect((await listRuns(engine.docs)).runs.map((r) => r.runId)).toEqual([runId]);
    expect((await listRuns(engine.docs, { job: 'alpha' })).runs.map((r) => r.runId)).toEqual([runId]);
  });

  it('names entries so that listing order is newest first, and reads back the run and time', () => {
    const at = (iso: string) => runIndexEntries({ runId: `alpha/${iso}`, job: 'alpha', createdAt: iso });
    const keys = [
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:00.001Z',
      '2026-06-30T23:59:59.999Z',
      '2031-01-01T00:00:00.000Z',
    ].map((iso) => at(iso)[0]!);
    expect([...keys].sort()).toEqual([...keys].reverse());
    expect(parseRunIndexEntry(runIndexKeys.all, keys[2]!)).toEqual({
      runId: 'alpha/2026-06-30T23:59:59.999Z',
      createdMs: Date.parse('2026-06-30T23:59:59.999Z'),
    });
    expect(at('2026-01-01T00:00:00.000Z')[1]!.startsWith(runIndexKeys.job('alpha'))).toBe(true);
    expect(parseRunIndexEntry(runIndexKeys.all, 'index/runs/not-an-entry.json')).toBeUndefined();
  });

  it.each<[string, Parameters<typeof listRuns>[1], RegExp]>([
    ['a limit of 0', { limit: 0 }, /^limit: must be a whole number from 1 to 1000$/],
    ['a limit over a page', { limit: 1001 }, /^limit: must be a whole number from 1 to 1000$/],
    ['an after that is not a next', { after: 'alpha/manual-r1' }, /^after: not the next of a page of runs/],
    [
      'the next of another job',
      { job: 'beta', after: Buffer.from(JSON.stringify({ j: 'alpha', c: 'x' })).toString('base64url') },
      /^after: the next of a listing of job alpha, not of job beta$/,
    ],
    [
      'the next of one job, for every job',
      { after: Buffer.from(JSON.stringify({ j: 'alpha', c: 'x' })).toString('base64url') },
      /^after: the next of a listing of job alpha, not of every job$/,
    ],
  ])('refuses %s with one line naming the option', async (_name, options, message) => {
    await expect(listRuns(new InMemoryDocumentStore(), options)).rejects.toMatchObject({
      code: 'InvalidConfig',
      message: expect.stringMatching(message),
    });
  });
});
