import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { resolveConnection } from '../../src/cli/connection';
import type { RunsView, ShowView, StatusView } from '../../src/hub/read-model';
import { pendingRequests, requestRun, type EngineRequest } from '../../src/hub/requests';
import type { DocumentStore } from '../../src/fencing/document-store';
import { CLI_CALL_TIMEOUT_MS } from '../../src/cli/hub';
import { useAzurite } from '../support/azurite';
import { cliPath, markDistInUse, projectRoot } from '../support/cluster-process';
import { hubResources } from '../../src/hub/resources';
import {
  azuriteStyleConnection,
  closedPort,
  runCli,
  seedHub,
  silentServer,
  tempCwd,
  type CliResult,
  type SeededHub,
} from '../support/cli-harness';
import { timeBound } from '../support/time-bound';

const azurite = useAzurite();
let seed: SeededHub;
let accountKey: string;
const cwds: ReturnType<typeof tempCwd>[] = [];

beforeAll(async () => {
  seed = await seedHub(azurite.blobService, azurite.leaseBlobService, azurite.uniqueName('cli'));
  accountKey = /AccountKey=([^;]+)/.exec(azurite.azurite.connectionString)?.[1] ?? '';
  expect(accountKey).not.toBe('');
});

afterEach(() => {
  for (const cwd of cwds.splice(0)) cwd.dispose();
});

function cwd(): ReturnType<typeof tempCwd> {
  const dir = tempCwd();
  cwds.push(dir);
  return dir;
}

/**
 * The CLI against the seeded hub, connected with --connection from an empty directory. With a
 * patient deadline: a busy machine's Azurite can take over the default 10 s to answer, and the
 * deadline has tests of its own below.
 */
function cli(...argv: string[]): Promise<CliResult> {
  return runCli(['--connection', azurite.azurite.connectionString, '--hub', seed.hub, '--timeout', '60', ...argv], {
    env: {},
    cwd: cwd().path,
  });
}

function json<T>(result: CliResult): T {
  expect(result.err).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.out) as T;
}

/** Exactly one non-empty line on stderr, with no key material in anything printed. */
function expectOneErrorLine(result: CliResult): string {
  expect(result.code).not.toBe(0);
  expect(result.out).toBe('');
  expect(result.err.endsWith('\n')).toBe(true);
  const lines = result.err.split('\n').filter((l) => l !== '');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^baton: /);
  expectNoSecrets(result);
  return lines[0] as string;
}

function expectNoSecrets(result: CliResult): void {
  for (const text of [result.out, result.err]) {
    expect(text).not.toContain(accountKey);
    expect(text).not.toContain(accountKey.slice(0, 16));
    expect(text).not.toMatch(/AccountKey=(?!\*\*\*)/i);
  }
}

async function requests(docs: DocumentStore): Promise<EngineRequest[]> {
  const out: EngineRequest[] = [];
  for await (const { request } of pendingRequests(docs)) if (request) out.push(request);
  return out;
}

