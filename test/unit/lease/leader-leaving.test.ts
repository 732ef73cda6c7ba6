/**
 * Make-before-break on a fake clock: a leader that is about to stop (`handOver`) says so in the
 * lease and leads on until a candidate of any rank asks, then yields to it at a safe point,
 * reserves the lease for it and releases; the requester, polling, takes it at once.
 */
import { describe, expect, it } from 'vitest';
import { sleep } from '../../../src/clock/clock';
import type { FakeClock } from '../../../src/clock/fake-clock';
import { LEAVING_POLL_MS } from '../../../src/lease/handover-timing';
import type { LeaderElector } from '../../../src/lease/leader-elector';
import type { Leadership } from '../../../src/lease/term';
import type { LeaderRank } from '../../../src/lease/leader-rank';
import { candidatesOnOneLease, expectTakenOnExpiry } from '../../support/lease-candidates';

const V1: LeaderRank = { version: '1.0.0', priority: 0 };
const POLL_MS = 100;
const TIMING = { checkMs: 1000, pollMs: POLL_MS, deferMs: 3000 };
const WAIT_MS = 5000;

/** Candidates on one lease and one fake clock, of version 1 unless `null` (no rank) is given. */
function setup() {
  const on = candidatesOnOneLease(TIMING);
  return { ...on, candidate: (identity: string, rank: LeaderRank | null = V1) => on.candidate(identity, rank ?? undefined) };
}

/** Steps of 700 ms, each ending in a checkpoint; `yieldSignal` is looked at only between steps. */
function steppingTask(clock: FakeClock, log: string[], name = 'a') {
  return async (leadership: Leadership): Promise<string> => {
    for (let step = 0; ; step++) {
      if (leadership.yieldSignal.aborted) return `yielded after ${step} steps`;
      if (leadership.signal.aborted) return `ended after ${step} steps`;
      leadership.heartbeat();
      log.push(`${name} start ${step}`);
      await sleep(clock, 700);
      log.push(`${name} checkpoint ${step}`);
    }
  };
}

/** Ticks `elector` once a second, as an instance's timer would, until it leads or `limitMs` passes. */
async function tickUntilLed(
  clock: FakeClock,
  elector: LeaderElector,
  task: (l: Leadership) => Promise<string>,
  limitMs = 60_000,
) {
  const until = clock.now() + limitMs;
  for (;;) {
    let settled = false;
    const attempt = elector.runIfLeader(task).finally(() => (settled = true));
    while (!settled && clock.now() < until) await clock.advance(50);
    const result = await attempt;
    if (result.led || clock.now() >= until) return result;
    await clock.advance(1000);
  }
}

