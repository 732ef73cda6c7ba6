/**
 * Crash takeover on a fake clock (`breakAfterMs`): the holder beats every quarter of it; a
 * candidate that sees the lease record unchanged for that long breaks the lease at the version
 * it saw and leads with the next epoch, instead of waiting out the lease.
 */
import { describe, expect, it } from 'vitest';
import { sleep } from '../../../src/clock/clock';
import type { FakeClock } from '../../../src/clock/fake-clock';
import type { LeaderElector } from '../../../src/lease/leader-elector';
import type { Leadership } from '../../../src/lease/term';
import { candidatesOnOneLease, type SeenEvent } from '../../support/lease-candidates';

const BREAK_AFTER_MS = 3000;
const TICK_MS = 1000;

function setup(breakAfterMs: number | null = BREAK_AFTER_MS) {
  const on = candidatesOnOneLease({});
  const candidate = (identity: string) => on.candidate(identity, undefined, breakAfterMs === null ? {} : { breakAfterMs });
  /** Nothing `identity` sends lands from now on: a dead process, or a paused one. */
  const silence = (identity: string) => {
    for (const op of ['renew', 'markAlive', 'raiseEpoch', 'release', 'read'] as const) {
      on.stores.get(identity)!.inject(op, { kind: 'hang' });
    }
  };
  const wake = (identity: string) => {
    for (const op of ['renew', 'markAlive', 'raiseEpoch', 'release', 'read'] as const) on.stores.get(identity)!.heal(op);
  };
  /** A candidate with crash takeover off: it never beats, and never breaks. */
  const withoutTakeover = (identity: string) => on.candidate(identity, undefined, {});
  return { ...on, candidate, withoutTakeover, silence, wake };
}

/** A task that leads until its term ends, heartbeating, and says how it ended. */
function leadOn(clock: FakeClock) {
  return async (leadership: Leadership): Promise<string> => {
    while (!leadership.signal.aborted) {
      leadership.heartbeat();
      await sleep(clock, 200);
    }
    return 'ended';
  };
}

/** Ticks `elector` every second, as a follower's timer would, until it leads or `limitMs` passes. */
async function tickUntilLed(clock: FakeClock, elector: LeaderElector, limitMs = 60_000) {
  const until = clock.now() + limitMs;
  for (;;) {
    let settled = false;
    const attempt = elector.runIfLeader(async (l) => l.epoch).finally(() => (settled = true));
    while (!settled && clock.now() < until) await clock.advance(50);
    const result = await attempt;
    if (result.led || clock.now() >= until) return result;
    await clock.advance(TICK_MS);
  }
}

