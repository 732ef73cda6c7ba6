import { describe, expect, it } from 'vitest';
import { defineJob } from '../../../src/jobs/define-job';
import { requestRun } from '../../../src/hub/requests';
import { runKeys } from '../../../src/hub/run-record';
import type { RunOutput } from '../../../src/hub/run-output';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { expectedSum, sumJob, type SumAcc } from '../../support/sample-jobs';

describe('engine on in-memory ports', () => {
  it('calls finalize once per run with the output and the run id as idempotency key; a failing hook is recorded, not fatal', async () => {
    const ports = memoryPorts();
    const calls: Array<{ output: unknown; key: string; state: string; planned: number }> = [];
    const base = sumJob({ items: 10 });
    const job = defineJob({
      ...base,
      name: 'hooked',
      finalize: (output, ctx) => {
        calls.push({ output, key: ctx.idempotencyKey, state: ctx.state, planned: ctx.counters.planned });
        throw new Error('downstream is down; AccountKey=abc123');
      },
    });
    const engine = buildEngine(ports, [job]);
    const stop = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'hooked');
    await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded', 20_000);
    await stop();
    expect(calls).toEqual([{ output: expectedSum(10), key: runId, state: 'succeeded', planned: 10 }]);
    const record = await engine.readRun(runId);
    expect(record?.finalizeError).toBe('downstream is down; AccountKey=***');
    expect(record?.outputKey).toBe(runKeys.output(runId));
  });

  it('runs a manual 200-item job end to end and writes the exact aggregate', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 200, itemsPerMessage: 3 })]);
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'sum');
    await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded', 20_000);
    await stop();
    const output = await engine.readJson<RunOutput>(runKeys.output(runId));
    expect(output?.output).toEqual(expectedSum(200));
    expect(output?.state).toBe('succeeded');
    const record = await engine.readRun(runId);
    expect(record?.counters).toMatchObject({ planned: 200, dispatched: 200, succeeded: 200, failed: 0 });
    expect((output?.output as SumAcc).count).toBe(200);
  });
});
