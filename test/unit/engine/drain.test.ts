import { describe, expect, it } from 'vitest';
import { drainPoison, drainResults } from '../../../src/engine/drain';
import type { DocumentCallOptions, WriteCondition } from '../../../src/fencing/document-store';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { newRunRecord, runKeys, runRecordSchema, transition, type RunRecord } from '../../../src/hub/run-record';
import { Bitset } from '../../../src/hub/bitset';
import { FAILURE_LOG_FANOUT, failureLogLevel, readFailureLog } from '../../../src/hub/failure-log';
import type { FailureEntry } from '../../../src/hub/fold';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { DEFAULT_TUNING, type TermContext } from '../../../src/engine/engine-context';
import type { RunBook } from '../../../src/engine/run-book';
import { sumJob } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

async function seedRun(engine: ReturnType<typeof unitEngine>, runId: string, planned: number, state: 'running' | 'succeeded') {
  const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
  let record = newRunRecord({
    runId,
    job: 'sum',
    trigger: 'manual',
    occurrence: undefined,
    now: engine.clock.date(),
    timeoutSeconds: 60,
  });
  record = {
    ...transition(transition(record, 'dispatching', engine.clock.date()), 'running', engine.clock.date()),
    counters: { ...record.counters, planned, dispatched: planned },
    acc: { count: 0, sum: 0, squares: 0 },
    seen: Bitset.empty(planned).toBase64(),
    messages: planned,
    cursor: planned,
  };
  if (state === 'succeeded')
    record = transition(transition(record, 'finalizing', engine.clock.date()), 'succeeded', engine.clock.date());
  await records.create(runKeys.record(runId), 1, record);
  return records;
}

