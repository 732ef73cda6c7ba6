/**
 * A resting lease on a fake clock: a leader with nothing to do before some time says so
 * (`Leadership.restUntil`) and returns; the elector writes the mark into the lease before it
 * releases, and candidates leave the free lease alone until then, at one read a tick, unless woken.
 */
import { describe, expect, it } from 'vitest';
import { sleep } from '../../../src/clock/clock';
import type { Leadership } from '../../../src/lease/term';
import { candidatesOnOneLease } from '../../support/lease-candidates';

const REST_MS = 30_000;

function setup() {
  const on = candidatesOnOneLease({});
  return { ...on, candidate: (identity: string) => on.candidate(identity, undefined) };
}

/** A task that says it rests until `at` (relative to the clock's date when it runs) and returns. */
const restFor =
  (ms: number | undefined, date: () => Date) =>
  async (leadership: Leadership): Promise<number> => {
    if (ms !== undefined) leadership.restUntil(new Date(date().getTime() + ms));
    return leadership.epoch;
  };

describe('a resting lease, on a fake clock', () => {
  it('is left alone until its time, read once a lease by each candidate, then led as usual', async () => {
    const { clock, memory, candidate, of, calls } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const until = new Date(clock.date().getTime() + REST_MS);
    expect(await a.runIfLeader(restFor(REST_MS, () => clock.date()))).toMatchObject({ led: true, epoch: 1 });
    expect(await memory.read()).toMatchObject({ leased: false, freedAs: 'released', restingUntil: until });
    expect(of('a', 'released')).toEqual([expect.objectContaining({ restingUntil: until })]);

    for (let tick = 0; tick < REST_MS / 1000 - 1; tick++) {
      await clock.advance(1000);
      expect(await b.runIfLeader(async () => 'b')).toEqual({ led: false, holder: undefined, restingUntil: until });
    }
    // A read tells a candidate until when to wait, and is trusted for one lease (15 s): a wake
    // elsewhere can end the rest early (see the stall after a wake, below).
    expect(calls('b', 'read')).toBe(2);
    expect(calls('b', 'acquire')).toBe(0);

    await clock.advance(1000);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, value: 'b', epoch: 2 });
    // The mark was for that rest only: the next holder's bump cleared it.
    expect((await memory.read()).restingUntil).toBeUndefined();
  });

  it("is led again within a lease when a woken term ends with its work open, not at the old rest's end", async () => {
    const { clock, candidate, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const c = candidate('c');
    const longRest = 10 * 60_000;
    await a.runIfLeader(restFor(longRest, () => clock.date()));
    // b's timer ticks and reads the rest; a's ticks too.
    await clock.advance(1000);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false, restingUntil: expect.any(Date) });
    expect(await a.runIfLeader(async () => 'a')).toMatchObject({ led: false, restingUntil: expect.any(Date) });
    // A trigger wakes c, whose term ends (its term's length) with the run still open: no rest.
    const woken = c.runIfLeader((leadership) => sleep(clock, 20_000, leadership.signal).then(() => 'term over'), { wake: true });
    await clock.advance(20_000);
    expect(await woken).toMatchObject({ led: true, value: 'term over' });
    const freedAt = clock.now();
    // c's instance is gone (scaled in); a's and b's timers tick every second.
    let led: string | undefined;
    while (!led && clock.now() - freedAt < longRest) {
      await clock.advance(1000);
      for (const [name, candidate] of [
        ['a', a],
        ['b', b],
      ] as const) {
        if (!led && (await candidate.runIfLeader(async () => name)).led) led = name;
      }
    }
    expect(led).toBeDefined();
    const acquiredAt = of(led!, 'acquired').at(-1)!.at;
    // Within one lease of the woken term's end (the longest a read of the rest is trusted).
    expect(acquiredAt - freedAt).toBeLessThanOrEqual(15_000 + 1000);
  });

  it('is led at once by a candidate that is woken', async () => {
    const { clock, candidate } = setup();
    const a = candidate('a');
    const b = candidate('b');
    await a.runIfLeader(restFor(REST_MS, () => clock.date()));
    await clock.advance(1000);
    expect(await b.runIfLeader(async () => 'b', { wake: true })).toMatchObject({ led: true, value: 'b' });
  });

  it.each([
    { case: 'the task takes it back', ms: REST_MS, takeBack: true },
    { case: 'its time has passed when the task returns', ms: -1, takeBack: false },
    { case: 'the task never said it', ms: undefined, takeBack: false },
  ])('is a plain release when $case', async ({ ms, takeBack }) => {
    const { clock, memory, candidate, of, calls } = setup();
    const a = candidate('a');
    const b = candidate('b');
    await a.runIfLeader(async (leadership) => {
      await restFor(ms, () => clock.date())(leadership);
      if (takeBack) leadership.restUntil(undefined);
    });
    expect((await memory.read()).restingUntil).toBeUndefined();
    expect(calls('a', 'markResting')).toBe(0);
    expect(of('a', 'released')[0]).not.toHaveProperty('restingUntil');
    await clock.advance(1000);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true });
  });

  it('is a plain release when the mark cannot be written: candidates lead at their next tick', async () => {
    const { clock, memory, stores, candidate, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    stores.get('a')!.inject('markResting', { kind: 'fail', error: new Error('503 ServerBusy') });
    expect(await a.runIfLeader(restFor(REST_MS, () => clock.date()))).toMatchObject({ led: true });
    expect(await memory.read()).toMatchObject({ leased: false, freedAs: 'released' });
    expect((await memory.read()).restingUntil).toBeUndefined();
    expect(of('a', 'released')).toEqual([expect.not.objectContaining({ restingUntil: expect.anything() })]);
    await clock.advance(1000);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true });
  });

  it('holds when the release fails: the lease expires, and still rests until its time', async () => {
    const { clock, memory, stores, candidate } = setup();
    const a = candidate('a');
    const b = candidate('b');
    stores.get('a')!.inject('release', { kind: 'fail', error: new Error('connection reset') });
    await a.runIfLeader(restFor(REST_MS, () => clock.date()));
    expect((await memory.read()).leased).toBe(true);
    await clock.advance(16_000);
    expect(await memory.read()).toMatchObject({ leased: false, freedAs: 'expired' });
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false, restingUntil: expect.any(Date) });
    await clock.advance(REST_MS - 16_000);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true });
  });

  it('is led at once by a candidate that outranks its last holder: a newer version may run jobs it did not know', async () => {
    const on = candidatesOnOneLease({});
    const { clock, memory } = on;
    const v1 = on.candidate('a', { version: '1.0.0', priority: 0 });
    const alsoV1 = on.candidate('b', { version: '1.0.0', priority: 0 });
    const v2 = on.candidate('c', { version: '2.0.0', priority: 0 });
    await v1.runIfLeader(restFor(REST_MS, () => clock.date()));
    await clock.advance(1000);
    expect(await alsoV1.runIfLeader(async () => 'b')).toMatchObject({ led: false, restingUntil: expect.any(Date) });
    expect(await v2.runIfLeader(restFor(REST_MS, () => clock.date()))).toMatchObject({ led: true });
    // Its own rest is kept by the older version alike.
    expect((await memory.read()).holderRank).toEqual({ version: '2.0.0', priority: 0 });
    await clock.advance(1000);
    expect(await alsoV1.runIfLeader(async () => 'b')).toMatchObject({ led: false, restingUntil: expect.any(Date) });
  });

  it('is not written by a term that hands over: its successor leads at once', async () => {
    const on = candidatesOnOneLease({ checkMs: 1000, pollMs: 100, deferMs: 3000 });
    const { clock, memory } = on;
    const v1 = on.candidate('a', { version: '1.0.0', priority: 0 });
    const v2 = on.candidate('b', { version: '2.0.0', priority: 0 });
    const leading = v1.runIfLeader(async (leadership) => {
      leadership.restUntil(new Date(clock.date().getTime() + REST_MS));
      // Steps on the test's clock until asked to yield, ending the wait in hand as soon as it is.
      while (!leadership.yieldSignal.aborted) {
        leadership.heartbeat();
        await sleep(clock, 100, leadership.yieldSignal).catch(() => undefined);
      }
    });
    await clock.advance(1000);
    const asking = v2.runIfLeader(async () => 'b');
    for (let i = 0; i < 100 && !(await memory.read()).reservedFor; i++) await clock.advance(100);
    await leading;
    expect((await memory.read()).restingUntil).toBeUndefined();
    for (let i = 0; i < 20; i++) await clock.advance(100);
    expect(await asking).toMatchObject({ led: true, value: 'b' });
  });
});
