import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/cluster-process';

/**
 * What `npm pack` ships, from `npm pack --dry-run` over the built dist/ (`npm test` builds
 * first): runtime code and its types, nothing a user's app does not run. The budget is the
 * tarball's size now with a little room; a change that needs more says so here.
 */
interface Packed {
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

const pkgJson = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
  exports: Record<string, { types: string; default: string }>;
  bin: { baton: string };
};

const packed = (): Packed => {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: projectRoot, encoding: 'utf8' });
  return (JSON.parse(out) as Packed[])[0]!;
};

describe('the package npm pack makes', () => {
  const pack = packed();
  const files = pack.files.map((f) => f.path).sort();

  it('holds the bundled code, its types, and the three files npm always adds', () => {
    // No app entry, host.json or app settings: the reference app has its own package.json.
    expect(files.filter((path) => !path.startsWith('dist/'))).toEqual(['LICENSE', 'README.md', 'package.json']);
    // The code is the bundle (build/bundle.mjs): a file per entry beside the two they share, and
    // the three an app loads only when it uses them.
    expect(files.filter((path) => path.startsWith('dist/bundle/'))).toEqual(
      [
        'baton-durable',
        'baton-http',
        'baton-leader',
        'baton-tools',
        'baton',
        'cli',
        'election',
        'functions',
        'index',
        'instance-main',
        'testing',
      ].map((name) => `dist/bundle/${name}.js`),
    );
    // dist/types holds the types alone, in the folders of src/: the declarations the entries
    // reach (build/types.mjs), so no CLI, local host or durable engine inside.
    const types = files.filter((path) => path.startsWith('dist/types/'));
    expect(
      files.filter((path) => path.startsWith('dist/') && !path.startsWith('dist/bundle/') && !path.startsWith('dist/types/')),
    ).toEqual([]);
    expect(types.filter((path) => !path.endsWith('.d.ts'))).toEqual([]);
    const folders = [...new Set(types.map((p) => p.split('/')[2]!))].sort();
    expect(folders).toEqual([
      'app',
      'clock',
      'election.d.ts',
      'engine',
      'errors.d.ts',
      'fencing',
      'functions.d.ts',
      'hub',
      'index.d.ts',
      'jobs',
      'lease',
      'local',
      'queue',
      'schedule',
      'storage',
      'telemetry',
      'testing.d.ts',
      'zod.d.ts',
    ]);
  });

  it('ships no chaos soak, benchmark, test, source map or TypeScript source', () => {
    expect(files.filter((p) => /(^|\/)(chaos|bench|test)\//.test(p))).toEqual([]);
    expect(files.filter((p) => p.endsWith('.map'))).toEqual([]);
    // Nor a pointer to one: a bundler or debugger would look for the map and warn.
    expect(
      files.filter((p) => p.endsWith('.js') && readFileSync(join(projectRoot, p), 'utf8').includes('sourceMappingURL=')),
    ).toEqual([]);
    expect(files.filter((p) => p.endsWith('.ts') && !p.endsWith('.d.ts'))).toEqual([]);
    // Every entry in package.json exports is there, with its types.
    for (const entry of ['index', 'functions', 'election', 'testing']) {
      const exported = pkgJson.exports[entry === 'index' ? '.' : `./${entry}`]!;
      expect(files).toContain(exported.default.slice(2));
      expect(files).toContain(exported.types.slice(2));
    }
    expect(files).toContain(pkgJson.bin.baton);
  });

  it('stays within its size budget', () => {
    // 344 KiB, 1,160 KiB and 310 files while dist/src shipped compiled modules. The bundle holds
    // the parts of zod, croner and semver Baton calls (about 260 KB unpacked), which those
    // modules required from node_modules instead; it shipped 160 files, and 82 once only the
    // declarations the entries reach were shipped.
    expect(pack.size, 'tarball bytes').toBeLessThan(344 * 1024);
    expect(pack.unpackedSize, 'unpacked bytes').toBeLessThan(1340 * 1024);
    expect(files.length, 'files').toBeLessThan(90);
  });
});
