import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Clock } from '../../../src/clock/clock';
import { FakeClock } from '../../../src/clock/fake-clock';
import { MONOTONIC_DRIFT_ALLOWANCE, StorageTimeClock } from '../../../src/clock/storage-time-clock';

/**
 * A machine: a monotonic clock (a FakeClock's `now()`) and a wall clock that can be set anywhere,
 * as a skewed or NTP-stepped one is. Storage's true time is `storageAt(now())`.
 */
function machine(options: { wallSkewMs: number; storageOrigin?: number }) {
  const mono = new FakeClock({ start: 1_000 });
  const storageOrigin = options.storageOrigin ?? Date.parse('2026-03-01T12:00:00.000Z');
  let wallSkewMs = options.wallSkewMs;
  const storageAt = (monotonicMs: number): number => storageOrigin + monotonicMs;
  const local: Clock = {
    now: () => mono.now(),
    date: () => new Date(storageAt(mono.now()) + wallSkewMs),
    setTimeout: (callback, ms) => mono.setTimeout(callback, ms),
    clearTimeout: (handle) => mono.clearTimeout(handle),
  };
  return {
    mono,
    local,
    storageAt,
    stepWall: (ms: number) => {
      wallSkewMs += ms;
    },
    /**
     * One request: sent now, stamped by storage `stampAfterMs` later (its `Date` header drops the
     * milliseconds, as HTTP dates do), answered `roundTripMs` after sending.
     */
    answer(clock: StorageTimeClock, roundTripMs: number, stampAfterMs: number): void {
      const stampedAt = storageAt(mono.now() + stampAfterMs);
      mono.jump(roundTripMs);
      clock.observe(new Date(Math.floor(stampedAt / 1000) * 1000).toUTCString(), mono.now());
    },
  };
}

describe('StorageTimeClock', () => {
  it('reads the local wall clock until storage has answered', () => {
    const m = machine({ wallSkewMs: 120_000 });
    const clock = new StorageTimeClock(m.local);
    expect(clock.synced).toBe(false);
    expect(clock.date().getTime()).toBe(m.local.date().getTime());
    clock.observe(undefined, m.mono.now());
    clock.observe('not a date', m.mono.now());
    expect(clock.synced).toBe(false);
  });

  it('is never ahead of storage time, and behind it by at most 1 s plus the round trip', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -86_400_000, max: 86_400_000 }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 0, max: 5_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 3_600_000 }),
        (wallSkewMs, phaseMs, roundTripMs, stampAt, laterMs) => {
          const m = machine({ wallSkewMs, storageOrigin: Date.parse('2026-03-01T12:00:00.000Z') + phaseMs });
          const clock = new StorageTimeClock(m.local);
          m.answer(clock, roundTripMs, Math.round(stampAt * roundTripMs));
          m.mono.jump(laterMs);
          const truth = m.storageAt(m.mono.now());
          const estimate = clock.date().getTime();
          expect(estimate).toBeLessThanOrEqual(truth);
          expect(truth - estimate).toBeLessThanOrEqual(1000 + roundTripMs + laterMs * MONOTONIC_DRIFT_ALLOWANCE + 1e-6);
        },
      ),
      { numRuns: 1000, seed: 13 },
    );
  });

  it('tightens with answers at different sub-second phases and never goes backwards', () => {
    const m = machine({ wallSkewMs: -120_000 });
    const clock = new StorageTimeClock(m.local);
    let previous = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < 20; i++) {
      m.answer(clock, 10, 5);
      m.mono.jump(i % 2 === 0 ? 2_130 : 1_870);
      const estimate = clock.date().getTime();
      expect(estimate).toBeGreaterThanOrEqual(previous);
      expect(estimate).toBeLessThanOrEqual(m.storageAt(m.mono.now()));
      previous = estimate;
    }
    // Some answer was stamped just after its second began: the lag is that answer's, well under 1 s.
    expect(m.storageAt(m.mono.now()) - clock.date().getTime()).toBeLessThan(200);
    // A stale answer (a cached header) lowers nothing.
    const before = clock.date().getTime();
    clock.observe(new Date(m.storageAt(m.mono.now()) - 60_000).toUTCString(), m.mono.now());
    expect(clock.date().getTime()).toBe(before);
  });

  it('ignores the wall clock once synced: a skewed or stepped wall clock changes nothing', () => {
    const fast = machine({ wallSkewMs: 120_000 });
    const slow = machine({ wallSkewMs: -120_000 });
    const clocks = [fast, slow].map((m) => {
      const clock = new StorageTimeClock(m.local);
      m.answer(clock, 40, 20);
      return clock;
    });
    expect(clocks[0]!.date().getTime()).toBe(clocks[1]!.date().getTime());
    const before = clocks[0]!.date().getTime();
    fast.stepWall(3_600_000);
    expect(clocks[0]!.date().getTime()).toBe(before);
    fast.stepWall(-7_200_000);
    expect(clocks[0]!.date().getTime()).toBe(before);
  });

  it('lags, never leads, after a pause its monotonic clock did not count, until the next answer', () => {
    const m = machine({ wallSkewMs: 0 });
    const clock = new StorageTimeClock(m.local);
    m.answer(clock, 20, 10);
    // A suspended VM: storage moves on 30 s, the monotonic clock does not.
    const pausedFor = 30_000;
    const truth = (): number => m.storageAt(m.mono.now()) + pausedFor;
    expect(truth() - clock.date().getTime()).toBeGreaterThanOrEqual(pausedFor);
    clock.observe(new Date(Math.floor(truth() / 1000) * 1000).toUTCString(), m.mono.now());
    expect(clock.date().getTime()).toBeLessThanOrEqual(truth());
    expect(truth() - clock.date().getTime()).toBeLessThan(1000);
  });

  it('keeps time local: now() and timers are the local monotonic clock', async () => {
    const m = machine({ wallSkewMs: 120_000 });
    const clock = new StorageTimeClock(m.local);
    m.answer(clock, 20, 10);
    expect(clock.now()).toBe(m.mono.now());
    let fired = false;
    clock.setTimeout(() => (fired = true), 50);
    await m.mono.advance(50);
    expect(fired).toBe(true);
  });

  it('reports a large skew once, and again only when it moves by 5 s or more', () => {
    const m = machine({ wallSkewMs: 120_000 });
    const reports: number[] = [];
    const clock = new StorageTimeClock(m.local, { onSkewChange: (skewMs) => reports.push(skewMs) });
    for (let i = 0; i < 5; i++) {
      m.answer(clock, 20, 10);
      m.mono.jump(1_000);
    }
    expect(reports).toHaveLength(1);
    expect(reports[0]).toBeGreaterThanOrEqual(120_000);
    expect(reports[0]).toBeLessThan(121_100);
    m.stepWall(-2_000);
    m.answer(clock, 20, 10);
    expect(reports).toHaveLength(1);
    m.stepWall(-118_000);
    m.answer(clock, 20, 10);
    expect(reports).toHaveLength(2);
    expect(Math.abs(reports[1]!)).toBeLessThan(1_100);
  });
});
