/**
 * Issue 4, acceptance 2 with real processes: `baton start --once --kill-leader-after` kill -9s
 * the leader mid-run; the run must still end with exactly the report the seed predicts, and its
 * record must be last written by a newer epoch. On its own, beside cluster.e2e.test.ts, because
 * it is the longest of the cluster runs.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hubResources } from '../../src/hub/resources';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { startAzurite } from '../../src/local/azurite';
import { runKeys, type RunRecord } from '../../src/hub/run-record';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import {
  isRunning,
  killAllSpawned,
  leadershipAcquired,
  markDistInUse,
  spawnBaton,
  type SpawnedProcess,
  referenceApp,
  demoSetup,
} from '../support/cluster-process';
import { dumpOnFailure, expectExactRun, readOutputFile, runEnded } from '../support/cluster-run';
import { patience } from '../support/slowdown';

const work = mkdtempSync(join(tmpdir(), 'baton-kill-leader-e2e-'));
const timings: string[] = [];
// cluster.e2e's `npm start` rebuilds dist/ in place; it waits until this file no longer spawns from it.
const releaseDist = markDistInUse();

afterAll(async () => {
  await killAllSpawned();
  releaseDist();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`kill-leader e2e timings:\n  ${timings.join('\n  ')}`);
});

describe('baton start --once --kill-leader-after (a real cluster on embedded Azurite)', () => {
  it(
    '--kill-leader-after: the leader is kill -9d mid-run, the run still ends exact, and a newer epoch wrote its record',
    { timeout: patience(120_000) },
    async () => {
      let cluster: SpawnedProcess | undefined;
      dumpOnFailure(() => cluster);
      const outputPath = join(work, 'failover.json');
      const dataDir = join(work, 'failover-data');
      const started = Date.now();
      // --data keeps Azurite's state on disk, so the run record's writer epoch can be read after exit.
      cluster = spawnBaton('cluster --kill-leader-after', [
        'start',
        '--app',
        referenceApp,
        '--setup',
        demoSetup,
        '--once',
        '--instances',
        '3',
        '--kill-leader-after',
        '3',
        '--data',
        dataDir,
        '--output',
        outputPath,
      ]);
      const exit = await cluster.waitExit(110_000);
      timings.push(`--once --kill-leader-after 3: ${Date.now() - started} ms`);
      expect(exit).toEqual({ code: 0, signal: null });

      const file = readOutputFile(outputPath);
      expectExactRun(file);
      const runId = file.record.runId;

      // The kill lands mid-run: after the run was requested, before it ended.
      const requested = cluster.indexOf(new RegExp(`^requested run ${runId}$`));
      const kill = await cluster.waitForLine(/^kill -9 (instance-\d+) \(the leader, pid (\d+)\)/, 1_000);
      const ended = cluster.indexOf(runEnded(runId));
      expect(requested).toBeGreaterThanOrEqual(0);
      expect(ended).toBeGreaterThan(kill.index);
      expect(kill.index).toBeGreaterThan(requested);
      const victim = kill.match[1]!;
      expect(isRunning(Number(kill.match[2]))).toBe(false);

      // The victim led with some epoch; a different instance took over afterwards with a higher one.
      // (The victim's own line may reach the cluster just after the kill note, so look anywhere.)
      const acquired = leadershipAcquired(cluster.lines);
      const first = acquired.filter((a) => a.instance === victim).at(-1);
      expect(first, 'the killed instance had announced its leadership').toBeDefined();
      const next = acquired.find((a) => a.index > kill.index && a.instance !== victim);
      expect(next, 'a leader after the kill').toBeDefined();
      expect(next!.instance).not.toBe(victim);
      expect(next!.epoch).toBeGreaterThan(first!.epoch);
      timings.push(
        `failover: ${victim} epoch ${first!.epoch} -> ${next!.instance} epoch ${next!.epoch} in ${next!.at - cluster.lines[kill.index]!.at} ms`,
      );

      // The final run record was written by the newer leader: its fencing epoch is higher.
      const azurite = await startAzurite({ persistTo: dataDir });
      try {
        const blobs = createBlobServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
        const docs = new FencedDocuments<RunRecord>(
          new BlobDocumentStore(blobs.getContainerClient(hubResources('baton').container)),
        );
        const stored = await docs.read(runKeys.record(runId));
        expect(stored?.value.state).toBe('succeeded');
        expect(stored!.epoch).toBeGreaterThan(first!.epoch);
        expect(stored!.epoch).toBeGreaterThanOrEqual(next!.epoch);
      } finally {
        await azurite.close();
      }
    },
  );
});
