import { describe, expect, it } from 'vitest';
import { sleep } from '../../../src/clock/clock';
import { FakeClock } from '../../../src/clock/fake-clock';
import { ConcurrentUpdateError, InvalidConfigError, LeaseLostError, type LeaseLossReason } from '../../../src/errors';
import { InMemoryHandoverRequestStore } from '../../../src/lease/in-memory-handover-request-store';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store';
import type { LeaderElectorOptions } from '../../../src/lease/elector-options';
import type { LeaderEvent } from '../../../src/lease/leader-events';
import { LeaderElector } from '../../../src/lease/leader-elector';
import type { Leadership } from '../../../src/lease/term';
import { ScriptedLeaseStore, serverBusy } from '../../support/scripted-lease-store';

function setup(defaults: Partial<LeaderElectorOptions> = {}) {
  const clock = new FakeClock();
  const memory = new InMemoryLeaseStore({ clock });
  const store = new ScriptedLeaseStore(memory);
  const events: Array<LeaderEvent & { at: number }> = [];
  const elector = (identity: string, options: Partial<LeaderElectorOptions> = {}) =>
    new LeaderElector({
      store,
      identity,
      clock,
      random: () => 0.5,
      onEvent: (event) => events.push({ ...event, at: clock.now() }),
      ...defaults,
      ...options,
    });
  return { clock, memory, store, events, elector };
}

/** A task that heartbeats every second until `until()` holds or its signal aborts. */
function busyTask(clock: FakeClock, until: () => boolean, onStart?: (l: Leadership) => void) {
  return async (leadership: Leadership): Promise<string> => {
    onStart?.(leadership);
    while (!until() && !leadership.signal.aborted) {
      leadership.heartbeat();
      await sleep(clock, 1000).catch(() => undefined);
    }
    return 'done';
  };
}

/** Notes each release call in the returned list, which the test also writes its own steps to. */
function recordReleases(store: ScriptedLeaseStore): string[] {
  const order: string[] = [];
  store.inject('release', () => {
    order.push('release');
    return undefined;
  });
  return order;
}

/** A task that never heartbeats and ignores its signal until `release()` is called. */
function stuckTask() {
  let release!: () => void;
  const settled = new Promise<void>((resolve) => (release = resolve));
  return { release: () => release(), task: async () => settled.then(() => 'late') };
}

