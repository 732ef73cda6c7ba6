import { describe, expect, it } from 'vitest';
import { renderShow } from '../../src/cli/format';
import { FAILURES_LISTED, showView } from '../../src/hub/read-model';
import { requestRun } from '../../src/hub/requests';
import { isTerminal, type RunRecord } from '../../src/hub/run-record';
import { firstRunFailures, readRunDetails } from '../../src/hub/status';
import type { QueueCallOptions, ReceivedMessage } from '../../src/queue/queue-port';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { ForwardingQueue } from '../support/forwarding-queue';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

const ITEMS = 30;
const FAILING = new Set([5, 17]);
const HELD = 13;

/** The workers' view of the work queue, with one instance paused while it holds message `HELD`. */
class PausedHolder extends ForwardingQueue {
  held: ReceivedMessage | undefined;

  override async receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    const batch = await super.receive(max, visibilityTimeoutSeconds, options);
    if (this.held) return batch;
    const taken = batch.find((m) => (JSON.parse(m.text) as { first?: number }).first === HELD);
    if (!taken) return batch;
    this.held = taken;
    return batch.filter((m) => m !== taken);
  }
}

describe('an open run on Azurite', () => {
  it('shows its failures so far and its oldest outstanding message while open, and calls onItemFailed once per failed item', async () => {
    const ports = azuritePorts(fixture, 'open');
    const holder = new PausedHolder(ports.work);
    const calls: { item: number; runId: string }[] = [];
    const job = sumJob({
      items: ITEMS,
      failWhen: (i) => FAILING.has(i),
      failureTolerance: { count: FAILING.size },
      // Hedging on, but no copy within the test: the held message stays outstanding until released.
      hedge: { maxPercent: 5, minWaitSeconds: 3600 },
      onItemFailed: (failure, ctx) => {
        calls.push({ item: failure.item, runId: ctx.runId });
      },
    });
    // Retries of the failing items (3 attempts) go through the queue, as under the host.
    const engine = buildEngine({ ...ports, work: holder }, [job], { workerVisibilitySeconds: 600 });
    const stopWorkers = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'sum');

    // Lead until every item but the held one is counted: the run is open, waiting for it.
    const counted = (r: RunRecord | undefined) => (r ? r.counters.succeeded + r.counters.failed : 0);
    let mid: RunRecord | undefined;
    await engine.leadUntil('leader', async () => {
      mid = await engine.readRun(runId);
      return counted(mid) === ITEMS - 1 && (mid?.outstanding.length ?? 0) > 0;
    });
    expect(holder.held).toBeDefined();
    expect(mid?.state).toBe('running');
    expect(mid?.counters).toMatchObject({ planned: ITEMS, failed: FAILING.size, succeeded: ITEMS - 1 - FAILING.size });

    // What `baton show` and the run API read, mid-run.
    const details = (await readRunDetails(ports.docs, runId))!;
    expect(details.manifest).toBeUndefined();
    const now = new Date();
    const view = showView('baton', 'baton-runs', details, await firstRunFailures(ports.docs, details, FAILURES_LISTED), now);
    expect(view.failures).toMatchObject({ failedCount: FAILING.size, missingCount: 1, soFar: true });
    expect(view.failures?.failed.map((f) => f.item).sort((a, b) => a - b)).toEqual([...FAILING]);
    expect(view.failures?.failed.every((f) => f.reason.includes('is cursed') && f.attempts === 3)).toBe(true);
    expect(view.run.outstanding).toHaveLength(1);
    const [waiting] = view.run.outstanding;
    expect(waiting).toMatchObject({ message: HELD, first: HELD, count: 1 });
    expect(waiting!.ageMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(waiting!.since)).toBeGreaterThanOrEqual(Date.parse(details.record.createdAt));
    const text = renderShow(view, now);
    expect(text).toContain(`${FAILING.size} failed so far`);
    expect(text).toMatch(new RegExp(`^\\s+${HELD}\\s+${HELD}\\s+\\d+s \\(since `, 'm'));
    // Each failure was told as soon as its checkpoint landed, while the run is open.
    expect(calls.map((c) => c.item).sort((a, b) => a - b)).toEqual([...FAILING]);

    // The paused instance comes back: the run ends, and the hook was called once per failed item.
    await ports.work.setVisibility(holder.held!, 0);
    await engine.leadUntil('leader', async () => isTerminal((await engine.readRun(runId))?.state ?? 'planning'));
    await stopWorkers();
    const ended = await engine.readRun(runId);
    expect(ended).toMatchObject({ state: 'succeeded', counters: { succeeded: ITEMS - FAILING.size, failed: FAILING.size } });
    expect((await engine.readJson<{ output: unknown }>(`runs/${runId}/output.json`))?.output).toEqual(
      expectedSum(ITEMS, (i) => FAILING.has(i)),
    );
    const shownEnded = showView('baton', 'baton-runs', (await readRunDetails(ports.docs, runId))!, undefined, new Date());
    expect(shownEnded.run.outstanding).toEqual([]);
    // Nothing more is owed to the hook: each failed item was told once.
    const deadline = Date.now() + patience(10_000);
    while (calls.length < FAILING.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(calls).toHaveLength(FAILING.size);
    expect(new Set(calls.map((c) => c.item))).toEqual(FAILING);
    expect(calls.every((c) => c.runId === runId)).toBe(true);
  });
});
