import { describe, expect, it } from 'vitest';
import { hedgeBound } from '../../src/engine/straggler-watch';
import { requestRun } from '../../src/hub/requests';
import type { RunOutput } from '../../src/hub/run-output';
import { isTerminal, runKeys } from '../../src/hub/run-record';
import { DEFAULT_HEDGE } from '../../src/jobs/job-definition';
import type { QueueCallOptions, ReceivedMessage } from '../../src/queue/queue-port';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { ForwardingQueue } from '../support/forwarding-queue';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

/** How long a received work message stays hidden: the Functions host's 10 minutes. */
const VISIBILITY_SECONDS = 600;

/**
 * The workers' view of the work queue, with one instance paused (SIGSTOP) while it holds a
 * message: the first delivery of message `first` is received, and so hidden for the workers'
 * visibility timeout, and never handed to a handler.
 */
class PausedHolder extends ForwardingQueue {
  held: ReceivedMessage | undefined;

  constructor(
    inner: ConstructorParameters<typeof ForwardingQueue>[0],
    private readonly first: number,
  ) {
    super(inner);
  }

  override async receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    const batch = await super.receive(max, visibilityTimeoutSeconds, options);
    if (this.held) return batch;
    const taken = batch.find((m) => (JSON.parse(m.text) as { first?: number }).first === this.first);
    if (!taken) return batch;
    this.held = taken;
    return batch.filter((m) => m !== taken);
  }
}

describe('hedged dispatch on Azurite', () => {
  it('a worker that holds one message without processing it does not hold the run: it ends exact, long before the message would show again', async () => {
    const ports = azuritePorts(fixture, 'hedge');
    const items = 40;
    const holder = new PausedHolder(ports.work, 13);
    // The job's hedging is the default one.
    const engine = buildEngine({ ...ports, work: holder }, [sumJob({ items })], { workerVisibilitySeconds: VISIBILITY_SECONDS });
    const stopWorkers = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'sum');
    const started = Date.now();
    // A hang guard far below the visibility timeout: without a copy the run would wait out the 600 s.
    await engine.leadUntil('leader', async () => isTerminal((await engine.readRun(runId))?.state ?? 'planning'), 60_000);
    const tookMs = Date.now() - started;

    expect(holder.held).toBeDefined();
    expect(tookMs).toBeLessThan(VISIBILITY_SECONDS * 1000);
    const record = await engine.readRun(runId);
    expect(record?.state).toBe('succeeded');
    expect(record?.counters).toMatchObject({ planned: items, succeeded: items, failed: 0 });
    expect(record?.hedges).toBeGreaterThanOrEqual(1);
    expect(record?.hedges).toBeLessThanOrEqual(hedgeBound(DEFAULT_HEDGE.maxPercent, items, DEFAULT_HEDGE.minCopies));
    const output = await engine.readJson<RunOutput>(runKeys.output(runId));
    expect(output?.output).toEqual(expectedSum(items));

    // The paused instance comes back and its message shows again: the run has ended, so a worker
    // drops it, and nothing of the run changes.
    await ports.work.setVisibility(holder.held!, 0);
    const deadline = Date.now() + patience(30_000);
    while ((await ports.work.approximateCount()) > 0) {
      if (Date.now() > deadline) throw new Error('the late original was not taken off the queue');
      await new Promise((r) => setTimeout(r, 50));
    }
    await stopWorkers();
    expect(await engine.readRun(runId)).toEqual(record);
    expect((await engine.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(items));
  });
});