describe('make-before-break handover, on a fake clock', () => {
  it('leads on until a successor asks, yields at a safe point, and the successor leads within a poll', async () => {
    const { clock, memory, candidate, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const log: string[] = [];
    const leading = a.runIfLeader(steppingTask(clock, log));
    await clock.advance(1000);
    // b ticks and finds a leading, not leaving: it does not ask (same rank).
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false });
    expect(of('b', 'handover-asked')).toEqual([]);

    const handing = a.handOver({ waitMs: WAIT_MS });
    await clock.advance(10);
    expect(await memory.read()).toMatchObject({ leased: true, holder: 'a', leaving: true });
    // a still leads while nobody has asked.
    await clock.advance(1500);
    expect(log.at(-1)).toMatch(/^a (start|checkpoint)/);
    expect(of('a', 'released')).toEqual([]);

    // b's next tick sees a leaving and asks; a yields at its next checkpoint.
    const succeeding = b.runIfLeader(async (l) => {
      log.push(`b leads at epoch ${l.epoch}`);
      return 'b';
    });
    await clock.advance(2000);
    expect(await handing).toMatchObject({ led: true, epoch: 1, to: 'b' });
    expect(await leading).toMatchObject({ led: true, value: expect.stringMatching(/^yielded after \d+ steps$/) });
    expect(await succeeding).toEqual({ led: true, value: 'b', epoch: 2 });
    // Every step a started reached its checkpoint before b led.
    const starts = log.filter((l) => l.startsWith('a start')).length;
    expect(log.filter((l) => l.startsWith('a checkpoint'))).toHaveLength(starts);
    expect(log.at(-1)).toBe('b leads at epoch 2');
    expect(of('a', 'released')).toEqual([expect.objectContaining({ to: 'b' })]);
    // The leaderless gap: from a's release to b's acquisition, at most one of b's polls, which
    // are faster while a leaving holder hands over.
    const gap = of('b', 'acquired')[0]!.at - of('a', 'released')[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(0);
    expect(gap).toBeLessThanOrEqual(LEAVING_POLL_MS);
    // The next holder's bump cleared the mark.
    expect((await memory.read()).leaving).toBeUndefined();
    expect((await memory.read()).changes?.at(-1)).toMatchObject({ holder: 'b', previous: 'a', reason: 'released' });
  });

  it('releases plainly when nobody asks before the bound, and anyone may then take the lease', async () => {
    const { clock, memory, candidate, of } = setup();
    const a = candidate('a');
    const c = candidate('c');
    const log: string[] = [];
    const leading = a.runIfLeader(steppingTask(clock, log));
    await clock.advance(1000);
    const handing = a.handOver({ waitMs: 3000 });
    let handed = false;
    void handing.then(() => (handed = true));
    await clock.advance(2900);
    expect(handed).toBe(false);
    expect(of('a', 'released')).toEqual([]);
    await clock.advance(1000);
    const result = await handing;
    expect(result).toMatchObject({ led: true, epoch: 1, to: undefined });
    expect(result.led && result.waitedMs).toBeGreaterThanOrEqual(3000);
    expect(await leading).toMatchObject({ led: true, value: expect.stringMatching(/^ended after/) });
    expect(of('a', 'released')).toEqual([expect.not.objectContaining({ to: expect.anything() })]);
    const record = await memory.read();
    expect(record).toMatchObject({ leased: false, freedAs: 'released', leaving: true });
    expect(record.reservedFor).toBeUndefined();
    // No reservation and no request: the next candidate takes the lease on its first look.
    expect(await c.runIfLeader(async () => 'c')).toEqual({ led: true, value: 'c', epoch: 2 });
    expect(of('c', 'deferred')).toEqual([]);
  });

  it('a candidate that does not lead hands nothing over', async () => {
    const { clock, candidate, calls } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(10);
    expect(await b.handOver({ waitMs: WAIT_MS })).toEqual({ led: false });
    expect(calls('b', 'markLeaving')).toBe(0);
    const handing = a.handOver({ waitMs: 1 });
    await clock.advance(1000);
    expect(await handing).toMatchObject({ led: true, to: undefined });
    await leading;
  });

  it('survives a leader that dies while it waits: the successor leads once the lease expires', async () => {
    const on = setup();
    const { clock, memory, candidate, stores } = on;
    const a = candidate('a');
    const b = candidate('b');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    void a.handOver({ waitMs: WAIT_MS });
    await clock.advance(10);
    expect((await memory.read()).leaving).toBe(true);
    // a's process stops answering: nothing it sends lands from now on.
    for (const op of ['renew', 'reserve', 'release', 'readRequest', 'markLeaving'] as const) {
      stores.get('a')!.inject(op, { kind: 'hang-forever' });
    }
    const result = await tickUntilLed(clock, b, async () => 'b');
    expect(result).toMatchObject({ led: true, epoch: 2 });
    await expectTakenOnExpiry(on, 'a', 'b');
    await clock.advance(30_000);
    void leading;
  });

  it('with two successors asking, exactly one leads and the other leaves the reserved lease alone', async () => {
    const { clock, memory, candidate, of, calls, stores } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const c = candidate('c');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    const handing = a.handOver({ waitMs: WAIT_MS });
    await clock.advance(10);
    // b's acquire is slow, so the lease stays free, reserved for b, while c looks at it.
    stores.get('b')!.inject('acquire', { kind: 'delay', ms: 400, clock });
    // Both tick at the same instant and see a leaving; b's request is written first, c's is refused.
    const bAsks = b.runIfLeader(steppingTask(clock, [], 'b'));
    const cAsks = c.runIfLeader(steppingTask(clock, [], 'c'));
    expect(await cAsks.then((r) => r)).toMatchObject({ led: false });
    expect(calls('b', 'writeRequest')).toBe(1);
    expect(of('b', 'handover-asked')).toHaveLength(1);
    expect(of('c', 'handover-asked')).toEqual([]);
    // a yields to b at its next checkpoint and releases, naming b.
    let released = false;
    while (!released) {
      await clock.advance(50);
      released = of('a', 'released').length > 0;
    }
    expect(await memory.read()).toMatchObject({ leased: false, reservedFor: { requester: 'b' } });
    // c's next look finds the lease free and reserved for b: it leaves it alone.
    expect(await c.runIfLeader(async () => 'c')).toMatchObject({ led: false });
    expect(of('c', 'deferred')).toEqual([expect.objectContaining({ to: 'b', reserved: true })]);
    await clock.advance(1000);
    expect(await handing).toMatchObject({ led: true, to: 'b' });
    expect(await memory.read()).toMatchObject({ leased: true, holder: 'b', epoch: 2 });
    // Ticking on, c never takes the lease from the new holder.
    for (let i = 0; i < 5; i++) {
      await clock.advance(1000);
      expect(await c.runIfLeader(async () => 'c')).toMatchObject({ led: false });
    }
    expect(of('c', 'acquired')).toEqual([]);
    const stopping = b.handOver({ waitMs: 1 });
    await clock.advance(1000);
    await stopping;
    expect(await bAsks).toMatchObject({ led: true, epoch: 2 });
    await leading;
  });

  it('a successor that stops while it waits withdraws its request, and the leader hands over to the next', async () => {
    const { clock, candidate, of, requests } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const c = candidate('c');
    // a's steps are long: b asks, then stops before a reaches its safe point.
    const leading = a.runIfLeader(async (leadership) => {
      while (!leadership.yieldSignal.aborted && !leadership.signal.aborted) {
        leadership.heartbeat();
        await sleep(clock, 3000);
      }
      return 'a done';
    });
    await clock.advance(1000);
    const handing = a.handOver({ waitMs: WAIT_MS });
    await clock.advance(10);
    const stopB = new AbortController();
    const bAsks = b.runIfLeader(async () => 'b', { signal: stopB.signal }).catch((err: unknown) => err);
    await clock.advance(10);
    expect((await requests.readRequest())?.requester).toBe('b');
    stopB.abort(new Error('b is shutting down'));
    await clock.advance(10);
    expect(await bAsks).toBeInstanceOf(Error);
    // Its request went with it, so it keeps nobody waiting for b.
    expect(await requests.readRequest()).toBeUndefined();
    // a, reading requests every 100 ms, never saw b's; c asks next, and a hands over to c.
    const cAsks = c.runIfLeader(async (l) => `c at ${l.epoch}`);
    await clock.advance(5000);
    expect(await handing).toMatchObject({ led: true, to: 'c' });
    expect(await cAsks).toEqual({ led: true, value: 'c at 2', epoch: 2 });
    expect(of('a', 'handover-requested')).toEqual([expect.objectContaining({ requester: 'c' })]);
    expect(of('b', 'acquired')).toEqual([]);
    expect(await leading).toMatchObject({ led: true, value: 'a done' });
  });

  it('a request late in the wait still gets the leader’s next safe point, not a cut mid-step', async () => {
    const { clock, candidate, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const log: string[] = [];
    // Steps of 2 s that stop when the term's signal ends them: a request 4.9 s into a 5 s wait
    // lands mid-step, and ending the term then would cut that step short.
    const leading = a.runIfLeader(async (leadership) => {
      for (let step = 0; ; step++) {
        if (leadership.yieldSignal.aborted) return `yielded after ${step} steps`;
        leadership.heartbeat();
        log.push(`start ${step}`);
        const cut = await sleep(clock, 2000, leadership.signal).then(
          () => false,
          () => true,
        );
        if (cut) return `cut in step ${step}`;
        log.push(`checkpoint ${step}`);
      }
    });
    await clock.advance(500);
    const handing = a.handOver({ waitMs: WAIT_MS });
    await clock.advance(4800);
    const succeeding = b.runIfLeader(async () => 'b');
    await clock.advance(6000);
    expect(await handing).toMatchObject({ led: true, to: 'b' });
    expect(await leading).toMatchObject({ led: true, value: expect.stringMatching(/^yielded after/) });
    expect(await succeeding).toMatchObject({ led: true, value: 'b', epoch: 2 });
    const starts = log.filter((l) => l.startsWith('start')).length;
    expect(log.filter((l) => l.startsWith('checkpoint'))).toHaveLength(starts);
    expect(of('a', 'released')).toEqual([expect.objectContaining({ to: 'b' })]);
  });

  it('a candidate without a rank cannot say it is leaving: its term just ends', async () => {
    const { clock, memory, candidate, calls } = setup();
    const a = candidate('a', null);
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    const handing = a.handOver({ waitMs: WAIT_MS });
    let handed = false;
    void handing.then(() => (handed = true));
    // Only the step in hand: the term ends at the next look at its signal.
    for (let i = 0; i < 8 && !handed; i++) await clock.advance(100);
    expect(handed).toBe(true);
    expect(await handing).toMatchObject({ led: true, to: undefined });
    expect(calls('a', 'markLeaving')).toBe(0);
    expect((await memory.read()).leased).toBe(false);
    await leading;
  });
});

/**
 * A shutdown inside the host's grace (`deadlineMs`): the Functions host kills a worker 5 s after
 * it asks it to stop, so whatever the successor and the task do, the lease is back before that.
 */
describe('make-before-break with a deadline, on a fake clock', () => {
  const BUDGET = { waitMs: 1000, deadlineMs: 3000 };

  /** Advances the clock in small steps until `promise` settles; the clock's time then. */
  async function settleOn<T>(clock: FakeClock, promise: Promise<T>, limitMs = 60_000): Promise<{ value: T; at: number }> {
    let done = false;
    void promise.then(
      () => (done = true),
      () => (done = true),
    );
    const until = clock.now() + limitMs;
    while (!done && clock.now() < until) await clock.advance(10);
    return { value: await promise, at: clock.now() };
  }

  it('a successor that asks in time gets the lease before the deadline', async () => {
    const { clock, candidate, of } = setup();
    const a = candidate('a');
    const b = candidate('b');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    const from = clock.now();
    const handing = a.handOver(BUDGET);
    await clock.advance(300);
    const succeeding = b.runIfLeader(async () => 'b');
    const { value, at } = await settleOn(clock, handing);
    expect(value).toMatchObject({ led: true, to: 'b', released: true });
    expect(at - from).toBeLessThanOrEqual(BUDGET.deadlineMs);
    await settleOn(clock, succeeding);
    expect(await succeeding).toMatchObject({ led: true, epoch: 2 });
    expect(of('a', 'task-abandoned')).toEqual([]);
    await leading;
  });

  it('nobody asks: the term ends after the wait and releases plainly, before the deadline', async () => {
    const { clock, memory, candidate } = setup();
    const a = candidate('a');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    const from = clock.now();
    const { value, at } = await settleOn(clock, a.handOver(BUDGET));
    expect(value).toMatchObject({ led: true, to: undefined, released: true });
    // The wait, then the step in hand (700 ms at most): well inside the deadline.
    expect(at - from).toBeGreaterThanOrEqual(BUDGET.waitMs);
    expect(at - from).toBeLessThanOrEqual(BUDGET.waitMs + 700 + 50);
    expect(await memory.read()).toMatchObject({ leased: false, freedAs: 'released' });
    await leading;
  });

  it('a task that ignores its end is abandoned, and the lease is back before the deadline', async () => {
    const { clock, memory, candidate, of } = setup();
    const a = candidate('a');
    const c = candidate('c');
    // A hook that never looks at its signals and never returns.
    const leading = a.runIfLeader(() => new Promise<string>(() => undefined)).catch((error: unknown) => error);
    await clock.advance(1000);
    const from = clock.now();
    const handing = a.handOver(BUDGET);
    await clock.advance(200);
    // c asks, and is yielded to at the deadline, not after the 10 s abandonment bound.
    const succeeding = c.runIfLeader(async (l) => l.epoch);
    const { value, at } = await settleOn(clock, handing);
    expect(value).toMatchObject({ led: true, to: 'c', released: true });
    expect(at - from).toBeLessThanOrEqual(BUDGET.deadlineMs);
    expect(of('a', 'task-abandoned')).toHaveLength(1);
    expect(await leading).toMatchObject({ name: 'TaskAbandonedError' });
    await settleOn(clock, succeeding);
    expect(await succeeding).toEqual({ led: true, value: 2, epoch: 2 });
    expect((await memory.read()).changes?.at(-1)).toMatchObject({ holder: 'c', previous: 'a', reason: 'released' });
  });

  it('the kill lands mid-release: the hook still ends by the deadline, says the lease was not released, and it expires', async () => {
    const on = setup();
    const { clock, candidate, stores } = on;
    const a = candidate('a');
    const b = candidate('b');
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(1000);
    // The release never answers (the process is killed while it is on the wire).
    stores.get('a')!.inject('release', { kind: 'hang-forever' });
    const from = clock.now();
    const { value, at } = await settleOn(clock, a.handOver(BUDGET));
    expect(value).toMatchObject({ led: true, to: undefined, released: false });
    expect(at - from).toBeLessThanOrEqual(BUDGET.deadlineMs);
    for (const op of ['renew', 'readRequest', 'markLeaving'] as const) stores.get('a')!.inject(op, { kind: 'hang-forever' });
    expect(await tickUntilLed(clock, b, async () => 'b')).toMatchObject({ led: true, epoch: 2 });
    await expectTakenOnExpiry(on, 'a', 'b');
    void leading;
  });
});
