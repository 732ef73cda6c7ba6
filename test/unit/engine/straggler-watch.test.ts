import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/clock/fake-clock';
import { RecentSamples } from '../../../src/engine/recent-samples';
import {
  HEDGE_MIN_SAMPLES,
  HEDGE_MULTIPLE,
  StragglerWatch,
  hedgeBound,
  hedgeGrant,
  type HedgePolicy,
} from '../../../src/engine/straggler-watch';

const POLICY: HedgePolicy = { floorMs: 5000, fallbackMs: 130_000 };

/** A watch on a fake clock, with `messages` sent at once and `samples` durations of `ms` reported. */
function watchOf(options: { messages: number; samples?: number; ms?: number; policy?: HedgePolicy }) {
  const clock = new FakeClock();
  const watch = new StragglerWatch(clock, options.policy ?? POLICY);
  for (let m = 0; m < options.messages; m++) watch.sent(m);
  for (let k = 0; k < (options.samples ?? 0); k++) watch.observe(options.ms ?? 100);
  return { clock, watch };
}

describe('hedgeBound and hedgeGrant: never past the bound', () => {
  it.each([
    // maxPercent, messages, bound
    [5, 1500, 75],
    [5, 1, 1],
    [5, 20, 1],
    [5, 21, 2],
    [7, 100, 7],
    [0.07, 10_000, 7],
    [100, 3, 3],
    [0, 1000, 0],
    [5, 0, 0],
  ])('maxPercent %d of %d messages: at most %d copies', (maxPercent, messages, bound) => {
    expect(hedgeBound(maxPercent, messages)).toBe(bound);
  });

  it.each([
    // maxPercent, messages, minCopies, bound
    [5, 100, 24, 24], // a small run can copy one stopped instance's whole batch
    [5, 10, 24, 10], // never more than one copy per message
    [5, 1500, 24, 75], // a large run: the percentage
    [5, 480, 24, 24],
    [5, 500, 24, 25],
    [0, 100, 24, 0], // off is off
    [5, 0, 24, 0],
  ])('maxPercent %d of %d messages with minCopies %d: at most %d copies', (maxPercent, messages, minCopies, bound) => {
    expect(hedgeBound(maxPercent, messages, minCopies)).toBe(bound);
  });

  it.each([
    // bound, sent so far, wanted, granted
    [75, 0, 3, 3],
    [75, 73, 5, 2],
    [75, 75, 1, 0],
    [2, 5, 1, 0], // a record past its bound (the job's bound was lowered) sends nothing more
    [0, 0, 10, 0],
    [10, 0, 0, 0],
  ])('bound %d with %d sent grants %d wanted as %d', (bound, sent, wanted, granted) => {
    expect(hedgeGrant(bound, sent, wanted)).toBe(granted);
  });
});

