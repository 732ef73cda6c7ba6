import { describe, expect, it } from 'vitest';
import { sleep } from '../../../src/clock/clock';
import type { FakeClock } from '../../../src/clock/fake-clock';
import type { LeaderElector } from '../../../src/lease/leader-elector';
import type { Leadership } from '../../../src/lease/term';
import type { LeaderRank } from '../../../src/lease/leader-rank';
import { candidatesOnOneLease, expectTakenOnExpiry } from '../../support/lease-candidates';

const V1: LeaderRank = { version: '1.0.0', priority: 0 };
const V2: LeaderRank = { version: '2.0.0', priority: 0 };
const V2_PREFERRED: LeaderRank = { version: '2.0.0', priority: 5 };
const TIMING = { checkMs: 1000, pollMs: 100, deferMs: 3000 };
// With checkMs 1000 the default request ttl is 3 × 1000 + 2000.
const TTL_MS = 5000;

/** Candidates on one in-memory lease and one fake clock; each has its own scripted view of the store. */
const setup = () => candidatesOnOneLease(TIMING);

/**
 * One tick of `elector` with a task that returns at once, moving the clock while it runs: a tick
 * that asks for the lease waits for it on the clock.
 */
async function tick(clock: FakeClock, elector: LeaderElector, value: string) {
  let settled = false;
  const result = elector.runIfLeader(async () => value).finally(() => (settled = true));
  for (let waited = 0; !settled && waited < 60_000; waited += 100) await clock.advance(100);
  return result;
}

/** Ticks `elector` once a second, as an instance's timer would, until it leads. */
async function tickUntilLed(clock: FakeClock, elector: LeaderElector, value: string) {
  let result = await tick(clock, elector, value);
  while (!result.led) {
    await clock.advance(1000);
    result = await tick(clock, elector, value);
  }
  return result;
}

/** A task that heartbeats and never yields, until `until()` holds or its term ends. */
function busyTask(clock: FakeClock, until: () => boolean = () => false) {
  return async (leadership: Leadership): Promise<string> => {
    while (!until() && !leadership.signal.aborted) {
      leadership.heartbeat();
      await sleep(clock, 500).catch(() => undefined);
    }
    return 'done';
  };
}

/**
 * A task of steps that each take 700 ms and end with a checkpoint. It looks at `yieldSignal`
 * only between steps, as the coordinator does, so a handover can never fall mid-step.
 */
function steppingTask(clock: FakeClock, log: string[]) {
  return async (leadership: Leadership): Promise<string> => {
    for (let step = 0; ; step++) {
      if (leadership.yieldSignal.aborted) return `yielded after ${step} steps`;
      if (leadership.signal.aborted) return 'ended';
      leadership.heartbeat();
      log.push(`start ${step}`);
      await sleep(clock, 700);
      log.push(`checkpoint ${step}`);
    }
  };
}

