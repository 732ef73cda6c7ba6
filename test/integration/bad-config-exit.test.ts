/**
 * Bad configuration, as a user meets it: the built `baton` CLI, `baton start` and the local
 * host's instance process, each started with one bad setting, must exit non-zero with exactly
 * one line on stderr that names the setting, no stack trace and no secret. None of these needs
 * storage (they fail before any request), so only the unknown-job cases at the end start Azurite.
 * Needs `npm run build` first (`npm test` does it).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hubResources } from '../../src/hub/resources';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import type { Env } from '../../src/storage/setting';
import { useAzurite } from '../support/azurite';
import { azuriteStyleConnection, closedPort, seedHub } from '../support/cli-harness';
import { cliPath, markDistInUse, projectRoot, referenceApp } from '../support/cluster-process';
import { describePatience, patience } from '../support/slowdown';
import { timeBound } from '../support/time-bound';

const instancePath = join(projectRoot, 'dist', 'src', 'local', 'instance-main.js');
/** Azurite's public development key, standing in for a secret a mangled setting could leak. */
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
  ms: number;
}

interface Running {
  readonly out: string;
  readonly err: string;
  /** Ends its stdin (an instance then stops) and resolves when it has exited (as `exited`). */
  finish(timeoutMs: number): Promise<Finished>;
  /** Resolves when it has exited, or kills its process group after `timeoutMs` (scaled by `patience`). */
  exited(timeoutMs: number): Promise<Finished>;
  /** Whether it has exited. */
  readonly done: boolean;
  /** SIGKILL to its process group; resolves when it has exited. */
  kill(): Promise<Finished>;
}

let cwd: string;
let release: (() => void) | undefined;
const started = new Set<number>();