describe('drain', () => {
  it('checkpoints before deleting: results whose checkpoint failed stay queued and count on a later pass', async () => {
    const engine = unitEngine([sumJob({ items: 4 })]);
    const records = await seedRun(engine, 'sum/manual-z', 4, 'running');
    const failing = new FailingRecordWrites(engine.docs);
    engine.ctx.docs = failing;
    for (const i of [1, 3])
      await engine.results.send(
        JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-z', job: 'sum', outcomes: [{ i, ok: true, r: { v: 2 * i } }] }),
      );
    const { book, term } = engine.book(2);
    failing.failing = true;
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ received: 2, folded: 0, deferred: 2 });
    expect(await engine.results.approximateCount()).toBe(2);
    failing.failing = false;
    await engine.clock.advance(engine.ctx.tuning.drainVisibilitySeconds * 1000 + 1);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ received: 2, folded: 2 });
    expect((await records.read(runKeys.record('sum/manual-z')))?.value.counters).toMatchObject({ succeeded: 2 });
    expect(await engine.results.approximateCount()).toBe(0);
  });

  it('a result delivered twice (a delete that was lost) counts once', async () => {
    const engine = unitEngine([sumJob({ items: 4 })]);
    const records = await seedRun(engine, 'sum/manual-a', 4, 'running');
    const result = { v: 1, t: 'result', run: 'sum/manual-a', job: 'sum', outcomes: [{ i: 2, ok: true, r: { v: 4 } }] };
    await engine.results.send(JSON.stringify(result));
    await engine.results.send(JSON.stringify(result));
    const { book, term } = engine.book(2);
    const stats = await drainResults(engine.ctx, term, book);
    expect(stats).toMatchObject({ received: 2, folded: 1, duplicates: 1 });
    const record = (await records.read(runKeys.record('sum/manual-a')))?.value;
    expect(record?.counters).toMatchObject({ succeeded: 1, duplicates: 1 });
    expect(record?.acc).toEqual({ count: 1, sum: 4, squares: 16 });
    expect(await engine.results.approximateCount()).toBe(0);
  });

  it('deletes results of an ended run together with the claim-check blobs they point at', async () => {
    const engine = unitEngine([sumJob({ items: 2 })]);
    await seedRun(engine, 'sum/manual-b', 2, 'succeeded');
    const claim = runKeys.claim('sum/manual-b', 'late');
    await engine.docs.write(claim, JSON.stringify([{ i: 0, ok: true, r: { v: 0 } }]), { ifNoneMatch: '*' });
    await engine.results.send(JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-b', job: 'sum', claim }));
    const { book, term } = engine.book(2);
    const stats = await drainResults(engine.ctx, term, book);
    expect(stats).toMatchObject({ received: 1, stray: 1, folded: 0 });
    expect(await engine.docs.read(claim)).toBeUndefined();
    expect(await engine.results.approximateCount()).toBe(0);
  });

  it('leaves results of a run that is still planning in the queue', async () => {
    const engine = unitEngine([sumJob({ items: 2 })]);
    const records = new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) });
    const record = newRunRecord({
      runId: 'sum/manual-c',
      job: 'sum',
      trigger: 'manual',
      occurrence: undefined,
      now: engine.clock.date(),
      timeoutSeconds: 60,
    });
    await records.create(runKeys.record('sum/manual-c'), 1, record);
    await engine.results.send(
      JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-c', job: 'sum', outcomes: [{ i: 0, ok: true, r: { v: 0 } }] }),
    );
    const { book, term } = engine.book(2);
    await drainResults(engine.ctx, term, book);
    expect(await engine.results.approximateCount()).toBe(1);
  });

  it('a run whose record cannot be read holds up only its own results: the others count and leave the queue', async () => {
    const engine = unitEngine([sumJob({ items: 2 })]);
    const records = await seedRun(engine, 'sum/manual-ok', 2, 'running');
    await engine.docs.write(runKeys.record('sum/manual-bad'), '{"not": "a run record"}', { ifNoneMatch: '*' });
    const outcome = (run: string, i: number) =>
      JSON.stringify({ v: 1, t: 'result', run, job: 'sum', outcomes: [{ i, ok: true, r: { v: i + 1 } }] });
    // The unreadable run's result arrives first, so it is the first group the pass works on.
    await engine.results.send(outcome('sum/manual-bad', 0));
    await engine.results.send(outcome('sum/manual-ok', 0));
    await engine.results.send(outcome('sum/manual-ok', 1));
    const { book, term } = engine.book(2);
    const stats = await drainResults(engine.ctx, term, book);
    expect(stats).toMatchObject({ received: 3, folded: 2, deferred: 1 });
    expect((await records.read(runKeys.record('sum/manual-ok')))?.value.counters).toMatchObject({ succeeded: 2 });
    // Only the unreadable run's message is left, for a later pass.
    expect(await engine.results.approximateCount()).toBe(1);
    expect(engine.logs).toContainEqual(
      expect.stringMatching(/^warn left 1 message\(s\) of run sum\/manual-bad for a later pass: /),
    );
  });

  it('a run whose record cannot be read holds up only its own poisoned work: the others fail their items and leave the queue', async () => {
    const engine = unitEngine([sumJob({ items: 2 })]);
    const records = await seedRun(engine, 'sum/manual-ok', 2, 'running');
    await engine.docs.write(runKeys.record('sum/manual-bad'), '{"not": "a run record"}', { ifNoneMatch: '*' });
    const work = (run: string, i: number) =>
      JSON.stringify({ v: 1, t: 'work', run, job: 'sum', first: i, count: 1, items: [{ i }] });
    // The unreadable run's message arrives first, so the pass meets it before the healthy run's.
    await engine.poison.send(work('sum/manual-bad', 0));
    await engine.poison.send(work('sum/manual-ok', 0));
    await engine.poison.send(work('sum/manual-ok', 1));
    const { book, term } = engine.book(2);
    const stats = await drainPoisonSettled(engine, book, term);
    expect(stats).toMatchObject({ received: 3, folded: 2, deferred: 1 });
    expect((await records.read(runKeys.record('sum/manual-ok')))?.value.counters).toMatchObject({ failed: 2 });
    // Only the unreadable run's message is left, for a later pass; its record is as found.
    expect(await engine.poison.approximateCount()).toBe(1);
    expect((await engine.docs.read(runKeys.record('sum/manual-bad')))?.body).toBe('{"not": "a run record"}');
    expect(engine.logs).toContainEqual(
      expect.stringMatching(/^warn left a poisoned work message of run sum\/manual-bad for a later pass: /),
    );
  });

  it('a raw work message the host gave up on fails its items that have no outcome yet', async () => {
    const engine = unitEngine([sumJob({ items: 3 })]);
    const records = await seedRun(engine, 'sum/manual-d', 3, 'running');
    await engine.results.send(
      JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-d', job: 'sum', outcomes: [{ i: 0, ok: true, r: { v: 0 } }] }),
    );
    await engine.poison.send(
      JSON.stringify({ v: 1, t: 'work', run: 'sum/manual-d', job: 'sum', first: 0, count: 2, items: [{ i: 0 }, { i: 1 }] }),
    );
    const { book, term } = engine.book(2);
    await drainResults(engine.ctx, term, book);
    await drainPoisonSettled(engine, book, term);
    const record = (await records.read(runKeys.record('sum/manual-d')))?.value;
    expect(record?.counters).toMatchObject({ succeeded: 1, failed: 1, duplicates: 1 });
    expect(record?.failureParts).toHaveLength(1);
    const part = await engine.docs.read(record?.failureParts[0] ?? '');
    expect(JSON.parse(part?.body.trim() ?? '{}')).toMatchObject({ item: 1, reason: expect.stringContaining('no result after') });
  });
});

