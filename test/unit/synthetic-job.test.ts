import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { processItem } from '../../src/jobs/process-item';
import { InvalidSettingError } from '../../src/errors';
import {
  createSyntheticJob,
  expectedSynthetic,
  hangOrderName,
  parseSyntheticJobs,
  SYNTHETIC_FAILURE,
} from '../../functions/synthetic-job';
import { timeBound } from '../support/time-bound';

const orders = mkdtempSync(join(tmpdir(), 'baton-hang-orders-'));
afterAll(() => rmSync(orders, { recursive: true, force: true }));

describe('the synthetic job', () => {
  it('splits n items, fails every nth by design and folds to the expected output', async () => {
    const spec = { name: 'sum', items: 10, failEvery: 4 };
    const job = createSyntheticJob(spec);
    const items: unknown[] = [];
    for await (const item of job.split({ runId: 'r', scheduledAt: new Date(0), signal: new AbortController().signal } as never))
      items.push(item);
    expect(items).toEqual(Array.from({ length: 10 }, (_, i) => ({ i })));
    let acc = job.aggregate.initial();
    const failed: number[] = [];
    for (const item of items as { i: number }[]) {
      try {
        const result = await job.process(item, {
          runId: 'r',
          itemIndex: item.i,
          attempt: 1,
          signal: new AbortController().signal,
        });
        acc = job.aggregate.add(acc, result, { itemIndex: item.i });
      } catch {
        failed.push(item.i);
      }
    }
    expect(failed).toEqual([3, 7]);
    expect(expectedSynthetic(spec)).toEqual({ output: acc, failed: [3, 7] });
    expect(acc).toEqual({
      count: 8,
      sum: 2 * (45 - 3 - 7),
      squares: [0, 1, 2, 4, 5, 6, 8, 9].reduce((s, i) => s + 4 * i * i, 0),
    });
  });

  it('leaves out the items a run fails besides those failing by design', () => {
    const spec = { name: 'sum', items: 10, failEvery: 4 };
    const { output, failed } = expectedSynthetic(spec, [5]);
    expect(failed).toEqual([3, 5, 7]);
    expect(output.count).toBe(7);
    expect(output.sum).toBe(2 * (45 - 3 - 5 - 7));
  });

  it('says why an item failed by design in words the checker knows', async () => {
    const job = createSyntheticJob({ name: 'sum', items: 4, failEvery: 4 });
    const outcome = await processItem(
      job,
      { i: 3 },
      { runId: 'r', itemIndex: 3, attempt: 1, signal: new AbortController().signal },
    );
    expect(outcome).toMatchObject({ ok: false, e: expect.stringMatching(SYNTHETIC_FAILURE) });
  });

  it('hangs exactly the hook call a hang order names, whatever its signal says', async () => {
    const job = createSyntheticJob({ name: 'sum', items: 3, hangOrders: orders });
    const runId = 'sum/2026-11-24T10:00:20.000Z';
    writeFileSync(join(orders, hangOrderName(runId, 'process', 1)), '');
    writeFileSync(join(orders, hangOrderName(runId, 'split')), '');
    writeFileSync(join(orders, hangOrderName(runId, 'finalize')), '');
    const aborted = AbortSignal.abort(new Error('past its bound'));
    const ctx = (i: number) => ({ runId, itemIndex: i, attempt: 1, signal: aborted });
    const settled = (p: Promise<unknown>) =>
      p.then(
        () => true,
        () => true,
      );
    expect(await job.process({ i: 0 }, ctx(0))).toEqual({ v: 0 });
    expect(await job.process({ i: 1 }, { ...ctx(1), runId: 'sum/2026-11-24T10:00:40.000Z' })).toEqual({ v: 2 });
    const hung = [
      settled(Promise.resolve(job.process({ i: 1 }, ctx(1)))),
      settled(
        (job.split({ runId, occurrence: undefined, signal: aborted }) as AsyncIterable<unknown>)[Symbol.asyncIterator]().next(),
      ),
      settled(Promise.resolve(job.finalize?.({ count: 0, sum: 0, squares: 0 }, { runId } as never))),
    ];
    // Absence is what is asserted: nothing settles within a window much longer than the calls above took.
    const first = await Promise.race([...hung, sleep(200).then(() => 'none')]);
    expect(first).toBe('none');
    // Without an order for it, the same run's split gives every item.
    const other = createSyntheticJob({ name: 'sum', items: 3, hangOrders: join(orders, 'empty') });
    const items: unknown[] = [];
    for await (const item of other.split({ runId, occurrence: undefined, signal: aborted }) as AsyncIterable<unknown>)
      items.push(item);
    expect(items).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    // A job that takes no orders has no finalize hook at all.
    expect(createSyntheticJob({ name: 'sum', items: 3 }).finalize).toBeUndefined();
  });

  it('a slow item stops waiting when its signal aborts', async () => {
    const job = createSyntheticJob({ name: 'slow', items: 1, slowEvery: 1, slowMs: 60_000 });
    const abort = new AbortController();
    // All of it is the machine's: nothing but the abort stands between the call and its end. However
    // slow the machine, it stays well under the 60 s that an item which ignored the signal would take.
    const bound = await timeBound(1_000);
    const boundMs = Math.min(bound.ms, 50_000);
    const started = Date.now();
    const processing = job.process({ i: 0 }, { runId: 'r', itemIndex: 0, attempt: 1, signal: abort.signal });
    abort.abort(new Error('run cancelled'));
    await expect(processing).rejects.toThrow();
    expect(Date.now() - started, `${bound.why}, capped at 50000 ms`).toBeLessThan(boundMs);
  });

  it('makes every item take itemMs, and a slow one slowMs instead', async () => {
    const job = createSyntheticJob({ name: 'work', items: 2, itemMs: 60_000, slowEvery: 2, slowMs: 0 });
    const ctx = (itemIndex: number, signal: AbortSignal) => ({ runId: 'r', itemIndex, attempt: 1, signal });
    // The slow item (index 1) takes slowMs, 0 here, not itemMs: it is done without any wait.
    await expect(job.process({ i: 1 }, ctx(1, new AbortController().signal))).resolves.toEqual({ v: 2 });
    // The other one is still waiting out its 60 s when its signal aborts, and stops then.
    const abort = new AbortController();
    let settled = false;
    const processing = job.process({ i: 0 }, ctx(0, abort.signal));
    void Promise.resolve(processing).then(
      () => (settled = true),
      () => (settled = true),
    );
    // A turn of the event loop: an item that did not wait would have settled by now.
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    abort.abort(new Error('run cancelled'));
    await expect(processing).rejects.toThrow();
  });

  it('makes every item hold the event loop for blockMs before it returns', async () => {
    const job = createSyntheticJob({ name: 'cpu', items: 1, blockMs: 50 });
    let turned = false;
    setImmediate(() => (turned = true));
    const started = performance.now();
    const processing = job.process({ i: 0 }, { runId: 'r', itemIndex: 0, attempt: 1, signal: new AbortController().signal });
    // Spun, not awaited: the call held the thread for the whole 50 ms, and no other callback ran meanwhile.
    expect(performance.now() - started).toBeGreaterThanOrEqual(50);
    expect(turned).toBe(false);
    await expect(processing).resolves.toEqual({ v: 0 });
    // Without it an item returns without spinning: its output is the same either way.
    expect(expectedSynthetic({ name: 'cpu', items: 1, blockMs: 50 })).toEqual(expectedSynthetic({ name: 'cpu', items: 1 }));
  });

  it.each([
    ['not JSON', '{', /BATON_SYNTHETIC_JOBS must be a JSON array/],
    ['not an array', '{"name":"a","items":1}', /BATON_SYNTHETIC_JOBS is invalid/],
    ['a negative count', '[{"name":"a","items":-1}]', /BATON_SYNTHETIC_JOBS is invalid at 0\.items/],
    ['a negative block', '[{"name":"a","items":1,"blockMs":-1}]', /BATON_SYNTHETIC_JOBS is invalid at 0\.blockMs/],
    ['a block of over a minute', '[{"name":"a","items":1,"blockMs":60001}]', /BATON_SYNTHETIC_JOBS is invalid at 0\.blockMs/],
    ['an unknown field', '[{"name":"a","items":1,"itmes":2}]', /BATON_SYNTHETIC_JOBS is invalid/],
    ['a bad schedule', '[{"name":"a","items":1,"schedule":"every minute"}]', /BATON_SYNTHETIC_JOBS\.0\.schedule/],
    ['an unknown zone', '[{"name":"a","items":1,"timeZone":"Europe/Atlantis"}]', /BATON_SYNTHETIC_JOBS\.0\.timeZone/],
    [
      'jitter past the next occurrence',
      '[{"name":"a","items":1,"schedule":"*/10 * * * * *","jitterSeconds":10}]',
      /BATON_SYNTHETIC_JOBS.*jitterSeconds \(10\) must be shorter/,
    ],
    ['hedging on as true', '[{"name":"a","items":1,"hedge":true}]', /BATON_SYNTHETIC_JOBS is invalid at 0\.hedge/],
    [
      'a hedge bound over 100 %',
      '[{"name":"a","items":1,"hedge":{"maxPercent":101}}]',
      /BATON_SYNTHETIC_JOBS is invalid at 0: job a: hedge\.maxPercent must be 0-100/,
    ],
  ])('BATON_SYNTHETIC_JOBS with %s fails with one line naming it', (_, value, message) => {
    let error: unknown;
    try {
      parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidSettingError);
    expect((error as InvalidSettingError).setting).toBe('BATON_SYNTHETIC_JOBS');
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it("hedges as any job does unless told otherwise: the chaos soak's straggler check turns it off to see it fail", () => {
    expect(createSyntheticJob({ name: 'sum', items: 3 }).hedge).toEqual({ maxPercent: 5, minWaitSeconds: 5, minCopies: 24 });
    expect(createSyntheticJob({ name: 'sum', items: 3, hedge: false }).hedge).toBe(false);
    expect(createSyntheticJob({ name: 'sum', items: 3, hedge: { minWaitSeconds: 2 } }).hedge).toEqual({
      maxPercent: 5,
      minWaitSeconds: 2,
      minCopies: 24,
    });
    expect(parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: '[{"name":"a","items":5,"hedge":false}]' })[0]?.hedge).toBe(false);
  });

  it('reads its schedule in a zone and spreads its starts, as any job does', () => {
    const job = createSyntheticJob({
      name: 'dst',
      items: 1,
      schedule: '0 30 2 * * *',
      timeZone: 'Europe/Berlin',
      jitterSeconds: 60,
    });
    expect(job).toMatchObject({ timeZone: 'Europe/Berlin', jitterSeconds: 60 });
    expect(createSyntheticJob({ name: 'utc', items: 1 })).toMatchObject({ timeZone: 'UTC', jitterSeconds: 0 });
  });

  it('unset or empty means no synthetic jobs; a valid list parses with defaults', () => {
    expect(parseSyntheticJobs({})).toEqual([]);
    expect(parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: ' ' })).toEqual([]);
    expect(parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: '[{"name":"a","items":5}]' })).toEqual([
      { name: 'a', items: 5, schedule: '0 0 0 1 1 *', itemsPerMessage: 1, slowMs: 0 },
    ]);
  });
});