beforeAll(() => {
  for (const path of [cliPath, instancePath]) {
    if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build first`);
  }
  release = markDistInUse();
  // No local.settings.json here, so only the settings each test gives count.
  cwd = mkdtempSync(join(tmpdir(), 'baton-bad-config-exit-'));
  // A file where --log-dir wants a folder.
  writeFileSync(join(cwd, 'not-a-folder'), '');
  // An app of two jobs, neither the sample: plain JavaScript on the built package, as a user's.
  const several = join(cwd, 'several-jobs');
  mkdirSync(several);
  writeFileSync(join(several, 'package.json'), JSON.stringify({ main: 'index.js' }));
  writeFileSync(join(several, 'host.json'), readFileSync(join(referenceApp, 'host.json')));
  const lib = (entry: string) => JSON.stringify(join(projectRoot, 'dist', 'src', `${entry}.js`));
  writeFileSync(
    join(several, 'index.js'),
    [
      `const { app } = require(${JSON.stringify(require.resolve('@azure/functions'))});`,
      `const { defineJob } = require(${lib('index')});`,
      `const { registerBaton } = require(${lib('functions')});`,
      `const job = (name) => defineJob({ name, schedule: '0 0 0 1 1 *', *split() { yield 1; }, process: async (n) => n,`,
      `  aggregate: { initial: () => 0, add: (a, b) => a + b } });`,
      `registerBaton(app, { jobs: [job('alpha'), job('beta')] });`,
    ].join('\n'),
  );
});

afterAll(() => {
  for (const pid of started) killGroup(pid);
  release?.();
  rmSync(cwd, { recursive: true, force: true });
});

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** `node <script> <args>` with only PATH and `env`, in its own process group. */
function start(script: string, args: string[], env: Env): Running {
  const t0 = Date.now();
  const child = spawn(process.execPath, [script, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  started.add(child.pid!);
  let out = '';
  let err = '';
  let done = false;
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const closed = new Promise<Finished>((resolve) =>
    child.once('close', (code, signal) => {
      done = true;
      started.delete(child.pid!);
      resolve({ code, signal, out, err, ms: Date.now() - t0 });
    }),
  );
  const exited = async (timeoutMs: number): Promise<Finished> => {
    const result = await Promise.race([closed, sleep(patience(timeoutMs), undefined)]);
    if (result) return result;
    killGroup(child.pid!);
    const killed = await closed;
    throw new Error(
      `${script} ${args.join(' ')} did not exit within ${describePatience(timeoutMs)}\n${killed.out}\n${killed.err}`,
    );
  };
  return {
    get out() {
      return out;
    },
    get err() {
      return err;
    },
    get done() {
      return done;
    },
    kill: () => {
      killGroup(child.pid!);
      return closed;
    },
    exited,
    finish: (timeoutMs) => {
      child.stdin.end();
      return exited(timeoutMs);
    },
  };
}

const baton = (args: string[], env: Env = {}, waitMs = 15_000) => start(cliPath, args, env).finish(waitMs);
const instance = (env: Env) => start(instancePath, [], env).finish(15_000);

/**
 * Exit `code` (1, or 2 for a bad value on the command line), nothing on stdout, exactly one line
 * on stderr that names `setting` and matches `rule`; no stack trace; `secret` nowhere. Returns
 * the line.
 */
function expectOneLine(result: Finished, setting: string, rule: RegExp, secret?: string, code = 1): string {
  const context = `stdout:\n${result.out}\nstderr:\n${result.err}`;
  expect(result.signal, context).toBeNull();
  expect(result.code, context).toBe(code);
  expect(result.out, context).toBe('');
  expect(result.err.endsWith('\n'), context).toBe(true);
  const lines = result.err.split('\n').filter((line) => line.trim() !== '');
  expect(lines, context).toHaveLength(1);
  const line = lines[0]!;
  expect(line).toContain(setting);
  expect(line).toMatch(rule);
  expect(result.err).not.toMatch(/^\s+at /m);
  expect(result.err).not.toMatch(/node:internal|\.[jt]s:\d+:\d+/);
  if (secret) {
    expect(result.err).not.toContain(secret);
    expect(result.out).not.toContain(secret);
  }
  return line;
}

describe('the local host instance process', () => {
  /** A valid configuration pointing at a port nothing listens on: each case changes one setting. */
  let base: Env;
  beforeAll(async () => {
    base = {
      AzureWebJobsStorage: azuriteStyleConnection(await closedPort(), KEY),
      BATON_HUB: `bad-config-${process.pid}`,
    };
  });

  it('starts with the base settings, so each case below fails for its own setting', async () => {
    const proc = start(instancePath, [], base);
    for (let waited = 0; !proc.out.includes('"kind":"started"'); waited += 50) {
      if (waited > patience(10_000) || proc.done) throw new Error(`the instance did not start:\n${proc.out}\n${proc.err}`);
      await sleep(50);
    }
    // Still up a second later, and quiet: nothing in the base settings is wrong. (Its storage is
    // unreachable, so stopping it cleanly would wait out the SDK's retries; it is killed instead.)
    await sleep(1_000);
    expect(proc.done).toBe(false);
    expect(proc.err).toBe('');
    await proc.kill();
  });

  it.each<[string, Env, string, RegExp, string?]>([
    [
      'an unparsable coordinator schedule',
      { BATON_COORDINATOR_SCHEDULE: 'every ten seconds' },
      'BATON_COORDINATOR_SCHEDULE',
      /^InvalidSettingError: BATON_COORDINATOR_SCHEDULE must be an NCRONTAB expression/,
    ],
    [
      'a 10 s lease',
      { BATON_LEASE_SECONDS: '10' },
      'BATON_LEASE_SECONDS',
      /^InvalidSettingError: BATON_LEASE_SECONDS must be at least 15$/,
    ],
    [
      'a renew deadline as long as the lease',
      { BATON_RENEW_DEADLINE_SECONDS: '15' },
      'BATON_RENEW_DEADLINE_SECONDS',
      /^InvalidSettingError: BATON_RENEW_DEADLINE_SECONDS must be less than BATON_LEASE_SECONDS \(15\)$/,
    ],
    [
      'a renew deadline too short to retry in',
      { BATON_LEASE_SECONDS: '30', BATON_RENEW_DEADLINE_SECONDS: '12' },
      'BATON_RENEW_DEADLINE_SECONDS',
      /must be greater than 12: 1\.2 × the renew interval, which is a third of BATON_LEASE_SECONDS \(30\)/,
    ],
    [
      'a malformed connection string holding a key',
      { AzureWebJobsStorage: `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY.slice(0, -4)}!!!!` },
      'AzureWebJobsStorage',
      /^InvalidSettingError: AzureWebJobsStorage is not a valid storage connection string: AccountKey is not base64$/,
      KEY.slice(0, 20),
    ],
    [
      'key material where a key name goes',
      { AzureWebJobsStorage: `AccountName=acct;${KEY.slice(0, 40)}=x` },
      'AzureWebJobsStorage',
      /part 2 has an unknown key/,
      KEY.slice(0, 20),
    ],
    ['no connection', { AzureWebJobsStorage: '' }, 'AzureWebJobsStorage', /AzureWebJobsStorage is not set/],
    [
      'BATON_SYNTHETIC_JOBS that is not JSON',
      { BATON_SYNTHETIC_JOBS: '[{"name":"sum",' },
      'BATON_SYNTHETIC_JOBS',
      /BATON_SYNTHETIC_JOBS must be a JSON array of job specs .*; it is not valid JSON$/,
    ],
    [
      'a synthetic job with a negative failure tolerance',
      { BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3,"failureTolerance":{"count":-1}}]' },
      'BATON_SYNTHETIC_JOBS',
      /BATON_SYNTHETIC_JOBS is invalid at 0\.failureTolerance\.count \(job sum\): must be 0 or more/,
    ],
    [
      'a synthetic job with an unparsable schedule',
      { BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3,"schedule":"daily"}]' },
      'BATON_SYNTHETIC_JOBS',
      /BATON_SYNTHETIC_JOBS\.0\.schedule "daily" is not a valid NCRONTAB expression/,
    ],
    [
      'BATON_MAX_ATTEMPTS that host.json disagrees with',
      { BATON_MAX_ATTEMPTS: '3' },
      'BATON_MAX_ATTEMPTS',
      /BATON_MAX_ATTEMPTS \(3\) must equal host\.json extensions\.queues\.maxDequeueCount \(5\)$/,
    ],
    [
      'a BATON_HOST_JSON that does not exist',
      { BATON_HOST_JSON: '/nonexistent/host.json' },
      'BATON_HOST_JSON',
      /^InvalidSettingError: BATON_HOST_JSON: cannot read \/nonexistent\/host\.json: ENOENT/,
    ],
    [
      'a local visibility timeout too short to renew',
      { BATON_LOCAL_VISIBILITY_SECONDS: '2' },
      'BATON_LOCAL_VISIBILITY_SECONDS',
      /^InvalidSettingError: BATON_LOCAL_VISIBILITY_SECONDS must be at least 5$/,
    ],
    [
      'a local visibility timeout that is not whole seconds',
      { BATON_LOCAL_VISIBILITY_SECONDS: '7.5' },
      'BATON_LOCAL_VISIBILITY_SECONDS',
      /^InvalidSettingError: BATON_LOCAL_VISIBILITY_SECONDS must be a whole number of seconds from 5 to 600$/,
    ],
    [
      'a frozen-timer switch that is neither on nor off',
      { BATON_LOCAL_FREEZE_TIMERS: 'yes' },
      'BATON_LOCAL_FREEZE_TIMERS',
      /^InvalidSettingError: BATON_LOCAL_FREEZE_TIMERS must be 1 \(timers off\) or 0$/,
    ],
    [
      'a BATON_APP folder with no app',
      { BATON_APP: '/nonexistent' },
      'BATON_APP',
      /^InvalidSettingError: BATON_APP: \/nonexistent\/package\.json: not found; run baton start in the Functions app$/,
    ],
    [
      'an instance name too long to be a lease holder',
      { BATON_INSTANCE: 'i'.repeat(300) },
      'BATON_INSTANCE',
      /^InvalidSettingError: BATON_INSTANCE must be at most 256 characters/,
    ],
  ])('%s: exit 1, one stderr line', async (_name, env, setting, rule, secret) => {
    expectOneLine(await instance({ ...base, ...env }), setting, rule, secret);
  });
});

describe('the baton CLI', () => {
  it.each<[string, string[], Env, string, RegExp, string?]>([
    [
      'a malformed AzureWebJobsStorage',
      ['status'],
      { AzureWebJobsStorage: `AccountName=acct;AccountKey=${KEY.slice(0, -4)}!!!!` },
      'AzureWebJobsStorage',
      /^baton: AzureWebJobsStorage is not a valid storage connection string: AccountKey is not base64 \(from the environment\)$/,
      KEY.slice(0, 20),
    ],
    ['no connection', ['status'], {}, 'AzureWebJobsStorage', /^baton: no storage connection: checked --connection/],
    [
      'a bad BATON_LEASE_CONTAINER',
      ['status'],
      { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_LEASE_CONTAINER: 'L' },
      'BATON_LEASE_CONTAINER',
      /^baton: BATON_LEASE_CONTAINER must be a container name of at least 3 characters$/,
    ],
  ])('%s: exit 1, one stderr line', async (_name, args, env, setting, rule, secret) => {
    expectOneLine(await baton(args, env), setting, rule, secret);
  });

  it.each<[string, string[], string, RegExp, string?]>([
    [
      'a malformed --connection',
      ['runs', '--connection', `AccountName=acct;Acountkey=${KEY}`],
      '--connection',
      /^baton: --connection is not a valid storage connection string: part 2 has an unknown key/,
      KEY.slice(0, 20),
    ],
    [
      'a bad --hub',
      ['trigger', 'sum', '--hub', 'Nightly', '--connection', 'UseDevelopmentStorage=true'],
      '--hub',
      /^baton: --hub must be 1-51 characters/,
    ],
  ])('%s is a usage error: exit 2, one stderr line', async (_name, args, setting, rule, secret) => {
    expectOneLine(await baton(args), setting, rule, secret, 2);
  });
});

describe('baton start: the same checks as its instances, before Azurite starts', () => {
  /**
   * Well short of what starting Azurite and the instances takes. All of it is the machine's:
   * nothing keeps a failed start alive, so the CLI's 2 s drain timer is not waited out; and
   * Azurite's start, the line it tells apart, slows with the machine too. The wait for the exit
   * outlasts the bound, so a slow exit fails on the bound and says why.
   */
  const startFailsWithin = () => timeBound(8_000);

  it.each<[string, string[], Env, string, RegExp]>([
    [
      'a 10 s lease',
      [],
      { BATON_LEASE_SECONDS: '10' },
      'BATON_LEASE_SECONDS',
      /^baton: BATON_LEASE_SECONDS must be at least 15$/,
    ],
    [
      'a renew deadline past the lease',
      [],
      { BATON_LEASE_SECONDS: '20', BATON_RENEW_DEADLINE_SECONDS: '25' },
      'BATON_RENEW_DEADLINE_SECONDS',
      /^baton: BATON_RENEW_DEADLINE_SECONDS must be less than BATON_LEASE_SECONDS \(20\)$/,
    ],
    [
      'BATON_SYNTHETIC_JOBS that is not JSON',
      [],
      { BATON_SYNTHETIC_JOBS: '{' },
      'BATON_SYNTHETIC_JOBS',
      /^baton: BATON_SYNTHETIC_JOBS must be a JSON array of job specs/,
    ],
    [
      'a synthetic job name Baton refuses',
      [],
      { BATON_SYNTHETIC_JOBS: '[{"name":"Sum","items":3}]' },
      'BATON_SYNTHETIC_JOBS',
      /^baton: BATON_SYNTHETIC_JOBS is invalid at 0: job Sum: name must be 1-48 lowercase letters/,
    ],
    [
      'a negative synthetic tolerance',
      [],
      { BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3,"failureTolerance":{"percent":-1}}]' },
      'BATON_SYNTHETIC_JOBS',
      /^baton: BATON_SYNTHETIC_JOBS is invalid at 0\.failureTolerance\.percent \(job sum\): must be 0-100$/,
    ],
    [
      'BATON_MAX_ATTEMPTS that host.json disagrees with',
      [],
      { BATON_MAX_ATTEMPTS: '2' },
      'BATON_MAX_ATTEMPTS',
      /^baton: BATON_MAX_ATTEMPTS \(2\) must equal host\.json/,
    ],
    [
      'a bad BATON_MAX_IN_FLIGHT',
      [],
      { BATON_MAX_IN_FLIGHT: '8' },
      'BATON_MAX_IN_FLIGHT',
      /^baton: BATON_MAX_IN_FLIGHT must be at least 16$/,
    ],
    [
      'a BATON_HOST_JSON that does not exist',
      [],
      { BATON_HOST_JSON: '/nonexistent/host.json' },
      '/nonexistent/host.json',
      /^baton: the app in .* failed to load: Error: cannot read \/nonexistent\/host\.json: ENOENT/,
    ],
    [
      'a folder that holds no Functions app',
      ['--app', '.'],
      {},
      'package.json',
      /^baton: \/.*\/package\.json: not found; run baton start in the Functions app$/,
    ],
    [
      'a --log-dir that cannot be made (a file is in the way)',
      ['--log-dir', 'not-a-folder/logs'],
      {},
      '--log-dir',
      /^baton: --log-dir not-a-folder\/logs: cannot write there \(ENOTDIR\)$/,
    ],
  ])('%s: exit 1, one stderr line, nothing started', async (_name, args, env, setting, rule) => {
    const bound = await startFailsWithin();
    const result = await baton(['start', '--app', referenceApp, ...args], env, Math.max(15_000, bound.ms));
    expectOneLine(result, setting, rule);
    // Azurite and the instances would have taken seconds and printed "cluster up".
    expect(result.out).not.toContain('cluster up');
    expect(result.ms, bound.why).toBeLessThan(bound.ms);
  });

  it.each<[string, string[], Env, string, RegExp]>([
    ['a bad --hub', ['--hub', 'a--b'], {}, '--hub', /^baton: --hub: must be 1-51 characters/],
    [
      'an unknown --job for --once',
      ['--once', '--job', 'nope'],
      { BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3}]' },
      '--job nope',
      /^baton: --job nope is not a job of this app \(jobs: blob-audit, sum\)$/,
    ],
    [
      '--once without --job in an app of several jobs',
      ['--app', 'several-jobs', '--once'],
      {},
      '--job',
      /^baton: --once needs --job: this app has several jobs \(alpha, beta\)$/,
    ],
  ])('%s is a usage error: exit 2, one stderr line, nothing started', async (_name, args, env, setting, rule) => {
    const bound = await startFailsWithin();
    const result = await baton(['start', '--app', referenceApp, ...args], env, Math.max(15_000, bound.ms));
    expectOneLine(result, setting, rule, undefined, 2);
    expect(result.out).not.toContain('cluster up');
    expect(result.ms, bound.why).toBeLessThan(bound.ms);
  });
});

describe('baton trigger of a job the leader does not run (with storage)', () => {
  const azurite = useAzurite();
  const connection = () => azurite.azurite.connectionString;
  const accountKey = () => /AccountKey=([^;]+)/.exec(connection())![1]!;

  it('on a hub whose leader recorded its jobs: one line naming the job and the known ones, exit 1', async () => {
    const seed = await seedHub(azurite.blobService, azurite.leaseBlobService, azurite.uniqueName('bad-trigger'));
    const result = await baton(['trigger', 'nope', '--connection', connection(), '--hub', seed.hub, '--timeout', '60']);
    expectOneLine(
      result,
      'nope',
      new RegExp(`^baton: hub ${seed.hub} has no job nope \\(known: ${seed.job}\\); pass --force to request it anyway$`),
      accountKey(),
    );
  });

  it('on a hub no leader has ticked on: says it is unchecked; the leader leaves it, and drops it only when an hour old', async () => {
    const hub = azurite.uniqueName('fresh');
    const args = ['--connection', connection(), '--hub', hub, '--timeout', '60'];
    const requested = await baton(['trigger', 'nope', ...args]);
    expect(requested.code, requested.err).toBe(0);
    expect(requested.err).toBe('');
    const runId = /^requested run (nope\/manual-[0-9a-f-]{36})$/m.exec(requested.out)?.[1];
    expect(runId, requested.out).toBeDefined();
    expect(requested.out).toContain(
      `job nope was not checked (no leader has recorded the jobs of hub ${hub} yet): a leader that does not run it leaves the request for one that does, for an hour, then drops it`,
    );

    expectOneLine(
      await baton(['show', runId!, ...args]),
      runId!,
      new RegExp(
        `^baton: no run ${runId} in hub ${hub} yet: its request waits for the next tick of a leader that runs job nope \\(an hour at most\\)$`,
      ),
    );

    // Another request for the same job, made over an hour ago: no leader that runs nope came.
    const docs = new BlobDocumentStore(azurite.blobService.getContainerClient(hubResources(hub).container));
    const staleId = randomUUID();
    const staleKey = `requests/${new Date(Date.now() - 61 * 60_000).toISOString()}-${randomUUID()}.json`;
    await docs.write(staleKey, JSON.stringify({ kind: 'run', job: 'nope', id: staleId }), { ifNoneMatch: '*' });

    // A real leader (the local host's instance) leaves the first request and drops the stale one.
    const leader = start(instancePath, [], {
      AzureWebJobsStorage: connection(),
      BATON_HUB: hub,
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
    });
    const pending = async () => {
      const keys: string[] = [];
      for await (const key of docs.list('requests/')) keys.push(key);
      return keys;
    };
    for (
      let waited = 0;
      (await pending()).includes(staleKey) ||
      !leader.out.includes('left a run request for job nope, which this leader does not run');
      waited += 200
    ) {
      if (waited > patience(20_000)) throw new Error(`the leader did not sort the requests:\n${leader.out}\n${leader.err}`);
      await sleep(200);
    }
    expect((await leader.finish(10_000)).code).toBe(0);
    expect(leader.out).toContain(
      'dropped a run request for job nope, which this leader does not run: no leader ran it for 60 minutes',
    );
    expect(await pending()).toHaveLength(1);

    expectOneLine(
      await baton(['show', runId!, ...args]),
      runId!,
      new RegExp(`^baton: no run ${runId} in hub ${hub} yet: its request waits for the next tick of a leader that runs job nope`),
    );
    expectOneLine(
      await baton(['show', `nope/manual-${staleId}`, ...args]),
      `nope/manual-${staleId}`,
      new RegExp(
        `^baton: no run nope/manual-${staleId} in hub ${hub}, and no request for it waits: a request no leader could run for an hour is dropped, ` +
          `and hub ${hub} has no job nope \\(known: blob-audit\\)$`,
      ),
    );
  });
});
