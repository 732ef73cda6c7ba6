import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError } from '../../../src/errors';
import { RunBook, type ActiveRun } from '../../../src/engine/run-book';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { newRunRecord, runKeys, runRecordSchema, type RunRecord } from '../../../src/hub/run-record';
import { sumJob } from '../../support/sample-jobs';
import { handLeadership, unitEngine } from '../../support/unit-engine';

const RUN = 'sum/manual-book';

async function openRun() {
  const engine = unitEngine([sumJob({ items: 4 })]);
  const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
  const record = newRunRecord({
    runId: RUN,
    job: 'sum',
    trigger: 'manual',
    occurrence: undefined,
    now: engine.clock.date(),
    timeoutSeconds: 60,
  });
  await records.create(runKeys.record(RUN), 1, record);
  const { book } = engine.book(2);
  const run = (await book.get(RUN)) as ActiveRun;
  const stored = async () => (await records.read(runKeys.record(RUN)))?.value;
  return { book, run, stored, engine };
}

describe('RunBook', () => {
  it('two saves of one run from the same snapshot refuse each other: why the dispatch and the drains go through update', async () => {
    const { book, run } = await openRun();
    const snapshot = run.doc.value;
    const saves = await Promise.allSettled([
      book.save(run, { ...snapshot, cursor: 3 }),
      book.save(run, { ...snapshot, counters: { ...snapshot.counters, succeeded: 2 } }),
    ]);
    expect(saves.map((s) => s.status)).toEqual(['fulfilled', 'rejected']);
    expect((saves[1] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrentUpdateError);
  });

  it('updates of one run at once all land, each applied to the record the one before left', async () => {
    const { book, run, stored } = await openRun();
    await Promise.all([
      book.update(run, (current) => ({ ...current, cursor: 3 })),
      book.update(run, (current) => ({ ...current, counters: { ...current.counters, succeeded: 2 } })),
      book.update(run, (current) => ({ ...current, counters: { ...current.counters, dispatched: current.cursor + 1 } })),
    ]);
    expect(await stored()).toMatchObject({ cursor: 3, counters: { succeeded: 2, dispatched: 4 } });
  });

  it('an update that fails does not stop the next one of the same run', async () => {
    const { book, run, stored } = await openRun();
    const results = await Promise.allSettled([
      book.update(run, () => {
        throw new Error('no change this time');
      }),
      book.update(run, (current) => ({ ...current, cursor: 2 })),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect((await stored())?.cursor).toBe(2);
  });

  it('nextSave wakes at the next save of the run, and gives up after its time or when the term ends', async () => {
    const { book, run, engine } = await openRun();
    const saved = book.nextSave(RUN, 1000);
    await book.update(run, (current) => ({ ...current, cursor: 1 }));
    expect(await saved).toBe(true);

    let timedOut: boolean | undefined;
    void book.nextSave(RUN, 1000).then((v) => (timedOut = v));
    await engine.clock.advance(999);
    expect(timedOut).toBeUndefined();
    await engine.clock.advance(1);
    expect(timedOut).toBe(false);

    const end = new AbortController();
    const ending = new RunBook(engine.ctx, { leadership: handLeadership(2), epoch: 2, signal: end.signal });
    const waiting = ending.nextSave(RUN, 60_000);
    end.abort();
    expect(await waiting).toBe(false);
    expect(await ending.nextSave(RUN, 60_000)).toBe(false);
  });
});
