import { describe, expect, it } from 'vitest';
import { drainResults } from '../../../src/engine/drain';
import { failureHooksIdle } from '../../../src/engine/failure-hooks';
import { finalizeRun } from '../../../src/engine/finalizer';
import { hedgeStragglers } from '../../../src/engine/hedger';
import { RunBook } from '../../../src/engine/run-book';
import type { RunOutput } from '../../../src/hub/run-output';
import { runKeys } from '../../../src/hub/run-record';
import type { ItemFailedContext, ItemFailure } from '../../../src/jobs/job-definition';
import { expectedSum, sumJob } from '../../support/sample-jobs';
import {
  handLeadership,
  termOf,
  unitEngine,
  receiveAll,
  firstOf,
  sumRunRecord as record,
  activeRun,
  dispatchedSumRun,
} from '../../support/unit-engine';

const RUN = 'sum/manual-hook';
const ITEMS = 20;
const FAILING = new Set([3, 11]);

/** A run of `ITEMS` one-item messages whose items 3 and 11 fail every try, dispatched by the leader of epoch 1. */
async function openRun(onItemFailed: (failure: ItemFailure, ctx: ItemFailedContext) => Promise<void> | void) {
  const job = sumJob({
    items: ITEMS,
    failWhen: (i) => FAILING.has(i),
    failureTolerance: { count: 2 },
    onItemFailed,
    hookTimeouts: { itemFailedSeconds: 30, graceSeconds: 10 },
  });
  const engine = unitEngine([job]);
  return { engine, ...(await dispatchedSumRun(engine, RUN)) };
}

/** Whether `promise` settles before the microtasks and timers due now have run. */
async function settlesNow(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  for (let k = 0; k < 20; k++) await Promise.resolve();
  return settled;
}

describe('onItemFailed', () => {
  it('is called once per failed item, through duplicates, a hedged copy and a change of leader', async () => {
    const calls: { failure: ItemFailure; runId: string; job: string }[] = [];
    const { engine, term, book, process } = await openRun((failure, ctx) => {
      calls.push({ failure, runId: ctx.runId, job: ctx.job });
    });
    const received = await receiveAll(engine);
    // A paused worker holds message 11; item 3's message is delivered twice (a duplicate result).
    const held = received.find((m) => firstOf(m) === 11)!;
    const twice = received.find((m) => firstOf(m) === 3)!;
    await process([twice], true);
    await process(received.filter((m) => m !== held));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS - 1, duplicates: 1 });
    await failureHooksIdle(engine.ctx);
    expect(calls.map((c) => c.failure.item)).toEqual([3]);

    // Message 11 straggles: the leader sends a copy, which fails too.
    await engine.clock.advance(10_000);
    expect(await hedgeStragglers(engine.ctx, term, book, await activeRun(book, RUN))).toBe(1);
    await process(await receiveAll(engine));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 1 });
    await failureHooksIdle(engine.ctx);
    expect(calls.map((c) => c.failure.item)).toEqual([3, 11]);

    // A new leader; the paused worker comes back and its original of message 11 fails as well.
    const next = new RunBook(engine.ctx, termOf(handLeadership(2)));
    const nextTerm = termOf(handLeadership(2));
    await process([held]);
    expect(await drainResults(engine.ctx, nextTerm, next)).toMatchObject({ folded: 0, duplicates: 1 });
    await finalizeRun(engine.ctx, nextTerm, next, await activeRun(next, RUN));
    await failureHooksIdle(engine.ctx);

    expect(calls).toEqual([
      { failure: { item: 3, reason: expect.stringContaining('item 3 is cursed'), attempts: 1 }, runId: RUN, job: 'sum' },
      { failure: { item: 11, reason: expect.stringContaining('item 11 is cursed'), attempts: 1 }, runId: RUN, job: 'sum' },
    ]);
    expect((await record(engine)).counters).toMatchObject({ succeeded: ITEMS - 2, failed: 2, duplicates: 2 });
  });

  it('a hook that throws changes nothing of the run and is logged', async () => {
    const { engine, term, book, process } = await openRun((failure) => {
      throw new Error(`pager down for item ${failure.item}`);
    });
    await process(await receiveAll(engine));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS });
    await finalizeRun(engine.ctx, term, book, await activeRun(book, RUN));
    await failureHooksIdle(engine.ctx);
    const ended = await record(engine);
    expect(ended).toMatchObject({ state: 'succeeded', counters: { succeeded: ITEMS - 2, failed: 2 } });
    const output = JSON.parse((await engine.docs.read(runKeys.output(RUN)))!.body) as RunOutput;
    expect(output.output).toEqual(expectedSum(ITEMS, (i) => FAILING.has(i)));
    expect(engine.logs).toContain(`warn run ${RUN}: onItemFailed for item 3 failed: pager down for item 3`);
    expect(engine.logs).toContain(`warn run ${RUN}: onItemFailed for item 11 failed: pager down for item 11`);
  });

  it('a hook that hangs holds up neither the drain nor the run, and is abandoned after its bound', async () => {
    let started = 0;
    const { engine, term, book, process } = await openRun(() => {
      started++;
      return new Promise<void>(() => undefined); // never settles and ignores its signal
    });
    await process(await receiveAll(engine));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS });
    await finalizeRun(engine.ctx, term, book, await activeRun(book, RUN));
    expect(await record(engine)).toMatchObject({ state: 'succeeded' });
    expect(started).toBe(2);
    const idle = failureHooksIdle(engine.ctx);
    expect(await settlesNow(idle)).toBe(false);
    await engine.clock.advance(30_000); // its bound: the signal aborts
    expect(await settlesNow(idle)).toBe(false);
    await engine.clock.advance(10_000); // and the grace: abandoned
    await idle;
    expect(engine.logs.filter((l) => l.includes('onItemFailed for item') && l.includes('abandoned'))).toHaveLength(2);
  });
});
