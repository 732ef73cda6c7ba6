/**
 * Real `baton` processes for the cluster e2e tests: the compiled CLI (or `npm start`) spawned in
 * its own process group, its stdout kept as timestamped lines, and every process it started
 * killed at the end, whatever happened. `npm test` builds dist/ before vitest runs, so the
 * compiled CLI is what a user's `npm start` runs, without a rebuild per test.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { describePatience, patience } from './slowdown';

export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const cliPath = join(projectRoot, 'dist', 'src', 'cli', 'main.js');
/** This repository's Functions app, the one `npm start` runs (`baton start --app functions`). */
export const referenceApp = join(projectRoot, 'functions');
/** The reference app's `--setup`, as `npm start` passes it: the sample's 2,000 demo blobs. */
export const demoSetup = join(projectRoot, 'dist', 'functions', 'demo-seed.js');

/** One stdout line, without the cluster's ISO timestamp prefix, and when the test got it. */
export interface Line {
  at: number;
  text: string;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnedProcess {
  readonly label: string;
  readonly proc: ChildProcess;
  readonly pid: number;
  readonly lines: Line[];
  readonly stderr: string[];
  readonly exited: Promise<Exit>;
  /** Resolves once the process has exited and its stdout and stderr are closed. */
  readonly closed: Promise<void>;
  readonly exit: Exit | undefined;
  /** Resolves with the first line at or after `from` that matches; rejects on exit, or on timeout (`timeoutMs` scaled by `patience`). */
  waitForLine(pattern: RegExp, timeoutMs: number, from?: number): Promise<{ index: number; match: RegExpMatchArray }>;
  /** Index of the first line matching `pattern`, or -1. */
  indexOf(pattern: RegExp, from?: number): number;
  /** Resolves with the exit, or rejects after `timeoutMs` (scaled by `patience`). */
  waitExit(timeoutMs: number): Promise<Exit>;
  /** Everything it printed, and the last lines of each instance's own log, for a failure message. */
  dump(): string;
}

/** Lines of each instance log a failure message shows: enough for the last few ticks. */
const INSTANCE_LOG_TAIL = 60;
const SAMPLE_LINE = /^\S+ \{"kind":"(requests|memory)",/;

/**
 * A new folder for `baton start --log-dir`: the cluster shows only warnings and changes of
 * leader, so the instances' own output (every level) is kept there for the failure dump.
 */
export function instanceLogDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'baton-e2e-instances-'));
  logDirs.add(dir);
  return dir;
}
const logDirs = new Set<string>();

function instanceLogTails(dir: string): string {
  let files: string[] = [];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith('.log'))
      .sort();
  } catch {
    return `--- no instance logs in ${dir} ---\n`;
  }
  return files
    .map((file) => {
      const lines = readFileSync(join(dir, file), 'utf8').trimEnd().split('\n');
      // The per-second request and memory samples would fill the tail; they hold no error text.
      const tail = lines.filter((line) => !SAMPLE_LINE.test(line)).slice(-INSTANCE_LOG_TAIL);
      return `--- ${file}: last ${tail.length} of ${lines.length} lines (request and memory samples left out) ---\n${tail.join('\n')}\n`;
    })
    .join('');
}

const spawned = new Set<SpawnedProcess>();
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z /;

/**
 * Spawns `command args` in the project root, in a new process group (so the cluster and its
 * instances can all be killed by the group's id), with stdout and stderr piped: not a TTY, so
 * the cluster prints plain timestamped lines.
 */
