import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, writeFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { hubResources } from '../hub/resources';
import { requestRun } from '../hub/requests';
import { readHubStatus, readRunDetails } from '../hub/status';
import { listRuns } from '../hub/run-index';
import { BlobDocumentStore } from '../fencing/blob-document-store';
import { BlobLeaseStore } from '../lease/blob-lease-store';
import { isTerminal, runKeys, type RunRecord } from '../hub/run-record';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../storage/client-factory';
import { AzureQueue } from '../queue/azure-queue';
import { wakeHub } from '../hub/wake';
import { parseLogLevel } from '../app/settings';
import { redactSecrets } from '../redact';
import { visible } from '../visible';
import { REPORT_ATTACHMENT } from '../hub/finalize-context';
import { startAzurite, type RunningAzurite } from './azurite';
import { APP_SETTING } from './app-functions';
import { parseInstanceLine } from './instance-events';
import type { SetupFunction } from './setup-module';
import { createView, type ClusterView, type InstanceView } from './live-view';
import { DEFAULT_HTTP_PORT, serveHttpProxy, type LocalHttpServer } from './http-server';
import { messageOf } from '../errors';

export interface ClusterOptions {
  instances: number;
  /** The Functions app each instance runs (its folder); default this repository's reference app. */
  app?: string;
  /** Persist Azurite to this folder; default in memory. */
  data?: string;
  /** Run one occurrence of `job` end to end, print the summary and exit. */
  once: boolean;
  /** kill -9 the leading instance this many seconds into the run, and start a replacement. */
  killLeaderAfterSeconds?: number;
  hub: string;
  /** The job `once` runs. */
  job?: string;
  /** Runs once Azurite is up and before any instance starts: the app's local data (`--setup`). */
  setup?: SetupFunction;
  /** Write the once-run's output document here. */
  outputFile?: string;
  /**
   * Keep each instance's whole output (stdout and stderr, secrets masked) in
   * `<logDir>/<instance>.log`; the cluster itself shows only warnings and changes of leader.
   */
  logDir?: string;
  /** The coordinator timer of each instance. */
  coordinatorSchedule: string;
  /**
   * Where the status page and the HTTP API listen, on 127.0.0.1. Unset: 7071, as `func start`,
   * or a free port when that one is taken; 0: a free port.
   */
  port?: number;
  out: NodeJS.WritableStream;
  tty: boolean;
}

export const DEFAULT_CLUSTER: Omit<ClusterOptions, 'out' | 'tty'> = {
  instances: 3,
  once: false,
  hub: 'baton',
  // Every second: a follower notices a released lease within 1 s (one lease read per tick each).
  coordinatorSchedule: '* * * * * *',
};

interface Instance extends InstanceView {
  proc: ChildProcess;
  exited: Promise<void>;
  /** After exit, once its stdout and stderr have been read to the end. */
  closed: Promise<void>;
  /** With `logDir`: where its whole output goes. */
  log?: WriteStream;
  /** Where it serves the app's http functions, once it says. */
  httpPort?: number;
}

const STOP_GRACE_MS = 8000;
/** How long a forced stop waits for the instances it killed to be gone. */
const KILL_WAIT_MS = 5000;
/**
 * Azurite's receive and delete slow down as a queue grows (320 messages/s with an empty queue,
 * 41 with 2,000 waiting), so the local cluster keeps a run's queue short: 256 messages in
 * flight keep three instances busy. Azure Storage has no such slope; there the default is 4,096.
 */
export const LOCAL_MAX_IN_FLIGHT = '256';
/** How long `--once` waits for its run before giving up. */
const ONCE_DEADLINE_MS = 10 * 60_000;

/** `--setup` threw: the cluster stops before any instance starts, with the module's own words. */
export class SetupFailedError extends Error {
  constructor(message: string) {
    super(`--setup failed: ${message}`);
  }
}

/**
 * The local cluster: Azurite in this process, the app's `--setup` run, and N instance processes that
 * each run the app's registration list on a local host. Resolves with the process exit code.
 */
