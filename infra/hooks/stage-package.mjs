// azd's prepackage hook (azure.yaml): builds the folder azd zips and deploys as is.
//
// Why a staged folder rather than the repository: the project root holds the development
// dependencies (Azurite, vitest), tests and sources. Deploying it with a remote build would
// install all of those on Azure; deploying it without one would upload them. The staged folder
// holds what the Functions host loads and nothing else: a package.json for the app (its `main`),
// host.json, the compiled code, and the production dependencies installed at the lockfile's
// versions, so Azure runs exactly the versions that were tested. They are plain JavaScript, so
// installing them here works for Linux on Azure.
//
// The project's package.json is the library's: `@azure/functions`, `durable-functions` and
// `@azure/monitor-opentelemetry` are peer dependencies there, which an app brings. The staged app
// is that app, so its package.json names them as dependencies, at the versions the tests ran with.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Where the package is staged, relative to the project root; azure.yaml's `dist`. */
export const STAGE_DIR = 'dist/deploy';

/**
 * What the Functions host needs from the project, copied as it is (staged path: project path);
 * package.json is written (appManifest). The app is the reference app in functions/, whose
 * host.json goes to the root of the stage, where the host reads it.
 */
export const PACKAGE_FILES = {
  'package-lock.json': 'package-lock.json',
  'host.json': 'functions/host.json',
  'dist/src': 'dist/src',
  'dist/functions': 'dist/functions',
};

/** The app's entry in the stage: the compiled functions/index.ts. */
export const APP_MAIN = 'dist/functions/index.js';

/**
 * The library's peer dependencies that the app supplies: what the Functions host loads it with,
 * the durable engine, and the Application Insights exporter (the infra sets its connection string).
 */
export const APP_PEERS = ['@azure/functions', 'durable-functions', '@azure/monitor-opentelemetry'];

/**
 * Production dependencies only, at the lockfile's versions, without install scripts. `install`
 * rather than `ci`: the app's package.json is not the one the lockfile was made for (the peers
 * are dependencies here), and `install` keeps every locked version that satisfies it.
 */
export const INSTALL_ARGS = ['install', '--omit=dev', '--omit=optional', '--ignore-scripts', '--no-audit', '--no-fund'];

/**
 * The staged app's package.json: its entry, the project's dependencies, and the peers the app
 * supplies, pinned to the versions in devDependencies (the ones the tests ran with).
 */
export function appManifest(pkg) {
  const dependencies = { ...pkg.dependencies };
  for (const name of APP_PEERS) {
    const tested = pkg.devDependencies?.[name];
    if (!tested)
      throw new Error(`stage-package: the app needs ${name}, and package.json devDependencies has no tested version of it`);
    dependencies[name] = tested;
  }
  return { name: pkg.name, version: pkg.version, private: true, main: APP_MAIN, engines: pkg.engines, dependencies };
}

// azd reads an ignore file at the root of what it zips. Without one, azd releases before
// 1.23.12 leave node_modules out of the zip, and this package needs it in.
export const FUNCIGNORE = '# Written by infra/hooks/stage-package.mjs: node_modules must stay in the package.\n*.d.ts\n';

/** Runs npm in `cwd`; throws when it fails. */
export function runNpm(cwd, args) {
  const windows = process.platform === 'win32';
  // npm is a .cmd file on Windows, which Node starts only through a shell.
  const result = spawnSync(windows ? 'npm.cmd' : 'npm', args, { cwd, stdio: 'inherit', shell: windows });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`npm ${args.join(' ')} exited with ${result.status ?? result.signal}`);
}

/**
 * Cleans and builds the project at `root`, copies what the host needs into STAGE_DIR and
 * installs the production dependencies there. Returns the staged folder.
 */
export function stagePackage(root, { npm = runNpm, log = (line) => console.log(line) } = {}) {
  // A clean build: tsc leaves the output of deleted sources behind, and it would be deployed.
  npm(root, ['run', 'clean']);
  npm(root, ['run', 'build']);
  const out = join(root, STAGE_DIR);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  for (const [staged, path] of Object.entries(PACKAGE_FILES)) {
    const from = join(root, path);
    if (!existsSync(from)) throw new Error(`stage-package: ${path} is missing after the build`);
    cpSync(from, join(out, staged), { recursive: true });
  }
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  writeFileSync(join(out, 'package.json'), `${JSON.stringify(appManifest(pkg), null, 2)}\n`);
  writeFileSync(join(out, '.funcignore'), FUNCIGNORE);
  npm(out, INSTALL_ARGS);
  log(`stage-package: staged ${STAGE_DIR} (package.json, ${Object.keys(PACKAGE_FILES).join(', ')}, production node_modules)`);
  return out;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) {
  try {
    stagePackage(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  }
}