describe('baton status', () => {
  it('--json returns the leader identity and epoch and the active run with its counters', async () => {
    const view = json<StatusView>(await cli('status', '--json'));
    expect(view.hub).toBe(seed.hub);
    expect(view.leader).toMatchObject({ identity: seed.leader, epoch: seed.epoch });
    expect(view.leader?.ledForMs).toBeGreaterThanOrEqual(0);
    expect(view.leader?.ledForMs).toBeLessThan(5 * 60_000);
    // The seed's lease was bumped by instance-a, then by the leader: two changes, newest first.
    expect(view.leadershipChanges).toEqual([
      expect.objectContaining({ holder: seed.leader, epoch: seed.epoch, previous: 'instance-a', reason: 'unknown' }),
      expect.objectContaining({ holder: 'instance-a', epoch: seed.epoch - 1, previous: null, reason: 'first' }),
    ]);
    expect(view.leader?.since).toBe(view.leadershipChanges[0]!.at);
    // The rank the leader recorded with its epoch: which version leads.
    expect(view.leader).toMatchObject({ version: '1.4.2', priority: 3 });
    expect(view.activeRuns).toHaveLength(1);
    expect(view.activeRuns[0]).toMatchObject({
      runId: seed.activeRunId,
      state: 'running',
      done: 7,
      counters: { planned: 10, succeeded: 6, failed: 1 },
    });
    expect(view.jobs).toEqual([
      expect.objectContaining({
        job: seed.job,
        active: [seed.activeRunId],
        recent: { started: 2, skipped: 1, missed: 1, cancelled: 0 },
        lastSkipOrMiss: expect.objectContaining({ outcome: 'missed', reason: 'no leader' }),
      }),
    ]);
  });

  it('prints compact text naming the leader, the epoch and the active run', async () => {
    const result = await cli('status');
    expect(result.code).toBe(0);
    expect(result.err).toBe('');
    expect(result.out).toContain(seed.leader);
    expect(result.out).toContain(`epoch ${seed.epoch}`);
    expect(result.out).toMatch(/leading for \d+s/);
    expect(result.out).toContain(`epoch ${seed.epoch}  v1.4.2 priority 3`);
    expect(result.out).toContain('leadership changes: last 2 of 2 kept');
    expect(result.out).toMatch(new RegExp(`${seed.leader} +${seed.epoch} +took a free lease \\(after instance-a\\)`));
    expect(result.out).toMatch(/instance-a +\d+ +first leader/);
    expect(result.out).toContain(seed.activeRunId);
    expect(result.out).toContain('7/10 70% (1 failed)');
    expectNoSecrets(result);
  });

  it('says so when no one leads a hub', async () => {
    const view = json<StatusView>(
      await runCli(['--connection', azurite.azurite.connectionString, '--hub', azurite.uniqueName('empty'), 'status', '--json'], {
        env: {},
        cwd: cwd().path,
      }),
    );
    expect(view).toMatchObject({ leader: null, activeRuns: [], jobs: [] });
  });
});