describe('LeaderElector on a fake clock', () => {
  it('acquires a free lease, runs the task at epoch 1, and releases when it ends', async () => {
    const { elector, memory, events } = setup();
    const result = await elector('a').runIfLeader((l) => `led at ${l.epoch}`);
    expect(result).toEqual({ led: true, value: 'led at 1', epoch: 1 });
    expect(events.map((e) => e.type)).toEqual(['acquired', 'released']);
    expect(await memory.read()).toMatchObject({ leased: false, holder: 'a', epoch: 1 });
  });

  it('records its rank with each epoch it takes', async () => {
    const { elector, memory } = setup();
    const requests = new InMemoryHandoverRequestStore();
    await elector('a', { rank: { version: '1.4.2', priority: 3 }, requests }).runIfLeader(async () => {
      expect(await memory.read()).toMatchObject({ leased: true, holder: 'a', holderRank: { version: '1.4.2', priority: 3 } });
    });
  });

  it('tells the store how it found the lease, so the history says why leadership moved', async () => {
    const { elector, memory, clock } = setup();
    const a = elector('a');
    const b = elector('b');
    await a.runIfLeader(() => 'ok');
    await b.runIfLeader(() => 'ok');
    let started = false;
    let done = false;
    const leading = a
      .runIfLeader(
        busyTask(
          clock,
          () => done,
          () => (started = true),
        ),
      )
      .catch((error: unknown) => error);
    await clock.advanceUntil(() => started, { maxMs: 1000 });
    memory.breakLease();
    await b.runIfLeader(() => 'ok');
    done = true;
    await clock.advanceUntil(() => false, { maxMs: 2000 });
    await leading;
    const { changes } = await memory.read();
    expect(changes?.map((c) => [c.holder, c.previous, c.reason])).toEqual([
      ['a', undefined, 'first'],
      ['b', 'a', 'released'],
      ['a', 'b', 'released'],
      ['b', 'a', 'broken'],
    ]);
  });

  it('does not lead while another holds the lease, at the cost of one read, and names the holder', async () => {
    const { elector, store, clock } = setup();
    let stop = false;
    const leading = elector('a').runIfLeader(busyTask(clock, () => stop));
    await clock.advance(1000);
    const before = store.calls.length;
    const result = await elector('b').runIfLeader(() => 'never');
    expect(result).toEqual({ led: false, holder: { identity: 'a', epoch: 1, acquiredAt: expect.any(Date) } });
    expect(store.calls.slice(before)).toEqual(['read']);
    stop = true;
    await clock.advance(1000);
    await expect(leading).resolves.toMatchObject({ led: true });
  });

  it('getLeader names the current holder with its epoch and acquisition time, and nobody once released', async () => {
    const { elector, clock } = setup();
    const observer = elector('observer');
    expect(await observer.getLeader()).toBeUndefined();
    let stop = false;
    const run = elector('a').runIfLeader(busyTask(clock, () => stop));
    await clock.advance(1000);
    expect(await observer.getLeader()).toEqual({ identity: 'a', epoch: 1, acquiredAt: expect.any(Date) });
    stop = true;
    await clock.advance(1000);
    await run;
    expect(await observer.getLeader()).toBeUndefined();
  });

  it('does not lead twice on one instance: an overlapping tick returns at once without storage calls', async () => {
    const { elector, store, clock } = setup();
    const a = elector('a');
    let stop = false;
    const first = a.runIfLeader(busyTask(clock, () => stop));
    await clock.advance(500);
    const before = store.calls.length;
    const second = await a.runIfLeader(() => 'twice');
    expect(second).toMatchObject({ led: false, holder: { identity: 'a', epoch: 1 } });
    expect(store.calls.length).toBe(before);
    stop = true;
    await clock.advance(1000);
    await first;
  });

  it.each(['read', 'acquire', 'bumpEpoch'] as const)(
    'an overlapping call while a slow %s is under way waits for that attempt, then names this elector without storage calls',
    async (slow) => {
      const { elector, store, clock } = setup();
      const a = elector('a');
      store.inject(slow, { kind: 'delay', ms: 2000, clock });
      let stop = false;
      let runs = 0;
      const first = a.runIfLeader(
        busyTask(
          clock,
          () => stop,
          () => runs++,
        ),
      );
      await clock.advance(500);
      const callsBefore = store.calls.length;
      const second = a.runIfLeader(() => 'twice');
      await clock.advance(2000);
      await expect(second).resolves.toMatchObject({ led: false, holder: { identity: 'a', epoch: 1 } });
      // The only calls since are the first attempt's own (the delayed one's successors), never a second read.
      expect(store.count('read')).toBe(1);
      expect(store.count('acquire')).toBe(1);
      expect(store.calls.length - callsBefore).toBeLessThanOrEqual(2);
      stop = true;
      await clock.advance(1000);
      await expect(first).resolves.toMatchObject({ led: true, epoch: 1 });
      expect(runs).toBe(1);
    },
  );

  it('an overlapping call whose earlier attempt found another holder reads for itself and names that holder', async () => {
    const { elector, store, clock } = setup();
    let stop = false;
    const b = elector('b').runIfLeader(busyTask(clock, () => stop));
    await clock.advance(100);
    store.inject('read', { kind: 'delay', ms: 2000, clock });
    const a = elector('a');
    const first = a.runIfLeader(() => 'never');
    await clock.advance(500);
    store.heal('read');
    const second = a.runIfLeader(() => 'never');
    await clock.advance(2000);
    await expect(first).resolves.toMatchObject({ led: false, holder: { identity: 'b' } });
    await expect(second).resolves.toMatchObject({ led: false, holder: { identity: 'b' } });
    stop = true;
    await clock.advance(1000);
    await b;
  });

  it('an overlapping call whose earlier attempt failed makes its own attempt', async () => {
    const { elector, store, clock } = setup();
    store.inject('read', { kind: 'delay', ms: 2000, clock });
    let acquires = 0;
    store.inject('acquire', () => (++acquires === 1 ? { kind: 'fail', error: serverBusy() } : undefined));
    const a = elector('a');
    const first = a.runIfLeader(() => 'never').catch((err: unknown) => err);
    await clock.advance(500);
    store.heal('read');
    const second = a.runIfLeader(() => 'led');
    await clock.advance(2000);
    await expect(first).resolves.toMatchObject({ statusCode: 503 });
    await expect(second).resolves.toEqual({ led: true, value: 'led', epoch: 1 });
  });

  it('renews every interval and keeps leading past three times the lease', async () => {
    const { elector, clock, events } = setup();
    const started = clock.now();
    const run = elector('a').runIfLeader(busyTask(clock, () => clock.now() - started > 46_000));
    await clock.advance(48_000);
    await expect(run).resolves.toMatchObject({ led: true, value: 'done' });
    const renewals = events.filter((e) => e.type === 'renewed');
    expect(renewals.length).toBeGreaterThanOrEqual(9);
    expect(events.some((e) => e.type === 'lost')).toBe(false);
    const gaps = renewals.slice(1).map((e, i) => e.at - (renewals[i]?.at ?? 0));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(5000);
  });

  type LossCase = {
    name: string;
    reason: LeaseLossReason;
    /** What goes wrong at t = 2 s into the term. */
    inject: (ctx: ReturnType<typeof setup>) => Promise<void> | void;
    /** Latest time after the fault by which the leader must know, in ms. */
    detectWithinMs: number;
    /** Does the elector try to release after the task settles? */
    releases: boolean;
    /** Renew failures reported before the loss (a hang ends by the deadline timer, not as a failure). */
    renewFailures: 'none' | 'some';
  };

  const lossCases: LossCase[] = [
    {
      name: 'another holder takes the lease',
      reason: 'conflict',
      inject: async ({ memory }) => {
        memory.breakLease();
        await memory.acquire('someone-else', 15);
      },
      detectWithinMs: 5000,
      releases: false,
      renewFailures: 'none',
    },
    {
      name: 'an outside client breaks the lease',
      reason: 'broken',
      inject: ({ memory }) => memory.breakLease(),
      detectWithinMs: 5000,
      releases: false,
      renewFailures: 'none',
    },
    {
      name: 'every renew fails with 503',
      reason: 'deadline',
      inject: ({ store }) => store.inject('renew', { kind: 'fail', error: serverBusy() }),
      // Last good renewal is the acquire at t=0; deadline 10 s; the fault came at t=2 s.
      detectWithinMs: 8000,
      releases: true,
      renewFailures: 'some',
    },
    {
      name: 'every renew hangs',
      reason: 'deadline',
      inject: ({ store }) => store.inject('renew', { kind: 'hang' }),
      detectWithinMs: 8000,
      releases: true,
      renewFailures: 'none',
    },
    {
      name: 'a renew hangs and ignores its abort signal',
      reason: 'deadline',
      inject: ({ store }) => store.inject('renew', { kind: 'hang-forever' }),
      detectWithinMs: 8000,
      releases: true,
      renewFailures: 'none',
    },
  ];

  it.each(lossCases)('loses leadership when $name ($reason)', async (testCase) => {
    const ctx = setup();
    const { elector, clock, events } = ctx;
    let leadership: Leadership | undefined;
    const run = elector('a').runIfLeader(
      busyTask(
        clock,
        () => false,
        (l) => (leadership = l),
      ),
    );
    const outcome = run.then(
      () => undefined,
      (err: unknown) => err,
    );
    await clock.advance(2000);
    const faultAt = clock.now();
    await testCase.inject(ctx);
    const noticed = await clock.advanceUntil(() => leadership?.signal.aborted === true, {
      maxMs: testCase.detectWithinMs,
      stepMs: 50,
    });
    expect(noticed).toBe(true);
    const lost = events.find((e) => e.type === 'lost');
    expect(lost).toMatchObject({ type: 'lost', reason: testCase.reason, identity: 'a', epoch: 1 });
    expect((lost?.at ?? Infinity) - faultAt).toBeLessThanOrEqual(testCase.detectWithinMs);
    // The loss must be known before storage could give the lease to anyone else.
    expect(lost?.at ?? Infinity).toBeLessThan(15_000);
    expect(leadership?.signal.reason).toBeInstanceOf(LeaseLostError);
    await clock.advance(2000);
    const err = await outcome;
    expect(err).toBeInstanceOf(LeaseLostError);
    expect((err as LeaseLostError).reason).toBe(testCase.reason);
    expect(ctx.store.count('release')).toBe(testCase.releases ? 1 : 0);
    const failuresBeforeLoss = events.filter((e) => e.type === 'renew-failed' && e.at <= (lost?.at ?? 0)).length;
    expect(failuresBeforeLoss > 0 ? 'some' : 'none').toBe(testCase.renewFailures);
    expect(events.filter((e) => e.type === 'lost')).toHaveLength(1);
  });

  it('gives up on a lease read that never returns, after the renew deadline', async () => {
    const { elector, clock, store } = setup();
    store.inject('read', { kind: 'hang-forever' });
    let settled: unknown;
    const run = elector('a')
      .runIfLeader(() => 'never')
      .then(
        (v) => (settled = v),
        (e: unknown) => (settled = e),
      );
    await clock.advance(9_900);
    expect(settled).toBeUndefined();
    await clock.advance(200);
    await run;
    expect(settled).toMatchObject({ name: 'TimeoutError' });
  });

  it('loses leadership when the task stops calling heartbeat(), then releases once it settles', async () => {
    const { elector, clock, events, store } = setup();
    const order = recordReleases(store);
    const stuck = stuckTask();
    let signal: AbortSignal | undefined;
    const run = elector('a')
      .runIfLeader(async (l) => {
        signal = l.signal;
        const value = await stuck.task();
        order.push('task settled');
        return value;
      })
      .catch((err: unknown) => err);
    await clock.advanceUntil(() => signal?.aborted === true, { maxMs: 40_000, stepMs: 100 });
    const lost = events.find((e) => e.type === 'lost');
    expect(lost).toMatchObject({ reason: 'stalled' });
    // Default stall timeout is twice the lease, checked on each 5 s renewal.
    expect(lost?.at).toBeGreaterThanOrEqual(30_000);
    expect(lost?.at).toBeLessThanOrEqual(35_000);
    order.push('lost');
    await clock.advance(7000);
    expect(order).toEqual(['lost']);
    stuck.release();
    await clock.advance(100);
    expect(await run).toMatchObject({ code: 'LeaseLost', reason: 'stalled' });
    expect(order).toEqual(['lost', 'task settled', 'release']);
  });

  it('never releases while the task runs, and releases right after it settles', async () => {
    const { elector, clock, store } = setup();
    const order = recordReleases(store);
    const run = elector('a').runIfLeader(async (l) => {
      for (let i = 0; i < 20; i++) {
        l.heartbeat();
        await sleep(clock, 1000);
      }
      order.push('task settled');
      return 'ok';
    });
    await clock.advance(19_500);
    expect(order).toEqual([]);
    await clock.advance(1000);
    await expect(run).resolves.toMatchObject({ led: true, value: 'ok' });
    expect(order).toEqual(['task settled', 'release']);
  });

  it('rides out transient renew failures without losing the lease', async () => {
    const { elector, clock, store, events } = setup();
    let failures = 2;
    store.inject('renew', () => (failures-- > 0 ? { kind: 'fail', error: serverBusy() } : undefined));
    const started = clock.now();
    const run = elector('a').runIfLeader(busyTask(clock, () => clock.now() - started > 20_000));
    await clock.advance(22_000);
    await expect(run).resolves.toMatchObject({ led: true });
    expect(events.filter((e) => e.type === 'renew-failed')).toHaveLength(2);
    expect(events.some((e) => e.type === 'lost')).toBe(false);
  });

  it('sees the loss as soon as it resumes from a pause longer than the lease, without renewing', async () => {
    const { elector, clock, store, events } = setup();
    let leadership: Leadership | undefined;
    const run = elector('a')
      .runIfLeader(
        busyTask(
          clock,
          () => false,
          (l) => (leadership = l),
        ),
      )
      .catch((err: unknown) => err);
    await clock.advance(3000);
    const renewsBefore = store.count('renew');
    clock.jump(20_000); // SIGSTOP for 20 s
    await clock.advance(0);
    expect(leadership?.signal.aborted).toBe(true);
    expect(leadership?.remainingMs()).toBe(0);
    expect(events.find((e) => e.type === 'lost')).toMatchObject({ reason: 'deadline' });
    expect(store.count('renew')).toBe(renewsBefore);
    await clock.advance(2000);
    expect(await run).toBeInstanceOf(LeaseLostError);
  });

  it('ends the term signal before releasing, so work the task left running stops first', async () => {
    const { elector, store } = setup();
    const order = recordReleases(store);
    await elector('a').runIfLeader((l) => {
      // Fire-and-forget work that outlives the task.
      l.signal.addEventListener('abort', () => order.push('left-over work stopped'), { once: true });
      return 'returned';
    });
    expect(order).toEqual(['left-over work stopped', 'release']);
  });

  it('counts the first renewal from the acquire, so a slow epoch bump causes no false loss', async () => {
    const { elector, clock, store, events } = setup();
    store.inject('bumpEpoch', { kind: 'delay', ms: 6000, clock });
    const started = clock.now();
    const run = elector('a').runIfLeader(busyTask(clock, () => clock.now() - started > 20_000));
    await clock.advance(22_000);
    await expect(run).resolves.toMatchObject({ led: true });
    expect(events.some((e) => e.type === 'lost')).toBe(false);
    // The first renewal is due 5 s after the acquire began, so it runs as soon as the bump ends.
    expect(events.find((e) => e.type === 'renewed')?.at).toBe(6000);
  });

  it('gives back a lease whose acquire succeeded in storage but whose reply was lost', async () => {
    const { elector, store, memory } = setup();
    store.inject('acquire', { kind: 'fail-after', error: serverBusy() });
    await expect(elector('a').runIfLeader(() => 'never')).rejects.toMatchObject({ statusCode: 503 });
    expect(store.count('release')).toBe(1);
    expect((await memory.read()).leased).toBe(false);
  });

  it('does not lead when another candidate changed the record during its epoch bump', async () => {
    const { elector, store, memory } = setup();
    store.inject('bumpEpoch', { kind: 'fail', error: new ConcurrentUpdateError('lease') });
    await expect(elector('a').runIfLeader(() => 'never')).resolves.toEqual({ led: false, holder: undefined });
    expect((await memory.read()).leased).toBe(false);
  });

  it('when the caller aborts during the acquire, it does not run the task and gives the lease back', async () => {
    const { elector, store, memory } = setup();
    const controller = new AbortController();
    store.inject('bumpEpoch', () => {
      controller.abort(new Error('shutting down'));
      return undefined;
    });
    let ran = false;
    const outcome = await elector('a')
      .runIfLeader(
        () => {
          ran = true;
        },
        { signal: controller.signal },
      )
      .catch((err: unknown) => err);
    expect(outcome).toMatchObject({ message: 'shutting down' });
    expect(ran).toBe(false);
    expect(store.count('release')).toBe(1);
    expect((await memory.read()).leased).toBe(false);
  });

  it('keeps leading and releasing when the logger throws', async () => {
    const clock = new FakeClock();
    const memory = new InMemoryLeaseStore({ clock });
    const boom = () => {
      throw new Error('log sink down');
    };
    const elector = new LeaderElector({ store: memory, clock, logger: { info: boom, warn: boom, debug: boom } });
    const started = clock.now();
    const run = elector.runIfLeader(busyTask(clock, () => clock.now() - started > 12_000));
    await clock.advance(13_000);
    await expect(run).resolves.toMatchObject({ led: true });
    expect((await memory.read()).leased).toBe(false);
    // And it can lead again: nothing was left half-done.
    await expect(elector.runIfLeader(() => 'again')).resolves.toMatchObject({ led: true, epoch: 2 });
  });

  it('strictly increases the epoch across 100 alternating holders', async () => {
    const { elector } = setup();
    const candidates = [elector('a'), elector('b')];
    const epochs: number[] = [];
    for (let i = 0; i < 100; i++) {
      const result = await candidates[i % 2]!.runIfLeader((l) => l.epoch);
      if (!result.led) throw new Error(`turn ${i} did not lead`);
      expect(result.value).toBe(result.epoch);
      epochs.push(result.epoch);
    }
    expect(epochs).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
  });

  it('does not lead when the epoch cannot be bumped, and gives the lease back', async () => {
    const { elector, store, memory } = setup();
    store.inject('bumpEpoch', { kind: 'fail', error: serverBusy() });
    await expect(elector('a').runIfLeader(() => 'never')).rejects.toMatchObject({ statusCode: 503 });
    expect(store.count('release')).toBe(1);
    expect((await memory.read()).leased).toBe(false);
  });

  it('runWhenLeader waits, then leads within one acquire-retry interval of the release', async () => {
    const { elector, clock, events } = setup({ acquireRetryMs: 2000 });
    const started = clock.now();
    const a = elector('a').runIfLeader(busyTask(clock, () => clock.now() - started >= 10_000));
    const b = elector('b').runWhenLeader((l) => ({ at: clock.now(), epoch: l.epoch }));
    await clock.advanceUntil(() => events.some((e) => e.type === 'acquired' && e.identity === 'b'), { maxMs: 20_000 });
    await a;
    const released = events.find((e) => e.type === 'released' && e.identity === 'a');
    const bLed = await b;
    expect(bLed.epoch).toBe(2);
    expect(bLed.at - (released?.at ?? 0)).toBeLessThanOrEqual(2000);
  });

  it('runWhenLeader takes over from a crashed holder once its lease expires', async () => {
    const { elector, clock, memory } = setup({ acquireRetryMs: 2000 });
    await memory.acquire('crashed', 15);
    await memory.bumpEpoch('crashed', 'crashed-holder');
    let ledAt = -1;
    const b = elector('b').runWhenLeader((l) => {
      ledAt = clock.now();
      return l.epoch;
    });
    await clock.advanceUntil(() => ledAt >= 0, { maxMs: 20_000 });
    await expect(b).resolves.toBe(2);
    expect(ledAt).toBeGreaterThanOrEqual(15_000);
    expect(ledAt).toBeLessThanOrEqual(15_000 + 2000);
  });

  it('rides out storage errors while waiting to lead', async () => {
    const { elector, clock, store, events } = setup({ acquireRetryMs: 1000 });
    let failures = 3;
    store.inject('read', () => (failures-- > 0 ? { kind: 'fail', error: serverBusy() } : undefined));
    const b = elector('b').runWhenLeader(() => 'finally');
    await clock.advance(5000);
    await expect(b).resolves.toBe('finally');
    expect(events.filter((e) => e.type === 'acquire-failed')).toHaveLength(3);
  });

  it("on the caller's abort: aborts the task's signal, waits for it, then releases", async () => {
    const { elector, clock, store, memory } = setup();
    const order = recordReleases(store);
    const controller = new AbortController();
    const run = elector('a')
      .runIfLeader(
        async (l) => {
          await new Promise((resolve) => l.signal.addEventListener('abort', resolve, { once: true }));
          order.push('saw abort');
          await sleep(clock, 3000);
          order.push('task settled');
          throw l.signal.reason;
        },
        { signal: controller.signal },
      )
      .catch((err: unknown) => err);
    await clock.advance(1000);
    controller.abort(new Error('host shutting down'));
    await clock.advance(4000);
    expect(await run).toMatchObject({ message: 'host shutting down' });
    expect(order).toEqual(['saw abort', 'task settled', 'release']);
    expect((await memory.read()).leased).toBe(false);
  });

  it('logs each event with holder and epoch, and the time since the last renewal on loss', async () => {
    const clock = new FakeClock();
    const memory = new InMemoryLeaseStore({ clock });
    const lines: string[] = [];
    const logger = { info: (m: string) => lines.push(`info ${m}`), warn: (m: string) => lines.push(`warn ${m}`) };
    const elector = new LeaderElector({ store: memory, identity: 'node-7', clock, logger });
    const run = elector.runIfLeader(busyTask(clock, () => false)).catch(() => undefined);
    await clock.advance(1000);
    memory.breakLease();
    await clock.advance(6000);
    await run;
    expect(lines[0]).toBe('info leadership acquired: holder=node-7 epoch=1');
    expect(lines[1]).toMatch(/^warn leadership lost: holder=node-7 epoch=1 reason=broken lastRenewAgoMs=\d+$/);
  });
});