export async function runCluster(options: ClusterOptions): Promise<number> {
  const view = createView(options.out, options.tty);
  const azurite = await startOnUsualPorts(options.data);
  const cluster = new Cluster(options, azurite, view);
  // Installed until everything is closed: a second Ctrl-C during shutdown still forces it.
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!cluster.stopRequested) {
      view.note(`${signal}: stopping the cluster (press Ctrl-C again to force)`);
      cluster.requestStop();
      return;
    }
    view.note(`${signal} again: killing every instance now`);
    // Forced: the process exits when the instances are gone and Azurite is closed, failed or
    // not, so no error is left to report and no instance outlives the command.
    void Promise.allSettled([cluster.killAll(), azurite.close()]).finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await cluster.run();
  } finally {
    await cluster.shutdown();
    view.stop();
    await azurite.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

class Cluster {
  private readonly instances = new Map<string, Instance>();
  private readonly docs: BlobDocumentStore;
  /** Where `--once`'s trigger wakes a leader that rests between occurrences. */
  private readonly wakeQueue: AzureQueue;
  private readonly lease: BlobLeaseStore;
  private next = 1;
  private readonly stopping = new AbortController();
  /** The status page and the HTTP API, once the cluster is up. */
  private http: LocalHttpServer | undefined;
  /** The live view's refresh loop, once the instances are up. */
  private refreshing: Promise<void> = Promise.resolve();
  private forced = false;
  /** BATON_LOG_LEVEL=debug: every instance log line and leader event, not only warnings and changes of leader. */
  private readonly verbose = parseLogLevel(process.env) === 'debug';

  constructor(
    private readonly options: ClusterOptions,
    private readonly azurite: RunningAzurite,
    private readonly view: ClusterView,
  ) {
    const settings = { kind: 'connectionString', connectionString: azurite.connectionString } as const;
    this.docs = new BlobDocumentStore(createBlobServiceClient(settings).getContainerClient(hubResources(options.hub).container));
    this.lease = new BlobLeaseStore(createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS }), options.hub);
    this.wakeQueue = new AzureQueue(createQueueServiceClient(settings), hubResources(options.hub).workQueue);
  }

  get stopRequested(): boolean {
    return this.stopping.signal.aborted;
  }

  requestStop(): void {
    this.stopping.abort();
  }

  /**
   * SIGKILL for every instance still alive, the forced way out; resolves once each has exited
   * (a loaded machine takes a moment to tear a process down), or after `KILL_WAIT_MS`.
   */
  async killAll(): Promise<void> {
    this.forced = true;
    const alive = [...this.instances.values()].filter((i) => i.alive);
    for (const instance of alive) instance.proc.kill('SIGKILL');
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, KILL_WAIT_MS)));
    await Promise.race([Promise.all(alive.map((i) => i.exited)), bound]);
    clearTimeout(timer);
  }

  async run(): Promise<number> {
    await this.setUp();
    // Stopped while setting up: nothing was started, nothing to wait for.
    if (this.stopRequested) return 130;
    this.http = await this.serveHttp();
    for (let i = 0; i < this.options.instances; i++) this.spawnInstance();
    this.view.note(
      `cluster up: ${this.options.instances} instances, hub ${this.options.hub}, Azurite blob ${this.azurite.blobEndpoint} queue ${this.azurite.queueEndpoint}`,
    );
    // The page's address once an instance serves it, so a first look does not meet a 503.
    if (await this.untilHttpServed()) {
      this.view.note(`status page: ${this.http.origin}/api/baton/page (the API under ${this.http.origin}/api/baton/)`);
    }
    if (this.azurite.blobPort === 10000 && this.azurite.queuePort === 10001) {
      this.view.note(
        `look inside from another terminal: npm run -s baton -- status --connection UseDevelopmentStorage=true --hub ${this.options.hub}`,
      );
    }
    this.refreshing = this.refreshLoop();
    const code = this.options.once ? await this.once() : await this.untilStopped();
    this.stopping.abort();
    return code;
  }

  /**
   * Stops every instance: SIGINT, a grace period, then SIGKILL. The instances are signalled
   * before the view's last refresh is awaited: on a busy machine that read alone can take
   * seconds, and the grace is theirs.
   */
  async shutdown(): Promise<void> {
    // Also ends the refresh loop when run() threw instead of returning.
    this.stopping.abort();
    const all = [...this.instances.values()].filter((i) => i.alive);
    // SIGINT: every instance stops, so a leader has nobody to hand over to and releases at once.
    for (const instance of all) instance.proc.kill(this.forced ? 'SIGKILL' : 'SIGINT');
    const grace = new Promise<void>((resolve) => setTimeout(resolve, STOP_GRACE_MS).unref());
    await Promise.race([Promise.all(all.map((i) => i.exited)), grace]);
    for (const instance of all) if (instance.alive) instance.proc.kill('SIGKILL');
    await Promise.all([...all.map((i) => i.exited), this.refreshing, this.http?.close()]);
    // The last lines of an instance are still in its pipes when it exits: end each log after close.
    await Promise.all(
      [...this.instances.values()].map(async (i) => {
        await i.closed;
        if (i.log?.writable) await new Promise((done) => i.log!.end(done));
      }),
    );
  }

  /**
   * The front door to the app's http functions (Baton's API and page among them), which each
   * instance serves on a port of its own, as the Functions host does behind its front end.
   */
  private serveHttp(): Promise<LocalHttpServer> {
    return serveHttpProxy(() => this.httpPorts(), {
      port: this.options.port ?? DEFAULT_HTTP_PORT,
      fallback: this.options.port === undefined,
      log: (_level, message) => this.view.note(message),
    });
  }

  /** The ports of the live instances that serve http, in the order they started. */
  private httpPorts(): number[] {
    return [...this.instances.values()].flatMap((i) => (i.alive && i.httpPort !== undefined ? [i.httpPort] : []));
  }

  /** Until an instance serves http, or none is left to; false when none does. */
  private async untilHttpServed(): Promise<boolean> {
    for (;;) {
      if (this.httpPorts().length > 0) return true;
      if (this.stopRequested || [...this.instances.values()].every((i) => !i.alive)) return false;
      await this.pause(50);
    }
  }

  /** The app's `--setup`, on the settings the instances get; a stop while it runs starts nothing. */
  private async setUp(): Promise<void> {
    const setup = this.options.setup;
    if (!setup) return;
    const { signal } = this.stopping;
    const stopped = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    try {
      await Promise.race([setup({ env: this.instanceEnv(), signal, log: (line) => this.view.note(line) }), stopped]);
    } catch (err) {
      if (signal.aborted) return;
      throw new SetupFailedError(redactSecrets(messageOf(err)));
    }
  }

  private async once(): Promise<number> {
    if (this.stopping.signal.aborted) return 130;
    if (!this.options.job) throw new Error('once needs a job');
    const runId = await requestRun(this.docs, this.options.job, {
      wake: (call) =>
        wakeHub(this.wakeQueue, call).catch((err: unknown) =>
          this.view.note(`could not wake a resting leader: ${messageOf(err)}`),
        ),
    });
    this.view.note(`requested run ${runId}`);
    const started = Date.now();
    let killed = false;
    for (;;) {
      if (this.stopping.signal.aborted) return 130;
      if (![...this.instances.values()].some((i) => i.alive)) {
        this.view.note(`every instance has exited; run ${runId} cannot finish (see the instance output above)`);
        return 1;
      }
      if (Date.now() - started > ONCE_DEADLINE_MS) {
        this.view.note(`run ${runId} did not finish within ${ONCE_DEADLINE_MS / 1000} s`);
        return 1;
      }
      const details = await readRunDetails(this.docs, runId).catch(() => undefined);
      if (details && isTerminal(details.record.state)) {
        // One last frame with the finished run, then the summary below it.
        this.stopping.abort();
        await this.refreshOnce();
        this.view.stop();
        return await this.summarize(details.record, details.output);
      }
      if (
        !killed &&
        this.options.killLeaderAfterSeconds !== undefined &&
        Date.now() - started >= this.options.killLeaderAfterSeconds * 1000
      ) {
        killed = await this.killLeader();
      }
      await sleep(250);
    }
  }

  private async summarize(record: RunRecord, output: unknown): Promise<number> {
    const { planned, succeeded, failed, duplicates } = record.counters;
    // A job may attach a readable report to its run (the sample does): show it.
    const report = await this.docs.read(runKeys.attachment(record.runId, REPORT_ATTACHMENT)).catch(() => undefined);
    if (report) this.view.note(`\n${report.body.trimEnd()}\n`);
    this.view.note(
      `run ${record.runId} ${record.state}: ${succeeded} succeeded, ${failed} failed of ${planned} (${duplicates} duplicates ignored)`,
    );
    if (record.outputKey) this.view.note(`output: ${hubResources(this.options.hub).container}/${record.outputKey}`);
    if (this.options.outputFile) {
      writeFileSync(this.options.outputFile, `${JSON.stringify({ record, output }, null, 2)}\n`);
    }
    return record.state === 'succeeded' ? 0 : 1;
  }

  private async untilStopped(): Promise<number> {
    while (!this.stopping.signal.aborted) {
      if (![...this.instances.values()].some((i) => i.alive)) {
        this.view.note('every instance has exited (see their output above); stopping the cluster');
        return 1;
      }
      await this.pause(500);
    }
    return 0;
  }

  /** kill -9 of whichever instance holds the lease, then a replacement, as a crash would go. */
  private async killLeader(): Promise<boolean> {
    const holder = (await this.lease.read()).holder;
    const victim = holder ? this.instances.get(holder) : undefined;
    if (!victim?.alive) return false;
    this.view.note(`kill -9 ${victim.name} (the leader, pid ${victim.proc.pid})`);
    victim.proc.kill('SIGKILL');
    this.spawnInstance();
    return true;
  }

  /** The settings every instance starts with (and `--setup` gets). */
  private instanceEnv(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      AzureWebJobsStorage: this.azurite.connectionString,
      BATON_HUB: this.options.hub,
      ...(this.options.app ? { [APP_SETTING]: this.options.app } : {}),
      BATON_COORDINATOR_SCHEDULE: this.options.coordinatorSchedule,
      BATON_MAX_IN_FLIGHT: process.env.BATON_MAX_IN_FLIGHT ?? LOCAL_MAX_IN_FLIGHT,
    };
  }

  private spawnInstance(): void {
    const name = `instance-${this.next++}`;
    const script = join(__dirname, `instance-main${__filename.endsWith('.ts') ? '.ts' : '.js'}`);
    const args = __filename.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
    const proc = spawn(process.execPath, args, {
      env: { ...this.instanceEnv(), BATON_INSTANCE: name },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let resolveExit!: () => void;
    const instance: Instance = {
      name,
      alive: true,
      items: 0,
      proc,
      exited: new Promise<void>((r) => (resolveExit = r)),
      closed: new Promise<void>((r) => proc.once('close', () => r())),
    };
    if (this.options.logDir) {
      const path = join(this.options.logDir, `${name}.log`);
      instance.log = createWriteStream(path, { flags: 'a' });
      // A full disk must not take the cluster down: say so once and stop keeping that log.
      instance.log.once('error', (err) => {
        this.view.note(`${name}: stopped writing ${path}: ${err.message}`);
        instance.log?.destroy();
      });
    }
    const keep = (line: string): void => {
      const log = instance.log;
      if (log?.writable) log.write(`${new Date().toISOString()} ${visible(redactSecrets(line))}\n`);
    };
    proc.on('exit', (code, signal) => {
      const how = signal ?? `code ${code}`;
      instance.alive = false;
      keep(`exited (${how})`);
      resolveExit();
      if (!this.stopping.signal.aborted) this.view.note(`${name} exited (${how})`);
    });
    createInterface({ input: proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      keep(line);
      const event = parseInstanceLine(line);
      if (!event) {
        if (line.trim()) this.view.note(`${name}: ${redactSecrets(line)}`);
        return;
      }
      if (event.kind === 'worked') instance.items += event.items;
      else if (event.kind === 'http') instance.httpPort = event.port;
      else if (event.kind === 'leader' && (event.type === 'acquired' || event.type === 'lost' || this.verbose)) {
        this.view.note(
          `${name}: leadership ${event.type}${event.epoch !== undefined ? ` (epoch ${event.epoch})` : ''}${event.reason ? `: ${event.reason}` : ''}`,
        );
      } else if (event.kind === 'log' && (event.level === 'warn' || this.verbose)) this.view.note(`${name}: ${event.message}`);
    });
    createInterface({ input: proc.stderr as NodeJS.ReadableStream }).on('line', (line) => {
      keep(`stderr: ${line}`);
      this.view.note(`${name} stderr: ${redactSecrets(line)}`);
    });
    this.instances.set(name, instance);
  }

  private async refreshLoop(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      await this.refreshOnce();
      await this.pause(500);
    }
  }

  /** Waits `ms`, or less when a stop is requested. */
  private pause(ms: number): Promise<void> {
    // One listener per wait, removed when the wait ends, so a long session does not pile them up.
    return new Promise<void>((resolve) => {
      const onStop = (): void => (clearTimeout(timer), resolve());
      const timer = setTimeout(() => (this.stopping.signal.removeEventListener('abort', onStop), resolve()), ms);
      this.stopping.signal.addEventListener('abort', onStop, { once: true });
    });
  }

  private async refreshOnce(): Promise<void> {
    const instances = [...this.instances.values()];
    try {
      const [status, recent] = await Promise.all([readHubStatus(this.docs, this.lease), listRuns(this.docs, { limit: 20 })]);
      this.view.update({ status, instances, finished: recent.runs.filter((r) => isTerminal(r.state)) });
    } catch (err) {
      this.view.update({ status: undefined, instances, finished: [], error: messageOf(err) });
    }
  }
}

/**
 * Azurite on its usual ports (10000, 10001), so `UseDevelopmentStorage=true` and the CLI find
 * it; on free ports when those are taken (another Azurite, or clusters side by side in tests).
 */
async function startOnUsualPorts(data: string | undefined): Promise<RunningAzurite> {
  const persist = data ? { persistTo: data } : {};
  try {
    return await startAzurite({ ...persist, blobPort: 10000, queuePort: 10001 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    return startAzurite(persist);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