describe('handover between ranked candidates, on a fake clock', () => {
  it('honours a higher-ranked request at the next safe point, then the requester leads at a higher epoch', async () => {
    const { clock, memory, candidate, of, stores, requests } = setup();
    const a = candidate('a', V1);
    const b = candidate('b', V2);
    const log: string[] = [];
    const leading = a.runIfLeader(steppingTask(clock, log));
    await clock.advance(350);
    const asking = b.runIfLeader(async (l) => {
      log.push(`b leads at epoch ${l.epoch}`);
      return 'b led';
    });
    await clock.advance(5000);

    const aResult = await leading;
    expect(aResult).toMatchObject({ led: true, epoch: 1 });
    expect(aResult.led && aResult.value).toMatch(/^yielded after \d+ steps$/);
    expect(await asking).toEqual({ led: true, value: 'b led', epoch: 2 });
    // Every step that started reached its checkpoint, and b led only after a's last one.
    const starts = log.filter((l) => l.startsWith('start')).length;
    expect(log.filter((l) => l.startsWith('checkpoint'))).toHaveLength(starts);
    expect(log.at(-1)).toBe('b leads at epoch 2');
    expect(log.at(-2)).toBe(`checkpoint ${starts - 1}`);

    const asked = of('b', 'handover-asked')[0];
    const requested = of('a', 'handover-requested')[0];
    const released = of('a', 'released')[0];
    const acquired = of('b', 'acquired')[0];
    expect(asked).toMatchObject({ holder: 'a', epoch: 1 });
    expect(requested).toMatchObject({ requester: 'b', epoch: 1 });
    expect(released).toMatchObject({ to: 'b', epoch: 1 });
    expect(acquired).toMatchObject({ epoch: 2 });
    // Seen at a's next check (every second), honoured at the end of the step then running
    // (≤ 700 ms), taken by b's next read (every 100 ms).
    expect(requested!.at - asked!.at).toBeLessThanOrEqual(TIMING.checkMs);
    expect(released!.at - requested!.at).toBeLessThanOrEqual(700);
    expect(acquired!.at - released!.at).toBeLessThanOrEqual(TIMING.pollMs);
    // a named b in the lease before it released; b's bump cleared that and its request.
    const aCalls = stores.get('a')!.calls;
    expect(aCalls.lastIndexOf('reserve')).toBe(aCalls.lastIndexOf('release') - 1);
    const record = await memory.read();
    expect(record).toMatchObject({ holder: 'b', holderRank: V2, epoch: 2 });
    expect(record.reservedFor).toBeUndefined();
    expect(record.changes?.at(-1)).toMatchObject({ holder: 'b', previous: 'a', reason: 'released' });
    expect(await requests.readRequest()).toBeUndefined();
  });

  it.each([
    { name: 'a lower version', holder: V2, candidate: V1 },
    { name: 'a lower priority', holder: V2_PREFERRED, candidate: V2 },
    { name: 'an equal rank', holder: V2, candidate: V2 },
    { name: 'no rank, against a ranked holder', holder: V1, candidate: undefined },
    { name: 'a higher rank, against a holder that gave none', holder: undefined, candidate: V2 },
  ])('never asks with $name: the holder keeps leading', async ({ holder, candidate: rank }) => {
    const { clock, requests, candidate, of, calls } = setup();
    const a = candidate('a', holder);
    const b = candidate('b', rank);
    let stop = false;
    const leading = a.runIfLeader(busyTask(clock, () => stop));
    await clock.advance(10);
    for (let tick = 0; tick < 10; tick++) {
      expect(await b.runIfLeader(async () => 'b')).toEqual({ led: false, holder: expect.objectContaining({ identity: 'a' }) });
      await clock.advance(1000);
    }
    expect(calls('b', 'writeRequest')).toBe(0);
    expect(calls('b', 'readRequest')).toBe(0);
    expect(of('b', 'handover-asked')).toEqual([]);
    expect(of('a', 'handover-requested')).toEqual([]);
    expect(await requests.readRequest()).toBeUndefined();
    stop = true;
    await clock.advance(1000);
    expect(await leading).toMatchObject({ led: true, value: 'done', epoch: 1 });
    // Ties elect as before: the other takes the released lease at once, with no waiting.
    if (holder && rank && holder === rank) {
      expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, epoch: 2 });
    }
  });

  it('lets a request lapse: a holder never yields to one older than its ttl', async () => {
    const { clock, memory, candidate, of, requests } = setup();
    // b asked, then went away before anyone read its request.
    await requests.writeRequest({ requester: 'b', rank: V2, ttlMs: TTL_MS });
    await clock.advance(TTL_MS);
    const a = candidate('a', V1);
    let stop = false;
    const leading = a.runIfLeader(busyTask(clock, () => stop));
    await clock.advance(20_000);
    expect(of('a', 'handover-requested')).toEqual([]);
    expect((await memory.read()).leased).toBe(true);
    stop = true;
    await clock.advance(1000);
    expect(await leading).toMatchObject({ led: true, value: 'done' });
    expect(of('a', 'released')[0]).not.toHaveProperty('to');
  });

  it('leaves a lease reserved for a requester that went away only for deferMs', async () => {
    const { clock, memory, candidate, of, requests } = setup();
    const a = candidate('a', V1);
    const d = candidate('d', V1);
    const leading = a.runIfLeader(steppingTask(clock, []));
    while (!(await memory.read()).leased) await clock.advance(10);
    // b asks once a leads, then goes away: its request stands when a reads it, but nobody will take the lease for it.
    await requests.writeRequest({ requester: 'b', rank: V2, ttlMs: TTL_MS });
    await clock.advance(2000);
    expect(await leading).toMatchObject({ led: true });
    expect(of('a', 'released')[0]).toMatchObject({ to: 'b' });
    const releasedAt = of('a', 'released')[0]!.at;
    // d ticks every second: it leaves the lease to b for deferMs after it first saw it, then takes it.
    let result = await tick(clock, d, 'd');
    while (!result.led) {
      expect((await memory.read()).leased).toBe(false);
      await clock.advance(1000);
      result = await tick(clock, d, 'd');
    }
    const tookAt = of('d', 'acquired')[0]!.at;
    expect(tookAt - releasedAt).toBeGreaterThanOrEqual(TIMING.deferMs);
    expect(tookAt - releasedAt).toBeLessThanOrEqual(TIMING.deferMs + 1000);
    expect(of('d', 'deferred')).toEqual([expect.objectContaining({ to: 'b', reserved: true })]);
    expect(result).toMatchObject({ led: true, epoch: 2 });
  });

  // The holder sees a request at one check and reaches its safe point up to a step later; what
  // stands then is what it hands to, not what it saw first.
  it.each([
    { name: 'withdrawn: it releases plainly and an equal rank leads at once', then: undefined },
    { name: 'replaced by a higher rank: it reserves for that one', then: V2_PREFERRED },
  ])('a request that is $name', async ({ then }) => {
    const { clock, memory, candidate, of, requests } = setup();
    const a = candidate('a', V1);
    const d = candidate('d', V1);
    const leading = a.runIfLeader(steppingTask(clock, []));
    while (!(await memory.read()).leased) await clock.advance(10);
    const first = await requests.writeRequest({ requester: 'b', rank: V2, ttlMs: TTL_MS });
    // Between the check that saw b's request and the end of the step running then.
    while (of('a', 'handover-requested').length === 0) await clock.advance(10);
    expect(of('a', 'released')).toEqual([]);
    await requests.deleteRequest(first);
    if (then) await requests.writeRequest({ requester: 'c', rank: then, ttlMs: TTL_MS });
    await clock.advance(1000);
    expect(await leading).toMatchObject({ led: true });
    expect(of('a', 'handover-requested')).toEqual([expect.objectContaining({ requester: 'b' })]);
    if (then) {
      expect(of('a', 'released')[0]).toMatchObject({ to: 'c' });
      expect((await memory.read()).reservedFor).toMatchObject({ requester: 'c' });
      expect(await tick(clock, d, 'd')).toMatchObject({ led: false });
      expect(of('d', 'deferred')).toEqual([expect.objectContaining({ to: 'c', reserved: true })]);
    } else {
      expect(of('a', 'released')[0]).not.toHaveProperty('to');
      expect((await memory.read()).reservedFor).toBeUndefined();
      // Nobody to leave it to: d, a's equal, takes it at its next tick.
      expect(await tick(clock, d, 'd')).toMatchObject({ led: true, epoch: 2 });
      expect(of('d', 'deferred')).toEqual([]);
    }
  });

  it('stops handing the lease to a higher-ranked candidate whose terms fail', async () => {
    const { clock, memory, candidate, of } = setup();
    const a = candidate('a', V1);
    const b = candidate('b', V2);
    // Both tick every second, as their timers would; b's every term throws (a new version that
    // cannot coordinate, say). a's steps yield to any request b makes.
    let aTicking: Promise<unknown> | undefined;
    let bTicking: Promise<unknown> | undefined;
    const failures: unknown[] = [];
    for (let second = 0; second < 90; second++) {
      aTicking ??= a.runIfLeader(steppingTask(clock, [])).finally(() => (aTicking = undefined));
      bTicking ??= b
        .runIfLeader(async () => {
          throw new Error('b cannot coordinate');
        })
        .catch((error: unknown) => failures.push(error))
        .finally(() => (bTicking = undefined));
      for (let ms = 0; ms < 1000; ms += 100) await clock.advance(100);
    }
    // b tried, and failed; after each failure it asks nobody for 5 ttls, then 10, …, and a,
    // its elder, leads meanwhile. (Before, b took the lease at nearly every tick.)
    expect(failures.length).toBe(of('b', 'acquired').length);
    const took = of('b', 'acquired').map((e) => e.at);
    expect(took.length).toBeGreaterThanOrEqual(2);
    expect(took.length).toBeLessThanOrEqual(3);
    expect(of('a', 'handover-requested')).toHaveLength(took.length);
    for (let i = 1; i < took.length; i++) expect(took[i]! - took[i - 1]!).toBeGreaterThanOrEqual(5 * TTL_MS * 2 ** (i - 1));
    // A holder whose term failed is no claim on the free lease: a never waited for b.
    expect(of('a', 'deferred')).toEqual([]);
    expect((await memory.read()).holder).toBe('a');
  });

  it('survives a holder that crashes while handing over: the lease expires and the requester leads', async () => {
    const on = setup();
    const { clock, candidate, stores, calls } = on;
    let crashed = false;
    const a = candidate('a', V1, {
      onEvent: (event) => {
        // The moment a starts to hand over, its process stops answering: nothing it sends lands.
        if (event.type === 'handover-requested' && !crashed) {
          crashed = true;
          const store = stores.get('a')!;
          for (const op of ['renew', 'reserve', 'release', 'readRequest'] as const) store.inject(op, { kind: 'hang-forever' });
        }
      },
    });
    const b = candidate('b', V2);
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(10);
    // b asks, and waits for the request's ttl in vain.
    const asking = b.runIfLeader(async () => 'b');
    await clock.advance(TTL_MS + 500);
    expect(crashed).toBe(true);
    expect(await asking).toMatchObject({ led: false });
    // b goes on ticking; it does not pester the same silent holder, and leads once the lease expires.
    let result = await tick(clock, b, 'b');
    while (!result.led) {
      await clock.advance(1000);
      result = await tick(clock, b, 'b');
    }
    expect(result).toMatchObject({ led: true, epoch: 2 });
    expect(calls('b', 'writeRequest')).toBe(1);
    await expectTakenOnExpiry(on, 'a', 'b');
    await clock.advance(30_000);
    void leading;
  });

  it('with two requesters, hands over to the higher-ranked one and the other never takes the lease', async () => {
    const { clock, memory, candidate, of, calls } = setup();
    const a = candidate('a', V1);
    const b = candidate('b', V2);
    const c = candidate('c', V2_PREFERRED);
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(10);
    const bAsks = b.runIfLeader(async () => 'b');
    await clock.advance(10);
    const cAsks = c.runIfLeader(async () => 'c');
    await clock.advance(TTL_MS);
    expect(await leading).toMatchObject({ led: true, epoch: 1 });
    expect(of('a', 'handover-requested')).toEqual([expect.objectContaining({ requester: 'c' })]);
    expect(of('a', 'released')[0]).toMatchObject({ to: 'c' });
    expect(await cAsks).toMatchObject({ led: true, value: 'c', epoch: 2 });
    expect(await bAsks).toMatchObject({ led: false });
    expect(of('b', 'acquired')).toEqual([]);
    expect(of('b', 'deferred')).toEqual([expect.objectContaining({ to: 'c', reserved: true })]);
    expect(calls('b', 'writeRequest')).toBe(1);
    expect(calls('c', 'writeRequest')).toBe(1);
    expect((await memory.read()).holder).toBe('c');
  });

  it('with two requesters the other way round, the lower one does not overwrite a standing higher request', async () => {
    const { clock, candidate, of, calls } = setup();
    const a = candidate('a', V1);
    const b = candidate('b', V2);
    const c = candidate('c', V2_PREFERRED);
    const leading = a.runIfLeader(steppingTask(clock, []));
    await clock.advance(10);
    const cAsks = c.runIfLeader(async () => 'c');
    await clock.advance(10);
    // b reads c's request and stands back at once.
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: false });
    expect(calls('b', 'writeRequest')).toBe(0);
    await clock.advance(TTL_MS);
    expect(await cAsks).toMatchObject({ led: true, epoch: 2 });
    expect(await leading).toMatchObject({ led: true, epoch: 1 });
    expect(of('b', 'handover-asked')).toEqual([]);
  });

  it('leaves a free lease to a higher-ranked requester whose request came as the term ended', async () => {
    const { memory, candidate, of, calls, requests } = setup();
    const b = candidate('b', V1);
    const d = candidate('d', V1);
    // b's term ends (released, naming no one) just as c, a newer version, asks: b never saw the request.
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, epoch: 1 });
    await requests.writeRequest({ requester: 'c', rank: V2, ttlMs: TTL_MS });
    expect((await memory.read()).leased).toBe(false);
    // Neither an older candidate nor the last holder takes the lease while c's request stands.
    const acquiresBefore = calls('d', 'acquire') + calls('b', 'acquire');
    expect(await d.runIfLeader(async () => 'd')).toEqual({ led: false });
    expect(await b.runIfLeader(async () => 'b again')).toEqual({ led: false });
    expect(calls('d', 'acquire') + calls('b', 'acquire')).toBe(acquiresBefore);
    expect(of('d', 'deferred')).toEqual([expect.objectContaining({ to: 'c', reserved: false })]);
    // The requester takes it on its next tick.
    const c = candidate('c', V2);
    expect(await c.runIfLeader(async () => 'c')).toMatchObject({ led: true, epoch: 2 });
  });

  it('takes a free lease from a requester that went away once deferMs has passed', async () => {
    const { clock, candidate, of, requests } = setup();
    const b = candidate('b', V1);
    const d = candidate('d', V1);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, epoch: 1 });
    await requests.writeRequest({ requester: 'c', rank: V2, ttlMs: 60_000 });
    const firstLook = clock.now();
    const result = await tickUntilLed(clock, d, 'd');
    expect(result).toMatchObject({ led: true, epoch: 2 });
    expect(clock.now() - firstLook).toBeGreaterThanOrEqual(TIMING.deferMs);
    expect(clock.now() - firstLook).toBeLessThanOrEqual(TIMING.deferMs + 1000);
    expect(of('d', 'deferred')).toEqual([expect.objectContaining({ to: 'c' })]);
  });

  it('an equal or lower request beside a free lease keeps no one waiting', async () => {
    const { candidate, of, requests } = setup();
    const b = candidate('b', V2);
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, epoch: 1 });
    await requests.writeRequest({ requester: 'c', rank: V1, ttlMs: TTL_MS });
    const d = candidate('d', V2);
    // b outranks nobody here and d ranks as b: only the request could hold d back, and it is lower.
    expect(await d.runIfLeader(async () => 'd')).toMatchObject({ led: true, epoch: 2 });
    expect(of('d', 'deferred')).toEqual([]);
  });

  it('leaves a free lease to a higher-ranked last holder for deferMs, then takes it', async () => {
    const { clock, candidate, of, calls } = setup();
    const b = candidate('b', V2);
    const a = candidate('a', V1);
    // b's term ends (a term is bounded); b would take it again on its next tick.
    expect(await b.runIfLeader(async () => 'b')).toMatchObject({ led: true, epoch: 1 });
    expect(await a.runIfLeader(async () => 'a')).toEqual({ led: false });
    expect(calls('a', 'acquire')).toBe(0);
    expect(await b.runIfLeader(async () => 'b again')).toMatchObject({ led: true, epoch: 2 });
    // Now b is gone: a waits deferMs from when it first saw the lease free, then leads.
    const firstLook = clock.now();
    const result = await tickUntilLed(clock, a, 'a');
    expect(result).toMatchObject({ led: true, epoch: 3 });
    expect(clock.now() - firstLook).toBeGreaterThanOrEqual(TIMING.deferMs);
    expect(clock.now() - firstLook).toBeLessThanOrEqual(TIMING.deferMs + 1000);
    expect(of('a', 'deferred').map((e) => (e.type === 'deferred' ? e.to : undefined))).toEqual(['b', 'b']);
  });
});