describe('LeaderElector configuration', () => {
  const store = new InMemoryLeaseStore();

  it('uses client-go style defaults derived from a 15 s lease', async () => {
    const clock = new FakeClock();
    const events: LeaderEvent[] = [];
    const elector = new LeaderElector({ store: new InMemoryLeaseStore({ clock }), clock, onEvent: (e) => events.push(e) });
    expect(elector.identity).toMatch(/^.+:\d+:[0-9a-f]{8}$/);
    const run = elector.runIfLeader(busyTask(clock, () => clock.now() >= 11_000));
    await clock.advance(12_000);
    await run;
    // Renewals every 5 s (a third of 15 s).
    expect(events.filter((e) => e.type === 'renewed')).toHaveLength(2);
  });

  it.each<[string, Partial<LeaderElectorOptions>, string]>([
    ['no store', { store: undefined as never }, 'store'],
    ['an empty identity', { identity: ' ' }, 'identity'],
    ['a lease under 15 s', { leaseDurationSeconds: 14 }, 'leaseDurationSeconds'],
    ['a lease over 60 s', { leaseDurationSeconds: 61 }, 'leaseDurationSeconds'],
    ['a fractional lease', { leaseDurationSeconds: 15.5 }, 'leaseDurationSeconds'],
    ['a zero renew interval', { renewIntervalMs: 0 }, 'renewIntervalMs'],
    ['a NaN renew interval', { renewIntervalMs: Number.NaN }, 'renewIntervalMs'],
    ['a renew deadline as long as the lease', { renewDeadlineMs: 15_000 }, 'renewDeadlineMs'],
    ['a negative renew deadline', { renewDeadlineMs: -1 }, 'renewDeadlineMs'],
    ['a renew deadline within 1.2 renew intervals', { renewIntervalMs: 5000, renewDeadlineMs: 6000 }, 'renewIntervalMs'],
    ['a zero acquire retry', { acquireRetryMs: 0 }, 'acquireRetryMs'],
    ['a stall timeout shorter than the renew interval', { stallTimeoutMs: 1000 }, 'stallTimeoutMs'],
  ])('rejects %s, naming the option in one line', (_name, options, option) => {
    let caught: unknown;
    try {
      new LeaderElector({ store, ...options });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidConfigError);
    expect((caught as InvalidConfigError).option).toBe(option);
    expect((caught as Error).message).toContain(option);
    expect((caught as Error).message).not.toContain('\n');
  });

  it('accepts the edges of every rule', () => {
    expect(() => new LeaderElector({ store, leaseDurationSeconds: 60 })).not.toThrow();
    expect(
      () => new LeaderElector({ store, leaseDurationSeconds: 15, renewIntervalMs: 5000, renewDeadlineMs: 6001 }),
    ).not.toThrow();
    expect(() => new LeaderElector({ store, stallTimeoutMs: 5000 })).not.toThrow();
  });
});

