/**
 * Issue 4, acceptance 3 and 4 against one running `baton start --instances 3` (no --once):
 * `baton status --json` finds its leader, `baton trigger` + `baton show --json` follow a
 * blob-audit run to its counters and exact output, and SIGTERM then takes the cluster down
 * within 10 s with no instance process left and no Azurite port listening. Then clusters
 * stopped at awkward moments: while seeding, before a `--once` run ended, with an instance
 * that does not stop.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expectedAudit } from '../../functions/demo-seed';
import {
  acceptsConnections,
  childPids,
  cliPath,
  CLUSTER_UP,
  clusterConnection,
  instanceLogDir,
  isRunning,
  killAllSpawned,
  leadershipAcquired,
  markDistInUse,
  parseClusterUp,
  runBaton,
  spawnBaton,
  spawnTracked,
  type ClusterUp,
  type CliRun,
  type SpawnedProcess,
  referenceApp,
  demoSetup,
} from '../support/cluster-process';
import { runEnded } from '../support/cluster-run';
import { closedPort } from '../support/cli-harness';
import { timeBound } from '../support/time-bound';
import { waitFor } from '../support/edge-support';
import { describePatience, patience } from '../support/slowdown';

let cluster: SpawnedProcess;
let up: ClusterUp;
let connection = '';
/** Instance pids seen while the cluster ran (pgrep -P). */
const instancePids = new Set<number>();
const timings: string[] = [];

function dumpOnFailure(): void {
  onTestFailed(() => {
    if (cluster) process.stderr.write(`\n${cluster.dump()}\n`);
  });
}

function json<T>(run: CliRun, what: string): T {
  if (run.code !== 0) throw new Error(`${what} exited ${run.code}: ${run.err}`);
  return JSON.parse(run.out) as T;
}

interface StatusJson {
  hub: string;
  leader: { identity: string | null; epoch: number; acquiredAt: string | null; ledForMs: number | null } | null;
  lastLeader: { identity: string; epoch: number } | null;
  restingUntil: string | null;
}

interface ShowJson {
  run: { runId: string; state: string; done: number; counters: Record<string, number> };
  outputPath: string | null;
  output: unknown;
  failures: { failedCount: number; missingCount: number } | null;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'timed-out']);
