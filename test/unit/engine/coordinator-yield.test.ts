import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/clock/fake-clock';
import { requestRun } from '../../../src/hub/requests';
import type { RunOutput } from '../../../src/hub/run-output';
import { runKeys } from '../../../src/hub/run-record';
import type { Leadership } from '../../../src/lease/term';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { expectedSum, sumJob } from '../../support/sample-jobs';
import { noLeaseToRaise } from '../../support/unit-engine';
import { patience } from '../../support/slowdown';

/** A hand-made term whose yield the test controls, as the elector's handover would. */
function yieldingLeadership(epoch: number) {
  const yielding = new AbortController();
  const leadership: Leadership = {
    identity: `leader-${epoch}`,
    epoch,
    signal: new AbortController().signal,
    yieldSignal: yielding.signal,
    heartbeat: () => undefined,
    remainingMs: () => 60_000,
    raiseEpoch: noLeaseToRaise,
    restUntil: () => undefined,
  };
  return { leadership, yieldNow: () => yielding.abort() };
}

describe('the coordinator yields between turns when a handover is asked for', () => {
  it('an idle leader returns from its idle wait at once, without waiting out its back-off', async () => {
    const clock = new FakeClock();
    const engine = buildEngine(memoryPorts(), [sumJob({ items: 1 })], { clock });
    const { leadership, yieldNow } = yieldingLeadership(1);
    let done = false;
    const leading = engine.coordinator.lead(leadership, { termMs: 600_000 }).finally(() => (done = true));
    // Idle turns back off to waits of 5 s.
    await clock.advance(30_000);
    expect(done).toBe(false);
    yieldNow();
    // No time passes: the wait in hand ends with the yield.
    await clock.advance(0);
    expect(done).toBe(true);
    expect((await leading).turns).toBeGreaterThanOrEqual(2);
  });

  it('a busy leader yields with its run checkpointed: the next term finishes it with every item counted once', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 300 })]);
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'sum');
    const first = yieldingLeadership(1);
    const leading = engine.coordinator.lead(first.leadership, { termMs: 600_000 });
    // Ask as soon as the run is under way, so the yield falls in the middle of it.
    const deadline = Date.now() + patience(500 * 5);
    while (!['dispatching', 'running'].includes((await engine.readRun(runId))?.state ?? '') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    first.yieldNow();
    const summary = await leading;
    expect(summary.turns).toBeGreaterThanOrEqual(1);
    const between = await engine.readRun(runId);
    expect(['dispatching', 'running', 'finalizing']).toContain(between?.state);
    // The requester's term (a higher epoch) carries on from the checkpoint.
    await engine.leadUntil('requester', async () => (await engine.readRun(runId))?.state === 'succeeded');
    await stop();
    const record = await engine.readRun(runId);
    expect(record).toMatchObject({ state: 'succeeded', counters: { planned: 300, succeeded: 300, failed: 0 } });
    expect((await engine.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(300));
  });
});
