import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { minVersion, subset, validRange } from 'semver';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/cluster-process';

/**
 * `engines.node` is a promise to every user: each package an install of Baton brings (its
 * dependencies, the peers it names and everything under them, as the lockfile resolved them)
 * must run on every Node it admits. npm picks, for each range, the newest version whose own
 * `engines` fits the Node doing the install, so a dependency that moves to a newer Node shows up
 * here when the lockfile is refreshed, not on a user's machine. And the promise is not tighter
 * than the tree needs: its minimum is the highest minimum in the tree.
 */
interface Manifest {
  engines?: { node?: string };
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
interface LockEntry extends Manifest {
  version?: string;
  link?: boolean;
}

const manifest = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as Manifest;
const lock = JSON.parse(readFileSync(join(projectRoot, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};

/** Where Node would find `name` required from the package at `from` (a lockfile key). */
function resolve(from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const key = `${dir ? `${dir}/` : ''}node_modules/${name}`;
    if (lock.packages[key]) return key;
    if (!dir) return undefined;
    const at = dir.lastIndexOf('node_modules/');
    dir = at <= 0 ? '' : dir.slice(0, at - 1);
  }
}

/** Every package an install brings: dependencies and peers (optional ones too), recursively. */
function installedTree(): Map<string, LockEntry> {
  const seen = new Map<string, LockEntry>();
  const visit = (from: string, entry: Manifest, root: boolean) => {
    const wanted = [
      ...Object.keys(entry.dependencies ?? {}).map((name) => [name, true] as const),
      ...Object.keys(entry.optionalDependencies ?? {}).map((name) => [name, false] as const),
      ...Object.keys(entry.peerDependencies ?? {}).map(
        (name) => [name, !root && !entry.peerDependenciesMeta?.[name]?.optional] as const,
      ),
    ];
    for (const [name, required] of wanted) {
      const key = resolve(from, name);
      if (!key) {
        // An optional dependency for another platform, or an optional peer nobody installed.
        if (required) throw new Error(`${from || 'baton-functions'} needs ${name}, which the lockfile does not have`);
        continue;
      }
      if (seen.has(key)) continue;
      const found = lock.packages[key]!;
      seen.set(key, found);
      visit(key, found, false);
    }
  };
  visit('', manifest, true);
  return seen;
}

describe("the package's engines", () => {
  const promised = manifest.engines?.node ?? '';

  it('promise Node 22 or newer, which Flex Consumption runs (Node 20 left support on 2026-04-30)', () => {
    expect(validRange(promised)).not.toBeNull();
    expect(minVersion(promised)?.major).toBeGreaterThanOrEqual(22);
  });

  const tree = installedTree();

  it('cover what every package an install brings needs, as the lockfile resolved them', () => {
    expect(tree.size).toBeGreaterThan(20);
    const broken = [...tree]
      .filter(([, entry]) => entry.engines?.node && !subset(promised, entry.engines.node, { includePrerelease: false }))
      .map(([key, entry]) => `${key.replace(/^.*node_modules\//, '')}@${entry.version} needs node ${entry.engines?.node}`);
    expect(broken, `engines.node is ${promised}`).toEqual([]);
  });

  it('are no stricter than the highest minimum in that tree', () => {
    const minimums = [...tree.values()]
      .map((entry) => (entry.engines?.node ? minVersion(entry.engines.node) : null))
      .filter((v) => v !== null);
    const highest = minimums.reduce((a, b) => (b.compare(a) > 0 ? b : a));
    expect(minVersion(promised)?.version).toBe(highest.version);
  });
});
