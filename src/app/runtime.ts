import { hubResources } from '../hub/resources';
import { packageVersion } from './package-version';
import { systemClock, type Clock } from '../clock/clock';
import { SKEW_REPORT_THRESHOLD_MS, StorageTimeClock } from '../clock/storage-time-clock';
import type { Coordinator } from '../engine/coordinator';
import { createCoordinator } from '../engine/leader-engine';
import type { EngineLogger } from '../engine/engine-context';
import { RunStateCache } from '../engine/run-state-cache';
import { secondsUntil, TickBeacon } from '../engine/tick-beacon';
import { wakeHub } from '../hub/wake';
import { restWakeFor } from './rest-wake';
import type { TickMessage } from '../engine/messages';
import { INVOCATION_MARGIN_MS, type WorkerDeps } from '../engine/worker';
import { ItemStartGate } from '../engine/item-start-gate';
import { BlobDocumentStore } from '../fencing/blob-document-store';
import type { DocumentStore } from '../fencing/document-store';
import type { LeaseReader } from '../lease/lease-store';
import { InvalidConfigError, InvalidSettingError, messageOf } from '../errors';
import { visible } from '../visible';
import { assertDurableReady } from '../durable/ready';
import { assertUniqueJobs } from '../jobs/define-job';
import type { HostQueueConfig } from './host-config';
import type { JobDefinition } from '../jobs/job-definition';
import { BlobEpochMark } from '../lease/blob-epoch-mark';
import { BlobLeaseStore } from '../lease/blob-lease-store';
import { BlobHandoverRequestStore } from '../lease/blob-handover-request-store';
import { defaultRenewIntervalMs, type LeaderLogger } from '../lease/elector-options';
import { LeaderElector } from '../lease/leader-elector';
import { ThreadedLeaseBeats } from '../lease/threaded-lease-beats';
import type { HandoverTiming } from '../lease/handover-timing';
import type { HandoverResult } from '../lease/handover';
import type { LeaderEvent } from '../lease/leader-events';
import { AzureQueueDirectory } from '../queue/azure-queue';
import { HubQueues } from '../engine/queue-shards';
import {
  createBlobServiceClient,
  createQueueServiceClient,
  LEASE_RETRY_OPTIONS,
  publicEndpoint,
} from '../storage/client-factory';
import { StorageRequestCounter } from '../storage/request-counter';
import { Schedule } from '../schedule/schedule';
import { parseBatonSettings, parseLogLevel, parseMetricsExporter, type BatonSettings, type LogLevel } from './settings';
import { parseStorageSettings, type StorageSettings } from '../storage/connection';
import { redactSecrets } from '../redact';
import { type Env } from '../storage/setting';
import { BatonTelemetry, type BatonTelemetryOptions } from '../telemetry/baton-telemetry';

/**
 * A leader's term runs inside one coordinator invocation, and each hook inside one invocation
 * too: a bound the host's `functionTimeout` would cut short ends the invocation mid-term (the
 * lease left to expire, a checkpoint lost) instead of where Baton ends it.
 */
function assertWithinFunctionTimeout(host: HostQueueConfig, settings: BatonSettings, jobs: readonly JobDefinition[]): void {
  const limit = host.functionTimeoutSeconds;
  if (limit === undefined) return;
  const timeout = `host.json functionTimeout (${limit} s)`;
  if (settings.termSeconds >= limit) {
    throw new InvalidSettingError(
      'BATON_TERM_SECONDS',
      `BATON_TERM_SECONDS (${settings.termSeconds}) must be less than ${timeout}: a term runs inside one coordinator invocation, which the host stops at its timeout`,
    );
  }
  for (const job of jobs) {
    const { graceSeconds } = job.hookTimeouts;
    for (const hook of ['splitSeconds', 'processSeconds', 'finalizeSeconds'] as const) {
      const bound = job.hookTimeouts[hook];
      if (bound + graceSeconds < limit) continue;
      throw new InvalidConfigError(
        `${job.name}.hookTimeouts.${hook}`,
        `job ${job.name}: hookTimeouts.${hook} (${bound}) plus graceSeconds (${graceSeconds}) must be less than ${timeout}: the hook runs inside one invocation, which the host stops at its timeout`,
      );
    }
  }
}

