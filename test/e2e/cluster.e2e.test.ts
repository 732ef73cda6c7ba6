/**
 * Issue 4, acceptance 1 with real processes: `baton start --once` (what `npm start` runs)
 * brings up embedded Azurite, seeds the demo container and runs three instance processes; the
 * blob-audit run must end with exactly the report the seed predicts. It runs as the README says,
 * `npm start -- --once --instances 3` (one cluster run checks both: each costs the machine
 * about 20 s of CPU). The leader killed mid-run is in
 * cluster-kill-leader.e2e.test.ts, so the two run side by side.
 *
 * It spawns the compiled CLI (`npm test` builds dist/ first). The running-cluster points
 * (SIGTERM, `baton status/show`) are in cluster-running.e2e.test.ts, so the two files run side
 * by side.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CLUSTER_UP,
  cliPath,
  instanceLogDir,
  killAllSpawned,
  leadershipAcquired,
  parseClusterUp,
  spawnTracked,
  distIsCurrent,
  waitUntilDistIdle,
  type SpawnedProcess,
  referenceApp,
} from '../support/cluster-process';
import { dumpOnFailure, expectExactRun, readOutputFile } from '../support/cluster-run';
import { patience } from '../support/slowdown';

const work = mkdtempSync(join(tmpdir(), 'baton-cluster-e2e-'));
const timings: string[] = [];

afterAll(async () => {
  await killAllSpawned();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`cluster e2e timings:\n  ${timings.join('\n  ')}`);
});

describe('baton start --once (a real cluster on embedded Azurite)', () => {
  it(
    '--once exits non-zero, saying why, when every instance dies (here: a setting only instances read)',
    { timeout: patience(60_000) },
    async () => {
      let cluster: SpawnedProcess | undefined;
      dumpOnFailure(() => cluster);
      const logs = instanceLogDir();
      cluster = spawnTracked(
        'cluster without instances',
        process.execPath,
        [cliPath, 'start', '--app', referenceApp, '--once', '--instances', '2', '--log-dir', logs],
        // The CLI checks the app, its settings and host.json before it starts; the local host's
        // own visibility setting is read by the instances alone.
        { ...process.env, BATON_LOCAL_VISIBILITY_SECONDS: '2' },
        logs,
      );
      const exit = await cluster.waitExit(45_000);
      expect(exit.code).toBe(1);
      expect(cluster.indexOf(/^every instance has exited; run .* cannot finish/)).toBeGreaterThan(0);
    },
  );

  // Last in this file: `npm start` rebuilds dist/ (tsc rewrites it in place), so it waits until
  // the other cluster files, which spawn processes from dist/, are done with it.
  it(
    'the README command, npm start -- --once --instances 3, completes with the exact report',
    { timeout: patience(150_000) },
    async () => {
      let cluster: SpawnedProcess | undefined;
      dumpOnFailure(() => cluster);
      const outputPath = join(work, 'npm-start.json');
      // npm start builds first: wait for the other cluster files only when that build would write.
      const waited = distIsCurrent() ? 0 : await waitUntilDistIdle(patience(60_000));
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
      expect(leadershipAcquired(cluster.lines).length).toBeGreaterThanOrEqual(1);
      const file = readOutputFile(outputPath);
      expectExactRun(file);
      // The summary line names the same run.
      expect(cluster.indexOf(new RegExp(`^run ${file.record.runId} succeeded: 40 succeeded, 0 failed of 40`))).toBeGreaterThan(0);
    },
  );
});
