import { describe, expect, it, vi } from 'vitest';
import { drainResults } from '../../../src/engine/drain';
import { finalizeRun } from '../../../src/engine/finalizer';
import { hedgeStragglers } from '../../../src/engine/hedger';
import { RunBook } from '../../../src/engine/run-book';
import type { StragglerWatch } from '../../../src/engine/straggler-watch';
import { handleWorkMessage, type WorkerDeps } from '../../../src/engine/worker';
import { renderShow } from '../../../src/cli/format';
import { showView } from '../../../src/hub/read-model';
import type { RunOutput } from '../../../src/hub/run-output';
import { runKeys } from '../../../src/hub/run-record';
import type { HedgeOptions } from '../../../src/jobs/job-definition';
import type { ReceivedMessage } from '../../../src/queue/queue-port';
import { expectedSum, sumJob } from '../../support/sample-jobs';
import {
  handLeadership,
  termOf,
  unitEngine,
  type UnitEngine,
  receiveAll,
  firstOf,
  sumRunRecord as record,
  activeRun,
  dispatchedSumRun,
} from '../../support/unit-engine';

const RUN = 'sum/manual-hedge';
const ITEMS = 20;

/** A run of `ITEMS` one-item messages, planned and dispatched by the leader of epoch 1. */
async function dispatchedRun(hedge: false | HedgeOptions, watches?: Map<string, StragglerWatch>, itemsPerMessage = 1) {
  const engine = unitEngine([sumJob({ items: ITEMS, hedge, itemsPerMessage })]);
  const { book, term, worker } = await dispatchedSumRun(engine, RUN, { ...(watches ? { watches } : {}), maxAttempts: 5 });
  expect((await engine.runs('sum'))[0]).toMatchObject({ state: 'running', cursor: ITEMS / itemsPerMessage });
  const sends = vi.spyOn(engine.work, 'send');
  return { engine, book, term, sends, worker };
}

/** Processes and deletes the messages, as a healthy worker would. */
async function process(engine: UnitEngine, worker: WorkerDeps, messages: readonly ReceivedMessage[]): Promise<void> {
  for (const message of messages) {
    expect((await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, worker)).kind).toBe('processed');
    await engine.work.delete(message);
  }
}

