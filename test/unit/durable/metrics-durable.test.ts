import * as df from 'durable-functions';
import { describe, expect, it } from 'vitest';
import { createFinalizeActivity, createSplitActivity, DURABLE_EPOCH, runInstanceId, startDueRuns } from '../../../src/durable';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { newRunRecord, runKeys, scheduledRunId, startLagMs, transition, type RunRecord } from '../../../src/hub/run-record';
import type { RunEndTelemetry } from '../../../src/telemetry/run-telemetry';
import { useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';

const fakeDurable = useFakeDurable();
const merge = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});
const T0 = new Date('2026-03-01T02:00:30.000Z');
const T1 = new Date('2026-03-01T02:01:10.000Z');
const RUN = scheduledRunId('nightly', new Date('2026-03-01T02:01:00.000Z'));

function recorder(): RunEndTelemetry & { ended: RunRecord[]; started: RunRecord[]; firstItems: RunRecord[] } {
  const ended: RunRecord[] = [];
  const started: RunRecord[] = [];
  const firstItems: RunRecord[] = [];
  return {
    ended,
    started,
    firstItems,
    runEnded: (record) => ended.push(record),
    runStarted: (record) => started.push(record),
    firstItemCounted: (record) => firstItems.push(record),
    occurrencesRecorded: () => undefined,
  };
}

/** A record as the split activity and the orchestration leave it: running, at the durable engine's epoch. */
async function seedRunning(docs: InMemoryDocumentStore, runId: string, job: string, created: Date, timeoutSeconds = 600) {
  const records = new FencedDocuments<RunRecord>(docs);
  let record = newRunRecord({ runId, job, trigger: 'manual', occurrence: undefined, now: created, timeoutSeconds });
  for (const state of ['dispatching', 'running'] as const) record = transition(record, state, created);
  record = { ...record, planEpoch: 1, planChunks: 1, counters: { ...record.counters, planned: 4, dispatched: 4 } };
  await records.create(runKeys.record(runId), DURABLE_EPOCH, record);
}

describe('durable run ends reach telemetry as the queue engine reports them', () => {
  it('the finalize activity reports its run once, however often Durable repeats it', async () => {
    const docs = new InMemoryDocumentStore();
    const telemetry = recorder();
    const jobs = new Map([['sum', withMerge(sumJob({ items: 4 }), merge)]]);
    const runId = 'sum/manual-1';
    await seedRunning(docs, runId, 'sum', T0);
    const finalize = createFinalizeActivity({ jobs, docs, clock: { date: () => T1 }, telemetry });
    const input = {
      kind: 'complete',
      runId,
      job: 'sum',
      acc: { count: 3, sum: 6, squares: 14 },
      counts: { planned: 4, succeeded: 3, failed: 1 },
      failures: [{ item: 2, reason: 'cursed', attempts: 3 }],
      // The earliest time a chunk's activity had outcomes, as the orchestrations pass it on.
      firstItemAt: '2026-03-01T02:00:31.250Z',
    };
    // Two executions at once (Durable can run an activity again before the first one returns),
    // then a repeat: one end, reported once.
    await Promise.all([finalize(input), finalize(input)]);
    await finalize(input);
    expect(telemetry.ended).toHaveLength(1);
    expect(telemetry.ended[0]?.firstItemAt).toBe('2026-03-01T02:00:31.250Z');
    expect(telemetry.firstItems).toEqual([expect.objectContaining({ runId, firstItemAt: '2026-03-01T02:00:31.250Z' })]);
    expect(telemetry.ended[0]).toMatchObject({
      runId,
      job: 'sum',
      state: 'failed',
      createdAt: T0.toISOString(),
      endedAt: T1.toISOString(),
      counters: { planned: 4, succeeded: 3, failed: 1 },
    });
  });

  it('the split activity reports the run it creates once, with its start lag; a repeat reports nothing', async () => {
    const docs = new InMemoryDocumentStore();
    const telemetry = recorder();
    const jobs = new Map([['nightly', withMerge(sumJob({ name: 'nightly', items: 4 }), merge)]]);
    const split = createSplitActivity({ jobs, docs, clock: { date: () => T1 }, telemetry });
    const input = { runId: RUN, job: 'nightly', occurrence: '2026-03-01T02:01:00.000Z', trigger: 'schedule', chunkItems: 500 };
    await split(input);
    await split(input);
    expect(telemetry.started).toEqual([expect.objectContaining({ runId: RUN, createdAt: T1.toISOString() })]);
    expect(startLagMs(telemetry.started[0]!)).toBe(10_000);
  });

  it('the starter reports a run it times out once, and nothing on the ticks after', async () => {
    const durable = await fakeDurable();
    const docs = new InMemoryDocumentStore();
    const telemetry = recorder();
    const jobs = [withMerge(sumJob({ name: 'nightly', items: 4, schedule: '0 * * * * *', timeoutSeconds: 60 }), merge)];
    const tick = (now: Date) => startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now, telemetry });
    await tick(T0);
    expect((await tick(T1)).started).toEqual([RUN]);
    durable.set(runInstanceId(RUN), df.OrchestrationRuntimeStatus.Running);
    await seedRunning(docs, RUN, 'nightly', T1, 60);
    await tick(new Date(T1.getTime() + 59_000));
    expect(telemetry.ended).toEqual([]);
    const late = await tick(new Date(T1.getTime() + 61_000));
    expect(late.ended).toHaveLength(1);
    await tick(new Date(T1.getTime() + 90_000));
    expect(telemetry.ended).toHaveLength(1);
    expect(telemetry.ended[0]).toMatchObject({ runId: RUN, state: 'timed-out', endReason: late.ended[0]?.reason });
  });
});
