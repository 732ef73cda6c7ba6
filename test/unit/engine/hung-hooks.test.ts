import { describe, expect, it } from 'vitest';
import { HookTimeoutError, LeaseLostError, TaskAbandonedError } from '../../../src/errors';
import type { FailuresManifest } from '../../../src/hub/run-output';
import { requestRun } from '../../../src/hub/requests';
import { defineJob } from '../../../src/jobs/define-job';
import type { HookTimeouts } from '../../../src/jobs/job-definition';
import { LeaderElector } from '../../../src/lease/leader-elector';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store';
import { runKeys } from '../../../src/hub/run-record';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { failuresOf } from '../../support/failures';
import { patience } from '../../support/slowdown';

/** A promise that never settles and a hook that ignores its signal: the worst a user can write. */
const forever = () => new Promise<never>(() => undefined);
const terminal = (state: string | undefined) => ['succeeded', 'failed', 'cancelled', 'timed-out'].includes(state ?? '');
const FAST: HookTimeouts = { splitSeconds: 0.3, processSeconds: 0.3, finalizeSeconds: 0.3, graceSeconds: 0.1 };

function countJob(options: {
  items: number;
  split?: (i: number) => Promise<void> | void;
  process?: (i: number) => Promise<void> | void;
  finalize?: () => Promise<void>;
  hookTimeouts?: HookTimeouts;
  failureTolerance?: { count: number };
}) {
  return defineJob<{ i: number }, number, number>({
    name: 'count',
    schedule: '0 0 0 1 1 *',
    hookTimeouts: { ...FAST, ...options.hookTimeouts },
    ...(options.failureTolerance ? { failureTolerance: options.failureTolerance } : {}),
    async *split() {
      for (let i = 0; i < options.items; i++) {
        await options.split?.(i);
        yield { i };
      }
    },
    async process(item) {
      await options.process?.(item.i);
      return 1;
    },
    aggregate: { initial: () => 0, add: (acc, n) => acc + n },
    ...(options.finalize ? { finalize: options.finalize } : {}),
  });
}

// On the code before hook bounds these hung the leader or the worker for good: each test has
// its own limit so that such a hang fails fast instead of at the suite's.
describe('hung hooks', { timeout: patience(30_000) }, () => {
  it('a split that hangs ignoring its signal times out; at maxSplitTimeouts the run fails saying why', async () => {
    const ports = memoryPorts();
    let calls = 0;
    const engine = buildEngine(ports, [
      countJob({ items: 3, split: () => (calls++, forever()), hookTimeouts: { maxSplitTimeouts: 2 } }),
    ]);
    const runId = await requestRun(ports.docs, 'count');
    await engine.leadUntil('l', async () => terminal((await engine.readRun(runId))?.state), 20_000);
    const record = await engine.readRun(runId);
    expect(record?.state).toBe('failed');
    expect(record?.endReason).toMatch(/^split timed out 2 times: split gave no item within 0\.3 s and ignored its abort signal/);
    expect(calls).toBe(2);
  });

  it('a split that hung once is called again and the run completes', async () => {
    const ports = memoryPorts();
    let hung = false;
    const split = (i: number) => {
      if (i === 1 && !hung) {
        hung = true;
        return forever();
      }
    };
    const engine = buildEngine(ports, [countJob({ items: 4, split })]);
    const stop = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'count');
    await engine.leadUntil('l', async () => terminal((await engine.readRun(runId))?.state), 20_000);
    await stop();
    expect(await engine.readRun(runId)).toMatchObject({ state: 'succeeded', splitTimeouts: 1, acc: 4 });
  });

  it('a process that hangs ignoring its signal fails its item with the reason; the others count', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [
      countJob({ items: 4, process: (i) => (i === 2 ? forever() : undefined), failureTolerance: { count: 1 } }),
    ]);
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'count');
    await engine.leadUntil('l', async () => terminal((await engine.readRun(runId))?.state), 25_000);
    await stop();
    expect(await engine.readRun(runId)).toMatchObject({ state: 'succeeded', counters: { succeeded: 3, failed: 1 } });
    const manifest = await engine.readJson<FailuresManifest>(runKeys.manifest(runId));
    expect(await failuresOf(ports.docs, manifest)).toEqual([
      expect.objectContaining({
        item: 2,
        reason: 'HookTimeoutError: process did not finish within 0.3 s and ignored its abort signal, so it was abandoned',
      }),
    ]);
  });

  it('a finalize that hangs ignoring its signal is abandoned: the run ends as decided, with finalizeError', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [countJob({ items: 2, finalize: forever })]);
    const stop = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'count');
    await engine.leadUntil('l', async () => terminal((await engine.readRun(runId))?.state), 20_000);
    await stop();
    expect(await engine.readRun(runId)).toMatchObject({
      state: 'succeeded',
      finalizeError: `${new HookTimeoutError('finalize', 300, true).message}`,
    });
  });

  it('a slow split heartbeats as it goes: planning longer than the watchdog keeps the term', async () => {
    const ports = memoryPorts();
    // 300 items 10 ms apart: about 3 s of planning in one chunk, against a 1.5 s watchdog.
    const engine = buildEngine(ports, [countJob({ items: 300, split: () => new Promise((r) => setTimeout(r, 10)) })]);
    const runId = await requestRun(ports.docs, 'count');
    const elector = new LeaderElector({
      store: new InMemoryLeaseStore(),
      identity: 'slow-split',
      renewIntervalMs: 100,
      renewDeadlineMs: 5000,
      stallTimeoutMs: 1500,
    });
    const planned = async () => !['planning', undefined].includes((await engine.readRun(runId))?.state);
    const done = new AbortController();
    const watch = (async () => {
      while (!(await planned())) await new Promise((r) => setTimeout(r, 50));
      done.abort(new Error('planned'));
    })();
    const led = await elector
      .runIfLeader((l) => engine.coordinator.lead(l, { termMs: 60_000 }), { signal: done.signal })
      .catch((e: unknown) => e);
    await watch;
    // The term ended because the test stopped it once the run was planned, not by a loss.
    expect(led).not.toBeInstanceOf(LeaseLostError);
    expect((led as Error).message).toBe('planned');
    expect((await engine.readRun(runId))?.counters.planned).toBe(300);
  });
});

describe('the elector and a task that ignores the end of its term', { timeout: patience(30_000) }, () => {
  it('abandons it after abandonTaskAfterMs, so the same candidate leads again', async () => {
    const store = new InMemoryLeaseStore();
    const events: string[] = [];
    const elector = new LeaderElector({
      store,
      identity: 'hung',
      renewIntervalMs: 100,
      renewDeadlineMs: 5000,
      stallTimeoutMs: 300,
      abandonTaskAfterMs: 200,
      onEvent: (e) => events.push(e.type),
    });
    // No heartbeat: the watchdog ends the term; the task ignores that and never settles.
    const first = await elector.runIfLeader(() => forever()).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(LeaseLostError);
    expect((first as LeaseLostError).reason).toBe('stalled');
    expect((first as LeaseLostError).cause).toBeInstanceOf(TaskAbandonedError);
    expect(events).toContain('task-abandoned');
    const second = await elector.runIfLeader(() => 'led again');
    expect(second).toMatchObject({ led: true, value: 'led again' });
  });
});