describe('poison copies of work whose result was sent', () => {
  // Item 0's worker sent its result and died before deleting its work message, so the host
  // moved the message to the poison queue after the result was on the results queue.
  const result = JSON.stringify({
    v: 1,
    t: 'result',
    run: 'sum/manual-p',
    job: 'sum',
    outcomes: [{ i: 0, ok: true, r: { v: 0 } }],
  });
  const copy = JSON.stringify({ v: 1, t: 'work', run: 'sum/manual-p', job: 'sum', first: 0, count: 1, items: [{ i: 0 }] });
  const succeeded = { succeeded: 1, failed: 0, duplicates: 1 };

  async function sentThenPoisoned() {
    const engine = unitEngine([sumJob({ items: 1 })]);
    const records = await seedRun(engine, 'sum/manual-p', 1, 'running');
    await engine.results.send(result);
    await engine.poison.send(copy);
    const counters = async () => (await records.read(runKeys.record('sum/manual-p')))?.value.counters;
    return { engine, counters, ...engine.book(2) };
  }

  it('the poison copy met first does not count a failure: the result counts once the results queue is drained', async () => {
    const { engine, counters, book, term } = await sentThenPoisoned();
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ received: 1, held: 1, folded: 0 });
    expect(await counters()).toMatchObject({ succeeded: 0, failed: 0 });
    await engine.clock.advance(VISIBILITY_MS);
    await drainResults(engine.ctx, term, book);
    await drainPoison(engine.ctx, term, book);
    expect(await counters()).toMatchObject(succeeded);
    expect(await engine.poison.approximateCount()).toBe(0);
  });

  it('the result met first counts, and the poison copy is a duplicate', async () => {
    const { engine, counters, book, term } = await sentThenPoisoned();
    await drainResults(engine.ctx, term, book);
    await drainPoisonSettled(engine, book, term);
    expect(await counters()).toMatchObject(succeeded);
  });

  it('a copy whose run had results left behind waits a drain visibility for them', async () => {
    const engine = unitEngine([sumJob({ items: 1 })]);
    const records = await seedRun(engine, 'sum/manual-p', 1, 'running');
    const failing = new FailingRecordWrites(engine.docs);
    engine.ctx.docs = failing;
    await engine.results.send(result);
    await engine.poison.send(copy);
    const { book, term } = engine.book(2);
    await drainPoison(engine.ctx, term, book);
    await engine.clock.advance(VISIBILITY_MS);
    failing.failing = true;
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ deferred: 1 });
    failing.failing = false;
    // The queue looked empty, but the result it could not count is hidden for a drain visibility.
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ held: 1, folded: 0 });
    await engine.clock.advance(VISIBILITY_MS);
    await drainResults(engine.ctx, term, book);
    await drainPoison(engine.ctx, term, book);
    expect((await records.read(runKeys.record('sum/manual-p')))?.value.counters).toMatchObject(succeeded);
  });

  it('a copy with no result fails its item once a drained results queue shows none came', async () => {
    const engine = unitEngine([sumJob({ items: 2 })]);
    const records = await seedRun(engine, 'sum/manual-q', 2, 'running');
    await engine.poison.send(copy.replaceAll('manual-p', 'manual-q'));
    const { book, term } = engine.book(2);
    // A new term waits a drain visibility: an earlier term's drain may hold a result hidden.
    await drainPoison(engine.ctx, term, book);
    await drainResults(engine.ctx, term, book);
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ held: 0, received: 0 });
    await engine.clock.advance(VISIBILITY_MS);
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ held: 1 });
    await drainResults(engine.ctx, term, book);
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ held: 0, received: 0 });
    await engine.clock.advance(6000);
    expect(await drainPoison(engine.ctx, term, book)).toMatchObject({ folded: 1 });
    expect((await records.read(runKeys.record('sum/manual-q')))?.value.counters).toMatchObject({ failed: 1, succeeded: 0 });
  });
});

