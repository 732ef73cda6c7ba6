import { describe, expect, it } from 'vitest';
import { planRun } from '../../../src/engine/planner';
import type { DocumentCallOptions, DocumentStore, WriteCondition } from '../../../src/fencing/document-store';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { defineJob } from '../../../src/jobs/define-job';
import type { Leadership } from '../../../src/lease/term';
import { newRunRecord, runKeys, runRecordSchema, type RunRecord } from '../../../src/hub/run-record';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { noLeaseToRaise, unitEngine } from '../../support/unit-engine';

const ITEMS = 200_000;
const RUN = 'big/manual-plan';

/** Counts plan chunk writes by the epoch in their key. */
class ChunkWrites extends ForwardingDocumentStore {
  readonly byEpoch = new Map<number, number>();
  override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
    const epoch = /\/plan\/e(\d+)\//.exec(key)?.[1];
    if (epoch) this.byEpoch.set(Number(epoch), (this.byEpoch.get(Number(epoch)) ?? 0) + 1);
    return super.write(key, body, condition, options);
  }
}

function leadership(epoch: number, controller = new AbortController()): Leadership {
  return {
    identity: `leader-${epoch}`,
    epoch,
    signal: controller.signal,
    yieldSignal: new AbortController().signal,
    heartbeat() {},
    remainingMs: () => 1e9,
    raiseEpoch: noLeaseToRaise,
    restUntil: () => undefined,
  };
}

