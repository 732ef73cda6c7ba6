/**
 * Issue 4, acceptance 1 and 2 with real processes: `baton start --once` (what `npm start` runs)
 * brings up embedded Azurite, seeds the demo container and runs three instance processes; the
 * blob-audit run must end with exactly the report the seed predicts, also when the leader is
 * kill -9'd mid-run, and then the run record is last written by a newer epoch. The last test
 * runs the README's literal `npm start -- --once --instances 3`.
 *
 * It spawns the compiled CLI (`npm test` builds dist/ first). The running-cluster points
 * (SIGTERM, `baton status/show`) are in cluster-running.e2e.test.ts, so the two files run side
 * by side.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hubResources } from '../../src/hub/resources';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { startAzurite } from '../../src/local/azurite';
import { runKeys, type RunRecord } from '../../src/hub/run-record';
import { expectedAudit } from '../../src/sample/demo-seed';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import {
  CLUSTER_UP,
  cliPath,
  instanceLogDir,
  isRunning,
  killAllSpawned,
  leadershipAcquired,
  parseClusterUp,
  spawnBaton,
  spawnTracked,
  waitUntilDistIdle,
  type SpawnedProcess,
} from '../support/cluster-process';

const work = mkdtempSync(join(tmpdir(), 'baton-cluster-e2e-'));
const timings: string[] = [];

interface OutputFile {
  record: RunRecord;
  /** The run's output document; the job's own output is its `output`. */
  output: { runId: string; state: string; output: unknown };
}

function readOutputFile(path: string): OutputFile {
  return JSON.parse(readFileSync(path, 'utf8')) as OutputFile;
}

function dumpOnFailure(cluster: () => SpawnedProcess | undefined): void {
  onTestFailed(() => {
    const c = cluster();
    if (c) process.stderr.write(`\n${c.dump()}\n`);
  });
}

/** The line the cluster prints when the run it requested ends. */
const runEnded = (runId: string) =>
  new RegExp(`^run ${runId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:? (succeeded|failed|cancelled|timed-out)`);

/** What every passing `--once` run must show: exit 0, the exact audit, all 40 batches counted. */
function expectExactRun(file: OutputFile): void {
  expect(file.record.state).toBe('succeeded');
  expect(file.output.state).toBe('succeeded');
  expect(file.record.counters).toMatchObject({ planned: 40, succeeded: 40, failed: 0, rejected: 0 });
  // Counts and bytes per prefix, totals, blobs without MD5 and the exact corrupted names.
  const expected = expectedAudit();
  expect(file.output.output).toEqual(expected);
  expect(expected.mismatchCount).toBe(7);
  expect((file.output.output as typeof expected).mismatches.map((m) => m.name)).toEqual(expected.mismatches.map((m) => m.name));
}

afterAll(async () => {
  await killAllSpawned();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`cluster e2e timings:\n  ${timings.join('\n  ')}`);
});

describe('baton start --once (a real cluster on embedded Azurite)', () => {
  it('--once exits non-zero, saying why, when every instance dies (here: no usable host.json)', { timeout: 60_000 }, async () => {
    let cluster: SpawnedProcess | undefined;
    dumpOnFailure(() => cluster);
    const logs = instanceLogDir();
    cluster = spawnTracked(
      'cluster without instances',
      process.execPath,
      [cliPath, 'start', '--once', '--instances', '2', '--log-dir', logs],
      { ...process.env, BATON_HOST_JSON: join(work, 'missing-host.json') },
      logs,
    );
    const exit = await cluster.waitExit(45_000);
    expect(exit.code).toBe(1);
    expect(cluster.indexOf(/^every instance has exited; run .* cannot finish/)).toBeGreaterThan(0);
  });

  it('--instances 3 exits 0 and writes exactly the audit the seed predicts', { timeout: 120_000 }, async () => {
    let cluster: SpawnedProcess | undefined;
    dumpOnFailure(() => cluster);
    const outputPath = join(work, 'once.json');
    const started = Date.now();
    cluster = spawnBaton('cluster --once', ['start', '--once', '--instances', '3', '--output', outputPath]);
    const exit = await cluster.waitExit(100_000);
    timings.push(`--once --instances 3: ${Date.now() - started} ms`);

    expect(exit).toEqual({ code: 0, signal: null });
    const up = parseClusterUp((await cluster.waitForLine(CLUSTER_UP, 1_000)).match);
    expect(up.instances).toBe(3);
    expect(leadershipAcquired(cluster.lines).length).toBeGreaterThanOrEqual(1);
    const file = readOutputFile(outputPath);
    expectExactRun(file);
    // The summary line names the same run.
    expect(cluster.indexOf(new RegExp(`^run ${file.record.runId} succeeded: 40 succeeded, 0 failed of 40`))).toBeGreaterThan(0);
  });

  it(
    '--kill-leader-after: the leader is kill -9d mid-run, the run still ends exact, and a newer epoch wrote its record',
    { timeout: 120_000 },
    async () => {
      let cluster: SpawnedProcess | undefined;
      dumpOnFailure(() => cluster);
      const outputPath = join(work, 'failover.json');
      const dataDir = join(work, 'failover-data');
      const started = Date.now();
      // --data keeps Azurite's state on disk, so the run record's writer epoch can be read after exit.
      cluster = spawnBaton('cluster --kill-leader-after', [
        'start',
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

  // Last in this file: `npm start` rebuilds dist/ (tsc rewrites it in place), so it waits until
  // the other cluster file, which spawns processes from dist/, is done with it.
  it('the README command, npm start -- --once --instances 3, completes with the exact report', { timeout: 150_000 }, async () => {
    let cluster: SpawnedProcess | undefined;
    dumpOnFailure(() => cluster);
    const outputPath = join(work, 'npm-start.json');
    const waited = await waitUntilDistIdle(60_000);
    if (waited > 0) timings.push(`npm start waited ${waited} ms for the other cluster file to finish with dist/`);
    const started = Date.now();
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const logs = instanceLogDir();
    cluster = spawnTracked(
      'npm start',
      npm,
      ['start', '--', '--once', '--instances', '3', '--output', outputPath, '--log-dir', logs],
      process.env,
      logs,
    );
    const exit = await cluster.waitExit(140_000);
    timings.push(`npm start -- --once --instances 3: ${Date.now() - started} ms`);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(parseClusterUp((await cluster.waitForLine(CLUSTER_UP, 1_000)).match).instances).toBe(3);
    expectExactRun(readOutputFile(outputPath));
  });
});
