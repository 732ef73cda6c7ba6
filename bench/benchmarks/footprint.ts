import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { deflateRawSync } from 'node:zlib';
import { median, report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * footprint: what Baton adds to a Functions app's deploy package and to every cold start. On Flex
 * Consumption the package is downloaded and loaded each time an instance starts, so an instance
 * that starts late leads late and works late.
 *
 * Two apps are built in a temporary folder, each with production dependencies only, installed as
 * a user installs (no lockfile, the registry's current versions):
 * - ours: one job, registered with `registerBaton`, from the packed tarball of this checkout;
 * - the floor: the same timer and queue trigger registered with `@azure/functions`, and the two
 *   storage clients built with `@azure/storage-blob`, `@azure/storage-queue` and
 *   `@azure/identity`, as an app that coordinates by hand would.
 * The deploy package is the app's folder zipped as a deploy zips it (deflate per file), measured
 * exactly: its bytes, the bytes unzipped and the file count. Cold start is a new `node` process
 * to the app's registrations done (the app prints a line when they are), the two apps alternating,
 * median of the runs, each under a stand-in for what the host's worker gives an app
 * (`@azure/functions-core`), as a deployed app registers. Both run on a connection string (Azurite's, never contacted before the line):
 * keyless, each would load `@azure/identity` alike, and Baton's start-up tick would ask the
 * machine's identity endpoint for a token.
 *
 * Goals: Baton adds at most 30 ms of cold start and 3 MB zipped to the floor's. The table's row is
 * the cold start (goal written as a ratio to the floor); the size is a second line, and `bothMet`
 * in the results needs both.
 */
export const name = 'footprint';

const ZIP_GOAL_BYTES = 3_000_000;
const COLD_START_GOAL_MS = 30;
const MB = 1_000_000;

const projectRoot = join(__dirname, '..', '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

interface Ran {
  out: string;
  err: string;
}

function exec(command: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, out, err) => {
      if (error) reject(new Error(`${command} ${args.join(' ')} failed in ${cwd}: ${error.message}\n${err}`));
      else resolve({ out, err });
    });
  });
}

function manifest(): { version: string; devDependencies: Record<string, string> } {
  return JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
    version: string;
    devDependencies: Record<string, string>;
  };
}

/** A Functions app's folder: package.json, host.json and index.js, which prints `registered` when done. */
function writeApp(dir: string, dependencies: Record<string, string>, index: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'footprint-app', version: '1.0.0', private: true, main: 'index.js', dependencies }, null, 2),
  );
  writeFileSync(
    join(dir, 'host.json'),
    JSON.stringify({ version: '2.0', extensions: { queues: { maxDequeueCount: 5, messageEncoding: 'none' } } }),
  );
  writeFileSync(join(dir, 'index.js'), index);
}

const BATON_APP = `const { app } = require('@azure/functions');
const { defineJob } = require('baton-functions');
const { registerBaton } = require('baton-functions/functions');

const sizes = defineJob({
  name: 'sizes',
  schedule: '0 0 3 * * *',
  *split() {
    for (const word of ['baton', 'passes', 'safely']) yield { word };
  },
  async process(item) {
    return { letters: item.word.length };
  },
  aggregate: { initial: () => 0, add: (sum, r) => sum + r.letters },
});

registerBaton(app, { jobs: [sizes] });
console.log('registered');
`;

// Identity is loaded, as Baton loads it, only for a keyless connection.
const FLOOR_APP = `const { app } = require('@azure/functions');
const { BlobServiceClient } = require('@azure/storage-blob');
const { QueueServiceClient } = require('@azure/storage-queue');

const connection = process.env.AzureWebJobsStorage;
const credential = () => new (require('@azure/identity').DefaultAzureCredential)();
const blobs = connection ? BlobServiceClient.fromConnectionString(connection) : new BlobServiceClient(process.env.BLOB_URL, credential());
const queues = connection ? QueueServiceClient.fromConnectionString(connection) : new QueueServiceClient(process.env.QUEUE_URL, credential());
const lease = blobs.getContainerClient('leases').getBlobClient('hub').getBlobLeaseClient();
const work = queues.getQueueClient('hub-work');

app.timer('coordinator', { schedule: '*/1 * * * * *', handler: async () => { await lease.acquireLease(15); } });
app.storageQueue('worker', { queueName: 'hub-work', connection: 'AzureWebJobsStorage', handler: async () => { await work.getProperties(); } });
console.log('registered');
`;