/** A drain visibility and the few seconds a held copy stays hidden. */
const VISIBILITY_MS = (DEFAULT_TUNING.drainVisibilitySeconds + 6) * 1000;

/**
 * The poison drain as a leader's turns reach it: a first pass meets the copies and holds them,
 * and once the results queue has been found empty a drain visibility later, they count.
 */
async function drainPoisonSettled(engine: ReturnType<typeof unitEngine>, book: RunBook, term: TermContext) {
  const first = await drainPoison(engine.ctx, term, book);
  await engine.clock.advance(VISIBILITY_MS);
  await drainResults(engine.ctx, term, book);
  const stats = await drainPoison(engine.ctx, term, book);
  return { ...stats, received: stats.received + first.received - first.held };
}

/** Refuses writes of run records while `failing` is set, as storage answering 503 would. */
class FailingRecordWrites extends ForwardingDocumentStore {
  failing = false;
  override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
    if (this.failing && key.endsWith('/run.json')) return Promise.reject(new Error(`503 Server Busy writing ${key}`));
    return super.write(key, body, condition, options);
  }
}

/** Every failure the stored record's failure log holds, by item. */
async function namedFailures(engine: ReturnType<typeof unitEngine>, record: RunRecord | undefined): Promise<number[]> {
  const items: number[] = [];
  for await (const entry of readFailureLog(engine.docs, record?.failureParts ?? [])) items.push(entry.item);
  return items.sort((a, b) => a - b);
}

/** Every blob the record's failure log names, indexes included, with its ETag. */
async function namedBlobs(engine: ReturnType<typeof unitEngine>, roots: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of roots) {
    const stored = await engine.docs.read(key);
    if (!stored) throw new Error(`${key} is named but gone`);
    out.set(key, stored.etag);
    if (failureLogLevel(key) > 0)
      for (const [k, etag] of await namedBlobs(engine, JSON.parse(stored.body) as string[])) out.set(k, etag);
  }
  return out;
}

/** Roots whose levels never rise and hold fewer than FAILURE_LOG_FANOUT of any one level. */
function expectBoundedRoots(roots: readonly string[]): void {
  const levels = roots.map(failureLogLevel);
  expect(levels).toEqual([...levels].sort((a, b) => b - a));
  for (const level of new Set(levels)) expect(levels.filter((l) => l === level).length).toBeLessThan(FAILURE_LOG_FANOUT);
}

