import { describe, expect, it } from 'vitest';
import { StaleEpochError } from '../../src/errors';
import type { RunOutput } from '../../src/hub/run-output';
import { requestRun } from '../../src/hub/requests';
import type { Leadership } from '../../src/lease/term';
import type { MessageReceipt, QueueCallOptions, QueuePort } from '../../src/queue/queue-port';
import { ForwardingQueue, type SendOptions } from '../support/forwarding-queue';
import { runKeys } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { noLeaseToRaise } from '../support/unit-engine';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

/** A term of leadership whose loss the test decides, as a paused or partitioned leader's would be. */
function term(epoch: number) {
  const controller = new AbortController();
  const leadership: Leadership = {
    identity: `leader-${epoch}`,
    epoch,
    signal: controller.signal,
    yieldSignal: new AbortController().signal,
    heartbeat: () => undefined,
    remainingMs: () => (controller.signal.aborted ? 0 : 60_000),
    raiseEpoch: noLeaseToRaise,
    restUntil: () => undefined,
  };
  return { leadership, lose: () => controller.abort(new Error(`leader ${epoch} lost its lease`)) };
}

/** Calls `hook` before the n-th call of `method`, then carries on. */
class TappedQueue extends ForwardingQueue {
  private calls = 0;
  constructor(
    inner: QueuePort,
    private readonly method: 'send' | 'delete',
    private readonly n: number,
    private readonly hook: () => void,
  ) {
    super(inner);
  }
  override send(text: string, options?: SendOptions): Promise<MessageReceipt> {
    if (this.method === 'send') this.tick();
    return super.send(text, options);
  }
  override delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean> {
    if (this.method === 'delete') this.tick();
    return super.delete(message, options);
  }
  private tick(): void {
    if (++this.calls === this.n) this.hook();
  }
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
          [method === 'send' ? 'work' : 'results']: new TappedQueue(
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

      const staleOutcome = await stale.coordinator
        .lead(first.leadership, { termMs: 60_000, returnWhenIdle: true })
        .catch((err: unknown) => err);
      expect(staleOutcome).toBeInstanceOf(Error);
      const afterLoss = await successor.readRun(runId);
      expect(afterLoss?.state).not.toBe('succeeded');

      const second = term(2);
      const deadline = Date.now() + patience(60_000);
      while (!['succeeded', 'failed'].includes((await successor.readRun(runId))?.state ?? '') && Date.now() < deadline) {
        await successor.coordinator.lead(second.leadership, { termMs: 5000, returnWhenIdle: true });
      }
      await stopWorkers();

      const record = await successor.readRun(runId);
      expect(record?.state).toBe('succeeded');
      expect(record?.counters).toMatchObject({ planned: items, succeeded: items, failed: 0 });
      const output = await successor.readJson<RunOutput>(runKeys.output(runId));
      expect(output?.output).toEqual(expectedSum(items));

      // The old leader's coordinator comes back, unaware it lost: its first fenced write fails
      // and the record does not change.
      const before = await successor.records.read(runKeys.record(runId));
      // Give it something to write: a request it will try to apply with its old epoch.
      await requestRun(ports.docs, 'sum');
      const comeback = await stale.coordinator
        .lead(term(1).leadership, { termMs: 5000, returnWhenIdle: true })
        .catch((e: unknown) => e);
      expect(comeback).toBeInstanceOf(StaleEpochError);
      expect((await successor.records.read(runKeys.record(runId)))?.etag).toBe(before?.etag);

      // And a direct write with the old epoch is refused too.
      const late = await successor.records
        .update(runKeys.record(runId), 1, (r) => r && { ...r, endReason: 'stale leader was here' })
        .catch((e: unknown) => e);
      expect(late).toBeInstanceOf(StaleEpochError);
      expect((await successor.readRun(runId))?.endReason).toBeNull();
    },
  );
});