/**
 * What the Functions host's Node worker gives an app before loading it: `@azure/functions-core`,
 * which each registration of `@azure/functions` hands its function to. Without it the library runs
 * in test mode and prints a warning for each registration, which no deployed app pays for. The
 * local host's stand-in (compiled by `npm run build`, which the bench runs first) needs nothing
 * but `node:module`, so it loads nothing either app would not.
 */
const FUNCTIONS_CORE = join(projectRoot, 'dist', 'src', 'local', 'functions-core.js');
const WORKER_CORE = `require(${JSON.stringify(FUNCTIONS_CORE)}).installFunctionsCore(() => undefined);\n`;

/** Every file under `dir`, relative, with `/` separators as a zip names them. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) out.push(relative(dir, path).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

interface PackageSize {
  zippedBytes: number;
  unzippedBytes: number;
  files: number;
  nodeModulesBytes: Record<string, number>;
}

/**
 * The exact size of a zip of `dir`: each file deflated (or stored, if deflate does not shrink it)
 * behind its local header (30 bytes and the name), a central directory entry per file (46 bytes and
 * the name), and the 22-byte end record. What `zip -r` and a deploy's zip write, without the
 * extra fields some tools add.
 */
function packageSize(dir: string): PackageSize {
  let zippedBytes = 22;
  let unzippedBytes = 0;
  const nodeModulesBytes: Record<string, number> = {};
  const files = filesUnder(dir);
  for (const file of files) {
    const data = readFileSync(join(dir, file));
    const name = Buffer.byteLength(file);
    const stored = Math.min(deflateRawSync(data).length, data.length);
    zippedBytes += 30 + name + stored + 46 + name;
    unzippedBytes += data.length;
    const top = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];
    if (top) nodeModulesBytes[top] = (nodeModulesBytes[top] ?? 0) + stored;
  }
  return { zippedBytes, unzippedBytes, files: files.length, nodeModulesBytes };
}

function sizeOnly({ zippedBytes, unzippedBytes, files }: PackageSize): Omit<PackageSize, 'nodeModulesBytes'> {
  return { zippedBytes, unzippedBytes, files };
}

