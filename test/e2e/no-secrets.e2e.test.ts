/**
 * Secrets never reach logs or errors, with real processes at BATON_LOG_LEVEL=debug (the most
 * output Baton has): a full `baton start --once` run, the same run on instance processes whose
 * own stdout and stderr are read raw, and storage errors against a SAS connection whose `sig`
 * storage echoes back in its error messages. Nothing any process prints may hold the Azurite
 * account key, an unmasked `AccountKey=` or an unmasked `sig=`.
 *
 * It spawns the compiled CLI and instance (`npm test` builds dist/ first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { hubResources } from '../../src/hub/resources';
import { requestRun } from '../../src/hub/requests';
import { readRunDetails } from '../../src/hub/status';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { isTerminal, type RunRecord } from '../../src/hub/run-record';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import {
  cliPath,
  instanceLogDir,
  killAllSpawned,
  markDistInUse,
  projectRoot,
  spawnTracked,
  type SpawnedProcess,
  referenceApp,
} from '../support/cluster-process';
import { waitFor } from '../support/edge-support';
import { failuresOf } from '../support/failures';
import { describePatience, patience } from '../support/slowdown';
import { hostCommandLine } from '../../src/local/stop-rules';

// Test setup only: the public Azurite development key, which every local run's connection carries.
const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const instanceMain = join(projectRoot, 'dist', 'src', 'local', 'instance-main.js');

const work = mkdtempSync(join(tmpdir(), 'baton-no-secrets-'));
const release = markDistInUse();
const timings: string[] = [];

/** 24 items, items 6, 13 and 20 failing by design (tolerated), two attempts each: errors on the way, a known end. */
const JOB = { name: 'tiny', items: 24, itemsPerMessage: 2, failEvery: 7, failureTolerance: { count: 3 } };
const FAILING = [6, 13, 20];

/** host.json with two deliveries and no retry delay, so the failing items end within seconds. */
function quickHostJson(): string {
  const host = JSON.parse(readFileSync(join(projectRoot, 'functions', 'host.json'), 'utf8'));
  host.extensions.queues.maxDequeueCount = 2;
  host.extensions.queues.visibilityTimeout = '00:00:00';
  const path = join(work, 'host.json');
  writeFileSync(path, JSON.stringify(host));
  return path;
}

function debugEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    BATON_LOG_LEVEL: 'debug',
    BATON_SYNTHETIC_JOBS: JSON.stringify([JOB]),
    BATON_HOST_JSON: quickHostJson(),
    BATON_MAX_ATTEMPTS: '2',
  };
}