export function spawnTracked(
  label: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  /** The `--log-dir` the process was given, whose instance logs its dump shows. */
  instanceLogs?: string,
): SpawnedProcess {
  const proc = spawn(command, args, { cwd: projectRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (proc.pid === undefined) throw new Error(`could not spawn ${label}: ${command} ${args.join(' ')}`);
  const pid = proc.pid;
  const lines: Line[] = [];
  const stderr: string[] = [];
  let exit: Exit | undefined;
  const exited = new Promise<Exit>((done) => {
    proc.once('exit', (code, signal) => {
      exit = { code, signal };
      done(exit);
    });
  });
  const closed = new Promise<void>((done) => proc.once('close', () => done()));
  createInterface({ input: proc.stdout! }).on('line', (raw) => lines.push({ at: Date.now(), text: raw.replace(TIMESTAMP, '') }));
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (chunk: string) => stderr.push(chunk));

  const indexOf = (pattern: RegExp, from = 0): number => {
    for (let i = from; i < lines.length; i++) if (pattern.test(lines[i]!.text)) return i;
    return -1;
  };
  const handle: SpawnedProcess = {
    label,
    proc,
    pid,
    lines,
    stderr,
    exited,
    closed,
    get exit() {
      return exit;
    },
    indexOf,
    async waitForLine(pattern, timeoutMs, from = 0) {
      const deadline = Date.now() + patience(timeoutMs);
      for (;;) {
        const index = indexOf(pattern, from);
        if (index >= 0) return { index, match: lines[index]!.text.match(pattern)! };
        if (exit) {
          // Lines may still be in the pipe when the exit event fires.
          await sleep(200);
          const late = indexOf(pattern, from);
          if (late >= 0) return { index: late, match: lines[late]!.text.match(pattern)! };
          throw new Error(`${label} exited (${exit.signal ?? `code ${exit.code}`}) before printing ${pattern}`);
        }
        if (Date.now() > deadline)
          throw new Error(`timed out after ${describePatience(timeoutMs)} waiting for ${label} to print ${pattern}`);
        await sleep(50);
      }
    },
    async waitExit(timeoutMs) {
      const timer = sleep(patience(timeoutMs), 'timeout' as const);
      const result = await Promise.race([exited, timer]);
      if (result === 'timeout') throw new Error(`${label} (pid ${pid}) did not exit within ${describePatience(timeoutMs)}`);
      return result;
    },
    dump() {
      return (
        `--- ${label} (pid ${pid}) stdout ---\n${lines.map((l) => `${new Date(l.at).toISOString()} ${l.text}`).join('\n')}\n` +
        `--- ${label} stderr ---\n${stderr.join('')}` +
        (instanceLogs ? `\n${instanceLogTails(instanceLogs)}` : '')
      );
    },
  };
  spawned.add(handle);
  return handle;
}

/** `node dist/src/cli/main.js <args>`: the compiled `baton` CLI. */
export function spawnBaton(label: string, args: string[]): SpawnedProcess {
  if (args[0] !== 'start' || args.includes('--log-dir')) return spawnTracked(label, process.execPath, [cliPath, ...args]);
  const logs = instanceLogDir();
  return spawnTracked(label, process.execPath, [cliPath, ...args, '--log-dir', logs], process.env, logs);
}

export interface CliRun {
  code: number | null;
  out: string;
  err: string;
  ms: number;
}

/** Runs one `baton` command to completion (killed after `timeoutMs`, scaled by `patience`). */
export async function runBaton(args: string[], timeoutMs = 30_000): Promise<CliRun> {
  const started = Date.now();
  const child = spawnBaton(`baton ${args[0] ?? ''}`, args);
  try {
    const { code } = await child.waitExit(timeoutMs);
    // Let the pipes drain.
    await Promise.race([child.closed, sleep(patience(2_000))]);
    return { code, out: child.lines.map((l) => l.text).join('\n'), err: child.stderr.join(''), ms: Date.now() - started };
  } finally {
    if (!child.exit) killGroup(child.pid);
    spawned.delete(child);
  }
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // the whole group is gone already
  }
}

/**
 * SIGKILL to every process group this file spawned (the cluster, its instances and any
 * replacement all share the group), then waits for the spawned processes to be reaped.
 */
export async function killAllSpawned(): Promise<void> {
  for (const child of spawned) killGroup(child.pid);
  await Promise.race([Promise.all([...spawned].map((c) => c.exited)), sleep(5_000)]);
  spawned.clear();
  for (const dir of logDirs) rmSync(dir, { recursive: true, force: true });
  logDirs.clear();
}

/** The synchronous last resort, should afterAll never run. */
function killAllNow(): void {
  for (const child of spawned) killGroup(child.pid);
}
process.once('exit', killAllNow);

/** The pids whose parent is `pid` (`ps -o pid= --ppid`). */
export function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((s) => Number(s.trim()))
      .filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    return []; // ps exits 1 when there are none
  }
}