describe('StragglerWatch: when a message is due for a copy', () => {
  it.each([
    // fast items: the floor decides
    { name: 'fast items, just before the floor', ms: 100, wait: 4999, due: [] },
    { name: 'fast items, at the floor', ms: 100, wait: 5000, due: [3] },
    // slow items: the multiple of the percentile decides
    { name: 'slow items, past the floor but short of the multiple', ms: 2000, wait: 2000 * HEDGE_MULTIPLE - 1, due: [] },
    { name: 'slow items, at the multiple', ms: 2000, wait: 2000 * HEDGE_MULTIPLE, due: [3] },
  ])('$name: overtaken, then waited $wait ms → $due', async ({ ms, wait, due }) => {
    const { clock, watch } = watchOf({ messages: 6, samples: 10, ms });
    // Messages 0-2 and 4-5 are counted: 3 was overtaken (by 4 and 5) now.
    for (const m of [0, 1, 2, 4, 5]) watch.counted(m);
    await clock.advance(wait);
    expect(watch.due(10)).toEqual(due);
  });

  it.each([
    { name: 'no durations at all', samples: 0, threshold: 130_000 },
    { name: `${HEDGE_MIN_SAMPLES - 1} durations`, samples: HEDGE_MIN_SAMPLES - 1, threshold: 130_000 },
    { name: `${HEDGE_MIN_SAMPLES} durations`, samples: HEDGE_MIN_SAMPLES, threshold: 5000 },
  ])('with $name the wait is $threshold ms (the fallback until the percentile is trusted)', ({ samples, threshold }) => {
    const { watch } = watchOf({ messages: 1, samples, ms: 10 });
    expect(watch.thresholdMs()).toBe(threshold);
  });

  it('never before the floor, however fast the items, and whatever the floor is', async () => {
    for (const floorMs of [1000, 5000, 60_000]) {
      const { clock, watch } = watchOf({ messages: 2, samples: 50, ms: 1, policy: { floorMs, fallbackMs: 0 } });
      watch.counted(1);
      await clock.advance(floorMs - 1);
      expect(watch.due(1)).toEqual([]);
      await clock.advance(1);
      expect(watch.due(1)).toEqual([0]);
    }
  });

  it('a backlog is not a straggler: messages not overtaken wait from the run’s last progress', async () => {
    const { clock, watch } = watchOf({ messages: 100, samples: 10, ms: 100 });
    // The queue moves slowly but steadily: one message counted every 4 s, in order.
    for (let m = 0; m < 20; m++) {
      await clock.advance(4000);
      watch.counted(m);
      expect(watch.due(100)).toEqual([]);
    }
    // Then it goes quiet with 80 out: every one of them is due once the run made no progress for the threshold.
    await clock.advance(4999);
    expect(watch.due(100)).toEqual([]);
    await clock.advance(1);
    expect(watch.due(100)).toHaveLength(80);
  });

  it('returns at most the limit, longest waiting first, and nothing for a limit of 0', async () => {
    const { clock, watch } = watchOf({ messages: 5, samples: 10, ms: 100 });
    watch.counted(2); // 0 and 1 overtaken now
    await clock.advance(1000);
    watch.counted(4); // 3 overtaken 1 s later
    await clock.advance(10_000);
    expect(watch.due(0)).toEqual([]);
    expect(watch.due(2)).toEqual([0, 1]);
    expect(watch.due(10)).toEqual([0, 1, 3]);
  });

  it('a copy starts the wait again, twice as long for each copy already sent', async () => {
    const { clock, watch } = watchOf({ messages: 3, samples: 10, ms: 100 });
    watch.counted(1);
    watch.counted(2);
    await clock.advance(5000);
    expect(watch.due(5)).toEqual([0]);
    // Each copy is held too (or the message fails and waits on its retries): 10 s, then 20 s, then 40 s.
    for (const wait of [10_000, 20_000, 40_000]) {
      watch.sent(0);
      await clock.advance(wait - 1);
      expect(watch.due(5)).toEqual([]);
      await clock.advance(1);
      expect(watch.due(5)).toEqual([0]);
    }
  });

  it('the doubling is per message: another message overdue for the first time waits the plain threshold', async () => {
    const { clock, watch } = watchOf({ messages: 3, samples: 10, ms: 100 });
    watch.counted(2); // 0 and 1 overtaken
    await clock.advance(5000);
    watch.sent(0); // a copy of 0 only
    expect(watch.due(5)).toEqual([1]);
  });

  it('a late original and its copy both arriving: the message is counted once, the second is no progress', async () => {
    const { clock, watch } = watchOf({ messages: 4, samples: 10, ms: 100 });
    for (const m of [1, 2, 3]) watch.counted(m);
    await clock.advance(5000);
    expect(watch.due(5)).toEqual([0]);
    watch.sent(0);
    await clock.advance(300);
    watch.counted(0); // the copy's result
    expect(watch.outstanding).toBe(0);
    await clock.advance(60_000);
    watch.counted(0); // the original's result, late: a duplicate, nothing changes
    expect(watch.outstanding).toBe(0);
    expect(watch.due(5)).toEqual([]);
    // Nor does it count as progress for a message sent later.
    watch.sent(7);
    await clock.advance(5000);
    expect(watch.due(5)).toEqual([7]);
  });

  it('a message whose items went back to the queue waits from when their next try is due, not from the send', async () => {
    const { clock, watch } = watchOf({ messages: 3, samples: 10, ms: 100 }); // threshold: the 5 s floor
    watch.counted(1); // 0 overtaken
    await clock.advance(1000);
    watch.retrying(0, 8000); // its worker failed it and sent it back, due in 8 s
    await clock.advance(4000);
    watch.counted(2); // sent before the retry note: overtaking nothing
    watch.sent(3);
    watch.counted(3); // sent after the note and counted before the retry is due: not a reason to copy yet
    await clock.advance(4000 + 5000 - 1);
    expect(watch.due(5)).toEqual([]);
    await clock.advance(1);
    expect(watch.due(5)).toEqual([0]);
    // The retry was no copy: the first copy waits twice the threshold, not four times.
    watch.sent(0);
    await clock.advance(10_000);
    expect(watch.due(5)).toEqual([0]);
  });

  it('a retry note for a counted or unknown message changes nothing', async () => {
    const { clock, watch } = watchOf({ messages: 2, samples: 10, ms: 100 });
    watch.counted(0);
    watch.retrying(0, 60_000);
    watch.retrying(9, 60_000);
    expect(watch.tracked()).toEqual([1]);
    await clock.advance(5000);
    expect(watch.due(5)).toEqual([1]);
  });

  it('forgets a message another leader counted without taking that for progress', async () => {
    const { clock, watch } = watchOf({ messages: 2, samples: 10, ms: 100 });
    await clock.advance(4000);
    watch.forget(1);
    expect(watch.tracks(1)).toBe(false);
    expect(watch.tracked()).toEqual([0]);
    await clock.advance(1000);
    expect(watch.due(5)).toEqual([0]);
  });

  it('a leader that takes over adopts the uncounted messages as sent when it does', async () => {
    // The old leader's watch is gone with its term; the new one knows only the record.
    const clock = new FakeClock({ start: 1_000_000 });
    const adopted = new StragglerWatch(clock, POLICY);
    for (const m of [4, 9]) adopted.sent(m);
    // No durations in this term: it waits the fallback, from its own start.
    await clock.advance(POLICY.fallbackMs - 1);
    expect(adopted.due(5)).toEqual([]);
    await clock.advance(1);
    expect(adopted.due(5)).toEqual([4, 9]);
  });
});

describe('RecentSamples', () => {
  it.each([
    { values: [], p: 0.9, expected: undefined },
    { values: [7], p: 0.9, expected: 7 },
    { values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], p: 0.9, expected: 9 },
    { values: [10, 9, 8, 7, 6, 5, 4, 3, 2, 1], p: 0.5, expected: 5 },
    { values: [1, 2, 3, -1, Number.NaN, Number.POSITIVE_INFINITY], p: 1, expected: 3 },
  ])('the $p percentile of $values is $expected', ({ values, p, expected }) => {
    const samples = new RecentSamples();
    for (const v of values) samples.add(v);
    expect(samples.percentile(p)).toBe(expected);
  });

  it('keeps only the last samples, so the percentile follows the run', () => {
    const samples = new RecentSamples(4);
    for (const v of [100, 100, 100, 100, 1, 1, 1]) samples.add(v);
    expect(samples.count).toBe(4);
    expect(samples.percentile(0.5)).toBe(1);
    expect(samples.percentile(1)).toBe(100);
  });
});