/** The worker's last attempt must be the host's last delivery, and messages travel as plain JSON. */
function assertHostAgrees(host: HostQueueConfig, settings: BatonSettings): void {
  if (host.maxDequeueCount !== settings.maxAttempts) {
    throw new InvalidSettingError(
      'BATON_MAX_ATTEMPTS',
      `BATON_MAX_ATTEMPTS (${settings.maxAttempts}) must equal host.json extensions.queues.maxDequeueCount (${host.maxDequeueCount})`,
    );
  }
  if (host.messageEncoding !== 'none') {
    throw new InvalidSettingError(
      'host.json',
      'host.json extensions.queues.messageEncoding must be "none": Baton sends plain JSON messages',
    );
  }
}

/** What one Functions worker process shares across invocations. */
export interface BatonRuntime {
  settings: BatonSettings;
  /** Aborted when `shutdown()` begins: no tick makes an attempt to lead after it. */
  readonly shutdownSignal: AbortSignal;
  /** Aborted once `shutdown()` has handed over: a tick still leading then ends its term and releases. */
  readonly stepDownSignal: AbortSignal;
  /**
   * Stops this instance's part in leadership: no new attempts, then a term it holds is handed
   * over make-before-break (`LeaderElector.handOver`): it leads on until a successor asks, for up
   * to `handoverWaitMs` (default 0: the term ends at once), and has the lease back within
   * `deadlineMs` when given. Resolves once the term has ended, or at once when this instance does
   * not lead, with what became of the lease. Never rejects; a second call waits for the first.
   */
  shutdown(options?: { handoverWaitMs?: number; deadlineMs?: number }): Promise<HandoverResult>;
  elector: LeaderElector;
  /** The leader's engine, built on first use: an instance that never leads never builds it. */
  readonly coordinator: Coordinator;
  /** The app's jobs, by name. */
  jobs: ReadonlyMap<string, JobDefinition>;
  /** One worker per queue shard: shard k's trigger sends its results and notes to shard k's queues. */
  workers: WorkerDeps[];
  resources: ReturnType<typeof hubResources>;
  /** Every storage request this runtime's clients sent, by operation: Baton's cost metric. */
  storageRequests: StorageRequestCounter;
  /** The app's logger, every line masked for secrets. */
  log: { info(message: string): void; warn(message: string): void };
  /** The hub's documents and lease as anyone reads them: what the HTTP API serves. */
  reads: { docs: DocumentStore; lease: LeaseReader; endpoint: string };
  /**
   * Storage's time, learned from the answers this runtime's clients receive: schedules, run
   * deadlines and record timestamps use it, so no instance's wall clock can start a run early
   * or time one out early.
   */
  clock: StorageTimeClock;
  /**
   * Baton's metrics and events (meter `baton`), fed by the elector, the queue engine and the
   * fenced documents. The durable engine's starter and activities take it as their `telemetry`.
   */
  telemetry: BatonTelemetry;
  /**
   * The second tick source (see `TickBeacon`): what a tick message's handler needs, and a wake
   * for start-up, so leadership begins even if no timer ever fires.
   */
  /**
   * When an idle leader may rest (`BATON_REST_WHEN_IDLE`, the queue engine): when a resting lease
   * must end for an occurrence (see `restWakeFor`). Undefined: an idle leader holds its term.
   */
  rest: { wakeAt(dueAt: number): number; aheadMs: number } | undefined;
  ticks: {
    hiddenSeconds: number;
    retrySeconds: number;
    resend(message: TickMessage, seconds: number): Promise<void>;
    /** Sends one tick that any instance may take: call once when the app starts. Never rejects. */
    wakeOnStart(): Promise<void>;
    /** Wakes a resting leader for a request it must apply (`wakeHub`). Never rejects: a failure is logged. */
    wake(options?: { abortSignal?: AbortSignal }): Promise<void>;
    /** Whole seconds from now (storage's time) until `at`, rounded up: a delayed tick surfaces no earlier. */
    secondsUntil(at: Date): number;
    /**
     * Settles once the beacon's calls started so far have. At shutdown, the last is the wake a
     * released lease sends its successor: a process that exits before it leaves the successor
     * waiting for its own timer, and a storage client closed under it retries for seconds.
     */
    settled(): Promise<void>;
  };
}