describe('crash takeover, on a fake clock', () => {
  it('a dead leader is replaced within breakAfterMs and two ticks, not the 15 s lease', async () => {
    const { clock, memory, candidate, silence, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    void a.runIfLeader(leadOn(clock));
    await clock.advance(5000);
    // b ticked meanwhile and found a beating: no break.
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false, holder: { identity: 'a' } });
    const diedAt = clock.now();
    silence('a');
    expect(await tickUntilLed(clock, b)).toMatchObject({ led: true, epoch: 2 });
    const takeoverMs = of('b', 'acquired')[0]!.at - diedAt;
    expect(takeoverMs).toBeLessThanOrEqual(BREAK_AFTER_MS + 2 * TICK_MS);
    expect(takeoverMs).toBeLessThan(15_000 - 5000);
    expect(of('b', 'broke')).toEqual([expect.objectContaining({ holder: 'a', epoch: 1 })]);
    const broke = of('b', 'broke')[0] as Extract<SeenEvent, { type: 'broke' }>;
    expect(broke.silentMs).toBeGreaterThanOrEqual(BREAK_AFTER_MS);
    // The history says the lease was broken, and the acquisition names whom it was taken from.
    expect((await memory.read()).changes?.at(-1)).toMatchObject({ holder: 'b', previous: 'a', reason: 'broken' });
    expect(of('b', 'acquired')[0]).toMatchObject({ after: { holder: 'a', freedAs: 'broken' } });
  });

  it('a leader whose beats land 2 s late (slow storage), inside breakAfterMs, is never replaced', async () => {
    const { clock, candidate, stores, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    void a.runIfLeader(leadOn(clock));
    await clock.advance(1000);
    // Every beat takes storage 2 s to apply.
    stores.get('a')!.inject('markAlive', { kind: 'delay', ms: 2000, clock });
    for (let t = 0; t < 60; t++) {
      await clock.advance(TICK_MS);
      expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false });
    }
    expect(of('b', 'broke')).toEqual([]);
    expect(of('a', 'lost')).toEqual([]);
  });

  it('a paused leader that wakes after it was replaced loses within a beat or two, and can write nothing', async () => {
    const { clock, memory, candidate, silence, wake, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    let aLeadership: Leadership | undefined;
    const aLeading = a.runIfLeader(async (leadership) => {
      aLeadership = leadership;
      return leadOn(clock)(leadership);
    });
    await clock.advance(2000);
    silence('a');
    expect(await tickUntilLed(clock, b, 30_000)).toMatchObject({ led: true, epoch: 2 });
    // b leads on; a wakes up, still believing it leads.
    const bLeading = b.runIfLeader(leadOn(clock));
    await clock.advance(100);
    expect(aLeadership!.signal.aborted).toBe(false);
    wake('a');
    // Its next beat is refused (the lease was broken): a loses within a beat or two (the one
    // under way when it was paused may take its whole bound), long before its next renewal.
    const wokeAt = clock.now();
    for (let i = 0; i < 200 && !aLeadership!.signal.aborted; i++) await clock.advance(50);
    expect(aLeadership!.signal.aborted).toBe(true);
    expect(clock.now() - wokeAt).toBeLessThanOrEqual(BREAK_AFTER_MS + BREAK_AFTER_MS / 4 + 100);
    // Broken, or already someone else's (storage says so as a conflict).
    expect(of('a', 'lost')).toEqual([expect.objectContaining({ reason: expect.stringMatching(/^(broken|conflict)$/) })]);
    let ended: unknown;
    void aLeading.catch((error: unknown) => (ended = error));
    for (let i = 0; i < 400 && ended === undefined; i++) await clock.advance(50);
    expect(ended).toMatchObject({ code: 'LeaseLost' });
    // It can neither raise its epoch nor free b's lease.
    await expect(aLeadership!.raiseEpoch(5)).rejects.toBeDefined();
    const bTerm = of('b', 'acquired').at(-1) as Extract<SeenEvent, { type: 'acquired' }>;
    expect(await memory.read()).toMatchObject({ leased: true, holder: 'b', epoch: bTerm.epoch });
    void bLeading;
  });

  it('of two candidates that saw the same stopped holder, exactly one leads', async () => {
    const { clock, candidate, silence, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const c = candidate('c');
    void a.runIfLeader(leadOn(clock));
    await clock.advance(1000);
    silence('a');
    const results: { b?: unknown; c?: unknown } = {};
    for (let t = 0; t < 10; t++) {
      // Both tick at the same instant, as timers on one grid do.
      const [rb, rc] = await Promise.all([
        b.runIfLeader(async (l) => l.epoch),
        c.runIfLeader(async (l) => l.epoch),
        clock.advance(200),
      ]);
      if ((rb as { led?: boolean }).led) results.b = rb;
      if ((rc as { led?: boolean }).led) results.c = rc;
      if (results.b || results.c) break;
      await clock.advance(TICK_MS - 200);
    }
    const leaders = Object.values(results);
    expect(leaders).toHaveLength(1);
    expect(leaders[0]).toMatchObject({ led: true, epoch: 2 });
    expect([...of('b', 'acquired'), ...of('c', 'acquired')]).toHaveLength(1);
  });

  it('a first read after a long silence breaks at once: storage says how long the record went unwritten', async () => {
    const { clock, candidate, silence, of, calls } = setup();
    const a = candidate('a');
    void a.runIfLeader(leadOn(clock));
    await clock.advance(2000);
    silence('a');
    await clock.advance(BREAK_AFTER_MS + 1000);
    // A candidate that never read the lease before: its one read is enough.
    const b = candidate('b');
    expect(await b.runIfLeader(async (l) => l.epoch)).toMatchObject({ led: true, epoch: 2 });
    expect(calls('b', 'read')).toBe(1);
    expect(of('b', 'broke')).toHaveLength(1);
  });

  it('a holder that does not beat (another version, or takeover off there) is left to its lease', async () => {
    const on = setup();
    const a = on.candidate('a');
    const old = on.withoutTakeover('old');
    void old.runIfLeader(leadOn(on.clock));
    await on.clock.advance(1000);
    on.silence('old');
    const diedAt = on.clock.now();
    expect(await tickUntilLed(on.clock, a)).toMatchObject({ led: true, epoch: 2 });
    expect(on.of('a', 'acquired')[0]!.at - diedAt).toBeGreaterThanOrEqual(15_000 - 1000 - TICK_MS);
    expect(on.of('a', 'broke')).toEqual([]);
  });

  it('off by default: candidates wait out the lease, and a holder makes no beats', async () => {
    const { clock, candidate, silence, of, calls } = setup(null);
    const a = candidate('a');
    const b = candidate('b');
    void a.runIfLeader(leadOn(clock));
    await clock.advance(5000);
    expect(calls('a', 'markAlive')).toBe(0);
    silence('a');
    const diedAt = clock.now();
    expect(await tickUntilLed(clock, b)).toMatchObject({ led: true, epoch: 2 });
    expect(of('b', 'acquired')[0]!.at - diedAt).toBeGreaterThanOrEqual(15_000 - 5000 - TICK_MS);
    expect(of('b', 'broke')).toEqual([]);
  });
});