describe('planning', () => {
  it('a 200k-item split with a leader change in the middle plans every item exactly once', async () => {
    let onItem: (i: number) => void = () => undefined;
    const job = defineJob<{ i: number }, number, number>({
      name: 'big',
      schedule: '0 0 0 1 1 *',
      *split() {
        for (let i = 0; i < ITEMS; i++) {
          onItem(i);
          yield { i };
        }
      },
      process: () => 1,
      aggregate: { initial: () => 0, add: (a, n) => a + n },
    });
    const engine = unitEngine([job]);
    const writes = new ChunkWrites(engine.docs);
    engine.ctx.docs = writes;
    const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
    const at = engine.clock.date();
    await records.create(
      runKeys.record(RUN),
      1,
      newRunRecord({ runId: RUN, job: 'big', trigger: 'manual', occurrence: undefined, now: at, timeoutSeconds: 3600 }),
    );

    // The first leader loses its term a little past half way through the split.
    const first = new AbortController();
    onItem = (i) => {
      if (i === ITEMS / 2 + 500) first.abort(new Error('lease lost'));
    };
    const a = engine.book(2);
    const termA = { leadership: leadership(2, first), epoch: 2, signal: first.signal };
    const runA = await a.book.get(RUN);
    if (!runA || !('seen' in runA)) throw new Error('the run did not load');
    await expect(planRun(engine.ctx, termA, a.book, runA)).rejects.toThrow('lease lost');
    const halfway = (await records.read(runKeys.record(RUN)))?.value;
    expect(halfway?.state).toBe('planning');
    const kept = halfway?.planSegments.reduce((n, s) => n + s.chunks, 0) ?? 0;
    expect(kept).toBeGreaterThan(0);
    expect(halfway?.planCursor).toBe(kept * 1000);

    // The next leader resumes from the checkpoint.
    onItem = () => undefined;
    const b = engine.book(3);
    const termB = { leadership: leadership(3), epoch: 3, signal: new AbortController().signal };
    const runB = await b.book.get(RUN);
    if (!runB || !('seen' in runB)) throw new Error('the run did not load');
    await planRun(engine.ctx, termB, b.book, runB);

    const record = (await records.read(runKeys.record(RUN)))?.value;
    expect(record).toMatchObject({ state: 'dispatching', counters: { planned: ITEMS }, planChunks: ITEMS / 1000 });
    expect(record?.planSegments).toEqual([
      { epoch: 2, chunks: kept },
      { epoch: 3, chunks: ITEMS / 1000 - kept },
    ]);
    // The second leader wrote only what the first had not persisted.
    expect(writes.byEpoch.get(3)).toBe(ITEMS / 1000 - kept);
    let expected = 0;
    for (let chunk = 0; chunk < (record?.planChunks ?? 0); chunk++) {
      const body = (await engine.docs.read(runKeys.planChunkOf(record!, chunk)))?.body ?? '';
      for (const line of body.split('\n')) {
        if (!line) continue;
        expect((JSON.parse(line) as { i: number }).i).toBe(expected);
        expected++;
      }
    }
    expect(expected).toBe(ITEMS);
  });

  /** A run of `items` items (1,000 a chunk) and what planning it needs. */
  async function plannable(items: number, wrap: (docs: DocumentStore) => DocumentStore) {
    const job = defineJob<{ i: number }, number, number>({
      name: 'big',
      schedule: '0 0 0 1 1 *',
      *split() {
        for (let i = 0; i < items; i++) yield { i };
      },
      process: () => 1,
      aggregate: { initial: () => 0, add: (a, n) => a + n },
    });
    const engine = unitEngine([job]);
    const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
    const at = engine.clock.date();
    await records.create(
      runKeys.record(RUN),
      1,
      newRunRecord({ runId: RUN, job: 'big', trigger: 'manual', occurrence: undefined, now: at, timeoutSeconds: 3600 }),
    );
    const term = { leadership: leadership(2), epoch: 2, signal: new AbortController().signal };
    engine.ctx.docs = wrap(engine.docs);
    const { book } = engine.book(2);
    const load = async () => {
      const run = await book.get(RUN);
      if (!run || !('seen' in run)) throw new Error('the run did not load');
      return run;
    };
    const record = async () => (await records.read(runKeys.record(RUN)))?.value;
    /** Every item, in order, read from the chunks the record names. */
    const planned = async () => {
      const done = await record();
      const seen: number[] = [];
      for (let chunk = 0; chunk < (done?.planChunks ?? 0); chunk++) {
        const body = (await engine.docs.read(runKeys.planChunkOf(done!, chunk)))?.body;
        if (body === undefined) throw new Error(`chunk ${chunk} is missing: ${runKeys.planChunkOf(done!, chunk)}`);
        for (const line of body.split('\n')) if (line) seen.push((JSON.parse(line) as { i: number }).i);
      }
      return seen;
    };
    return { engine, term, book, load, record, planned };
  }

  it('a storage error while planning drops the turn, not the run: the next turn resumes and plans every item once', async () => {
    let chunkWrites = 0;
    let checkpointRefused = false;
    /** Storage answers 503 (after the SDK's retries) to the third chunk write and to the first checkpoint after it. */
    class Flaky extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        const busy = () => Promise.reject(Object.assign(new Error('The server is busy.'), { statusCode: 503 }));
        if (key.includes('/plan/') && ++chunkWrites === 3) return busy();
        if (key === runKeys.record(RUN) && chunkWrites > 3 && !checkpointRefused) {
          checkpointRefused = true;
          return busy();
        }
        return super.write(key, body, condition, options);
      }
    }
    const { engine, term, book, load, record, planned } = await plannable(5000, (docs) => new Flaky(docs));
    await expect(planRun(engine.ctx, term, book, await load())).rejects.toThrow('The server is busy.');
    expect((await record())?.state).toBe('planning');
    await expect(planRun(engine.ctx, term, book, await load())).rejects.toThrow('The server is busy.');
    expect((await record())?.state).toBe('planning');
    await planRun(engine.ctx, term, book, await load());
    expect(await record()).toMatchObject({ state: 'dispatching', counters: { planned: 5000 }, endReason: null });
    expect(await planned()).toEqual(Array.from({ length: 5000 }, (_, i) => i));
  });

  it("names every chunk under the epoch it was written under when the term's epoch is raised mid-slice", async () => {
    let chunkWrites = 0;
    let raise = (): void => undefined;
    /** A refused write elsewhere in the turn raises the term's epoch while this slice plans. */
    class RaisedMidSlice extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        if (key.includes('/plan/') && ++chunkWrites === 2) raise();
        return super.write(key, body, condition, options);
      }
    }
    const { engine, term, book, load, record, planned } = await plannable(5000, (docs) => new RaisedMidSlice(docs));
    raise = () => void (term.epoch = 3);
    await planRun(engine.ctx, term, book, await load());
    expect((await record())?.state).toBe('dispatching');
    expect((await record())?.planSegments).toEqual([{ epoch: 2, chunks: 5 }]);
    expect(await planned()).toEqual(Array.from({ length: 5000 }, (_, i) => i));
  });
});