describe('baton runs and show', () => {
  it("runs --json lists the hub's runs newest first, filtered by job and limited", async () => {
    const all = json<RunsView>(await cli('runs', '--json'));
    expect(all.runs.map((r) => r.runId)).toEqual([seed.activeRunId, seed.finishedRunId]);
    expect(all.runs[1]).toMatchObject({ state: 'succeeded', counters: { planned: 4, succeeded: 3, failed: 1 } });

    const one = json<RunsView & { next: string }>(await cli('runs', '--job', seed.job, '--limit', '1', '--json'));
    expect(one.runs.map((r) => r.runId)).toEqual([seed.activeRunId]);
    // The next page starts where that one ended, and is the last.
    const older = json<RunsView & { next: string | null }>(
      await cli('runs', '--job', seed.job, '--limit', '1', '--after', one.next, '--json'),
    );
    expect(older).toMatchObject({ runs: [{ runId: seed.finishedRunId }], next: null });
    expect(json<RunsView>(await cli('runs', '--job', 'other', '--json')).runs).toEqual([]);

    const text = await cli('runs');
    expect(text.out).toContain(seed.activeRunId);
    expect(text.out).toContain(seed.finishedRunId);
    expect(text.out).not.toContain('older runs');
    // A page that is not the last says how to read the next.
    const first = await cli('runs', '--job', seed.job, '--limit', '1');
    expect(first.out).toContain(`older runs: baton runs --job ${seed.job} --after ${one.next}\n`);
  });

  it('runs --after that is not a next: exit 2, one line naming it', async () => {
    const result = await cli('runs', '--after', 'audit/never');
    expect(result.code).toBe(2);
    expect(expectOneErrorLine(result)).toBe(
      'baton: --after: not the next of a page of runs (pass the next value a page returned)',
    );
  });

  it('show --json returns the counters and failures so far of an open run, and the output and failures of a finished one', async () => {
    const open = json<ShowView>(await cli('show', seed.activeRunId, '--json'));
    expect(open.run).toMatchObject({
      runId: seed.activeRunId,
      state: 'running',
      counters: { planned: 10, dispatched: 10, succeeded: 6, failed: 1 },
    });
    expect(open).toMatchObject({ output: null, outputPath: null });
    // Open: the failures its checkpoints have counted so far, from the failure log its record names.
    expect(open.failures).toEqual({
      failed: [{ item: 4, reason: 'blob not found', attempts: 5 }],
      failedCount: 1,
      missing: [],
      missingCount: 3,
      soFar: true,
    });

    const done = json<ShowView>(await cli('show', seed.finishedRunId, '--json'));
    expect(done.run).toMatchObject({ state: 'succeeded', counters: { planned: 4, succeeded: 3, failed: 1 } });
    expect(done.output).toEqual({ blobs: 3, bytes: 300 });
    expect(done.outputPath).toBe(`${seed.hub}-runs/runs/${seed.finishedRunId}/output.json`);
    expect(done.failures).toEqual({
      failed: [{ item: 2, reason: 'Content-MD5 mismatch', attempts: 5 }],
      failedCount: 1,
      missing: [],
      missingCount: 0,
    });
  });

  it('show prints the run id, counters, failures and output as text', async () => {
    const result = await cli('show', seed.finishedRunId);
    expect(result.code).toBe(0);
    expect(result.out).toContain(seed.finishedRunId);
    expect(result.out).toContain('planned 4');
    expect(result.out).toContain('Content-MD5 mismatch');
    expect(result.out).toContain('"bytes": 300');
  });

  it('failures prints one JSON line per failure: from the manifest of a finished run, from the record of an open one', async () => {
    const lines = (result: { out: string }) =>
      result.out
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as unknown);
    const done = await cli('failures', seed.finishedRunId);
    expect(done.code).toBe(0);
    expect(lines(done)).toEqual([{ item: 2, reason: 'Content-MD5 mismatch', attempts: 5 }]);
    const open = await cli('failures', seed.activeRunId);
    expect(open.code).toBe(0);
    expect(lines(open)).toEqual([{ item: 4, reason: 'blob not found', attempts: 5 }]);
    const unknown = await cli('failures', `${seed.job}/no-such-run`);
    expect(unknown.code).toBe(1);
    expect(expectOneErrorLine(unknown)).toContain(`no run ${seed.job}/no-such-run`);
  });

  it('show of an unknown run id is one line and exit 1', async () => {
    const result = await cli('show', `${seed.job}/no-such-run`);
    expect(result.code).toBe(1);
    expect(expectOneErrorLine(result)).toContain(`no run ${seed.job}/no-such-run`);
  });
});

