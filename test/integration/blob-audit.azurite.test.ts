import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunOutput } from '../../src/hub/run-output';
import { requestRun } from '../../src/hub/requests';
import { runKeys } from '../../src/hub/run-record';
import { AUDIT_REPORT, createBlobAuditJob, type AuditOutput } from '../../functions/blob-audit';
import { expectedAudit, seedDemoBlobs } from '../../functions/demo-seed';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine, lostTick, transportFailure, type Engine } from '../support/engine-harness';
import { describePatience, patience } from '../support/slowdown';

const fixture = useAzurite();

/**
 * Leads until the run ends. Azurite serves this whole test in one process, so on a busy
 * machine a lease call can queue behind thousands of reads and miss its deadline; a real
 * instance then leads again once it can, and so does this loop (the output must still be exact).
 * `timeoutMs` is scaled by `patience`.
 */
async function leadUntilTerminal(engine: Engine, runId: string, timeoutMs: number): Promise<number> {
  const elector = engine.elector('leader');
  const started = Date.now();
  const capMs = patience(timeoutMs);
  let lost = 0;
  for (;;) {
    const state = (await engine.readRun(runId).catch((err: unknown) => (transportFailure(err) ? undefined : Promise.reject(err))))
      ?.state;
    if (state === 'succeeded' || state === 'failed' || state === 'cancelled' || state === 'timed-out') return lost;
    if (Date.now() - started > capMs) throw new Error(`run ${runId} still ${state} after ${describePatience(timeoutMs)}`);
    try {
      await elector.runIfLeader((l) => engine.coordinator.lead(l, { termMs: 5000, returnWhenIdle: true }));
    } catch (err) {
      // A tick that lost its term, timed out on the acquire or lost its connection ends the way
      // a real instance's timer invocation does: the next tick leads again.
      lostTick(err);
      lost++;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('blob-audit on Azurite', () => {
  it('the seed leaves wrong, missing and true Content-MD5s where it says', async () => {
    const container = fixture.blobService.getContainerClient(fixture.uniqueName('seed'));
    const expected = await seedDemoBlobs(container, { count: 60, corrupt: 3, withoutMd5: 4 });
    const wrong = new Set(expected.mismatches.map((m) => m.name));
    let none = 0;
    for await (const blob of container.listBlobsFlat()) {
      const bytes = await container.getBlobClient(blob.name).downloadToBuffer();
      const stored = blob.properties.contentMD5;
      if (!stored) {
        none++;
        continue;
      }
      const matches = Buffer.from(stored).equals(createHash('md5').update(bytes).digest());
      expect(matches, blob.name).toBe(!wrong.has(blob.name));
    }
    expect(none).toBe(4);
    expect(expected).toEqual(expectedAudit({ count: 60, corrupt: 3, withoutMd5: 4 }));
  });

  it(
    'audits 2,000 seeded blobs on three workers: exactly the output and report the seed predicts',
    { timeout: patience(180_000) },
    async () => {
      const ports = azuritePorts(fixture, 'audit');
      const target = fixture.blobService.getContainerClient(fixture.uniqueName('target'));
      const expected = await seedDemoBlobs(target);
      expect(expected).toEqual(expectedAudit());

      const job = createBlobAuditJob({ target });
      const engine = buildEngine(ports, [job], { workerVisibilitySeconds: 30 });
      const stop = engine.startWorkers(3);
      try {
        const runId = await requestRun(ports.docs, job.name);
        const lost = await leadUntilTerminal(engine, runId, 150_000);
        if (lost > 0) console.warn(`blob-audit: leadership lost ${lost} time(s) on a busy machine; the run went on`);
        const record = await engine.readRun(runId);
        expect(record?.state).toBe('succeeded');
        expect(record?.finalizeError).toBeNull();
        expect(record?.counters).toMatchObject({ planned: 40, succeeded: 40, failed: 0 });

        const output = await engine.readJson<RunOutput>(runKeys.output(runId));
        expect(output?.output as AuditOutput).toEqual(expected);

        const report = (await ports.docs.read(runKeys.attachment(runId, AUDIT_REPORT)))?.body;
        expect(report).toBeDefined();
        expect(expected.mismatches).toHaveLength(7);
        for (const { name } of expected.mismatches) expect(report).toContain(`\`${name}\``);
        expect(report).toContain(`| **Total** | **2,000** | **${expected.bytes.toLocaleString('en-US')}** |`);
        expect(report).toContain('Blobs without a stored MD5: 5');
      } finally {
        await stop();
      }
    },
  );
});
