/**
 * Retention on Azurite, through the engine an app runs: an idle leader deletes the runs past
 * `BATON_RETENTION_DAYS` with every blob they had, leaves open and newer runs as they were, and
 * a run that has just ended keeps only what a reader needs (the storage a finished run costs).
 */
import { describe, expect, it } from 'vitest';
import { requestRun } from '../../src/hub/requests';
import { retentionSlice } from '../../src/hub/retention';
import { listRuns } from '../../src/hub/run-index';
import { isTerminal, runKeys } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine } from '../support/engine-harness';
import { blobsOf, DAY, seedRun, type SeededRun } from '../support/retention-runs';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();
const HOUR = 3_600_000;

describe('retention on Azurite', () => {
  it(
    'an idle leader deletes ended runs past retention whole; open and newer runs keep every blob; a finished 10,000-item run keeps only its record, output and failures',
    { timeout: patience(240_000) },
    async () => {
      const ports = azuritePorts(fixture, 'ret');
      const container = fixture.blobService.getContainerClient(`${ports.hub}-runs`);
      const now = new Date();
      const old: SeededRun[] = [];
      for (let i = 0; i < 3; i++) old.push(await seedRun(ports.docs, { job: 'sum', name: `old-${i}`, now, age: (40 + i) * DAY }));
      const openOld = await seedRun(ports.docs, { job: 'sum', name: 'open-old', now, age: 40 * DAY, open: true });
      const young = await seedRun(ports.docs, { job: 'sum', name: 'young', now, age: HOUR });
      const etags = async (run: SeededRun) => Promise.all(run.keys.map(async (key) => (await ports.docs.read(key))?.etag));
      const before = { open: await etags(openOld), young: await etags(young) };

      // Ten failing items, so the run leaves a failure log as well as its output.
      const job = sumJob({
        items: 10_000,
        itemsPerMessage: 100,
        failWhen: (i) => i % 1000 === 7,
        failureTolerance: { count: 10 },
      });
      const engine = buildEngine(ports, [job], { retention: { runDays: 30, outputDays: 30 }, tuning: { maxAttempts: 1 } });
      const stop = engine.startWorkers(2);
      const runId = await requestRun(ports.docs, 'sum');
      const gone = async () =>
        (await Promise.all(old.map(async (run) => (await blobsOf(ports.docs, run)).length))).every((n) => n === 0);
      try {
        await engine.leadUntil(
          'leader',
          async () => {
            const state = (await engine.readRun(runId))?.state;
            return state !== undefined && isTerminal(state) && (await gone());
          },
          180_000,
        );
      } finally {
        await stop();
      }

      const record = await engine.readRun(runId);
      expect(record).toMatchObject({ state: 'succeeded', counters: { planned: 10_000, succeeded: 9990, failed: 10 } });
      expect((await engine.readJson<{ output: unknown }>(runKeys.output(runId)))?.output).toEqual(
        expectedSum(10_000, (i) => i % 1000 === 7),
      );
      for (const run of old) expect(await blobsOf(ports.docs, run)).toEqual([]);
      expect(await blobsOf(ports.docs, openOld)).toEqual(openOld.keys);
      expect(await blobsOf(ports.docs, young)).toEqual(young.keys);
      expect({ open: await etags(openOld), young: await etags(young) }).toEqual(before);
      expect((await listRuns(ports.docs, { limit: 10 })).runs.map((r) => r.runId).sort()).toEqual(
        [runId, openOld.runId, young.runId].sort(),
      );

      // What the finished run keeps: the record, the output, the manifest and the failure log's
      // parts; no plan chunk, no claim. Plus its two empty index entries.
      const blobs: Array<{ name: string; bytes: number }> = [];
      for await (const blob of container.listBlobsFlat({ prefix: runKeys.prefix(runId) })) {
        blobs.push({ name: blob.name.slice(runKeys.prefix(runId).length), bytes: blob.properties.contentLength ?? 0 });
      }
      const names = blobs.map((b) => b.name);
      expect(names.filter((n) => n.startsWith('plan/') || n.startsWith('claims/'))).toEqual([]);
      expect(names.filter((n) => !n.startsWith('failures/'))).toEqual(['failures.json', 'output.json', 'run.json']);
      expect(names.filter((n) => n.startsWith('failures/')).length).toBeGreaterThanOrEqual(1);
      const bytes = blobs.reduce((total, b) => total + b.bytes, 0);
      // The dedupe bitset (10,000 bits, in base64) is most of it.
      expect(bytes).toBeLessThan(16 * 1024);
      console.info(
        `a finished 10,000-item run keeps ${blobs.length} blobs, ${bytes} bytes (${blobs.map((b) => `${b.name} ${b.bytes}`).join(', ')}), and 2 empty index entries`,
      );
    },
  );

  it('outputs kept longer than runs: the run keeps its record and output past BATON_RETENTION_DAYS, and loses both at the output horizon', async () => {
    const ports = azuritePorts(fixture, 'retout');
    const now = new Date();
    const trimmed = await seedRun(ports.docs, { job: 'sum', name: 'trimmed', now, age: 10 * DAY });
    const whole = await seedRun(ports.docs, { job: 'sum', name: 'whole', now, age: 100 * DAY });
    const policy = { runDays: 7, outputDays: 90 };
    for (let slice = await retentionSlice(ports.docs, { epoch: 1, now, policy }); slice.more;) {
      slice = await retentionSlice(ports.docs, { epoch: 1, now, policy });
    }
    expect(await blobsOf(ports.docs, whole)).toEqual([]);
    const kept = [runKeys.record(trimmed.runId), runKeys.output(trimmed.runId)];
    expect(await blobsOf(ports.docs, trimmed)).toEqual(trimmed.keys.filter((k) => k.startsWith('index/') || kept.includes(k)));
    expect((await listRuns(ports.docs)).runs.map((r) => r.runId)).toEqual([trimmed.runId]);
  });
});
