import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// `npm test` builds first, so these check the compiled package as a consumer would load it.
const require = createRequire(import.meta.url);
const root = join(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; main: string };
const bundle = join(root, 'dist', 'bundle');

/**
 * An app's start in a new process, as the Functions host starts one: it takes a job from the root
 * and registers it with the settings in its first argument; `own()` lists the package's files it
 * has loaded, and `http` holds the handlers of its HTTP routes by name. `then` runs after, and
 * prints what the test reads as its last line.
 */
function startApp(then: string, env: Record<string, string>): string {
  const app = `
    const { basename } = require('node:path');
    const { defineJob } = require(${JSON.stringify(join(bundle, 'index.js'))});
    const { registerBaton } = require(${JSON.stringify(join(bundle, 'functions.js'))});
    const own = () => Object.keys(require.cache).filter((f) => f.startsWith(${JSON.stringify(bundle)})).map((f) => basename(f)).sort();
    const http = new Map();
    const app = { timer() {}, storageQueue() {}, http(name, options) { http.set(name, options.handler); }, hook: { appTerminate() {} } };
    const job = defineJob({
      name: 'sizes', schedule: '0 0 3 * * *', *split() { yield 1; }, async process() { return 1; },
      aggregate: { initial: () => 0, add: (sum) => sum, merge: (a, b) => a + b },
    });
    registerBaton(app, { jobs: [job], env: JSON.parse(process.argv[1]) });
    ${then}
  `;
  const settings = JSON.stringify({ AzureWebJobsStorage: 'UseDevelopmentStorage=true', ...env });
  const out = execFileSync(process.execPath, ['-e', app, settings], { cwd: join(root, 'functions'), encoding: 'utf8' });
  // The last line: an exporter prints its own lines before it.
  return out.trim().split('\n').at(-1)!;
}