/** Whether `pid` is a live process (a zombie awaiting its reaper counts as gone). */
export function isRunning(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (existsSync('/proc/self/stat')) {
    try {
      const text = readFileSync(stat, 'utf8');
      const state = text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3);
      return state !== 'Z' && state !== 'X';
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function acceptsConnections(port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

export interface ClusterUp {
  instances: number;
  hub: string;
  blobEndpoint: string;
  queueEndpoint: string;
  blobPort: number;
  queuePort: number;
}

export const CLUSTER_UP = /cluster up: (\d+) instances, hub (\S+), Azurite blob (\S+) queue (\S+)/;

export function parseClusterUp(match: RegExpMatchArray): ClusterUp {
  const [, instances, hub, blobEndpoint, queueEndpoint] = match as unknown as [string, string, string, string, string];
  return {
    instances: Number(instances),
    hub,
    blobEndpoint,
    queueEndpoint,
    blobPort: Number(new URL(blobEndpoint).port),
    queuePort: Number(new URL(queueEndpoint).port),
  };
}

/** Azurite's well-known development account, from the azurite package itself. */
function azuriteAccount(): { name: string; key: string } {
  const require = createRequire(import.meta.url);
  const constants = require('azurite/dist/src/blob/utils/constants') as Record<string, unknown>;
  return { name: String(constants.EMULATOR_ACCOUNT_NAME), key: String(constants.EMULATOR_ACCOUNT_KEY_STR) };
}

/** A connection string for the cluster's Azurite, built from the endpoints it printed. */
export function clusterConnection(up: Pick<ClusterUp, 'blobEndpoint' | 'queueEndpoint'>): string {
  const { name, key } = azuriteAccount();
  return (
    `DefaultEndpointsProtocol=http;AccountName=${name};AccountKey=${key};` +
    `BlobEndpoint=${up.blobEndpoint};QueueEndpoint=${up.queueEndpoint};`
  );
}

/** `instance-N: leadership acquired (epoch E)` lines, in order. */
export function leadershipAcquired(
  lines: readonly Line[],
): Array<{ index: number; instance: string; epoch: number; at: number }> {
  const out: Array<{ index: number; instance: string; epoch: number; at: number }> = [];
  lines.forEach((line, index) => {
    const m = /^(instance-\d+): leadership acquired \(epoch (\d+)\)/.exec(line.text);
    if (m) out.push({ index, instance: m[1]!, epoch: Number(m[2]), at: line.at });
  });
  return out;
}

// ---- dist/ in use ---------------------------------------------------------------------------
// `npm start` rebuilds dist/ in place while a test in another file may be starting processes
// from it. Files that spawn from dist/ mark themselves for their duration; the npm start test
// waits until no other live test process holds a mark before it builds.

const marksDir = join(tmpdir(), `baton-e2e-dist-users-${createHash('sha1').update(projectRoot).digest('hex').slice(0, 12)}`);

/** Marks dist/ as in use by this test process until the returned function is called. */
export function markDistInUse(): () => void {
  mkdirSync(marksDir, { recursive: true });
  const mark = join(marksDir, `${process.pid}-${randomUUID().slice(0, 8)}`);
  writeFileSync(mark, '');
  const release = () => rmSync(mark, { force: true });
  process.once('exit', release);
  return release;
}

/**
 * Whether a build now would write nothing: the build is incremental (tsconfig.build.json), so
 * with no source newer than its last build info it leaves every file in dist/ as it is, and the
 * processes running from dist/ have nothing to fear from it.
 */
export function distIsCurrent(): boolean {
  let built: number;
  try {
    built = statSync(join(projectRoot, 'dist', '.tsbuildinfo')).mtimeMs;
  } catch {
    return false;
  }
  const newer = (dir: string): boolean =>
    readdirSync(dir, { withFileTypes: true }).some((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return newer(path);
      return statSync(path).mtimeMs > built;
    });
  return (
    ![join(projectRoot, 'src'), join(projectRoot, 'functions')].some(newer) &&
    ['tsconfig.json', 'tsconfig.build.json', 'package.json'].every((f) => statSync(join(projectRoot, f)).mtimeMs <= built)
  );
}

/** Throws, naming the fix, where dist/ is older than the sources a test means to run compiled. */
export function requireCurrentDist(): void {
  if (!distIsCurrent()) throw new Error('dist/ is older than src/ or functions/: run `npm run build` (npm test builds first)');
}

/** Waits until no live process (other than this one) marks dist/ as in use; gives up after `timeoutMs`. */
export async function waitUntilDistIdle(timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    let holders: string[] = [];
    try {
      holders = readdirSync(marksDir).filter((name) => {
        const pid = Number(name.split('-')[0]);
        return pid !== process.pid && isRunning(pid);
      });
    } catch {
      holders = [];
    }
    if (holders.length === 0 || Date.now() - started > timeoutMs) return Date.now() - started;
    await sleep(500);
  }
}