/** A new process of `app`, under the worker's stand-in (`workerCore`), until it prints `registered`, in ms. */
function coldStart(app: string, workerCore: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['--require', workerCore, 'index.js'], {
      cwd: app,
      env: { ...process.env, AzureWebJobsStorage: 'UseDevelopmentStorage=true', FUNCTIONS_WORKER_RUNTIME: 'node' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let ms: number | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (ms === undefined && /^registered$/m.test(out)) {
        ms = performance.now() - started;
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    // Judged once both pipes are read to their end, as they keep no order between them.
    child.on('close', (code) => {
      if (ms === undefined)
        reject(new Error(`${app}/index.js exited ${code} before its registrations were done:\n${out}\n${err}`));
      // The library's test mode would mean the stand-in did not take, and each registration warned.
      else if (/test mode/.test(err)) reject(new Error(`${app}/index.js ran @azure/functions in test mode:\n${err}`));
      else resolve(ms);
    });
  });
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const runs = options.smoke ? 2 : 31;
  const work = mkdtempSync(join(tmpdir(), 'baton-footprint-'));
  try {
    const { version, devDependencies } = manifest();
    await exec(npm, ['pack', '--pack-destination', work], projectRoot, 120_000);
    const tarball = join(work, `baton-functions-${version}.tgz`);
    const functions = devDependencies['@azure/functions'] ?? '^4';
    const ours = join(work, 'ours');
    const floor = join(work, 'floor');
    writeApp(ours, { '@azure/functions': functions, 'baton-functions': `file:${tarball}` }, BATON_APP);
    // The floor takes the versions of the storage SDKs and identity that Baton's install got.
    writeApp(floor, { '@azure/functions': functions }, FLOOR_APP);
    // A smoke run takes what npm ci left in the cache; a real one asks the registry, as a user does.
    const install = ['install', '--omit=dev', '--no-audit', '--no-fund', ...(options.smoke ? ['--prefer-offline'] : [])];
    await exec(npm, install, ours, 300_000);
    const resolved = (pkg: string) =>
      (JSON.parse(readFileSync(join(ours, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
    const sdks = ['@azure/storage-blob', '@azure/storage-queue', '@azure/identity'];
    await exec(npm, [...install, ...sdks.map((pkg) => `${pkg}@${resolved(pkg)}`)], floor, 300_000);
    const oursSize = packageSize(ours);
    const floorSize = packageSize(floor);
    const workerCore = join(work, 'worker-core.js');
    writeFileSync(workerCore, WORKER_CORE);

    const oursMs: number[] = [];
    const floorMs: number[] = [];
    // One unmeasured start of each first, so neither arm pays for a cold file cache.
    await coldStart(ours, workerCore);
    await coldStart(floor, workerCore);
    for (let i = 0; i < runs; i++) {
      if (i % 2 === 0) {
        oursMs.push(await coldStart(ours, workerCore));
        floorMs.push(await coldStart(floor, workerCore));
      } else {
        floorMs.push(await coldStart(floor, workerCore));
        oursMs.push(await coldStart(ours, workerCore));
      }
    }
    const oursColdMs = median(oursMs);
    const floorColdMs = median(floorMs);
    const addedZip = oursSize.zippedBytes - floorSize.zippedBytes;
    const addedMs = oursColdMs - floorColdMs;
    const zipMet = addedZip <= ZIP_GOAL_BYTES;
    const coldMet = addedMs <= COLD_START_GOAL_MS;
    // What Baton's install has that the floor's does not, largest first (zipped bytes).
    const added = Object.entries(oursSize.nodeModulesBytes)
      .map(([pkg, bytes]) => [pkg, bytes - (floorSize.nodeModulesBytes[pkg] ?? 0)] as const)
      .filter(([, bytes]) => bytes > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([pkg, bytes]) => ({ package: pkg, zippedBytes: bytes }));
    const versions = Object.fromEntries([...sdks, '@azure/functions'].map((pkg) => [pkg, resolved(pkg)]));

    const result = report(
      name,
      {
        samples: { oursColdStartMs: oursMs, floorColdStartMs: floorMs },
        summary: {
          ours: { ...sizeOnly(oursSize), coldStartMs: oursColdMs },
          floor: { ...sizeOnly(floorSize), coldStartMs: floorColdMs },
          addedZippedBytes: addedZip,
          addedUnzippedBytes: oursSize.unzippedBytes - floorSize.unzippedBytes,
          addedFiles: oursSize.files - floorSize.files,
          addedColdStartMs: addedMs,
          zipGoalBytes: ZIP_GOAL_BYTES,
          coldStartGoalMs: COLD_START_GOAL_MS,
          zipGoalMet: zipMet,
          coldStartGoalMet: coldMet,
          bothMet: zipMet && coldMet,
          runs,
          versions,
          addedPackages: added.slice(0, 15),
          goalNote: `the goal's ratio is (floor + ${COLD_START_GOAL_MS} ms) / floor, so met means Baton adds at most ${COLD_START_GOAL_MS} ms of cold start; the size goal (at most ${ZIP_GOAL_BYTES / MB} MB zipped more) is zipGoalMet`,
        },
        ours: oursColdMs,
        floor: floorColdMs,
        unit: 'ms cold start',
        goal: { ratio: (floorColdMs + COLD_START_GOAL_MS) / floorColdMs, direction: 'atMost' },
      },
      options,
    );
    console.log(
      `footprint (zipped)  ours ${(oursSize.zippedBytes / MB).toFixed(2)} MB  floor ${(floorSize.zippedBytes / MB).toFixed(2)} MB  adds ${(addedZip / MB).toFixed(2)} MB  goal ≤ ${ZIP_GOAL_BYTES / MB} MB  ${zipMet ? 'met' : 'missed'}`,
    );
    console.log(
      `footprint (unzipped)  ours ${(oursSize.unzippedBytes / MB).toFixed(1)} MB in ${oursSize.files} files  floor ${(floorSize.unzippedBytes / MB).toFixed(1)} MB in ${floorSize.files} files`,
    );
    return result;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