describe('failure parts', () => {
  it('never rewrites or deletes a blob the checkpoint names: a fold into indexes whose save fails, and failures = counter', async () => {
    const engine = unitEngine([sumJob({ items: 300 })]);
    const records = await seedRun(engine, 'sum/manual-g', 300, 'running');
    const docs = new FailingRecordWrites(engine.docs);
    engine.ctx.docs = docs;
    const { book, term } = engine.book(2);
    const fail = async (i: number) => {
      await engine.results.send(
        JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-g', job: 'sum', outcomes: [{ i, ok: false, e: `bad ${i}`, a: 3 }] }),
      );
      return drainResults(engine.ctx, term, book);
    };
    // 255 parts: 15 indexes of 16 parts and 15 parts. The 256th folds 16 parts into an index,
    // then 16 indexes into one of level 2, and that checkpoint's save fails.
    for (let i = 0; i < 255; i++) await fail(i);
    const before = (await records.read(runKeys.record('sum/manual-g')))?.value;
    expect(before?.counters.failed).toBe(255);
    expect(before?.failureParts.map(failureLogLevel)).toEqual([...Array(15).fill(1), ...Array(15).fill(0)]);
    const namedBefore = await namedBlobs(engine, before?.failureParts ?? []);
    docs.failing = true;
    expect(await fail(255)).toMatchObject({ deferred: 1 });
    docs.failing = false;
    // The stored checkpoint still names exactly the failures it counted, in blobs as they were.
    const stored = (await records.read(runKeys.record('sum/manual-g')))?.value;
    expect(stored?.counters.failed).toBe(255);
    expect(await namedFailures(engine, stored)).toEqual(Array.from({ length: 255 }, (_, i) => i));
    expect(await namedBlobs(engine, stored?.failureParts ?? [])).toEqual(namedBefore);
    // The message comes back after the drain visibility and counts once.
    await engine.clock.advance((engine.ctx.tuning.drainVisibilitySeconds + 1) * 1000);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 1 });
    const after = (await records.read(runKeys.record('sum/manual-g')))?.value;
    expect(after?.counters.failed).toBe(256);
    expect(after?.failureParts.map(failureLogLevel)).toEqual([2]);
    expect(await namedFailures(engine, after)).toEqual(Array.from({ length: 256 }, (_, i) => i));
    const namedAfter = await namedBlobs(engine, after?.failureParts ?? []);
    for (const [key, etag] of namedBefore) expect(namedAfter.get(key)).toBe(etag);
    // Nothing is deleted; only the failed save's part and its two indexes are named by no checkpoint.
    const kept: string[] = [];
    for await (const key of engine.docs.list('runs/sum/manual-g/failures/')) kept.push(key);
    expect(namedAfter.size).toBe(256 + 16 + 1);
    expect(
      kept
        .filter((key) => !namedAfter.has(key))
        .map(failureLogLevel)
        .sort(),
    ).toEqual([0, 1, 2]);
  });

  it('keeps fewer than 16 roots of each level in the checkpoint, however many parts, losing no failure', async () => {
    const engine = unitEngine([sumJob({ items: 300 })]);
    const records = await seedRun(engine, 'sum/manual-e', 300, 'running');
    const { book, term } = engine.book(2);
    // 300 drains, each with one failure: 300 parts, 256 + 2 × 16 + 12.
    for (let i = 0; i < 300; i++) {
      await engine.results.send(
        JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-e', job: 'sum', outcomes: [{ i, ok: false, e: `bad ${i}`, a: 3 }] }),
      );
      await drainResults(engine.ctx, term, book);
    }
    const record = (await records.read(runKeys.record('sum/manual-e')))?.value;
    expect(record?.counters.failed).toBe(300);
    expect(record?.failureParts.map(failureLogLevel)).toEqual([2, 1, 1, ...Array(12).fill(0)]);
    expectBoundedRoots(record?.failureParts ?? []);
    const entries: FailureEntry[] = [];
    for await (const entry of readFailureLog(engine.docs, record?.failureParts ?? [])) entries.push(entry);
    // In the order they were counted, each with its reason.
    expect(entries).toEqual(Array.from({ length: 300 }, (_, i) => ({ item: i, reason: `bad ${i}`, attempts: 3 })));
  });

  it('folds the up to 64 parts a record written before indexes names, oldest first, losing no failure', async () => {
    const engine = unitEngine([sumJob({ items: 100 })]);
    const records = await seedRun(engine, 'sum/manual-l', 100, 'running');
    const legacy: string[] = [];
    for (let i = 0; i < 64; i++) {
      const key = runKeys.failurePart('sum/manual-l', 1, i, `legacy${i}`);
      await engine.docs.write(key, `${JSON.stringify({ item: i, reason: `bad ${i}`, attempts: 3 })}\n`, { ifNoneMatch: '*' });
      legacy.push(key);
    }
    const seeded = (await records.read(runKeys.record('sum/manual-l')))!;
    const counters = { ...seeded.value.counters, failed: 64 };
    const seen = Bitset.empty(100);
    for (let i = 0; i < 64; i++) seen.add(i);
    await records.replace(runKeys.record('sum/manual-l'), 1, seeded, {
      ...seeded.value,
      counters,
      seen: seen.toCheckpoint(),
      failureParts: legacy,
    });
    await engine.results.send(
      JSON.stringify({ v: 1, t: 'result', run: 'sum/manual-l', job: 'sum', outcomes: [{ i: 64, ok: false, e: 'bad 64', a: 3 }] }),
    );
    const { book, term } = engine.book(2);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 1 });
    const record = (await records.read(runKeys.record('sum/manual-l')))?.value;
    expect(record?.failureParts.map(failureLogLevel)).toEqual([1, 1, 1, 1, 0]);
    expect(await namedFailures(engine, record)).toEqual(Array.from({ length: 65 }, (_, i) => i));
  });
});
