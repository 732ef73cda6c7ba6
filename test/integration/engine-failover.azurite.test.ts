import { describe, expect, it } from 'vitest';
import { StaleEpochError } from '../../src/errors';
import type { RunOutput } from '../../src/engine/finalizer';
import { requestRun } from '../../src/engine/requests';
import type { Leadership } from '../../src/lease/leader-elector';
import type { MessageReceipt, QueueCallOptions, QueuePort, ReceivedMessage } from '../../src/queue/queue-port';
import { runKeys } from '../../src/runs/run-record';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { expectedSum, sumJob } from '../support/sample-jobs';

const fixture = useAzurite();

/** A term of leadership whose loss the test decides, as a paused or partitioned leader's would be. */
function term(epoch: number) {
  const controller = new AbortController();
  const leadership: Leadership = {
    identity: `leader-${epoch}`,
    epoch,
    signal: controller.signal,
    heartbeat: () => undefined,
    remainingMs: () => (controller.signal.aborted ? 0 : 60_000),
  };
  return { leadership, lose: () => controller.abort(new Error(`leader ${epoch} lost its lease`)) };
}

/** Calls `hook` before the n-th call of `method`, then carries on. */
function tap(queue: QueuePort, method: 'send' | 'delete', n: number, hook: () => void): QueuePort {
  let calls = 0;
  const before = () => {
    if (++calls === n) hook();
  };
  return {
    name: queue.name,
    ensure: (o?: QueueCallOptions) => queue.ensure(o),
    send: async (text: string, o?: QueueCallOptions & { visibilityTimeoutSeconds?: number }) => {
      if (method === 'send') before();
      await queue.send(text, o);
    },
    receive: (max: number, vis: number, o?: QueueCallOptions): Promise<ReceivedMessage[]> => queue.receive(max, vis, o),
    delete: async (m: MessageReceipt, o?: QueueCallOptions) => {
      if (method === 'delete') before();
      return queue.delete(m, o);
    },
    approximateCount: (o?: QueueCallOptions) => queue.approximateCount(o),
  };
}

describe('leader failover inside a run', () => {
  it.each([
    { phase: 'mid-dispatch', method: 'send' as const, after: 100 },
    { phase: 'mid-drain, between checkpoint and delete', method: 'delete' as const, after: 1 },
  ])(
    'the leader loses its signal $phase: a higher epoch resumes, the output is exact, the stale leader is refused',
    async ({ method, after }) => {
      const ports = azuritePorts(fixture, 'failover');
      const items = 300;
      const jobs = [sumJob({ items })];
      const first = term(1);
      const stale = buildEngine(
        {
          ...ports,
          [method === 'send' ? 'work' : 'results']: tap(
            method === 'send' ? ports.work : ports.results,
            method,
            after,
            first.lose,
          ),
        },
        jobs,
      );
      const successor = buildEngine(ports, jobs);
      const stopWorkers = successor.startWorkers(2);
      const runId = await requestRun(ports.docs, 'sum');

      const staleOutcome = await stale.coordinator.lead(first.leadership, { termMs: 60_000 }).catch((err: unknown) => err);
      expect(staleOutcome).toBeInstanceOf(Error);
      const afterLoss = await successor.readRun(runId);
      expect(afterLoss?.state).not.toBe('succeeded');

      const second = term(2);
      const deadline = Date.now() + 60_000;
      while (!['succeeded', 'failed'].includes((await successor.readRun(runId))?.state ?? '') && Date.now() < deadline) {
        await successor.coordinator.lead(second.leadership, { termMs: 5000 });
      }
      await stopWorkers();

      const record = await successor.readRun(runId);
      expect(record?.state).toBe('succeeded');
      expect(record?.counters).toMatchObject({ planned: items, succeeded: items, failed: 0 });
      const output = await successor.readJson<RunOutput>(runKeys.output(runId));
      expect(output?.output).toEqual(expectedSum(items));

      // The old leader comes back with its old epoch: its first fenced write is refused.
      const late = await successor.records
        .update(runKeys.record(runId), 1, (r) => r && { ...r, endReason: 'stale leader was here' })
        .catch((e: unknown) => e);
      expect(late).toBeInstanceOf(StaleEpochError);
      expect((await successor.readRun(runId))?.endReason).toBeNull();
    },
  );
});
