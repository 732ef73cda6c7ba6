import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { hubResources } from '../../src/hub/resources';
import { requestRun } from '../../src/hub/requests';
import { readRunDetails, type RunDetails } from '../../src/hub/status';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import type { LeaseRecord } from '../../src/lease/lease-store';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { DEFAULT_CLUSTER, LOCAL_MAX_IN_FLIGHT } from '../../src/local/cluster';
import { parseInstanceLine, type InstanceEvent } from '../../src/local/instance-events';
import { DRAIN_WAIT_MS, stopInstance, type InstanceStopKind } from '../../src/local/stop-rules';
import { isTerminal, type RunRecord } from '../../src/hub/run-record';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';
import { AzureQueue } from '../../src/queue/azure-queue';
import { wakeHub } from '../../src/hub/wake';
import { sumRequestCounts } from '../../src/storage/request-counter';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { describePatience, patience } from '../../test/support/slowdown';

/**
 * A local cluster for benchmarks: Azurite in this process (in memory, free ports) and N real
 * instance processes (the compiled `instance-main`, as `baton start` runs them), each reporting
 * its leader events, storage requests (and the bytes they sent) and memory as JSON lines. The
 * host's stops (`stopInstance`), kill -9 and SIGSTOP go to real processes.
 */
export interface BenchClusterOptions {
  instances: number;
  hub?: string;
  /** Registered on every instance (BATON_SYNTHETIC_JOBS). */
  jobs?: SyntheticJobSpec[];
  /** Default: the local cluster's (`baton start`). */
  coordinatorSchedule?: string;
  leaseSeconds?: number;
  /**
   * Let an idle leader rest the lease between occurrences, as the app does by default
   * (`BATON_REST_WHEN_IDLE`). Default false here: the benchmarks of throughput, memory and
   * failover measure a leader that stands, and an idle cluster's leader would rest until its
   * run is triggered; idle-cost and start-lag measure the app's default.
   */
  restWhenIdle?: boolean;
  /** More app settings for every instance. */
  env?: Record<string, string>;
}

export type TimedEvent = InstanceEvent & { at: number };

export interface BenchInstance {
  name: string;
  proc: ChildProcess;
  alive: boolean;
  events: TimedEvent[];
  /** The last cumulative request counts the instance reported. */
  requests: { total: number; byOperation: Record<string, number> };
  /** The last cumulative request body bytes the instance reported, by operation. */
  bytes: { total: number; byOperation: Record<string, number> };
  memory?: Extract<InstanceEvent, { kind: 'memory' }>;
  exited: Promise<void>;
  /** How the process exited, once it has. */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  stderr: string[];
}

const TERM_EVENTS = new Set(['acquired', 'released', 'lost', 'release-failed', 'task-abandoned']);
const ROOT = resolve(__dirname, '..', '..');
const INSTANCE_MAIN = join(ROOT, 'dist', 'src', 'local', 'instance-main.js');

export class BenchCluster {
  readonly instances: BenchInstance[] = [];
  readonly docs: BlobDocumentStore;
  private readonly lease: BlobLeaseStore;
  private readonly wakeQueue: AzureQueue;
  private next = 1;
  private waiters: (() => void)[] = [];