describe('baton trigger and cancel', () => {
  it('trigger writes a run request and prints the run id it will have', async () => {
    const before = await requests(seed.docs);
    const out = json<{ runId: string; job: string; requested: boolean }>(await cli('trigger', seed.job, '--json'));
    const added = (await requests(seed.docs)).filter((r) => !before.some((b) => JSON.stringify(b) === JSON.stringify(r)));
    expect(added).toHaveLength(1);
    const request = added[0];
    expect(request).toMatchObject({ kind: 'run', job: seed.job });
    expect(out.runId).toBe(`${seed.job}/manual-${(request as Extract<EngineRequest, { kind: 'run' }>).id}`);

    const text = await cli('trigger', seed.job);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(new RegExp(`requested run ${seed.job}/manual-[0-9a-f-]{36}`));
  });

  it('trigger --if-active skip prints the open run and asks for nothing; wait asks the leader to wait; a bad value is a usage error', async () => {
    const before = await requests(seed.docs);
    const skipped = json<{ runId: string; requested: boolean }>(await cli('trigger', seed.job, '--if-active', 'skip', '--json'));
    expect(skipped).toMatchObject({ runId: seed.activeRunId, requested: false, skipped: true });
    expect(await requests(seed.docs)).toEqual(before);
    const text = await cli('trigger', seed.job, '--if-active', 'skip');
    expect(text.out).toBe(
      `skipped: run ${seed.activeRunId} of job ${seed.job} is open, and nothing was requested; follow it with: baton show ${seed.activeRunId}\n`,
    );

    const waiting = json<{ runId: string }>(await cli('trigger', seed.job, '--if-active', 'wait', '--json'));
    expect(await requests(seed.docs)).toContainEqual({
      kind: 'run',
      job: seed.job,
      id: waiting.runId.split('/manual-')[1],
      ifActive: 'wait',
    });

    const bad = await cli('trigger', seed.job, '--if-active', 'later');
    expect(bad.code).toBe(2);
    expect(expectOneErrorLine(bad)).toMatch(
      /^baton: option '--if-active <what>' argument 'later' is invalid\. Allowed choices are start, skip, wait\.?$/,
    );
  });

  it('trigger --key names the same run each time, as BatonClient and the API do; a bad key is a usage error', async () => {
    const first = json<{ runId: string }>(await cli('trigger', seed.job, '--key', 'close-2026-11', '--json'));
    const again = json<{ runId: string }>(await cli('trigger', seed.job, '--key', 'close-2026-11', '--json'));
    expect(first.runId).toMatch(new RegExp(`^${seed.job}/manual-k-[A-Za-z0-9_-]{32}$`));
    expect(again.runId).toBe(first.runId);
    expect(await requestRun(seed.docs, seed.job, { key: 'close-2026-11' })).toBe(first.runId);

    const bad = await cli('trigger', seed.job, '--key', '');
    expect(bad.code).toBe(2);
    expect(expectOneErrorLine(bad)).toBe('baton: --key: must be 1 to 200 characters with no control characters');
  });

  it('trigger refuses a job the hub does not know, unless forced', async () => {
    const refused = await cli('trigger', 'nope');
    expect(refused.code).toBe(1);
    expect(expectOneErrorLine(refused)).toContain(`no job nope (known: ${seed.job})`);
    const forced = await cli('trigger', 'nope', '--force', '--json');
    expect(json<{ runId: string }>(forced).runId).toMatch(/^nope\/manual-/);
  });

  it('cancel writes a cancel request for an open run', async () => {
    const result = await cli('cancel', seed.activeRunId);
    expect(result.code).toBe(0);
    expect(result.out).toContain(seed.activeRunId);
    expect(await requests(seed.docs)).toContainEqual({
      kind: 'cancel',
      runId: seed.activeRunId,
      reason: 'cancelled with the baton CLI',
    });
  });

  it('cancel of a finished run writes nothing; of an unknown run is one line and exit 1', async () => {
    const done = json<{ requested: boolean; state: string }>(await cli('cancel', seed.finishedRunId, '--json'));
    expect(done).toMatchObject({ requested: false, state: 'succeeded' });
    expect((await requests(seed.docs)).some((r) => r.kind === 'cancel' && r.runId === seed.finishedRunId)).toBe(false);

    const unknown = await cli('cancel', `${seed.job}/nothing`);
    expect(unknown.code).toBe(1);
    expect(expectOneErrorLine(unknown)).toContain(`no run ${seed.job}/nothing`);
  });
});