describe('hedged dispatch', () => {
  it('copies a held message once it waited past the floor; the copy counts and the late original is a duplicate', async () => {
    const { engine, book, term, sends, worker } = await dispatchedRun({ maxPercent: 10, minWaitSeconds: 5 });
    const received = await receiveAll(engine);
    // One worker takes message 7 and never finishes it (paused); the others are done.
    const original = received.find((m) => firstOf(m) === 7)!;
    await process(
      engine,
      worker,
      received.filter((m) => m !== original),
    );
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS - 1 });

    await engine.clock.advance(4999);
    expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(0);
    expect(sends).not.toHaveBeenCalled();
    await engine.clock.advance(1);
    expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(1);
    expect((await record(engine)).hedges).toBe(1);
    expect(sends).toHaveBeenCalledTimes(1);

    // The copy is the planned message, and a healthy worker takes it.
    const [copy, ...more] = await receiveAll(engine);
    expect(more).toEqual([]);
    expect(JSON.parse(copy!.text)).toEqual(JSON.parse(original.text));
    await process(engine, worker, [copy!]);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 1, duplicates: 0 });
    expect((await record(engine)).counters).toMatchObject({ succeeded: ITEMS, duplicates: 0 });

    // The paused worker comes back after its visibility ran out, and the original arrives late.
    await engine.clock.advance(600_000);
    const [late] = await receiveAll(engine);
    expect(firstOf(late!)).toBe(7);
    await process(engine, worker, [late!]);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 0, duplicates: 1 });

    await finalizeRun(engine.ctx, term, book, await activeRun(book, RUN));
    const ended = await record(engine);
    expect(ended).toMatchObject({ state: 'succeeded', hedges: 1 });
    expect(ended.counters).toMatchObject({ planned: ITEMS, succeeded: ITEMS, failed: 0, duplicates: 1 });
    const output = JSON.parse((await engine.docs.read(runKeys.output(RUN)))!.body) as RunOutput;
    expect(output.output).toEqual(expectedSum(ITEMS));
    // `baton show` (and the API's run) say how many copies went.
    const shown = showView('baton', 'baton-runs', { record: ended, output: undefined, manifest: undefined });
    expect(shown.run.hedges).toBe(1);
    expect(renderShow(shown, engine.clock.date())).toMatch(/hedged\s+1 copies of straggling work messages/);
  });

  it.each([
    // maxPercent of 20 messages, at least minCopies → bound
    { maxPercent: 10, minCopies: 0, bound: 2 },
    { maxPercent: 1, minCopies: 0, bound: 1 },
    { maxPercent: 100, minCopies: 0, bound: ITEMS },
    { maxPercent: 10, minCopies: 6, bound: 6 },
    { maxPercent: 5, minCopies: 24, bound: ITEMS },
  ])(
    'never past the bound ($maxPercent %, at least $minCopies → $bound copies), even while every instance is slow',
    async ({ maxPercent, minCopies, bound }) => {
      const { engine, book, term, sends } = await dispatchedRun({ maxPercent, minWaitSeconds: 5, minCopies });
      // Every message is taken and none is finished: no durations, so the wait is processSeconds + graceSeconds.
      expect(await receiveAll(engine)).toHaveLength(ITEMS);
      await engine.clock.advance(129_999);
      expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(0);
      await engine.clock.advance(1);
      expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(bound);
      // The copies are taken by slow instances too; an hour of turns sends nothing more.
      await receiveAll(engine);
      for (let t = 0; t < 360; t++) {
        await engine.clock.advance(10_000);
        await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN));
        await receiveAll(engine);
      }
      expect(sends).toHaveBeenCalledTimes(bound);
      expect((await record(engine)).hedges).toBe(bound);
    },
  );

  it('a leader change mid-hedge: the new leader sends only what is left of the bound, the old one is refused', async () => {
    // 20 % of 20 messages: at most 4 copies across every leader.
    const {
      engine,
      book: bookA,
      term: termA,
      sends,
      worker,
    } = await dispatchedRun({ maxPercent: 20, minWaitSeconds: 5, minCopies: 0 });
    const held = new Set([2, 5, 12, 15, 17, 18]);
    const received = await receiveAll(engine);
    const wave1 = received.filter((m) => firstOf(m) < 10 && !held.has(firstOf(m)));
    const wave2 = received.filter((m) => firstOf(m) >= 10 && !held.has(firstOf(m)));
    await process(engine, worker, wave1);
    await drainResults(engine.ctx, termA, bookA); // 2 and 5 overtaken now
    await engine.clock.advance(3000);
    await process(engine, worker, wave2);
    await drainResults(engine.ctx, termA, bookA); // 12, 15, 17 and 18 overtaken 3 s later
    await engine.clock.advance(2000);
    expect(await hedgeStragglers(engine.ctx, termA, bookA, await activeRun(bookA, RUN))).toBe(2);
    expect((await record(engine)).hedges).toBe(2);

    // A new leader takes over and fences the run, as `takeOver` does.
    const { book: bookB, term: termB } = engine.book(2);
    const runB = await activeRun(bookB, RUN);
    await bookB.save(runB, { ...runB.doc.value, updatedAt: engine.clock.date().toISOString() });

    // The old leader, unaware, finds four more overdue: its count of copies is refused, so none goes.
    await engine.clock.advance(3000);
    await expect(hedgeStragglers(engine.ctx, termA, bookA, await activeRun(bookA, RUN))).rejects.toThrow();
    expect(sends).toHaveBeenCalledTimes(2);

    // The new leader adopts the six uncounted messages (the copies of 2 and 5 are held too) and
    // knows no durations of its own: it waits the fallback from its start, then sends what is left.
    await receiveAll(engine);
    expect(await hedgeStragglers(engine.ctx, termB, bookB, await activeRun(bookB, RUN))).toBe(0);
    await engine.clock.advance(130_000);
    expect(await hedgeStragglers(engine.ctx, termB, bookB, await activeRun(bookB, RUN))).toBe(2);
    for (let t = 0; t < 30; t++) {
      await engine.clock.advance(10_000);
      expect(await hedgeStragglers(engine.ctx, termB, bookB, await activeRun(bookB, RUN))).toBe(0);
    }
    expect(sends).toHaveBeenCalledTimes(4);
    expect((await record(engine)).hedges).toBe(4);
  });

  it.each([
    { who: 'the same process, which keeps its watch', kept: true, waitMs: 2000 },
    { who: 'another process, which starts its own', kept: false, waitMs: 130_000 },
  ])('a run led again by $who: a held message is copied $waitMs ms into the new term', async ({ kept, waitMs }) => {
    const watches = new Map<string, StragglerWatch>();
    const { engine, book, term, sends, worker } = await dispatchedRun({ maxPercent: 10, minWaitSeconds: 5 }, watches);
    const received = await receiveAll(engine);
    await process(
      engine,
      worker,
      received.filter((m) => firstOf(m) !== 7),
    );
    await drainResults(engine.ctx, term, book);
    await engine.clock.advance(3000);
    // The term ends 3 s after message 7 was overtaken; the next one begins at once.
    const next = new RunBook(engine.ctx, termOf(handLeadership(2)), kept ? watches : new Map());
    const run = await activeRun(next, RUN);
    await next.save(run, { ...run.doc.value, updatedAt: engine.clock.date().toISOString() });
    const nextTerm = termOf(handLeadership(2));
    // Its first turn looks at once.
    expect(await hedgeStragglers(engine.ctx, nextTerm, next, await activeRun(next, RUN))).toBe(0);
    await engine.clock.advance(waitMs - 1);
    expect(await hedgeStragglers(engine.ctx, nextTerm, next, await activeRun(next, RUN))).toBe(0);
    await engine.clock.advance(1);
    expect(await hedgeStragglers(engine.ctx, nextTerm, next, await activeRun(next, RUN))).toBe(1);
    expect(sends).toHaveBeenCalledTimes(1);
  });

  it('with no durations to go by, waits what a whole message may take, not one item', async () => {
    // Four items a message, each bounded at 120 s plus 10 s of grace: a message may take 520 s.
    const { engine, book, term, sends, worker } = await dispatchedRun({ maxPercent: 50, minWaitSeconds: 5 }, undefined, 4);
    const received = await receiveAll(engine);
    const held = received.find((m) => firstOf(m) === 8)!;
    // The first two messages are counted, so the ones after them have been overtaken.
    await process(
      engine,
      worker,
      received.filter((m) => firstOf(m) < 8),
    );
    await drainResults(engine.ctx, term, book);
    // Two durations: too few to trust, so the wait is the fallback, sized by the message.
    await engine.clock.advance(4 * 130_000 - 1);
    expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(0);
    await engine.clock.advance(1);
    expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBeGreaterThan(0);
    expect(sends.mock.calls.some(([text]) => JSON.parse(text as string).first === firstOf(held))).toBe(true);
  });

  it('workers report how long a message took; a result without a duration, or with a bad one, still counts', async () => {
    const { engine, book, term, worker } = await dispatchedRun({ maxPercent: 10, minWaitSeconds: 5 });
    const [first] = await receiveAll(engine);
    await process(engine, worker, [first!]);
    const [reported] = engine.results.peekAll();
    expect(JSON.parse(reported!)).toMatchObject({ t: 'result', ms: expect.any(Number) as number });
    for (const [i, ms] of [
      [1, -5],
      [2, 'slow'],
      [3, undefined],
    ] as const) {
      const outcomes = [{ i, ok: true, r: { v: 2 * i } }];
      await engine.results.send(JSON.stringify({ v: 1, t: 'result', run: RUN, job: 'sum', outcomes, ms }));
    }
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 4, malformed: 0 });
  });

  it('an item tried again after a delay is no straggler: its retry note holds copies off until the try is due', async () => {
    const engine = unitEngine([
      sumJob({
        items: ITEMS,
        hedge: { maxPercent: 10, minWaitSeconds: 5 },
        failWhen: (i) => i === 7,
        retry: { attempts: 3, delaySeconds: 10, backoff: 1 },
      }),
    ]);
    const { book, term, worker } = await dispatchedSumRun(engine, RUN, { maxAttempts: 5 });
    const hedge = async () => hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN));
    await process(engine, worker, await receiveAll(engine));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS - 1 });
    for (const attempt of [2, 3]) {
      // Waiting 10 s for its next try, then the 5 s floor: a copy any sooner would be waste.
      await engine.clock.advance(10_000);
      expect(await hedge()).toBe(0);
      const [retry, ...more] = await receiveAll(engine);
      expect(more).toEqual([]);
      expect(JSON.parse(retry!.text)).toMatchObject({ first: 7, count: 1, tried: attempt - 1 });
      await process(engine, worker, [retry!]);
      await drainResults(engine.ctx, term, book);
      await engine.clock.advance(5_000 - 1);
      expect(await hedge()).toBe(0);
    }
    expect((await record(engine)).counters).toMatchObject({ succeeded: ITEMS - 1, failed: 1, duplicates: 0 });
    expect((await record(engine)).hedges).toBe(0);
  });

  it('a result that only says items are tried again costs no checkpoint', async () => {
    const { engine, book, term, worker } = await dispatchedRun({ maxPercent: 10, minWaitSeconds: 5 });
    await process(engine, worker, await receiveAll(engine));
    await drainResults(engine.ctx, term, book);
    const before = await engine.docs.read(runKeys.record(RUN));
    await engine.results.send(JSON.stringify({ v: 1, t: 'result', run: RUN, job: 'sum', retrying: { items: [3], inMs: 1000 } }));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ received: 1, folded: 0, malformed: 0 });
    expect((await engine.docs.read(runKeys.record(RUN)))?.etag).toBe(before?.etag);
    expect(engine.results.peekAll()).toEqual([]);
  });

  it('with hedging off no copy is sent, however long a message is held', async () => {
    const { engine, book, term, sends, worker } = await dispatchedRun(false);
    const received = await receiveAll(engine);
    await process(
      engine,
      worker,
      received.filter((m) => firstOf(m) !== 7),
    );
    await drainResults(engine.ctx, term, book);
    for (let t = 0; t < 60; t++) {
      await engine.clock.advance(10_000);
      expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(0);
    }
    expect(sends).not.toHaveBeenCalled();
    expect((await record(engine)).hedges).toBe(0);
  });
});
