import { describe, expect, it } from 'vitest';
import { foldOutcomes, type FoldState } from '../../../src/hub/fold';
import type { ItemOutcome } from '../../../src/jobs/item-outcome';
import { Bitset } from '../../../src/hub/bitset';
import type { RunCounters } from '../../../src/hub/run-record';
import { sumJob, type SumAcc } from '../../support/sample-jobs';
import { shuffled } from '../../support/unit-engine';

const job = sumJob({ items: 0 });

const zero: RunCounters = { planned: 0, dispatched: 0, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 };

function state(planned: number): FoldState {
  return {
    acc: job.aggregate.initial(),
    seen: Bitset.empty(planned),
    counters: { ...zero, planned, dispatched: planned },
  };
}

const ok = (i: number, v = 2 * i): ItemOutcome => ({ i, ok: true, r: { v } });
const fail = (i: number, e = `item ${i} failed`, a = 3): ItemOutcome => ({ i, ok: false, e, a });

describe('foldOutcomes', () => {
  it('folds successes and failures into the accumulator and the counters', () => {
    const s = state(4);
    const out = foldOutcomes(job, s, [ok(0), ok(1), fail(2, 'boom', 5), ok(3)]);
    expect(out.acc).toEqual({ count: 3, sum: 0 + 2 + 6, squares: 0 + 4 + 36 });
    expect(out.counters).toEqual({ ...zero, planned: 4, dispatched: 4, succeeded: 3, failed: 1 });
    expect(out.failures).toEqual([{ item: 2, reason: 'boom', attempts: 5 }]);
    expect(s.seen.count()).toBe(4);
    // The counters passed in are not changed; the caller commits the returned ones.
    expect(s.counters).toEqual({ ...zero, planned: 4, dispatched: 4 });
  });

  it.each<[string, ItemOutcome[], Partial<RunCounters>, SumAcc, number]>([
    ['the same success twice counts once', [ok(1), ok(1)], { succeeded: 1, duplicates: 1 }, { count: 1, sum: 2, squares: 4 }, 0],
    ['the same failure twice counts once', [fail(1), fail(1)], { failed: 1, duplicates: 1 }, { count: 0, sum: 0, squares: 0 }, 1],
    [
      'success then failure keeps the success',
      [ok(1), fail(1)],
      { succeeded: 1, duplicates: 1 },
      { count: 1, sum: 2, squares: 4 },
      0,
    ],
    [
      'failure then success keeps the failure',
      [fail(1), ok(1)],
      { failed: 1, duplicates: 1 },
      { count: 0, sum: 0, squares: 0 },
      1,
    ],
    [
      'three copies raise duplicates by two',
      [ok(2), ok(2), ok(2)],
      { succeeded: 1, duplicates: 2 },
      { count: 1, sum: 4, squares: 16 },
      0,
    ],
    ['an index at the plan size is rejected', [ok(3)], { rejected: 1 }, { count: 0, sum: 0, squares: 0 }, 0],
    ['an index far past the plan is rejected', [ok(1_000_000), fail(99)], { rejected: 2 }, { count: 0, sum: 0, squares: 0 }, 0],
  ])('%s', (_name, outcomes, counters, acc, failures) => {
    const out = foldOutcomes(job, state(3), outcomes);
    expect(out.counters).toEqual({ ...zero, planned: 3, dispatched: 3, ...counters });
    expect(out.acc).toEqual(acc);
    expect(out.failures).toHaveLength(failures);
  });

  it('a duplicate across two folds is caught by the bitset carried between them', () => {
    const s = state(3);
    const first = foldOutcomes(job, s, [ok(0), ok(1)]);
    const second = foldOutcomes(job, { ...s, acc: first.acc, counters: first.counters }, [ok(1), ok(2)]);
    expect(second.counters).toMatchObject({ succeeded: 3, duplicates: 1 });
    expect(second.acc).toEqual({ count: 3, sum: 0 + 2 + 4, squares: 0 + 4 + 16 });
  });

  it("a result that fails the job's result schema becomes a failure and never reaches add", () => {
    const bad: ItemOutcome = { i: 1, ok: true, r: { v: 'not a number' } };
    const out = foldOutcomes(job, state(2), [ok(0), bad]);
    expect(out.acc).toEqual({ count: 1, sum: 0, squares: 0 });
    expect(out.counters).toMatchObject({ succeeded: 1, failed: 1 });
    expect(out.failures).toEqual([{ item: 1, reason: "result does not match the job's result schema", attempts: 1 }]);
  });

  it('a later good copy of a schema-failed index is a duplicate, not a success', () => {
    const out = foldOutcomes(job, state(1), [{ i: 0, ok: true, r: null }, ok(0)]);
    expect(out.counters).toMatchObject({ succeeded: 0, failed: 1, duplicates: 1 });
  });

  describe('order independence', () => {
    // 60 planned items; 0..49 succeed, 50..59 fail on the last attempt; some copies arrive
    // twice or three times; a few indexes are outside the plan.
    const planned = 60;
    const outcomes: ItemOutcome[] = [];
    for (let i = 0; i < 50; i++) outcomes.push(ok(i));
    for (let i = 50; i < 60; i++) outcomes.push(fail(i, `item ${i} is cursed`, 3));
    for (const i of [0, 7, 7, 23, 49]) outcomes.push(ok(i));
    for (const i of [50, 59]) outcomes.push(fail(i, `item ${i} is cursed`, 3));
    outcomes.push(ok(60), ok(61), fail(100));

    const fold = (list: ItemOutcome[]) => {
      const s = state(planned);
      const out = foldOutcomes(job, s, list);
      return { ...out, seen: s.seen.toBase64() };
    };
    const reference = fold(outcomes);

    it('the reference fold is what the items say', () => {
      let sum = 0;
      let squares = 0;
      for (let i = 0; i < 50; i++) {
        sum += 2 * i;
        squares += 4 * i * i;
      }
      expect(reference.acc).toEqual({ count: 50, sum, squares });
      expect(reference.counters).toEqual({
        ...zero,
        planned,
        dispatched: planned,
        succeeded: 50,
        failed: 10,
        duplicates: 7,
        rejected: 3,
      });
      expect(reference.failures.map((f) => f.item).sort((a, b) => a - b)).toEqual([50, 51, 52, 53, 54, 55, 56, 57, 58, 59]);
    });

    it.each([1, 2, 3, 42, 1234, 99999])('a permutation (seed %i) folds to the same acc, counters and bitset', (seed) => {
      const list = shuffled(outcomes, seed);
      expect(list).not.toEqual(outcomes);
      const got = fold(list);
      expect(got.acc).toEqual(reference.acc);
      expect(got.counters).toEqual(reference.counters);
      expect(got.seen).toBe(reference.seen);
      expect([...got.failures].sort((a, b) => a.item - b.item)).toEqual([...reference.failures].sort((a, b) => a.item - b.item));
    });

    it('folding in several batches of a permutation gives the same result as one batch', () => {
      const list = shuffled(outcomes, 7);
      const s = state(planned);
      let acc = s.acc;
      let counters = s.counters;
      for (let at = 0; at < list.length; at += 9) {
        const out = foldOutcomes(job, { acc, seen: s.seen, counters }, list.slice(at, at + 9));
        acc = out.acc;
        counters = out.counters;
      }
      expect(acc).toEqual(reference.acc);
      expect(counters).toEqual(reference.counters);
    });
  });
});