describe('connection and hub resolution', () => {
  const statusVia = (argv: string[], env: Record<string, string>, dir: string) =>
    runCli([...argv, 'status', '--json'], { env, cwd: dir });

  it('--connection beats the environment, which beats local.settings.json', async () => {
    const [flagPort, envPort, filePort] = await Promise.all([closedPort(), closedPort(), closedPort()]);
    const dir = cwd();
    dir.writeLocalSettings({ AzureWebJobsStorage: azuriteStyleConnection(filePort, accountKey), BATON_HUB: seed.hub });
    const env = { AzureWebJobsStorage: azuriteStyleConnection(envPort, accountKey) };

    const viaFlag = await statusVia(['--connection', azuriteStyleConnection(flagPort, accountKey)], env, dir.path);
    expect(expectOneErrorLine(viaFlag)).toContain(`127.0.0.1:${flagPort}`);
    expect(viaFlag.err).toContain('check --connection');

    const viaEnv = await statusVia([], env, dir.path);
    expect(expectOneErrorLine(viaEnv)).toContain(`127.0.0.1:${envPort}`);

    const viaFile = await statusVia([], {}, dir.path);
    expect(expectOneErrorLine(viaFile)).toContain(`127.0.0.1:${filePort}`);
    expect(viaFile.err).toContain('local.settings.json');

    // And each source works when it points at storage: the file here, hub from the file too.
    dir.writeLocalSettings({ AzureWebJobsStorage: azurite.azurite.connectionString, BATON_HUB: seed.hub });
    const fromFile = json<StatusView>(await statusVia([], {}, dir.path));
    expect(fromFile.leader).toMatchObject({ identity: seed.leader, epoch: seed.epoch });
  });

  it('takes the hub from --hub, then BATON_HUB, then local.settings.json, then baton', () => {
    const dir = cwd();
    dir.writeLocalSettings({ AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'from-file' });
    const resolve = (hub: string | undefined, env: Record<string, string>) => resolveConnection({ hub, env, cwd: dir.path }).hub;
    expect(resolve('from-flag', { BATON_HUB: 'from-env' })).toBe('from-flag');
    expect(resolve(undefined, { BATON_HUB: 'from-env' })).toBe('from-env');
    expect(resolve(undefined, {})).toBe('from-file');
    expect(resolveConnection({ env: { AzureWebJobsStorage: 'UseDevelopmentStorage=true' }, cwd: cwd().path }).hub).toBe('baton');
  });

  it('counts identity-based AzureWebJobsStorage__* settings as the environment source', () => {
    const dir = cwd();
    dir.writeLocalSettings({ AzureWebJobsStorage: 'UseDevelopmentStorage=true' });
    const resolved = resolveConnection({
      env: { AzureWebJobsStorage__accountName: 'batonprod' },
      cwd: dir.path,
    });
    expect(resolved.source).toBe('AzureWebJobsStorage');
    expect(resolved.storage).toMatchObject({ kind: 'identity', blobServiceUri: 'https://batonprod.blob.core.windows.net' });
  });

  it('with no settings anywhere: one line naming the three places and the fix', async () => {
    const result = await runCli(['status'], { env: {}, cwd: cwd().path });
    expect(result.code).toBe(1);
    const line = expectOneErrorLine(result);
    expect(line).toContain('--connection');
    expect(line).toContain('AzureWebJobsStorage');
    expect(line).toContain('local.settings.json');
    expect(line).toContain('{"Values":{"AzureWebJobsStorage":"UseDevelopmentStorage=true"}}');
  });

  it('a malformed connection string is one line that names its source and not its value', async () => {
    const bad = `AccountName=devstoreaccount1;AccountKey=${accountKey.slice(0, -4)}!!!!`;
    const result = await runCli(['status'], { env: { AzureWebJobsStorage: bad }, cwd: cwd().path });
    expect(result.code).toBe(1);
    const line = expectOneErrorLine(result);
    expect(line).toContain('AzureWebJobsStorage is not a valid storage connection string');
    expect(line).toContain('from the environment');
  });
});

