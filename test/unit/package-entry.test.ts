import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// `npm test` builds first, so these check the compiled package as a consumer would load it.
const require = createRequire(import.meta.url);
const root = join(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; main: string };

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
      'BlobLeaseStore',
      'FencedDocuments',
      'LEASE_RETRY_OPTIONS',
      'LeaderElector',
      'StorageTimeClock',
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

  it("points `main` at the library, and the reference app's own package.json at the compiled app", () => {
    expect(pkg.main).toBe('dist/bundle/index.js');
    const app = JSON.parse(readFileSync(join(root, 'functions', 'package.json'), 'utf8')) as { main: string; private: boolean };
    expect(app.private).toBe(true);
    expect(join(root, 'functions', app.main)).toBe(join(root, 'dist', 'functions', 'index.js'));
    expect(existsSync(join(root, 'functions', app.main))).toBe(true);
    expect(existsSync(join(root, 'functions', 'host.json'))).toBe(true);
  });
});
