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
    expect(require.resolve(pkg.name)).toBe(join(root, 'dist', 'src', 'index.js'));
  });

  it('exports the elector, both lease stores, startAzurite and the error classes', () => {
    const lib = require(pkg.name) as Record<string, unknown>;
    for (const name of [
      'LeaderElector',
      'BlobLeaseStore',
      'InMemoryLeaseStore',
      'startAzurite',
      'FencedDocuments',
      'BatonError',
      'InvalidConfigError',
      'InvalidSettingError',
      'LeaseHeldError',
      'LeaseLostError',
      'StaleEpochError',
      'ConcurrentUpdateError',
      'defineJob',
      'Coordinator',
      'requestRun',
      'requestCancel',
      'createBatonRuntime',
      'batonRegistrations',
    ]) {
      expect(typeof lib[name], name).toBe('function');
    }
  });

  it('keeps `main` for the Functions host, pointing at the compiled registrations', () => {
    expect(pkg.main).toBe('dist/functions/index.js');
    expect(existsSync(join(root, pkg.main))).toBe(true);
  });
});