  private constructor(
    readonly azurite: RunningAzurite,
    private readonly options: BenchClusterOptions,
  ) {
    const settings = { kind: 'connectionString', connectionString: azurite.connectionString } as const;
    this.docs = new BlobDocumentStore(createBlobServiceClient(settings).getContainerClient(hubResources(this.hub).container));
    this.lease = new BlobLeaseStore(createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS }), this.hub);
    this.wakeQueue = new AzureQueue(createQueueServiceClient(settings), hubResources(this.hub).workQueue);
  }

  static async start(options: BenchClusterOptions): Promise<BenchCluster> {
    if (!existsSync(INSTANCE_MAIN)) throw new Error(`${INSTANCE_MAIN} is missing: run npm run build first`);
    const cluster = new BenchCluster(await startAzurite(), options);
    for (let i = 0; i < options.instances; i++) cluster.spawn();
    return cluster;
  }

  get hub(): string {
    return this.options.hub ?? 'bench';
  }

  get connectionString(): string {
    return this.azurite.connectionString;
  }

  /** Starts one more instance; `env` adds settings for this one only (a new version, say). */
  spawn(env: Record<string, string> = {}): BenchInstance {
    const name = `instance-${this.next++}`;
    const proc = spawn(process.execPath, [INSTANCE_MAIN], {
      cwd: ROOT,
      env: {
        ...process.env,
        AzureWebJobsStorage: this.azurite.connectionString,
        BATON_HUB: this.hub,
        BATON_INSTANCE: name,
        BATON_COORDINATOR_SCHEDULE: this.options.coordinatorSchedule ?? DEFAULT_CLUSTER.coordinatorSchedule,
        BATON_MAX_IN_FLIGHT: LOCAL_MAX_IN_FLIGHT,
        ...(this.options.leaseSeconds ? { BATON_LEASE_SECONDS: String(this.options.leaseSeconds) } : {}),
        ...(this.options.jobs ? { BATON_SYNTHETIC_JOBS: JSON.stringify(this.options.jobs) } : {}),
        BATON_REST_WHEN_IDLE: String(this.options.restWhenIdle === true),
        ...this.options.env,
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let exited!: () => void;
    const instance: BenchInstance = {
      name,
      proc,
      alive: true,
      events: [],
      requests: { total: 0, byOperation: {} },
      bytes: { total: 0, byOperation: {} },
      exited: new Promise<void>((r) => (exited = r)),
      stderr: [],
    };
    proc.on('exit', (code, signal) => {
      instance.exit = { code, signal };
      instance.alive = false;
      exited();
      this.wake();
    });
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      const event = parseInstanceLine(line);
      if (!event) return;
      const timed = { ...event, at: event.at ?? Date.now() } as TimedEvent;
      instance.events.push(timed);
      if (timed.kind === 'requests') {
        instance.requests = { total: timed.total, byOperation: timed.byOperation };
        instance.bytes = { total: timed.bytes ?? 0, byOperation: timed.bytesByOperation ?? {} };
      }
      if (timed.kind === 'memory') instance.memory = timed;
      this.wake();
    });
    createInterface({ input: proc.stderr! }).on('line', (line) => instance.stderr.push(line));
    this.instances.push(instance);
    return instance;
  }

  /**
   * Resolves when `check` returns a value, re-checked on every event; rejects after `timeoutMs`,
   * scaled by the test suite's measured slowdown (1 in a benchmark run by hand).
   */
  async waitFor<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    const deadline = Date.now() + patience(timeoutMs);
    for (;;) {
      const value = check();
      if (value !== undefined) return value;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${describePatience(timeoutMs)} waiting for ${what}\n${this.dump()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => (clearTimeout(timer), resolve()));
      });
    }
  }

  /** The first leader `acquired` event after `since` (ms since epoch), on any live instance but `except`. */
  acquiredSince(since: number, except?: BenchInstance): { instance: BenchInstance; at: number; epoch: number } | undefined {
    let first: { instance: BenchInstance; at: number; epoch: number } | undefined;
    for (const instance of this.instances) {
      if (instance === except) continue;
      for (const e of instance.events) {
        if (e.kind === 'leader' && e.type === 'acquired' && e.at >= since && (!first || e.at < first.at)) {
          first = { instance, at: e.at, epoch: e.epoch ?? 0 };
        }
      }
    }
    return first;
  }

  /** The live instance whose last leader event is `acquired`: the one leading now. */
  leader(): BenchInstance | undefined {
    return this.instances.find((i) => {
      if (!i.alive) return false;
      // Only the events that begin or end a term: handover and deference events say neither.
      const last = [...i.events].reverse().find((e) => e.kind === 'leader' && TERM_EVENTS.has(e.type));
      return last?.kind === 'leader' && last.type === 'acquired';
    });
  }

  /** The epoch of `instance`'s latest term (its last `acquired` event); undefined if it never led. */
  lastEpoch(instance: BenchInstance): number | undefined {
    for (let i = instance.events.length - 1; i >= 0; i--) {
      const e = instance.events[i]!;
      if (e.kind === 'leader' && e.type === 'acquired') return e.epoch;
    }
    return undefined;
  }

  /** The hub's lease as storage has it now: whether it is held, by whom, with which epoch. */
  async readLease(): Promise<LeaseRecord> {
    return this.lease.read();
  }

  async trigger(job: string): Promise<string> {
    return requestRun(this.docs, job, { wake: (call) => wakeHub(this.wakeQueue, call).catch(() => undefined) });
  }

  /** Every run record of `job` that can be read now, in occurrence order (manual runs first). */
  async runsOf(job: string): Promise<RunRecord[]> {
    const records = new FencedDocuments<RunRecord>(this.docs);
    const found: RunRecord[] = [];
    for await (const key of this.docs.list(`runs/${job}/`)) {
      if (!key.endsWith('/run.json')) continue;
      const record = await records.read(key).catch(() => undefined);
      if (record) found.push(record.value);
    }
    return found.sort((a, b) => (a.occurrence ?? '').localeCompare(b.occurrence ?? ''));
  }

  async waitForRun(runId: string, timeoutMs: number): Promise<RunDetails> {
    const deadline = Date.now() + patience(timeoutMs);
    for (;;) {
      const details = await readRunDetails(this.docs, runId).catch(() => undefined);
      if (details && isTerminal(details.record.state)) return details;
      if (Date.now() > deadline)
        throw new Error(`run ${runId} did not finish within ${describePatience(timeoutMs)}\n${this.dump()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Request counts summed over every instance this cluster started (dead ones at their last report). */
  totalRequests(): { total: number; byOperation: Record<string, number> } {
    const byOperation = sumRequestCounts(...this.instances.map((i) => i.requests.byOperation));
    return { total: Object.values(byOperation).reduce((a, b) => a + b, 0), byOperation };
  }

  /** Request body bytes summed over every instance this cluster started (dead ones at their last report). */
  totalBytes(): { total: number; byOperation: Record<string, number> } {
    const byOperation = sumRequestCounts(...this.instances.map((i) => i.bytes.byOperation));
    return { total: Object.values(byOperation).reduce((a, b) => a + b, 0), byOperation };
  }

  /** Waits until every live instance has reported its requests after `since`. */
  async freshRequestReports(since: number, timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      () =>
        this.instances.filter((i) => i.alive).every((i) => i.events.some((e) => e.kind === 'memory' && e.at >= since))
          ? true
          : undefined,
      timeoutMs,
      'fresh metric reports',
    );
  }

  /**
   * Stops one instance as the Functions host would (`stop-rules.ts`: WorkerTerminate, a bare
   * SIGTERM, SIGKILL, or a drain followed by SIGTERM), each killed 5 s after it was asked;
   * resolves once it has exited. A paused instance is resumed first, to hear it.
   */
  async stopInstance(instance: BenchInstance, kind: InstanceStopKind): Promise<void> {
    instance.proc.kill('SIGCONT');
    const drained = this.waitFor(
      () => (instance.events.some((e) => e.kind === 'drained') || !instance.alive ? true : undefined),
      DRAIN_WAIT_MS * 2,
      `${instance.name} to drain`,
    ).catch(() => undefined);
    await stopInstance(instance, kind, { drained: drained.then(() => undefined) });
  }

  /** `instance`'s record of its own stop (its `stop` event), once it made one. */
  stopOf(instance: BenchInstance): Extract<TimedEvent, { kind: 'stop' }> | undefined {
    return instance.events.find((e): e is Extract<TimedEvent, { kind: 'stop' }> => e.kind === 'stop');
  }

  /** SIGINT to every instance (the whole cluster's stop), then SIGKILL after `graceMs`; closes Azurite. */
  async stop(graceMs = 10_000): Promise<void> {
    for (const i of this.instances) if (i.alive) i.proc.kill('SIGCONT');
    // SIGINT, the whole cluster's stop: a leader has nobody to hand over to.
    for (const i of this.instances) if (i.alive) i.proc.kill('SIGINT');
    const all = Promise.all(this.instances.map((i) => i.exited));
    const timer = setTimeout(() => {
      for (const i of this.instances) if (i.alive) i.proc.kill('SIGKILL');
    }, graceMs);
    await all;
    clearTimeout(timer);
    await this.azurite.close();
  }

  /** For a failure message: each instance's last events (its log lines among them) and stderr. */
  dump(): string {
    return this.instances
      .map((i) => {
        // The per-second request and memory samples would fill the tail; they hold no error text.
        const events = i.events
          .filter((e) => e.kind !== 'requests' && e.kind !== 'memory' && e.kind !== 'invocations')
          .slice(-40)
          .map((e) => `${new Date(e.at).toISOString()} ${JSON.stringify(e)}`);
        return (
          `--- ${i.name} (pid ${i.proc.pid}, ${i.alive ? 'alive' : 'exited'}): last ${events.length} events\n${events.join('\n')}\n` +
          `--- ${i.name} stderr\n${i.stderr.slice(-20).join('\n')}`
        );
      })
      .join('\n');
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
