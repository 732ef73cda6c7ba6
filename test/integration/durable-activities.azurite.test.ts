import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { defineJob } from '../../src/jobs/define-job';
import { requestRun } from '../../src/hub/requests';
import { readRunDetails } from '../../src/hub/status';
import { listRuns } from '../../src/hub/run-index';
import { isTerminal, newRunRecord, runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import { createSyntheticJob, expectedSynthetic, hangOrderName, type SyntheticJobSpec } from '../../functions/synthetic-job';
import {
  createFinalizeActivity,
  createProcessActivity,
  createSplitActivity,
  ForeignRunError,
  ItemsFailedError,
  type SplitResult,
} from '../../src/durable';
import { useAzurite } from '../support/azurite';
import { keysUnder } from '../support/retention-runs';
import { azuritePorts } from '../support/azurite-engine';
import { comparableRun, durableEngine, durableSynthetic, withMerge } from '../support/durable-jobs';
import { buildEngine } from '../support/engine-harness';
import { failuresOf } from '../support/failures';

const fixture = useAzurite();
const OCCURRENCE = '2026-03-01T02:00:00.000Z';

/** A fresh hub's `<hub>-runs` container on Azurite, as the Functions app and the CLI open it. */
function hubDocs(prefix: string): BlobDocumentStore {
  return new BlobDocumentStore(fixture.blobService.getContainerClient(`${fixture.uniqueName(prefix)}-runs`));
}

describe('durable activities on Azurite', () => {
  it('split, process and finalize leave the run, output and manifest the CLI reads, as the queue engine does', async () => {
    const spec: SyntheticJobSpec = {
      name: 'audit',
      items: 120,
      itemsPerMessage: 3,
      failEvery: 9,
      failureTolerance: { percent: 20 },
    };

    const ports = azuritePorts(fixture, 'queue');
    const engine = buildEngine(ports, [createSyntheticJob(spec)], { tuning: { maxAttempts: 3 } });
    const stop = engine.startWorkers(2);
    const queueRunId = await requestRun(ports.docs, 'audit');
    await engine.leadUntil('leader', async () => isTerminal((await engine.readRun(queueRunId))?.state ?? 'planning'), 90_000);
    await stop();
    const queue = await readRunDetails(ports.docs, queueRunId);

    const docs = hubDocs('durable');
    const durable = durableEngine([durableSynthetic(spec)], docs, { seed: 5 });
    const run = await durable.run('audit', OCCURRENCE, { chunkItems: 50, maxAttempts: 3 });
    const details = await readRunDetails(docs, run.runId);

    expect(details?.output?.output).toEqual(expectedSynthetic(spec).output);
    expect((await failuresOf(docs, details?.manifest)).map((f) => f.item)).toEqual(expectedSynthetic(spec).failed);
    expect(await comparableRun(docs, details)).toEqual(await comparableRun(ports.docs, queue));
    // Both engines say when the run's first item had its outcome, between its creation and end.
    for (const record of [details!.record, queue!.record]) {
      expect(record.firstItemAt).not.toBeNull();
      expect(Date.parse(record.firstItemAt!)).toBeGreaterThanOrEqual(Date.parse(record.createdAt));
      expect(Date.parse(record.firstItemAt!)).toBeLessThanOrEqual(Date.parse(record.endedAt!));
    }
    expect(details?.record).toMatchObject({
      runId: run.runId,
      job: 'audit',
      trigger: 'schedule',
      occurrence: OCCURRENCE,
      state: 'succeeded',
      outputKey: runKeys.output(run.runId),
      manifestKey: runKeys.manifest(run.runId),
      // 50 rounds down to whole messages of 3: three chunks, one plan blob each.
      chunkItems: 48,
      planChunks: 3,
    });
    expect((await listRuns(docs)).runs.map((r) => r.runId)).toEqual([run.runId]);
    // Every chunk orchestration has returned by the end: the plan is deleted with it.
    expect(await keysUnder(docs, runKeys.planPrefix(run.runId))).toEqual([]);
  });

  it('a finalize hook that hangs is bounded by hookTimeouts: the run ends with a finalize error', async () => {
    const docs = hubDocs('hung');
    const orders = mkdtempSync(join(tmpdir(), 'baton-hang-orders-'));
    try {
      const job = durableSynthetic({
        name: 'hung',
        items: 4,
        itemsPerMessage: 2,
        hangOrders: orders,
        hookTimeouts: { finalizeSeconds: 1, graceSeconds: 0.5 },
      });
      const deps = { jobs: new Map([[job.name, job]]), docs };
      const runId = `hung/${OCCURRENCE}`;
      // The hook never settles and ignores its signal, as one stuck on a dead connection does.
      writeFileSync(join(orders, hangOrderName(runId, 'finalize')), '');
      const planned = await createSplitActivity(deps)({
        runId,
        job: 'hung',
        occurrence: OCCURRENCE,
        trigger: 'schedule',
        chunkItems: 4,
      });
      const { planEpoch } = planned as Extract<SplitResult, { kind: 'planned' }>;
      const process = createProcessActivity(deps);
      for (const first of [0, 2]) {
        await process({ runId, job: 'hung', planEpoch, chunkItems: 4, first, count: 2, attempt: 1, final: true });
      }
      const ended = await createFinalizeActivity(deps)({
        kind: 'complete',
        runId,
        job: 'hung',
        acc: { count: 4, sum: 12, squares: 56 },
        counts: { planned: 4, succeeded: 4, failed: 0 },
        failures: [],
      });
      expect(ended).toMatchObject({ runId, state: 'succeeded' });
      const record = (await readRunDetails(docs, runId))?.record;
      expect(record?.state).toBe('succeeded');
      expect(record?.finalizeError).toMatch(/^finalize did not finish within 1 s and ignored its abort signal/);
    } finally {
      rmSync(orders, { recursive: true, force: true });
    }
  });

  it('each activity is safe to repeat, and a run that has ended is only reported', async () => {
    const docs = hubDocs('repeat');
    const job = durableSynthetic({ name: 'repeat', items: 10, itemsPerMessage: 2, failEvery: 4, failureTolerance: { count: 5 } });
    const deps = { jobs: new Map([[job.name, job]]), docs };
    const split = createSplitActivity(deps);
    const process = createProcessActivity(deps);
    const finalize = createFinalizeActivity(deps);
    const runId = `repeat/${OCCURRENCE}`;
    const splitInput = { runId, job: 'repeat', occurrence: OCCURRENCE, trigger: 'schedule', chunkItems: 4 };

    const first = await split(splitInput);
    expect(first).toMatchObject({ kind: 'planned', planned: 10, chunkItems: 4, chunks: 3 });
    expect(await split(splitInput)).toEqual(first);
    const planEpoch = (first as Extract<SplitResult, { kind: 'planned' }>).planEpoch;

    const message = { runId, job: 'repeat', planEpoch, chunkItems: 4, first: 2, count: 2, attempt: 1 };
    // Items 2 and 3: item 3 fails by design. Before the last try the activity throws, for the retry policy.
    await expect(process({ ...message, final: false })).rejects.toThrow(ItemsFailedError);
    await expect(process({ ...message, final: false })).rejects.toThrow(
      '1 of 2 item(s) failed; item 3: Error: synthetic item 3 fails by design',
    );
    await expect(process({ ...message, final: true, attempt: 5 })).resolves.toEqual({
      outcomes: [
        { i: 2, ok: true, r: { v: 4 } },
        { i: 3, ok: false, e: 'Error: synthetic item 3 fails by design', a: 5 },
      ],
      doneAt: expect.any(String),
    });
    await expect(process({ ...message, first: 8, count: 2, final: false })).resolves.toEqual({
      outcomes: [
        { i: 8, ok: true, r: { v: 16 } },
        { i: 9, ok: true, r: { v: 18 } },
      ],
      doneAt: expect.any(String),
    });

    const acc = { count: 8, sum: 70, squares: 908 }; // items 0..9 but 3 and 7, results 2i
    const failures = [
      { item: 7, reason: 'Error: synthetic item 7 fails by design', attempts: 5 },
      { item: 3, reason: 'Error: synthetic item 3 fails by design', attempts: 5 },
    ];
    const finalizeInput = {
      kind: 'complete',
      runId,
      job: 'repeat',
      acc,
      counts: { planned: 10, succeeded: 8, failed: 2 },
      failures,
    };
    const ended = await finalize(finalizeInput);
    const output = await docs.read(runKeys.output(runId));
    expect(await finalize(finalizeInput)).toEqual(ended);
    expect(await finalize({ ...finalizeInput, acc: { count: 0, sum: 0, squares: 0 } })).toEqual(ended);
    expect((await docs.read(runKeys.output(runId)))?.etag).toBe(output?.etag);
    expect(ended).toEqual({
      runId,
      state: 'succeeded',
      counts: { planned: 10, succeeded: 8, failed: 2 },
      outputKey: runKeys.output(runId),
      manifestKey: runKeys.manifest(runId),
    });
    const details = await readRunDetails(docs, runId);
    expect(details?.output).toMatchObject({
      state: 'succeeded',
      output: acc,
      counters: { planned: 10, succeeded: 8, failed: 2 },
    });
    expect(details?.manifest).toEqual({
      runId,
      state: 'succeeded',
      failedCount: 2,
      failureParts: [expect.stringMatching(/\/failures\/e0-/)],
      missing: [],
      missingCount: 0,
    });
    expect(await failuresOf(docs, details?.manifest)).toEqual([...failures].reverse());
    // The repeated finalizes found the manifest and wrote no failure part of their own.
    const parts: string[] = [];
    for await (const key of docs.list(`${runKeys.prefix(runId)}failures/`)) parts.push(key);
    expect(parts).toEqual(details?.manifest?.failureParts);
    expect(await split(splitInput)).toEqual({ kind: 'ended', result: ended });
  });

  it('a split that throws ends the run failed with its reason (secrets masked), as the queue planner does', async () => {
    const docs = hubDocs('broken');
    const broken = withMerge(
      defineJob<{ i: number }, number, number>({
        name: 'broken',
        schedule: '0 0 0 1 1 *',
        *split() {
          yield { i: 0 };
          throw new Error('listing failed: AccountKey=abc123;');
        },
        process: (item) => item.i,
        aggregate: { initial: () => 0, add: (a, r) => a + r },
      }),
      (a: number, b: number) => a + b,
    );
    const split = createSplitActivity({ jobs: new Map([[broken.name, broken]]), docs });
    const runId = `broken/${OCCURRENCE}`;
    const result = await split({ runId, job: 'broken', occurrence: OCCURRENCE, trigger: 'schedule', chunkItems: 500 });
    const reason = 'split failed: listing failed: AccountKey=***;';
    expect(result).toEqual({ kind: 'failed', reason });
    const details = await readRunDetails(docs, runId);
    expect(details?.record).toMatchObject({ state: 'failed', endReason: reason, planEpoch: null });
    expect(await keysUnder(docs, runKeys.planPrefix(runId))).toEqual([]);
  });

  it('leaves alone a run record a queue-engine leader has written', async () => {
    const docs = hubDocs('foreign');
    const job = durableSynthetic({ name: 'foreign', items: 3 });
    const runId = `foreign/${OCCURRENCE}`;
    const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
    const record = newRunRecord({
      runId,
      job: 'foreign',
      trigger: 'schedule',
      occurrence: new Date(OCCURRENCE),
      now: new Date(OCCURRENCE),
      timeoutSeconds: 60,
    });
    const written = await records.create(runKeys.record(runId), 2, record);
    const split = createSplitActivity({ jobs: new Map([[job.name, job]]), docs });
    await expect(split({ runId, job: 'foreign', occurrence: OCCURRENCE, trigger: 'schedule', chunkItems: 500 })).rejects.toThrow(
      ForeignRunError,
    );
    expect((await records.read(runKeys.record(runId)))?.etag).toBe(written.etag);
  });
});
