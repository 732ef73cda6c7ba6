import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The version in Baton's package.json, found upward from this file (src/app or dist/src/app). */
export function packageVersion(
  from: string | undefined = typeof __dirname === 'undefined' ? undefined : __dirname,
): string | undefined {
  if (from === undefined) return undefined;
  let dir = from;
  for (let i = 0; i < 4; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'baton-functions' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not here; look further up
    }
    dir = dirname(dir);
  }
  return undefined;
}