export interface RuntimeOptions {
  jobs?: readonly JobDefinition[];
  /** The host.json queue settings the app runs under; checked against Baton's settings. */
  hostQueueConfig?: HostQueueConfig;
  onLeaderEvent?: (event: LeaderEvent) => void;
  logger?: LeaderLogger & EngineLogger;
  identity?: string;
  /** This machine's clock (default: the system clock); `date()` is corrected to storage time. */
  clock?: Clock;
  /** Counts this runtime's storage requests; pass one to share it with other clients of the process. */
  storageRequests?: StorageRequestCounter;
  /**
   * Where metrics and events go; default the global OpenTelemetry providers (see
   * `setupTelemetry`, which must run before this). Tests pass their own in-memory providers.
   */
  telemetry?: Omit<BatonTelemetryOptions, 'storageRequests'>;
}

/**
 * The chaos suite's broken-build switch (`DocumentStore.unsafeUnfenced`) must never reach real
 * storage: it is refused unless storage is the local emulator, and loud when on.
 */
function checkFencingSwitch(env: Env, storage: StorageSettings, log: { warn(message: string): void }): boolean {
  if (!env.BATON_UNSAFE_DISABLE_FENCING) return false;
  const local =
    storage.kind === 'connectionString' &&
    /(^|;)(UseDevelopmentStorage=true|BlobEndpoint=https?:\/\/(127\.0\.0\.1|localhost)[:/])/i.test(storage.connectionString);
  if (!local) {
    throw new InvalidSettingError(
      'BATON_UNSAFE_DISABLE_FENCING',
      'BATON_UNSAFE_DISABLE_FENCING is a test-only switch and is refused unless storage is the local emulator',
    );
  }
  log.warn('fencing is OFF (BATON_UNSAFE_DISABLE_FENCING): a stale leader can overwrite run records; for the chaos suite only');
  return true;
}

/**
 * Every line the elector and the engine log goes through here: key material is masked whatever
 * the sink (a split or finalize error can quote a SAS URL), and debug lines pass only at `debug`.
 */
function redactingLogger(logger: LeaderLogger & EngineLogger, level: LogLevel): LeaderLogger & EngineLogger {
  return {
    info: (message) => logger.info(visible(redactSecrets(message))),
    warn: (message) => logger.warn(visible(redactSecrets(message))),
    ...(level === 'debug' && logger.debug ? { debug: (message: string) => logger.debug?.(visible(redactSecrets(message))) } : {}),
  };
}

/**
 * Builds the process-wide runtime from app settings. Throws `InvalidSettingError` (one line,
 * naming the setting) on the first bad setting, so a misconfigured app fails at start-up rather
 * than on its first tick.
 */