describe('the built package', () => {
  it('resolves its name through `exports` to the library entry', () => {
    expect(require.resolve(pkg.name)).toBe(join(root, 'dist', 'bundle', 'index.js'));
  });

  it('exports jobs, the hub client and the typed errors from the root, and nothing else', () => {
    const lib = require(pkg.name) as Record<string, unknown>;
    expect(Object.keys(lib).sort()).toEqual([
      'BatonClient',
      'BatonError',
      'ConcurrentUpdateError',
      'HookTimeoutError',
      'InvalidConfigError',
      'InvalidRunIdError',
      'InvalidSettingError',
      'LeaseHeldError',
      'LeaseLostError',
      'StaleEpochError',
      'TaskAbandonedError',
      'defineJob',
      'isBatonError',
      'withinTolerance',
    ]);
  });

  it('exports the elector, the lease and fencing stores and what they need from `baton-functions/election`', () => {
    expect(require.resolve(`${pkg.name}/election`)).toBe(join(root, 'dist', 'bundle', 'election.js'));
    const election = require(`${pkg.name}/election`) as Record<string, unknown>;
    expect(Object.keys(election).sort()).toEqual([
      'BlobDocumentStore',
      'BlobEpochMark',
      'BlobHandoverRequestStore',
      'BlobLeaseStore',
      'FencedDocuments',
      'LEASE_RETRY_OPTIONS',
      'LeaderElector',
      'StorageTimeClock',
      'ThreadedLeaseBeats',
      'createBlobServiceClient',
      'describeLeaderEvent',
      'parseStorageSettings',
      'systemClock',
    ]);
  });

  it('exports the one-job runner, the fakes, the fake clock and the embedded Azurite from `baton-functions/testing`', () => {
    expect(require.resolve(`${pkg.name}/testing`)).toBe(join(root, 'dist', 'bundle', 'testing.js'));
    const testing = require(`${pkg.name}/testing`) as Record<string, unknown>;
    expect(Object.keys(testing).sort()).toEqual([
      'FakeClock',
      'InMemoryDocumentStore',
      'InMemoryHandoverRequestStore',
      'InMemoryLeaseStore',
      'InMemoryQueue',
      'runJobOnce',
      'startAzurite',
    ]);
    for (const name of Object.keys(testing)) expect(typeof testing[name], name).toBe('function');
  });

  it('exports the register call and the app storage client from `baton-functions/functions`, and nothing else', () => {
    expect(require.resolve(`${pkg.name}/functions`)).toBe(join(root, 'dist', 'bundle', 'functions.js'));
    const functions = require(`${pkg.name}/functions`) as Record<string, unknown>;
    expect(Object.keys(functions).sort()).toEqual(['blobServiceClient', 'registerBaton']);
    expect(typeof functions.registerBaton).toBe('function');
    expect(typeof functions.blobServiceClient).toBe('function');
  });

  it('gives each class one identity and its own name, whichever entry it came through', () => {
    const lib = require(pkg.name) as typeof import('../../src/index');
    const functions = require(`${pkg.name}/functions`) as typeof import('../../src/functions');
    const app = {
      timer: () => undefined,
      storageQueue: () => undefined,
      http: () => undefined,
      hook: { appTerminate: () => undefined },
    };
    let thrown: unknown;
    try {
      const env = { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'Not A Hub' };
      functions.registerBaton(app as never, { jobs: [], env, hostJson: join(root, 'functions', 'host.json') });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(lib.InvalidSettingError);
    expect(thrown).toBeInstanceOf(lib.BatonError);
    expect((thrown as Error).name).toBe('InvalidSettingError');
    expect((thrown as InstanceType<typeof lib.InvalidSettingError>).setting).toBe('BATON_HUB');
  });

  it('keeps the name of every class and function an entry exports, and each error names itself', () => {
    // The bundle keeps no names by wrapper; a clash between two modules would rename one.
    for (const entry of ['', '/functions', '/election', '/testing']) {
      const exported = require(`${pkg.name}${entry}`) as Record<string, unknown>;
      for (const [name, value] of Object.entries(exported)) {
        if (typeof value === 'function') expect(value.name, `${pkg.name}${entry} ${name}`).toBe(name);
      }
    }
    const lib = require(pkg.name) as Record<string, unknown>;
    for (const [name, value] of Object.entries(lib)) {
      if (typeof value !== 'function' || !(value.prototype instanceof Error)) continue;
      const ErrorClass = value as new (...args: string[]) => Error;
      expect(new ErrorClass('InvalidConfig', 'x', 'y').name, name).toBe(name);
    }
  });

  it('loads the HTTP handlers on the first request, and the durable engine for a durable app, from their own files', () => {
    const then = `
      const registered = own();
      const request = (query) => ({ headers: new Headers(), url: 'http://localhost/api/baton/x', query: new URLSearchParams(query), params: {} });
      (async () => {
        const page = await http.get('baton-page')(request(''), {});
        // Refused before any read, with a 400 only if baton-http.js knows baton.js's InvalidConfigError.
        const runs = await http.get('baton-api-runs')(request('after=garbage'), {});
        const html = String(page.body).startsWith('<!doctype html>');
        console.log(JSON.stringify({ registered, requested: own(), status: page.status, html, runs: runs.status, error: runs.jsonBody.error }));
        process.exit(0);
      })();
    `;
    const run = (env: Record<string, string>) =>
      JSON.parse(startApp(then, { BATON_HUB: 'later', ...env })) as {
        registered: string[];
        requested: string[];
        status: number;
        html: boolean;
        runs: number;
        error: string;
      };
    const queue = run({});
    expect(queue.registered).toEqual(['baton.js', 'functions.js', 'index.js']);
    expect(queue.requested).toEqual(['baton-http.js', 'baton.js', 'functions.js', 'index.js']);
    expect(queue).toMatchObject({ status: 200, html: true, runs: 400 });
    expect(queue.error).toMatch(/^query after/);
    const durable = run({ BATON_ENGINE: 'durable' });
    expect(durable.registered).toEqual(['baton-durable.js', 'baton.js', 'functions.js', 'index.js']);
    expect(durable).toMatchObject({ status: 200, html: true });
  });

  it('gives the testing kit, in the tools bundle, the classes of the app bundle', async () => {
    // baton-tools.js takes every module baton.js holds from it, so an error the kit passes on
    // from the runtime is the very class the root exports.
    const lib = require(pkg.name) as typeof import('../../src/index');
    const testing = require(`${pkg.name}/testing`) as typeof import('../../src/testing');
    const job = lib.defineJob({
      name: 'sizes',
      schedule: '0 0 3 * * *',
      *split() {
        yield 1;
      },
      process: async () => 1,
      aggregate: { initial: () => 0, add: (sum: number) => sum },
    });
    const azurite = { connectionString: 'UseDevelopmentStorage=true' } as never;
    const run = testing.runJobOnce(job, { azurite, env: { BATON_MAX_ATTEMPTS: 'lots' } });
    await expect(run).rejects.toBeInstanceOf(lib.InvalidSettingError);
    await expect(run).rejects.toMatchObject({ setting: 'BATON_MAX_ATTEMPTS' });
  });

  it("loads, on an app's start, only the packages the app uses", () => {
    // A new process, as the Functions host starts one, lists the installed packages it has loaded
    // by the time its registrations are done, and which of the package's own files: an app never
    // loads the tools' bundle.
    const then = `
      const packages = new Set();
      for (const file of Object.keys(require.cache)) {
        const parts = file.split(require('node:path').sep);
        const at = parts.lastIndexOf('node_modules');
        if (at < 0) continue;
        const scoped = parts[at + 1].startsWith('@');
        packages.add(parts.slice(at + 1, at + (scoped ? 3 : 2)).join('/'));
      }
      console.log(JSON.stringify({ own: own(), packages: [...packages].sort() }));
      process.exit(0);
    `;
    const bundled: string[][] = [];
    const loaded = (env: Record<string, string>): string[] => {
      const { own, packages } = JSON.parse(startApp(then, env)) as { own: string[]; packages: string[] };
      bundled.push(own);
      return packages;
    };

    const plain = loaded({});
    expect(bundled[0]).toEqual(['baton.js', 'functions.js', 'index.js']);
    // What the floor app of bench/benchmarks/footprint.ts loads too: the storage SDKs and their core.
    expect(plain).toEqual(expect.arrayContaining(['@azure/storage-blob', '@azure/storage-queue']));
    // Loaded only when a setting or a call uses them: OpenTelemetry when a provider is registered,
    // identity for a keyless connection, the durable engine under BATON_ENGINE=durable, the CLI's
    // and the local host's packages never in an app. zod and croner are inside the bundle.
    for (const unused of [
      '@opentelemetry/api',
      '@opentelemetry/api-logs',
      '@azure/identity',
      'durable-functions',
      'commander',
      'cli-progress',
      'azurite',
      'zod',
      'croner',
    ]) {
      expect(plain, unused).not.toContain(unused);
    }
    // Exporting metrics is a use: the API comes with it (its SDK is an optional peer, absent here).
    expect(
      loaded({ BATON_METRICS_EXPORTER: 'console', BATON_HUB: 'footprint' }).filter((name) => name.startsWith('@opentelemetry/')),
    ).toEqual(expect.arrayContaining(['@opentelemetry/api', '@opentelemetry/api-logs']));
  });

  it("points `main` at the library, and the reference app's own package.json at the compiled app", () => {
    expect(pkg.main).toBe('dist/bundle/index.js');
    const app = JSON.parse(readFileSync(join(root, 'functions', 'package.json'), 'utf8')) as { main: string; private: boolean };
    expect(app.private).toBe(true);
    expect(join(root, 'functions', app.main)).toBe(join(root, 'dist', 'functions', 'index.js'));
    expect(existsSync(join(root, 'functions', app.main))).toBe(true);
    expect(existsSync(join(root, 'functions', 'host.json'))).toBe(true);
  });
});