describe('unreachable storage', () => {
  /**
   * A refused connection fails within seconds. All of it is the machine's: the CLI's one retry
   * after a refusal starts at once (the SDK's first backoff is 0 ms). No fixed line needs a cap:
   * the SDK's default backoff (4 s, then 12 s) would run into the call deadline, and waiting out
   * the deadline ends in "no answer within", not ECONNREFUSED, which the line tells apart.
   */
  const refusedWithin = () => timeBound(15_000);

  /**
   * A deadline of `deadlineMs` honoured: the deadline itself is a timer, the same on any machine,
   * and only the slack around it scales. A deadline that was not honoured ends at the CLI's 10 s
   * default instead, so the bound stays under that however slow the machine, or it could no longer
   * tell the two apart.
   */
  async function deadlineWithin(deadlineMs: number, slackMs: number): Promise<{ ms: number; why: string }> {
    const slack = await timeBound(slackMs);
    const cap = CLI_CALL_TIMEOUT_MS - 500;
    const ms = Math.min(deadlineMs + slack.ms, cap);
    return { ms, why: `bound ${ms} ms = ${deadlineMs} ms deadline + slack (${slack.why}), capped at ${cap} ms` };
  }

  it('a closed port: exit 3, one line naming the endpoint, no key, within seconds', async () => {
    const port = await closedPort();
    const bound = await refusedWithin();
    const result = await runCli(['--connection', azuriteStyleConnection(port, accountKey), 'status', '--json'], {
      env: {},
      cwd: cwd().path,
    });
    expect(result.code).toBe(3);
    const line = expectOneErrorLine(result);
    expect(line).toBe(
      `baton: cannot reach blob storage at http://127.0.0.1:${port}/devstoreaccount1 (ECONNREFUSED). ` +
        "Is Azurite running? Start it with 'npm start' or check --connection.",
    );
    expect(result.ms, bound.why).toBeLessThan(bound.ms);
  });

  it('an endpoint that accepts connections and never answers times out with the same one line', async () => {
    const server = await silentServer();
    try {
      const bound = await deadlineWithin(1_000, 4_000);
      const result = await runCli(['--connection', azuriteStyleConnection(server.port, accountKey), 'runs'], {
        env: {},
        cwd: cwd().path,
        callTimeoutMs: 1000,
      });
      expect(result.code).toBe(3);
      expect(expectOneErrorLine(result)).toContain(
        `cannot reach blob storage at http://127.0.0.1:${server.port}/devstoreaccount1 (no answer within 1 s)`,
      );
      expect(result.ms, bound.why).toBeLessThan(bound.ms);
    } finally {
      await server.close();
    }
  });

  it('--timeout sets that deadline in whole seconds', async () => {
    const server = await silentServer();
    try {
      const bound = await deadlineWithin(2_000, 6_000);
      const result = await runCli(['--connection', azuriteStyleConnection(server.port, accountKey), '--timeout', '2', 'runs'], {
        env: {},
        cwd: cwd().path,
      });
      expect(result.code).toBe(3);
      expect(expectOneErrorLine(result)).toContain('(no answer within 2 s)');
      expect(result.ms).toBeGreaterThanOrEqual(1_900);
      expect(result.ms, bound.why).toBeLessThan(bound.ms);
    } finally {
      await server.close();
    }
  });

  it.each(['10ms', '0', '601', '1.5'])(
    '--timeout %s is a usage error: exit 2, one line naming the option, before any storage call',
    async (value) => {
      const result = await runCli(['--connection', 'UseDevelopmentStorage=true', '--timeout', value, 'status'], {
        env: {},
        cwd: cwd().path,
      });
      expect(result.code).toBe(2);
      expect(expectOneErrorLine(result)).toBe(
        `baton: option '--timeout <seconds>' argument '${value}' is invalid. must be whole seconds from 1 to 600`,
      );
    },
  );

  it('as a process: exits 3 with one stderr line, in under 15 s', async () => {
    const port = await closedPort();
    const root = join(__dirname, '..', '..');
    // As in process, plus starting node and compiling the CLI, the machine's too. Nothing keeps
    // the process alive after a refusal, so the CLI's 2 s drain timer is not waited out.
    const bound = await refusedWithin();
    const started = Date.now();
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(root, 'src', 'cli', 'main.ts'),
        'status',
        '--connection',
        azuriteStyleConnection(port, accountKey),
      ],
      { cwd: root, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    const result: CliResult = { code: code ?? -1, out, err, ms: Date.now() - started };
    expect(result.code).toBe(3);
    expect(expectOneErrorLine(result)).toContain(`http://127.0.0.1:${port}/devstoreaccount1 (ECONNREFUSED)`);
    expect(result.ms, bound.why).toBeLessThan(bound.ms);
  });
});