export function createBatonRuntime(env: Env = process.env, options: RuntimeOptions = {}): BatonRuntime {
  const storage = parseStorageSettings(env);
  const settings = parseBatonSettings(env);
  const logLevel = parseLogLevel(env);
  // `setupTelemetry` acts on it, before this; checked here too, so a runtime composed without it
  // still refuses a bad value at start-up rather than ignore it.
  parseMetricsExporter(env);
  const jobs = options.jobs ?? [];
  assertUniqueJobs(jobs);
  // The durable engine folds chunks apart and merges them: every job must say how, at start-up.
  if (settings.engine === 'durable') for (const job of jobs) assertDurableReady(job);
  if (options.hostQueueConfig) {
    assertHostAgrees(options.hostQueueConfig, settings);
    assertWithinFunctionTimeout(options.hostQueueConfig, settings, jobs);
  }
  const logger = options.logger && redactingLogger(options.logger, logLevel);
  const log = logger ?? { info: () => undefined, warn: () => undefined };
  const unsafeUnfenced = checkFencingSwitch(env, storage, log);
  const clock = new StorageTimeClock(options.clock ?? systemClock, { onSkewChange: (skewMs) => reportSkew(log, skewMs) });
  const resources = hubResources(settings.hub, settings.queueShards);
  const storageRequests = options.storageRequests ?? new StorageRequestCounter();
  const telemetry = new BatonTelemetry({ ...options.telemetry, storageRequests });
  // Every client feeds the clock; the lease client's answers alone would do for the leader, whose
  // term begins with one, but the others keep the estimate tight during a term.
  const clientOptions = { requestCounter: storageRequests, storageTime: clock };
  const leaseClient = createBlobServiceClient(storage, { retryOptions: LEASE_RETRY_OPTIONS, ...clientOptions });
  const blobService = createBlobServiceClient(storage, clientOptions);
  const queueService = createQueueServiceClient(storage, clientOptions);
  const docs = new BlobDocumentStore(blobService.getContainerClient(resources.container), {
    unsafeUnfenced,
    onStaleEpoch: () => telemetry.fencingRefused(),
  });
  const queues = HubQueues.forHub(settings.hub, settings.queueShards, new AzureQueueDirectory(queueService), clock);
  const jobMap = new Map(jobs.map((job) => [job.name, job]));
  const leaseStore = new BlobLeaseStore(leaseClient, settings.hub, {
    containerName: settings.leaseContainer,
    // Beside the documents the epochs fence, so a deleted lease container restarts nothing.
    epochMark: BlobEpochMark.at(leaseClient.getContainerClient(resources.container), resources.epochMark),
  });
  // Shard 0's work queue: every instance polls it already, so a tick there costs no new listener.
  const tickQueue = queues.active[0]!.work;
  const beacon = new TickBeacon({
    queue: tickQueue,
    clock,
    leaseMs: settings.leaseDurationSeconds * 1000,
    ...(settings.takeoverMs !== undefined
      ? {
          takeover: {
            breakAfterMs: settings.takeoverMs,
            renewIntervalMs: defaultRenewIntervalMs(settings.leaseDurationSeconds * 1000),
          },
        }
      : {}),
    log: (message) => logger?.debug?.(message),
  });
  const elector = new LeaderElector({
    store: leaseStore,
    leaseDurationSeconds: settings.leaseDurationSeconds,
    renewDeadlineMs: settings.renewDeadlineMs,
    ...(settings.takeoverMs !== undefined
      ? {
          breakAfterMs: settings.takeoverMs,
          // From a thread, so that items computing on this instance do not look like a crash.
          beats: new ThreadedLeaseBeats({
            storage,
            containerName: settings.leaseContainer,
            blobName: settings.hub,
            requestCounter: storageRequests,
            onThreadError: (err) =>
              log.warn(`the lease beat thread failed; beats stop until the next term: ${redactSecrets(messageOf(err))}`),
          }),
        }
      : {}),
    // Every instance's coordinator timer is a follower's chance to take over; on a fixed grid,
    // the leader's lease is timed to expire just before one of them.
    ...alignmentFor(settings.coordinatorSchedule),
    clock,
    ...(options.identity ? { identity: options.identity } : {}),
    // Recorded with each epoch, so the status shows which version leads (a deploy's question),
    // and compared: a newer version (then a higher priority) asks the holder to hand over.
    rank: { version: settings.appVersion ?? packageVersion() ?? '0', priority: settings.leaderPriority },
    requests: new BlobHandoverRequestStore(leaseClient, settings.hub, { containerName: settings.leaseContainer }),
    handover: handoverTimingFor(settings.coordinatorSchedule),
    ...(logger ? { logger } : {}),
    onEvent: (event) => {
      telemetry.leaderEvent(event);
      beacon.onLeaderEvent(event);
      options.onLeaderEvent?.(event);
    },
  });
  const stopping = new AbortController();
  const steppingDown = new AbortController();
  let shuttingDown: Promise<HandoverResult> | undefined;
  const shutdown = (handoverWaitMs: number, deadlineMs: number | undefined): Promise<HandoverResult> =>
    (shuttingDown ??= (async () => {
      stopping.abort();
      // With no wait the term ends at once; with a wait it leads on until a successor asks.
      const handed = await elector.handOver({ waitMs: handoverWaitMs, ...(deadlineMs !== undefined ? { deadlineMs } : {}) });
      if (handed.led && handoverWaitMs > 0) {
        const to = handed.to ? `reserved the lease for ${handed.to}` : 'no successor asked in time';
        log.info(`shutting down: epoch ${handed.epoch} ${to} after ${Math.round(handed.waitedMs)} ms`);
      }
      steppingDown.abort();
      return handed;
    })());
  // The leader tells it when runs are next due; this instance's workers ask it before each item.
  const itemGate = new ItemStartGate(clock);
  let coordinator: Coordinator | undefined;
  const runs = new RunStateCache(docs, { clock });
  const functionTimeoutSeconds = options.hostQueueConfig?.functionTimeoutSeconds;
  const workers = queues.active.map((shard): WorkerDeps => ({
    jobs: jobMap,
    docs,
    work: shard.work,
    results: shard.results,
    poison: shard.poison,
    runs,
    maxAttempts: settings.maxAttempts,
    ...(functionTimeoutSeconds === undefined ? {} : { invocationBudgetMs: functionTimeoutSeconds * 1000 - INVOCATION_MARGIN_MS }),
    gate: itemGate,
    log: (level, message) => log[level](message),
  }));
  return {
    settings,
    elector,
    get coordinator() {
      return (coordinator ??= createCoordinator({
        jobs: jobMap,
        docs,
        queues,
        clock,
        log,
        tuning: { maxAttempts: settings.maxAttempts, maxInFlightMessages: settings.maxInFlightMessages },
        telemetry,
        retention: settings.retention,
        itemGate,
      }));
    },
    jobs: jobMap,
    workers,
    resources,
    storageRequests,
    log,
    reads: { docs, lease: leaseStore, endpoint: publicEndpoint(blobService) },
    clock,
    telemetry,
    shutdownSignal: stopping.signal,
    stepDownSignal: steppingDown.signal,
    shutdown: (options) => shutdown(options?.handoverWaitMs ?? 0, options?.deadlineMs),
    rest:
      settings.restWhenIdle && settings.engine === 'queue'
        ? restWakeFor(settings.coordinatorSchedule, options.hostQueueConfig?.maxPollingIntervalMs ?? HOST_MAX_POLLING_MS)
        : undefined,
    ticks: {
      hiddenSeconds: beacon.hiddenSeconds,
      retrySeconds: Math.max(1, Math.round((handoverTimingFor(settings.coordinatorSchedule).checkMs ?? 10_000) / 1000)),
      settled: () => beacon.idle(),
      resend: async (message, seconds) => {
        await tickQueue.send(JSON.stringify(message), { visibilityTimeoutSeconds: seconds });
      },
      secondsUntil: (at) => secondsUntil(clock, at),
      wake: async (options) => {
        await wakeHub(tickQueue, options).catch((err: unknown) => {
          log.warn(
            `could not wake a resting leader (the request stands; it is applied when the rest ends): ${redactSecrets(messageOf(err))}`,
          );
        });
      },
      wakeOnStart: async () => {
        if (settings.engine === 'durable') return;
        const tick: TickMessage = { v: 1, t: 'tick', epoch: 0 };
        // A tick lost here costs only until the next timer tick or beacon; say so, and go on.
        await tickQueue.send(JSON.stringify(tick)).catch((err: unknown) => {
          log.warn(`start-up tick not sent: ${redactSecrets(messageOf(err))}`);
        });
      },
    },
  };
}

