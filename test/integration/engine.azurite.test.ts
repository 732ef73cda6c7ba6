import { describe, expect, it } from 'vitest';
import { requestRun } from '../../src/hub/requests';
import type { FailuresManifest, RunOutput } from '../../src/hub/run-output';
import { runKeys } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { DuplicatingQueue } from '../support/duplicating-queue';
import { buildEngine, lostTick } from '../support/engine-harness';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { failuresOf } from '../support/failures';

const fixture = useAzurite();

async function untilTerminal(engine: ReturnType<typeof buildEngine>, runId: string) {
  return async () => {
    const state = (await engine.readRun(runId))?.state;
    return state === 'succeeded' || state === 'failed' || state === 'cancelled' || state === 'timed-out';
  };
}

describe('job engine on Azurite', () => {
  it('a 1,000-item job across three instances (one leads, all work) yields the directly computed aggregate', async () => {
    const ports = azuritePorts(fixture);
    const jobs = [sumJob({ items: 1000 })];
    // Three instances: each has its own coordinator and worker pump, on one storage account.
    const instances = ['i1', 'i2', 'i3'].map(() => buildEngine(ports, jobs));
    const stops = instances.map((engine) => engine.startWorkers(1));
    const runId = await requestRun(ports.docs, 'sum');
    const done = await untilTerminal(instances[0]!, runId);
    const leaders = new Set<string>();
    await Promise.all(
      instances.map(async (engine, i) => {
        const elector = engine.elector(`instance-${i}`);
        while (!(await done())) {
          try {
            const result = await elector.runIfLeader((l) => engine.coordinator.lead(l, { termMs: 3000, returnWhenIdle: true }));
            if (result.led) leaders.add(`instance-${i}`);
          } catch (err) {
            lostTick(err);
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      }),
    );
    await Promise.all(stops.map((stop) => stop()));
    const output = await instances[0]!.readJson<RunOutput>(runKeys.output(runId));
    expect(output).toMatchObject({ state: 'succeeded', output: expectedSum(1000) });
    expect((await instances[0]!.readRun(runId))?.counters).toMatchObject({
      planned: 1000,
      succeeded: 1000,
      failed: 0,
      dispatched: 1000,
    });
    expect(leaders.size).toBeGreaterThanOrEqual(1);
  });

  it('every work and result message delivered twice: the same output, and the duplicates counted', async () => {
    const base = azuritePorts(fixture, 'dup');
    const ports = { ...base, work: new DuplicatingQueue(base.work), results: new DuplicatingQueue(base.results) };
    const engine = buildEngine(ports, [sumJob({ items: 200 })], { workerVisibilitySeconds: 30 });
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'sum');
    const summaries = await engine.leadUntil('leader', await untilTerminal(engine, runId));
    await stop();
    // Copies that arrive after the run ended are deleted as stray: drain them too.
    summaries.push(...(await engine.leadUntil('leader', async () => (await base.results.approximateCount()) === 0)));
    const output = await engine.readJson<RunOutput>(runKeys.output(runId));
    expect(output).toMatchObject({ state: 'succeeded', output: expectedSum(200) });
    const counters = (await engine.readRun(runId))?.counters;
    expect(counters).toMatchObject({ planned: 200, succeeded: 200, failed: 0 });
    // Each item: two work copies, each answered by two result copies; one counts, the other
    // three are duplicates (or stray, when they come after the run ended).
    const stray = summaries.reduce((total, s) => total + s.stray, 0);
    expect((counters?.duplicates ?? 0) + stray).toBe(3 * 200);
    expect(ports.work.sent).toBe(400);
  });

  it.each([
    { tolerance: { percent: 5 }, state: 'succeeded' },
    { tolerance: { percent: 4 }, state: 'failed' },
    { tolerance: { count: 10 }, state: 'succeeded' },
    { tolerance: { count: 9 }, state: 'failed' },
  ])(
    '5% of items always fail: exactly that set fails, with reasons; tolerance $tolerance → $state',
    async ({ tolerance, state }) => {
      const ports = azuritePorts(fixture, 'fail');
      const cursed = (i: number) => i % 20 === 7;
      const engine = buildEngine(ports, [sumJob({ items: 200, failWhen: cursed, failureTolerance: tolerance })]);
      const stop = engine.startWorkers(2);
      const runId = await requestRun(ports.docs, 'sum');
      await engine.leadUntil('leader', await untilTerminal(engine, runId));
      await stop();
      const record = await engine.readRun(runId);
      expect(record?.state).toBe(state);
      expect(record?.counters).toMatchObject({ planned: 200, succeeded: 190, failed: 10 });
      const manifest = await engine.readJson<FailuresManifest>(runKeys.manifest(runId));
      const expectedFailed = Array.from({ length: 200 }, (_, i) => i).filter(cursed);
      const failures = await failuresOf(ports.docs, manifest);
      expect(failures.map((f) => f.item)).toEqual(expectedFailed);
      for (const failure of failures) {
        expect(failure.reason).toBe(`Error: item ${failure.item} is cursed`);
        expect(failure.attempts).toBe(3);
      }
      const output = await engine.readJson<RunOutput>(runKeys.output(runId));
      expect(output?.output).toEqual(expectedSum(200, cursed));
    },
  );
});