/** The cluster's own line for a leader it reads from the hub, or for a resting one. */
const LEADER_SHOWN = /^leader: (instance-\d+ epoch \d+|none \(resting until )/;

let releaseDist: (() => void) | undefined;

beforeAll(async () => {
  releaseDist = markDistInUse();
  cluster = spawnBaton('cluster', ['start', '--app', referenceApp, '--setup', demoSetup, '--instances', '3']);
  up = parseClusterUp((await cluster.waitForLine(CLUSTER_UP, 50_000)).match);
  connection = clusterConnection(up);
}, patience(60_000));

afterAll(async () => {
  await killAllSpawned();
  releaseDist?.();
  if (timings.length) console.log(`running-cluster e2e timings:\n  ${timings.join('\n  ')}`);
});

describe('a running local cluster and the baton CLI', () => {
  it(
    'status --json returns the leader; trigger, then show --json returns the run counters and output',
    { timeout: patience(110_000) },
    async () => {
      dumpOnFailure();
      expect(up.instances).toBe(3);
      expect(up.hub).toBe('baton');
      // A patient deadline: on a loaded 2-core machine the cluster's Azurite can take over the
      // default 10 s to answer, and this test is about the answers, not about the deadline. The
      // CLI takes it in whole seconds, 600 at most.
      const callTimeout = String(Math.min(600, Math.ceil(patience(30_000) / 1000)));
      const base = ['--connection', connection, '--hub', 'baton', '--timeout', callTimeout];

      // The leader, once there is one and it has recorded itself: between its lease acquire and
      // its epoch bump the lease is held but names nobody yet (a window a busy machine widens).
      // The sample job is due hourly, so the first leader soon finds nothing to do and rests the
      // lease (BATON_REST_WHEN_IDLE): then the status says until when, and who led last.
      const t0 = Date.now();
      let status: StatusJson | undefined;
      for (;;) {
        // The cluster prints the leader it reads from the same records: ask once it has one, not
        // every half second until then (each CLI call is a process that loads the SDKs).
        await cluster.waitForLine(LEADER_SHOWN, 40_000);
        status = json<StatusJson>(await runBaton(['status', '--json', ...base], 60_000), 'status');
        if (status.leader?.identity || status.restingUntil) break;
        if (Date.now() - t0 > patience(40_000)) throw new Error(`no leader in status --json within ${describePatience(40_000)}`);
        await sleep(500);
      }
      timings.push(`leader visible in status --json after ${Date.now() - t0} ms`);
      expect(status.hub).toBe('baton');
      const named = status.leader ?? status.lastLeader;
      expect(named?.identity).toMatch(/^instance-[123]$/);
      expect(named!.epoch).toBeGreaterThanOrEqual(1);
      if (status.leader) expect(status.leader.ledForMs).toBeGreaterThanOrEqual(0);
      else {
        // At most the longest rest (10 minutes) ahead, and not past.
        const restMs = Date.parse(status.restingUntil!) - Date.now();
        expect(restMs).toBeGreaterThan(0);
        expect(restMs).toBeLessThanOrEqual(10 * 60_000 + 5_000);
      }
      // It is the instance that announced leadership with that epoch.
      const announced = leadershipAcquired(cluster.lines).find((a) => a.epoch === named!.epoch);
      if (announced) expect(announced.instance).toBe(named!.identity);

      // Instances as child processes of the cluster, while it runs.
      for (const pid of childPids(cluster.pid)) instancePids.add(pid);
      expect(instancePids.size).toBe(3);

      const trigger = json<{ job: string; runId: string; requested: boolean }>(
        await runBaton(['trigger', 'blob-audit', '--json', ...base], 60_000),
        'trigger',
      );
      expect(trigger).toMatchObject({ job: 'blob-audit', requested: true });
      expect(trigger.runId).toMatch(/^blob-audit\//);

      const t1 = Date.now();
      let show: ShowJson | undefined;
      for (;;) {
        const run = await runBaton(['show', trigger.runId, '--json', ...base], 60_000);
        // Exit 1 "no run …" until the leader's next tick creates the record.
        if (run.code === 0) {
          show = JSON.parse(run.out) as ShowJson;
          if (TERMINAL.has(show.run.state)) break;
        } else expect(run.err).toMatch(/no run/);
        if (Date.now() - t1 > patience(80_000))
          throw new Error(`run ${trigger.runId} did not finish within ${describePatience(80_000)}`);
        // The cluster prints the run's end as it reads it: ask again once it has, not every second.
        await cluster.waitForLine(runEnded(trigger.runId), 80_000);
        await sleep(1_000);
      }
      timings.push(`triggered run finished (seen by show --json) after ${Date.now() - t1} ms`);
      expect(show.run.runId).toBe(trigger.runId);
      expect(show.run.state).toBe('succeeded');
      expect(show.run.counters).toMatchObject({ planned: 40, dispatched: 40, succeeded: 40, failed: 0, rejected: 0 });
      expect(show.run.done).toBe(40);
      expect(show.output).toEqual(expectedAudit());
      expect(show.outputPath).toMatch(/^baton-runs\/runs\/blob-audit\/.+\/output\.json$/);
      expect(show.failures).toMatchObject({ failedCount: 0, missingCount: 0 });
    },
  );

  it(
    'the CLI against an unreachable endpoint exits non-zero with one line on stderr',
    { timeout: patience(30_000) },
    async () => {
      const port = await closedPort();
      const endpoint = `http://127.0.0.1:${port}/devstoreaccount1`;
      const run = await runBaton([
        'status',
        '--json',
        '--connection',
        clusterConnection({ blobEndpoint: endpoint, queueEndpoint: endpoint }),
      ]);
      expect(run.code).not.toBe(0);
      expect(run.code).not.toBeNull();
      expect(run.out).toBe('');
      const lines = run.err.split('\n').filter((l) => l.trim() !== '' && !/^npm warn/i.test(l));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^baton: /);
      expect(lines[0]).toContain(endpoint);
    },
  );

  it(
    'SIGTERM stops it within 10 s: no instance process left, no Azurite port listening',
    { timeout: patience(60_000) },
    async () => {
      dumpOnFailure();
      for (const pid of childPids(cluster.pid)) instancePids.add(pid);
      expect(instancePids.size).toBeGreaterThanOrEqual(3);
      expect(await acceptsConnections(up.blobPort, patience(2_000))).toBe(true);
      expect(await acceptsConnections(up.queuePort, patience(2_000))).toBe(true);

      // Within 10 s on the reference machine: the instances' 8 s grace and the teardown. A hang
      // or a stop one instance after another exceeds it on any machine; a slower one moves it.
      const bound = await timeBound(10_000);
      const t0 = Date.now();
      process.kill(cluster.pid, 'SIGTERM');
      const exit = await cluster.waitExit(bound.ms);
      const stopMs = Date.now() - t0;
      timings.push(`SIGTERM to exit: ${stopMs} ms (${bound.why})`);
      expect(stopMs, bound.why).toBeLessThan(bound.ms);
      expect(exit).toEqual({ code: 0, signal: null });
      expect(cluster.indexOf(/^SIGTERM: stopping the cluster/)).toBeGreaterThanOrEqual(0);

      const left = [...instancePids].filter(isRunning);
      expect(left, `instance processes still running: ${left.join(', ')}`).toEqual([]);
      expect(await acceptsConnections(up.blobPort)).toBe(false);
      expect(await acceptsConnections(up.queuePort)).toBe(false);
      // A minute-long session must not pile listeners onto a long-lived signal (it once added one per 500 ms wait).
      expect(cluster.stderr.join('')).not.toMatch(/MaxListenersExceededWarning/);
    },
  );
});

describe('stopping a cluster at awkward moments', () => {
  it(
    'SIGINT while seeding: exits without starting instances, nothing left listening',
    { timeout: patience(60_000) },
    async () => {
      const early = spawnBaton('cluster stopped while seeding', [
        'start',
        '--app',
        referenceApp,
        '--setup',
        demoSetup,
        '--instances',
        '2',
        '--hub',
        'seeding',
      ]);
      // Seeding 2,000 blobs takes a few seconds after the line that announces it; the signal lands in between.
      await early.waitForLine(/^seeding demo blobs/, 30_000);
      process.kill(early.pid, 'SIGINT');
      const exit = await early.waitExit(15_000);
      expect(exit.code).toBe(130);
      expect(early.indexOf(/^SIGINT: stopping the cluster/)).toBeGreaterThanOrEqual(0);
      expect(early.indexOf(/^cluster up/)).toBe(-1);
      expect(early.indexOf(/^seeded \d+ demo blobs/)).toBe(-1);
      expect(childPids(early.pid)).toEqual([]);
    },
  );

  it('SIGTERM before its --once run ended: exits 130, as after Ctrl-C', { timeout: patience(60_000) }, async () => {
    const logs = instanceLogDir();
    const once = spawnTracked(
      '--once cluster stopped mid-run',
      process.execPath,
      [
        cliPath,
        ...['start', '--app', referenceApp, '--once', '--job', 'endless', '--instances', '1', '--hub', 'once'],
        '--log-dir',
        logs,
      ],
      // One item that takes a minute: the run cannot end before the signal lands, however slow the machine.
      { ...process.env, BATON_SYNTHETIC_JOBS: JSON.stringify([{ name: 'endless', items: 1, slowEvery: 1, slowMs: 60_000 }]) },
      logs,
    );
    const requested = await once.waitForLine(/^requested run (\S+)$/, 30_000);
    process.kill(once.pid, 'SIGTERM');
    expect(await once.waitExit(60_000)).toEqual({ code: 130, signal: null });
    expect(once.indexOf(/^SIGTERM: stopping the cluster/)).toBeGreaterThan(requested.index);
  });

  it(
    'a second SIGINT kills an instance that does not stop (here: SIGSTOPped) and exits',
    { timeout: patience(60_000) },
    async () => {
      const logs = instanceLogDir();
      const stuck = spawnTracked(
        'cluster with a frozen instance',
        process.execPath,
        [cliPath, 'start', '--app', referenceApp, '--instances', '2', '--hub', 'frozen', '--log-dir', logs],
        process.env,
        logs,
      );
      await stuck.waitForLine(/^cluster up/, 30_000);
      // An instance announces its start once its signal handlers are in: from then on, the one left
      // running stops on the cluster's SIGTERM, and the frozen one is one that would have.
      const started = (file: string) => {
        try {
          return readFileSync(join(logs, file), 'utf8').includes('"kind":"started"');
        } catch {
          return false;
        }
      };
      await waitFor('both instances to start', async () => started('instance-1.log') && started('instance-2.log'), 30_000);
      const pids = childPids(stuck.pid);
      expect(pids.length).toBe(2);
      process.kill(pids[0]!, 'SIGSTOP');
      process.kill(stuck.pid, 'SIGINT');
      // Only a signal the cluster takes after its first is a second one.
      await stuck.waitForLine(/^SIGINT: stopping the cluster/, 10_000);
      process.kill(stuck.pid, 'SIGINT');
      const exit = await stuck.waitExit(15_000);
      expect(exit.code).toBe(130);
      expect(stuck.indexOf(/^SIGINT again: killing every instance now/)).toBeGreaterThan(0);
      expect(pids.filter(isRunning)).toEqual([]);
    },
  );
});