/** The Functions host's queue polling when host.json does not say (`maxPollingInterval`). */
const HOST_MAX_POLLING_MS = 60_000;

function reportSkew(log: { info(message: string): void; warn(message: string): void }, skewMs: number): void {
  const seconds = (Math.abs(skewMs) / 1000).toFixed(1);
  if (Math.abs(skewMs) < SKEW_REPORT_THRESHOLD_MS) {
    log.info(`this machine's clock is back within ${seconds} s of storage time`);
    return;
  }
  log.warn(
    `this machine's clock is ${seconds} s ${skewMs > 0 ? 'ahead of' : 'behind'} storage time; schedules and deadlines follow storage time`,
  );
}

/**
 * Handovers keep time with the coordinator's tick: candidates ask on their ticks, so the holder
 * looks once a tick (1–10 s), and leaves a departed requester's or higher rank's lease alone
 * for three ticks. A requester reads the lease ten times a tick while it waits (100–500 ms).
 */
export function handoverTimingFor(schedule: string): Partial<HandoverTiming> {
  const period = Schedule.parse(schedule, 'BATON_COORDINATOR_SCHEDULE').fixedPeriod()?.periodMs ?? 10_000;
  const checkMs = Math.min(10_000, Math.max(1000, period));
  return { checkMs, deferMs: 3 * checkMs, pollMs: Math.min(500, Math.max(100, checkMs / 10)) };
}

function alignmentFor(schedule: string): { expiryAlignment?: { periodMs: number; offsetMs: number } } {
  const grid = Schedule.parse(schedule, 'BATON_COORDINATOR_SCHEDULE').fixedPeriod();
  return grid ? { expiryAlignment: grid } : {};
}