/** What no process may print: the key (raw or URL-encoded), or AccountKey / sig with a value that is not `***`. */
function expectNoSecrets(label: string, text: string, extraSecrets: string[] = []): void {
  for (const secret of [AZURITE_KEY, encodeURIComponent(AZURITE_KEY), ...extraSecrets]) {
    expect(text.includes(secret), `${label} printed a secret`).toBe(false);
  }
  expect(text, `${label} printed an AccountKey`).not.toMatch(/AccountKey\s*=\s*(?!\*\*\*)/i);
  expect(text, `${label} printed a sig`).not.toMatch(/(^|[?&;\s"'])sig(=|%3D)(?!\*\*\*)/im);
}

interface Instance {
  name: string;
  proc: ChildProcess;
  out: string[];
  err: string[];
  exited: Promise<number | null>;
}

const instances: Instance[] = [];

/** An instance process as the cluster starts one (stdin held open: it stops when stdin ends), its output kept raw. */
function spawnInstance(name: string, env: NodeJS.ProcessEnv): Instance {
  const proc = spawn(process.execPath, [instanceMain], {
    cwd: projectRoot,
    env: { ...env, BATON_INSTANCE: name },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  const err: string[] = [];
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => out.push(chunk));
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => err.push(chunk));
  const exited = new Promise<number | null>((resolve) => proc.once('close', (code) => resolve(code)));
  const instance = { name, proc, out, err, exited };
  instances.push(instance);
  return instance;
}

/** The host's WorkerTerminate: the hooks run and the instance exits by itself, code 0. */
async function stopInstance(instance: Instance): Promise<number | null> {
  instance.proc.stdin!.write(hostCommandLine('terminate'));
  const code = await Promise.race([instance.exited, sleep(patience(15_000)).then(() => 'timeout' as const)]);
  if (code === 'timeout') {
    instance.proc.kill('SIGKILL');
    throw new Error(`${instance.name} did not stop within ${describePatience(15_000)}`);
  }
  return code;
}

const dump = (i: Instance) => `--- ${i.name} stdout ---\n${i.out.join('')}\n--- ${i.name} stderr ---\n${i.err.join('')}`;

/** Storage that refuses everything with 403 and, as a worst case, quotes the request URL (its SAS included) in the error. */
async function echoingStorage(): Promise<{ port: number; server: http.Server; requests: number }> {
  const state = { port: 0, server: undefined as unknown as http.Server, requests: 0 };
  state.server = http.createServer((req, res) => {
    state.requests++;
    req.resume();
    req.on('end', () => {
      // A HEAD has no body to quote anything in: it finds nothing, so the caller goes on to a
      // write, which is refused with the URL quoted (escaped as XML, as Azure's bodies are; the
      // storage SDKs now refuse a body that is not well-formed, and then quote nothing).
      if (req.method === 'HEAD') {
        res.writeHead(404, { 'x-ms-error-code': 'BlobNotFound', 'x-ms-request-id': '1' });
        res.end();
        return;
      }
      res.writeHead(403, {
        'content-type': 'application/xml',
        'x-ms-error-code': 'AuthenticationFailed',
        'x-ms-request-id': '1',
      });
      res.end(
        '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code>' +
          `<Message>Server failed to authenticate the request. Request URL: http://127.0.0.1${(req.url ?? '').replaceAll('&', '&amp;')}</Message></Error>`,
      );
    });
  });
  await new Promise<void>((resolve) => state.server.listen(0, '127.0.0.1', resolve));
  state.port = (state.server.address() as AddressInfo).port;
  return state;
}

afterAll(async () => {
  for (const i of instances) if (i.proc.exitCode === null && i.proc.signalCode === null) i.proc.kill('SIGKILL');
  await killAllSpawned();
  release();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`no-secrets e2e timings:\n  ${timings.join('\n  ')}`);
});

describe('a full local run at BATON_LOG_LEVEL=debug prints no secret', () => {
  it(
    'baton start --once --instances 2: the CLI output (instance log lines included) holds no key and no sig',
    { timeout: patience(150_000) },
    async () => {
      let cluster: SpawnedProcess | undefined;
      onTestFailed(() => {
        if (cluster) process.stderr.write(`\n${cluster.dump()}\n`);
      });
      const outputPath = join(work, 'once.json');
      const started = Date.now();
      const logs = instanceLogDir();
      cluster = spawnTracked(
        'baton start --once (debug)',
        process.execPath,
        [
          cliPath,
          'start',
          '--app',
          referenceApp,
          '--once',
          '--instances',
          '2',
          '--job',
          JOB.name,
          '--output',
          outputPath,
          '--log-dir',
          logs,
        ],
        debugEnv(),
        logs,
      );
      const exit = await cluster.waitExit(140_000);
      await Promise.race([cluster.closed, sleep(patience(2_000))]);
      timings.push(`baton start --once --instances 2 (debug): ${Date.now() - started} ms`);
      expect(exit).toEqual({ code: 0, signal: null });

      const { record } = JSON.parse(readFileSync(outputPath, 'utf8')) as { record: RunRecord };
      expect(record).toMatchObject({ state: 'succeeded', counters: { planned: 24, succeeded: 21, failed: 3 } });
      const out = cluster.lines.map((l) => l.text).join('\n');
      // Debug is on: the instances' info lines reach the cluster's output, failing items' retries among them.
      expect(out).toMatch(/^instance-\d: run tiny\/manual-\S+ planned 24 items in 12 messages$/m);
      expect(out).toMatch(
        /^instance-\d: 1 item\(s\) of run tiny\/manual-\S+ failed try 1 of 2; trying again in 1 s: Error: synthetic item (6|13|20) fails/m,
      );
      expectNoSecrets('baton start stdout', out);
      expectNoSecrets('baton start stderr', cluster.stderr.join(''));
      // Only the sample's audit job reads the demo blobs: a run of another job does not wait for them.
      expect(out).not.toMatch(/^seed/m);
      // --log-dir keeps every instance's whole output: the same rule holds there.
      const kept = readdirSync(logs).filter((f) => f.endsWith('.log'));
      expect(kept.sort()).toEqual(['instance-1.log', 'instance-2.log']);
      for (const file of kept) {
        const text = readFileSync(join(logs, file), 'utf8');
        expect(text).toMatch(/"kind":"started"/);
        expectNoSecrets(`--log-dir ${file}`, text);
      }
    },
  );

  describe('instance processes, read raw', () => {
    let azurite: RunningAzurite;
    beforeAll(async () => {
      azurite = await startAzurite();
      // The connection every instance gets carries the account key, as the cluster's does.
      expect(azurite.connectionString).toContain(AZURITE_KEY);
    });
    afterAll(async () => {
      await azurite?.close();
    });

    it(
      'two instances run the job to its end; neither stdout nor stderr holds the key or a sig',
      { timeout: patience(90_000) },
      async () => {
        const hub = 'nosecrets';
        const env = {
          ...debugEnv(),
          AzureWebJobsStorage: azurite.connectionString,
          BATON_HUB: hub,
          BATON_COORDINATOR_SCHEDULE: '* * * * * *',
          BATON_MAX_IN_FLIGHT: '64',
          // A leader that stands, so a follower's per-tick debug line names it (checked below);
          // a resting hub's ticks say so instead, and its lines hold no secret either.
          BATON_REST_WHEN_IDLE: 'false',
        };
        const pair = [spawnInstance('instance-a', env), spawnInstance('instance-b', env)];
        onTestFailed(() => void process.stderr.write(`\n${pair.map(dump).join('\n')}\n`));
        const started = Date.now();
        const blobs = createBlobServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
        const docs = new BlobDocumentStore(blobs.getContainerClient(hubResources(hub).container));
        await blobs.getContainerClient(hubResources(hub).container).createIfNotExists();
        const runId = await requestRun(docs, JOB.name);
        let record: RunRecord | undefined;
        while (Date.now() - started < patience(75_000)) {
          record = (await readRunDetails(docs, runId).catch(() => undefined))?.record;
          if (record && isTerminal(record.state)) break;
          await sleep(250);
        }
        expect(record).toMatchObject({ state: 'succeeded', counters: { planned: 24, succeeded: 21, failed: 3 } });
        const manifest = (await readRunDetails(docs, runId))?.manifest;
        expect((await failuresOf(docs, manifest)).map((f) => f.item)).toEqual(FAILING);
        // The follower's per-tick debug line names the holder once the leader has recorded itself;
        // a tick that falls between the leader's acquire and its epoch bump says "another
        // candidate", and a short run can end before the next tick, so wait for that tick.
        const holderNamed = /not leading this tick: held by instance-[ab]/;
        await waitFor(
          'a follower tick that names the holder',
          async () => holderNamed.test(pair.map((i) => i.out.join('')).join('')),
          10_000,
        );
        for (const instance of pair) expect(await stopInstance(instance)).toBe(0);
        timings.push(`two instances, raw output (debug): ${Date.now() - started} ms`);

        const all = pair.map((i) => i.out.join('')).join('');
        // Debug lines are there (the timer's per-tick line, the engine's info lines), and the retries' errors.
        expect(all).toMatch(holderNamed);
        expect(all).toContain(`planned 24 items in 12 messages`);
        expect(all).toMatch(/1 item\(s\) of run tiny\/manual-\S+ failed try 1 of 2; trying again in 1 s/);
        for (const instance of pair) {
          expectNoSecrets(`${instance.name} stdout`, instance.out.join(''));
          expectNoSecrets(`${instance.name} stderr`, instance.err.join(''));
        }
      },
    );
  });
});

describe('a SAS connection whose storage errors quote the sig', () => {
  let storage: Awaited<ReturnType<typeof echoingStorage>>;
  const secretSig = `S3cr3t${randomBytes(24).toString('base64url')}`;
  let sas: string;
  beforeAll(async () => {
    storage = await echoingStorage();
    const endpoint = `http://127.0.0.1:${storage.port}/acct`;
    sas =
      `BlobEndpoint=${endpoint};QueueEndpoint=${endpoint};` +
      `SharedAccessSignature=sv=2024-11-04&ss=bq&srt=sco&sp=rwdlacup&se=2099-01-01T00:00:00Z&sig=${secretSig}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => storage?.server.close(() => resolve()));
  });

  it('an instance logs the refusals with sig masked, never its value', { timeout: patience(60_000) }, async () => {
    const instance = spawnInstance('instance-sas', {
      ...debugEnv(),
      AzureWebJobsStorage: sas,
      BATON_HUB: 'sas',
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
    });
    onTestFailed(() => void process.stderr.write(`\n${dump(instance)}\n`));
    const deadline = Date.now() + patience(30_000);
    const text = () => instance.out.join('');
    // Both triggers fail against this storage: the worker's queue and the coordinator's lease.
    // The blob SDK quotes the refusal's message, request URL and all; the queue SDK (12.31 and
    // newer) says only the status, so the URL reaches the log through the coordinator.
    const quoted = /baton-coordinator failed: .*Request URL: .*sig=\*\*\*/;
    while (!(quoted.test(text()) && /baton-worker: receive failed: /.test(text())) && Date.now() < deadline) {
      await sleep(200);
    }
    expect(await stopInstance(instance)).toBe(0);
    expect(storage.requests).toBeGreaterThan(0);
    // The refusal quoted the request URL, SAS and all; what left the process has sig masked.
    expect(text()).toMatch(quoted);
    expect(text()).toMatch(/baton-worker: receive failed: RestError: /);
    expectNoSecrets('instance-sas stdout', text(), [secretSig]);
    expectNoSecrets('instance-sas stderr', instance.err.join(''), [secretSig]);
  });

  it.each([
    ['from AzureWebJobsStorage: baton status', ['status'], true],
    ['pasted without --connection: an unknown command', [() => sas], false],
  ])('the CLI fails with one line and the sig masked (%s)', { timeout: patience(30_000) }, async (_, args, viaEnv) => {
    const argv = (args as Array<string | (() => string)>).map((a) => (typeof a === 'function' ? a() : a));
    const cli = spawnTracked('baton (sas)', process.execPath, [cliPath, ...argv], {
      ...process.env,
      BATON_LOG_LEVEL: 'debug',
      ...(viaEnv ? { AzureWebJobsStorage: sas } : { AzureWebJobsStorage: '' }),
    });
    const exit = await cli.waitExit(20_000);
    await Promise.race([cli.closed, sleep(patience(2_000))]);
    const out = cli.lines.map((l) => l.text).join('\n');
    const err = cli.stderr.join('');
    // A pasted SAS is an unknown command: a usage error (2); a refused status is a failure (1).
    expect(exit.code).toBe(viaEnv ? 1 : 2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/^baton: /);
    expectNoSecrets('baton stdout', out, [secretSig]);
    expectNoSecrets('baton stderr', err, [secretSig]);
  });
});
