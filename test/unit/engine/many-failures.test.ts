import { describe, expect, it } from 'vitest';
import { drainResults } from '../../../src/engine/drain';
import { finalizeRun } from '../../../src/engine/finalizer';
import type { DocumentCallOptions, StoredDocument, WriteCondition } from '../../../src/fencing/document-store';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { Bitset } from '../../../src/hub/bitset';
import { readFailures, readFailuresManifest } from '../../../src/hub/failures-manifest';
import { newRunRecord, runKeys, runRecordSchema, transition, type RunRecord } from '../../../src/hub/run-record';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { sumJob } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';
import { patience } from '../../support/slowdown';

const RUN = 'sum/manual-many';
const ITEMS = 200_000;
const PER_MESSAGE = 100;
/** Far above one checkpoint's part (100 failures, about 5 KB) and far below all of them (about 9 MB). */
const BOUND = 64 * 1024;

/** The largest document read and written: what any one step held of the failures at once. */
class SizeWatch extends ForwardingDocumentStore {
  largestRead = { bytes: 0, key: '' };
  largestWrite = { bytes: 0, key: '' };
  override async read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    const stored = await super.read(key, options);
    if (stored && stored.body.length > this.largestRead.bytes) this.largestRead = { bytes: stored.body.length, key };
    return stored;
  }
  override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
    if (body.length > this.largestWrite.bytes) this.largestWrite = { bytes: body.length, key };
    return super.write(key, body, condition, options);
  }
  reset(): void {
    this.largestRead = { bytes: 0, key: '' };
    this.largestWrite = { bytes: 0, key: '' };
  }
}

describe('a run with many failed items', { timeout: patience(120_000) }, () => {
  it('ends with a small manifest from which every failed item reads back once, with its reason, in bounded reads', async () => {
    const engine = unitEngine([sumJob({ items: ITEMS })]);
    const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
    const at = engine.clock.date();
    const created = newRunRecord({
      runId: RUN,
      job: 'sum',
      trigger: 'manual',
      occurrence: undefined,
      now: at,
      timeoutSeconds: 3600,
    });
    await records.create(runKeys.record(RUN), 1, {
      ...transition(transition(created, 'dispatching', at), 'running', at),
      counters: { ...created.counters, planned: ITEMS, dispatched: ITEMS },
      acc: { count: 0, sum: 0, squares: 0 },
      seen: Bitset.empty(ITEMS).toBase64(),
      messages: ITEMS / PER_MESSAGE,
      cursor: ITEMS / PER_MESSAGE,
    });
    const watch = new SizeWatch(engine.docs);
    engine.ctx.docs = watch;
    const { book, term } = engine.book(2);

    // One checkpoint per message: 2,000 failure parts of 100 failures each.
    for (let first = 0; first < ITEMS; first += PER_MESSAGE) {
      const outcomes = Array.from({ length: PER_MESSAGE }, (_, k) => ({ i: first + k, ok: false, e: `bad ${first + k}`, a: 3 }));
      await engine.results.send(JSON.stringify({ v: 1, t: 'result', run: RUN, job: 'sum', outcomes }));
      await drainResults(engine.ctx, term, book);
    }
    const counted = (await records.read(runKeys.record(RUN)))!.value;
    expect(counted.counters).toMatchObject({ succeeded: 0, failed: ITEMS });
    const run = await book.get(RUN);
    if (!run || !('seen' in run)) throw new Error('the run did not load');
    await finalizeRun(engine.ctx, term, book, run);

    // Neither the drains nor the end held more than about one part of the failures at a time.
    expect(watch.largestRead.bytes, watch.largestRead.key).toBeLessThan(BOUND);
    expect(watch.largestWrite.bytes, watch.largestWrite.key).toBeLessThan(BOUND);
    const record = (await records.read(runKeys.record(RUN)))!.value;
    expect(record).toMatchObject({ state: 'failed', manifestKey: runKeys.manifest(RUN) });
    expect(record.failureParts.length).toBeLessThanOrEqual(2 * 15);
    const stored = await engine.docs.read(runKeys.manifest(RUN));
    expect(stored!.body.length).toBeLessThan(4096);

    watch.reset();
    const manifest = await readFailuresManifest(watch, RUN);
    expect(manifest).toMatchObject({ runId: RUN, state: 'failed', failedCount: ITEMS, missingCount: 0 });
    const listed = new Uint8Array(ITEMS);
    let count = 0;
    const wrong: string[] = [];
    for await (const failure of readFailures(watch, manifest!, { onMissing: (key) => wrong.push(`missing ${key}`) })) {
      count++;
      if (failure.item < ITEMS) listed[failure.item] = listed[failure.item]! + 1;
      if (failure.item >= ITEMS || failure.reason !== `bad ${failure.item}` || failure.attempts !== 3)
        wrong.push(JSON.stringify(failure));
    }
    expect(wrong).toEqual([]);
    expect(count).toBe(ITEMS);
    expect(listed.every((n) => n === 1)).toBe(true);
    expect(watch.largestRead.bytes, watch.largestRead.key).toBeLessThan(BOUND);
  });
});