describe('usage errors exit 2, and the help shows the global options', () => {
  /** The CLI with no settings anywhere: a usage error must be found before any of them is read. */
  const bare = (...argv: string[]) => runCli(argv, { env: {}, cwd: cwd().path });

  it('an unknown option: exit 2, one line naming it and the near miss', async () => {
    const result = await bare('status', '--jsn');
    expect(result.code).toBe(2);
    expect(expectOneErrorLine(result)).toBe("baton: unknown option '--jsn' (Did you mean --json?)");
  });

  it.each([
    ['an unknown command', ['stauts'], "baton: unknown command 'stauts' (Did you mean status?)"],
    ['a missing argument', ['show'], "baton: missing required argument 'runId'"],
    ['a missing option value', ['runs', '--job'], "baton: option '--job <name>' argument missing"],
    [
      'a bad option value',
      ['runs', '--limit', '0'],
      "baton: option '--limit <n>' argument '0' is invalid. must be a whole number from 1 to 10000",
    ],
    ['an empty --connection', ['--connection', '', 'status'], 'baton: --connection is empty: pass a storage connection string'],
    ['options start needs --once for', ['start', '--output', 'run.json'], 'baton: --kill-leader-after and --output need --once'],
    [
      'an --interval below half a second',
      ['status', '--watch', '--interval', '0.4'],
      "baton: option '--interval <seconds>' argument '0.4' is invalid. must be seconds from 0.5 to 3600, such as 2 or 0.5",
    ],
    [
      'an --interval that is not a number',
      ['status', '--watch', '--interval', '2s'],
      "baton: option '--interval <seconds>' argument '2s' is invalid. must be seconds from 0.5 to 3600, such as 2 or 0.5",
    ],
    ['an --interval without --watch', ['status', '--interval', '5'], 'baton: --interval needs --watch'],
    [
      '--watch with --json',
      ['status', '--watch', '--json'],
      'baton: --watch does not combine with --json; for one document per read, run baton status --json in a loop',
    ],
  ])('%s: exit 2, one line', async (_name, argv, line) => {
    const result = await bare(...argv);
    expect(result.code).toBe(2);
    expect(expectOneErrorLine(result)).toBe(line);
  });

  it('no command at all: the help on stderr, exit 2', async () => {
    const result = await bare();
    expect(result.code).toBe(2);
    expect(result.out).toBe('');
    expect(result.err).toContain('Usage: baton [options] [command]');
  });

  it('a failure that is not about the command line still exits 1', async () => {
    // Valid command line, no storage connection anywhere.
    const result = await bare('status');
    expect(result.code).toBe(1);
  });

  it('status --help lists the global options, an example and the exit codes, on stdout with exit 0', async () => {
    const result = await bare('status', '--help');
    expect(result.code).toBe(0);
    expect(result.err).toBe('');
    expect(result.out).toContain('Usage: baton status [options]');
    expect(result.out).toMatch(/Global Options:\n(.*\n)*\s+--connection <string>/);
    expect(result.out).toMatch(/^\s+--hub <name>/m);
    expect(result.out).toMatch(/^\s+--timeout <seconds>/m);
    expect(result.out).toMatch(/Examples:\n\s+baton status /);
    // Commander wraps option descriptions at the output's width.
    const flat = result.out.replace(/\s+/g, ' ');
    expect(flat).toContain('--watch read again and redraw every --interval seconds until Ctrl-C');
    expect(flat).toMatch(/--interval <seconds> with --watch: .*0\.5 to 3600 \(default 2\)/);
    expect(result.out).toMatch(/^\s+baton status --watch --interval 5$/m);
    expect(result.out).toMatch(/^\s+2\s+usage error/m);
    expect(result.out).toMatch(/^\s+3\s+storage unreachable/m);
  });

  it.each(['runs', 'show', 'failures', 'trigger', 'cancel', 'start'])(
    '%s --help lists the global options and examples',
    async (command) => {
      const result = await bare(command, '--help');
      expect(result.code).toBe(0);
      expect(result.out).toContain('Global Options:');
      expect(result.out).toContain('--connection <string>');
      expect(result.out).toMatch(new RegExp(`Examples:\\n\\s+baton ${command} `));
    },
  );
});