describe('expiryAlignment: a crashed leader is replaced on the first follower tick after expiry', () => {
  // Renewal instants on the wall clock, for a leader that leads for a minute.
  async function renewalsWith(options: Partial<LeaderElectorOptions>, startAtMs: number): Promise<number[]> {
    const { clock, elector, events } = setup();
    clock.jump(startAtMs);
    const wallStart = clock.date().getTime() - clock.now();
    let done = false;
    const leading = elector('a', options).runIfLeader(busyTask(clock, () => done));
    await clock.advance(60_000);
    done = true;
    await clock.advance(2000);
    await leading;
    return events.filter((e) => e.type === 'renewed').map((e) => wallStart + e.at);
  }

  it.each([
    // tick period, tick offset, start of the term (ms past a period boundary)
    [2000, 0, 0],
    [2000, 0, 1337],
    [2000, 500, 250],
    [1000, 0, 900],
  ])(
    'ticks every %i ms (offset %i), term starting %i ms in: every renewal leaves the lease ending 300 ms before a tick',
    async (periodMs, offsetMs, start) => {
      const renewals = await renewalsWith({ expiryAlignment: { periodMs, offsetMs } }, start);
      expect(renewals.length).toBeGreaterThanOrEqual(12);
      for (const at of renewals) expect((((at + 15_000 + 300 - offsetMs) % periodMs) + periodMs) % periodMs).toBe(0);
      const gaps = renewals.slice(1).map((t, i) => t - renewals[i]!);
      // At most 100 ms late, never more than half an interval early; a grid that divides the
      // interval keeps the interval exactly.
      for (const gap of gaps) {
        expect(gap).toBeLessThanOrEqual(5100);
        expect(gap).toBeGreaterThanOrEqual(2500);
      }
      if (5000 % periodMs === 0) expect(new Set(gaps)).toEqual(new Set([5000]));
    },
  );

  it('a renewal due a fraction of a ms before an aligned instant waits for it rather than renewing a whole period early', async () => {
    // The monotonic clock has fractions of a ms and the wall clock whole ms, so the plain
    // renewal can fall just short of the grid; it must not be pulled a whole tick early.
    const { clock, elector, events } = setup();
    clock.jump(699.5);
    let done = false;
    const leading = elector('a', { expiryAlignment: { periodMs: 1000 } }).runIfLeader(busyTask(clock, () => done));
    await clock.advance(30_000);
    done = true;
    await clock.advance(2000);
    await leading;
    const acquired = events.find((e) => e.type === 'acquired')!.at;
    const renewed = events.filter((e) => e.type === 'renewed').map((e) => e.at);
    expect(renewed[0]! - acquired).toBeGreaterThanOrEqual(5000);
    expect(renewed[0]! - acquired).toBeLessThanOrEqual(5100);
    expect(new Set(renewed.slice(1).map((t, i) => t - renewed[i]!))).toEqual(new Set([5000]));
  });

  it('with ticks further apart than half a renew interval, aligns only the renewals it can reach', async () => {
    const renewals = await renewalsWith({ expiryAlignment: { periodMs: 10_000 } }, 0);
    const aligned = renewals.filter((at) => (at + 15_300) % 10_000 === 0);
    expect(aligned.length).toBeGreaterThanOrEqual(Math.floor(renewals.length / 2) - 1);
    const gaps = renewals.slice(1).map((t, i) => t - renewals[i]!);
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(5000);
  });

  it('without it, renews every renew interval from the acquire', async () => {
    const renewals = await renewalsWith({}, 1337);
    const gaps = renewals.slice(1).map((t, i) => t - renewals[i]!);
    expect(new Set(gaps)).toEqual(new Set([5000]));
  });

  it.each([
    [{ periodMs: 0 }, 'expiryAlignment.periodMs'],
    [{ periodMs: 2000, offsetMs: 2000 }, 'expiryAlignment.offsetMs'],
    [{ periodMs: 2000, marginMs: -1 }, 'expiryAlignment.marginMs'],
  ])('rejects %j naming %s', (expiryAlignment, option) => {
    const { elector } = setup();
    expect(() => elector('a', { expiryAlignment })).toThrow(InvalidConfigError);
    expect(() => elector('a', { expiryAlignment })).toThrow(option);
  });
});
