import { describe, expect, it } from 'vitest';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { requestRun } from '../../src/engine/requests';
import { runKeys } from '../../src/runs/run-record';
import type { RunOutput } from '../../src/engine/finalizer';
import { buildEngine, type EnginePorts } from '../support/engine-harness';
import { expectedSum, sumJob, type SumAcc } from '../support/sample-jobs';

function memoryPorts(): EnginePorts {
  const lease = new InMemoryLeaseStore();
  return {
    docs: new InMemoryDocumentStore(),
    work: new InMemoryQueue('work'),
    results: new InMemoryQueue('results'),
    poison: new InMemoryQueue('work-poison'),
    leases: () => lease,
  };
}

describe('engine on in-memory ports', () => {
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