describe("times on the CLI's views are storage's", () => {
  /** A preload that sets this process's clock `minutes` off. */
  function skewedClock(minutes: number): string {
    const preload = join(cwd().path, 'skewed-clock.cjs');
    writeFileSync(
      preload,
      `const real = Date; const skew = ${minutes} * 60_000;\n` +
        'globalThis.Date = class extends real { constructor(...a) { super(...(a.length ? a : [real.now() + skew])); } static now() { return real.now() + skew; } };\n',
    );
    return preload;
  }

  it('a request is named by storage time, from the CLI (--force: no read before it) and from BatonClient alike', async () => {
    const hub = azurite.uniqueName('named');
    const preload = skewedClock(-5);
    const release = markDistInUse();
    try {
      await promisify(execFile)(
        process.execPath,
        [
          '--require',
          preload,
          cliPath,
          'trigger',
          'later',
          '--force',
          '--connection',
          azurite.azurite.connectionString,
          '--hub',
          hub,
        ],
        { cwd: cwd().path, env: { PATH: process.env.PATH ?? '' } },
      );
      const client = `new (require(${JSON.stringify(join(projectRoot, 'dist', 'src', 'index.js'))}).BatonClient)().trigger('later')`;
      await promisify(execFile)(process.execPath, ['--require', preload, '-e', client], {
        cwd: cwd().path,
        env: { PATH: process.env.PATH ?? '', AzureWebJobsStorage: azurite.azurite.connectionString, BATON_HUB: hub },
      });
    } finally {
      release();
    }
    const container = azurite.blobService.getContainerClient(hubResources(hub).container);
    const named: number[] = [];
    for await (const blob of container.listBlobsFlat({ prefix: 'requests/' })) {
      named.push(Date.parse(/^requests\/(.+Z)-/.exec(blob.name)?.[1] ?? ''));
    }
    expect(named).toHaveLength(2);
    // Nearer storage's time than half the skew, not five minutes behind.
    for (const at of named) expect(Math.abs(at - Date.now())).toBeLessThan(150_000);
  });

  it('a machine whose clock is 5 minutes slow shows the latest change of leader seconds ago, not in 5 minutes', async () => {
    const dir = cwd();
    const preload = join(dir.path, 'slow-clock.cjs');
    writeFileSync(
      preload,
      'const real = Date; const skew = -5 * 60_000;\n' +
        'globalThis.Date = class extends real { constructor(...a) { super(...(a.length ? a : [real.now() + skew])); } static now() { return real.now() + skew; } };\n',
    );
    const release = markDistInUse();
    let out: string;
    try {
      ({ stdout: out } = await promisify(execFile)(
        process.execPath,
        [
          '--require',
          preload,
          cliPath,
          'status',
          '--connection',
          azurite.azurite.connectionString,
          '--hub',
          seed.hub,
          '--timeout',
          '60',
        ],
        { cwd: dir.path, env: { PATH: process.env.PATH ?? '' } },
      ));
    } finally {
      release();
    }
    expect(out).toContain('leadership changes');
    // The seed changed leaders moments ago, by storage's clock.
    expect(out).not.toMatch(/\(in \d/);
    // (Seconds on an idle machine; a loaded one may take a minute or more to get here.)
    expect(out).toMatch(/\(\d+[smhd][\dsmh]* ago\)/);
  });
});
