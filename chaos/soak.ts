import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { hubResources } from '../src/hub/resources';
import { jobStateKey, jobStateSchema, type JobState } from '../src/hub/job-state';
import { readHubStatus } from '../src/hub/status';
import { requestRun } from '../src/hub/requests';
import { BlobDocumentStore } from '../src/fencing/blob-document-store';
import { BlobLeaseStore } from '../src/lease/blob-lease-store';
import { startAzurite, type RunningAzurite } from '../src/local/azurite';
import { DRAIN_RULE } from '../src/local/stop-rules';
import { FencedDocuments } from '../src/fencing/fenced-documents';
import { isTerminal, runKeys, runRecordSchema, scheduledRunId, type RunRecord } from '../src/hub/run-record';
import type { DocumentStore } from '../src/fencing/document-store';
import {
  createSyntheticJob,
  expectedSynthetic,
  hangOrderName,
  syntheticJobSpecSchema,
  type SyntheticJobSpec,
} from '../functions/synthetic-job';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../src/storage/client-factory';
import { storageErrorOf } from '../src/storage/rest-error';
import { auditEntryOf, AuditTrailWriter, blobKeyOf, isAuditedWrite, readAuditTrail } from './audit-trail';
import { ChaosInstances, type ChaosInstance, type HeldMessage, type HostStop } from './chaos-instances';
import { faultExpectations, jobExpectation, type DrainedMessage, type FaultTarget } from './fault-effects';
import { FAULT_KINDS, planFaults, type FaultKind, type FaultStep, type HungHook } from './fault-plan';
import { FaultProxy, type ProxyAction } from './fault-proxy';
import { checkInvariants, DEPLOY_TAKEOVER_MS, type CheckResult, type Expectation } from './invariants';
import { dueAtOf, longestStartGapMs, occurrencesDue, scheduleOfJob, type AccountedJob } from './occurrence-accounting';
import { SeededRandom } from './rng';
import { isTickMessage, messageQueuesOf, readHubSnapshot } from './snapshot';

export interface SoakOptions {
  minutes: number;
  instances: number;
  seed: number;
  /** Fault kinds to inject; default all. */
  kinds?: readonly FaultKind[];
  /** Where Azurite persists, and where the audit trail, logs and report go. Default: a new temp folder. */
  data?: string;
  /** Keep the data folder afterwards (it is kept anyway when a violation is found). */
  keep?: boolean;
  hub?: string;
  /** `BATON_QUEUE_SHARDS` of every instance (default 1). */
  queueShards?: number;
  /**
   * Longest wait for runs to end, in each settling phase, and for queues to empty. Default: the
   * longest job timeout plus 20 s, which the invariants need; shorter only to see violations sooner.
   * 0 settles nothing: no redeploy, the instances stop as the faults end and the check judges what
   * is there (for a build expected to fail, whose violations are in the audit trail already).
   */
  settleSeconds?: number;
  /** Least quiet time between two faults (default 6 s, `DEFAULT_MIN_GAP_MS`); the plan shares out what is left. */
  minGapSeconds?: number;
  /**
   * Hedged dispatch in the test jobs (default on, as in every job). Off, a run a straggler hit
   * waits for the straggler to come back: the straggler check's broken build.
   */
  hedge?: boolean;
  /**
   * How much slower this machine is than the one the soak's own waits were set on (default 1, at
   * least 1): the waits for a first leader, an open run, a leader to aim at or a fault to land are
   * multiplied by it. On a starved machine they would otherwise run out and skip faults or fail.
   */
  slowdown?: number;
  log: (line: string) => void;
}

export interface SoakReport {
  seed: number;
  minutes: number;
  instances: number;
  queueShards: number;
  kinds: FaultKind[];
  /** Whether the test jobs hedged (`SoakOptions.hedge`). */
  hedge: boolean;
  faults: Record<FaultKind, number>;
  /** What the faults aimed at a run, an instance or the lease hit, in the order they were injected. */
  targets: FaultTarget[];
  /** How each run a fault was aimed at ended (absent: it has no record, as a skipped occurrence has none). */
  targetRuns: Record<string, { state: string; endReason: string | null; finalizeError: string | null }>;
  /** Requests the proxies disturbed, by action. */
  proxy: Record<ProxyAction, number> & { forwarded: number };
  leaderChanges: number;
  /**
   * Every stop the soak made by the host's rules (`stop-rules.ts`: deploys, restarts, the
   * straggler's scale-in, bare SIGTERMs, drains), with the instance's own record of it and how its
   * process ended. The settling redeploys stop the whole cluster (SIGINT) and are not among them.
   */
  stops: HostStop[];
  /** From the first fault to the last one's end, and from then until every run had ended. */
  faultMs: number;
  settleMs: number;
  check: CheckResult;
  data: string;
  kept: boolean;
}

/** A failing item is tried five times, a second apart, so it costs seconds of a 20 s period. */
const CHAOS_RETRY = { attempts: 5, delaySeconds: 1, backoff: 1 };

/**
 * The soak's test jobs: every 20 s, known outputs, items that fail on every attempt, and (in
 * the second) items slower than a lease, so a worker outlives the leader that sent it work. The
 * third reads its schedule in a zone with daylight saving time and spreads its starts (jitter),
 * so the occurrence account checks both against the library's.
 */
export const CHAOS_JOBS: SyntheticJobSpec[] = [
  {
    name: 'chaos-sum',
    schedule: '0,20,40 * * * * *',
    items: 400,
    itemsPerMessage: 4,
    failEvery: 37,
    failureTolerance: { percent: 10 },
    timeoutSeconds: 120,
    // Its hooks answer at once, so seconds are plenty; a hung one (`hung-hook`) costs seconds too.
    hookTimeouts: { splitSeconds: 3, processSeconds: 3, finalizeSeconds: 3, graceSeconds: 1, maxSplitTimeouts: 2 },
    retry: CHAOS_RETRY,
  },
  {
    name: 'chaos-slow',
    schedule: '10,30,50 * * * * *',
    items: 60,
    itemsPerMessage: 1,
    failEvery: 11,
    slowEvery: 30,
    slowMs: 17_000,
    failureTolerance: { percent: 20 },
    timeoutSeconds: 150,
    retry: CHAOS_RETRY,
  },
  {
    name: 'chaos-zoned',
    // Seconds 0, 15, 30 and 45 of every even minute on Chatham's wall clock. Chatham is 12:45
    // ahead of UTC in winter and 13:45 in summer (daylight saving time): 45 minutes off any whole
    // hour all year, so its even minutes are odd ones in UTC and a UTC reading of the fields
    // names none of its occurrences, at any time of day. In a zone a whole number of hours off
    // (New York), a schedule that fires at every hour of the day names the same instants as in UTC; only
    // the days the clocks change could tell them apart, which a soak cannot wait for (the unit
    // table of occurrence-accounting.test.ts has them).
    schedule: '*/15 */2 * * * *',
    timeZone: 'Pacific/Chatham',
    // Each start up to 10 s past its occurrence, under the 15 s between two of them.
    jitterSeconds: 10,
    // Short runs (10 messages): two starts can come 5 s apart, and the load stays small.
    items: 40,
    itemsPerMessage: 4,
    timeoutSeconds: 60,
    retry: CHAOS_RETRY,
  },
];

/** A test job's schedule as the occurrence account reads it: the expression, its zone and its jitter. */
function accounted(job: SyntheticJobSpec): AccountedJob {
  const { name, schedule, timeZone, jitterSeconds } = syntheticJobSpecSchema.parse(job);
  return { name, schedule, timeZone, jitterSeconds };
}

/**
 * When a scheduled run of a test job was due to start (ms since the epoch): its occurrence, plus
 * its job's jitter. NaN for a manual run, whose id names no occurrence.
 */
function dueOfRun(run: string): number {
  const occurrence = new Date(run.slice(run.indexOf('/') + 1));
  if (Number.isNaN(occurrence.getTime())) return Number.NaN;
  const job = CHAOS_JOBS.find((j) => run.startsWith(`${j.name}/`));
  return job ? dueAtOf(accounted(job), occurrence) : occurrence.getTime();
}

/**
 * The longest two starts of the test jobs can be apart while one of them keeps to its schedule:
 * the least, over the jobs, of each one's longest gap between starts (its jitter included). 20 s,
 * chaos-sum's and chaos-slow's period. The frozen-timer check's period, and the longest wait for a
 * moment with no run open to redeploy at.
 */
function startPeriodMs(jobs: readonly SyntheticJobSpec[], from: Date): number {
  return Math.min(...jobs.map((job) => longestStartGapMs(accounted(job), from) ?? Number.POSITIVE_INFINITY));
}

/** The job whose hooks `hung-hook` faults hang: its runs are short, so a hung one costs little time. */
const HUNG_JOB = CHAOS_JOBS[0] as SyntheticJobSpec;
/**
 * The job a straggler is stopped in: a clean run of it sends no copy, so its hedge bound (5 % of
 * 100 messages: 5 copies) is there for the straggler's. chaos-slow's 3 go to its items slow by
 * design, whose copies are as slow, so a straggler there could find none left.
 */
const STRAGGLER_JOB = CHAOS_JOBS[0] as SyntheticJobSpec;
/**
 * The job whose slow items (17 s) a `drain-abort` fault catches being taken up: still running
 * when the host aborts them 1 to 3 s in. Every other item runs for milliseconds and would end
 * before its abort came.
 */
const DRAIN_JOB = CHAOS_JOBS[1] as SyntheticJobSpec;
/**
 * The straggler's host hides a message it runs for this long, past any pause the plan draws: a
 * paused instance's messages then stay hidden until it comes back, as under the Functions host,
 * which hides them for 10 minutes (the other instances' 10 s is the soak's, so kills end sooner).
 */
const STRAGGLER_VISIBILITY_SECONDS = 120;
/**
 * Messages the straggler takes at a time (host.json `batchSize`, taking more only when it holds
 * none): the shipped host.json's 16, what a real instance stopped mid-batch holds. A run may copy
 * at least 24 (`hedge.minCopies`), so every message it holds can be copied; a worker holding
 * more than the run's bound is past what hedging covers.
 */
const STRAGGLER_BATCH = 16;

// A message whose worker died or failed is delivered again after 1 s, not 30 s as in the app's
// host.json; five deliveries leave room for those a kill or a lost answer burns.
const CHAOS_HOST_JSON = {
  version: '2.0',
  extensions: {
    queues: {
      batchSize: 16,
      newBatchThreshold: 8,
      maxDequeueCount: 5,
      visibilityTimeout: '00:00:01',
      messageEncoding: 'none',
      maxPollingInterval: '00:00:01',
    },
  },
};
const LEASE_SECONDS = 15;
const QUEUE_SETTLE_MS = 45_000;
const LOCAL_VISIBILITY_SECONDS = 10;
const MIN_QUIET_MS = 4000;

/** Expected outputs of synthetic jobs; the soak's own jobs must also succeed, as their failures are within tolerance. */
export function chaosExpectations(
  jobs: readonly SyntheticJobSpec[] = CHAOS_JOBS,
  requireSuccess = jobs === CHAOS_JOBS,
): Map<string, Expectation> {
  return new Map(
    jobs.map((spec) => {
      if (requireSuccess) return [spec.name, jobExpectation(spec)];
      const { output, failed } = expectedSynthetic(spec);
      return [spec.name, { planned: spec.items, output, failed }];
    }),
  );
}

/**
 * A chaos soak: a persistent Azurite behind two fault proxies (blob and queue), N instance
 * processes running the test jobs, and a seeded schedule of faults. Then the faults stop, the
 * instances are redeployed with the schedules off so open runs can end, and every run is
 * checked against the invariants, with the audit trail the blob proxy took off the wire.
 */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const hub = options.hub ?? 'chaos';
  const kinds = [...(options.kinds ?? FAULT_KINDS)];
  const slowdown = options.slowdown ?? 1;
  if (!(slowdown >= 1)) throw new Error(`--slowdown must be at least 1, got ${slowdown}`);
  const patient = (ms: number) => Math.round(ms * slowdown);
  if (options.data && existsSync(options.data) && readdirSync(options.data).length > 0) {
    throw new Error(`--data ${options.data} is not empty: a soak starts from empty storage and a new audit trail`);
  }
  const data = options.data ?? mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  mkdirSync(data, { recursive: true });
  const azuriteDir = join(data, 'azurite');
  const container = hubResources(hub).container;
  const audit = new AuditTrailWriter(join(data, 'audit.ndjson'));
  writeFileSync(audit.file, '');
  // Hang orders for the test jobs' hooks (`hung-hook`): files the instances look for by name.
  const hangOrders = join(data, 'hang-orders');
  mkdirSync(hangOrders, { recursive: true });
  // While this file exists, the first worker to send an item's final failure dies (`worker-death`).
  const dieAfterSending = join(data, 'die-after-sending');
  writeFileSync(join(data, 'host.json'), JSON.stringify(CHAOS_HOST_JSON, null, 2));
  const stragglerHostJson = join(data, 'straggler-host.json');
  const { queues: hostQueues } = CHAOS_HOST_JSON.extensions;
  writeFileSync(
    stragglerHostJson,
    JSON.stringify(
      { ...CHAOS_HOST_JSON, extensions: { queues: { ...hostQueues, batchSize: STRAGGLER_BATCH, newBatchThreshold: 0 } } },
      null,
      2,
    ),
  );

  let azurite: RunningAzurite = await startAzurite({ persistTo: azuriteDir });
  const blobProxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: azurite.blobPort,
    seed: options.seed,
    captureBody: (method, url) => isAuditedWrite(method, url, container),
    onExchange: (exchange) => {
      const entry = auditEntryOf(exchange, container);
      if (entry) audit.append(entry);
    },
  });
  const queueProxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: azurite.queuePort,
    seed: options.seed + 1,
  });
  const proxies = [blobProxy, queueProxy];
  // The instances reach storage only through the proxies; the soak itself goes direct.
  const proxied = azurite.connectionString
    .replace(/BlobEndpoint=http:\/\/[^/]+/, `BlobEndpoint=http://127.0.0.1:${blobProxy.port}`)
    .replace(/QueueEndpoint=http:\/\/[^/]+/, `QueueEndpoint=http://127.0.0.1:${queueProxy.port}`);
  const hedge = options.hedge ?? true;
  let jobs: SyntheticJobSpec[] = CHAOS_JOBS.map((job) => ({ ...job, hangOrders, ...(hedge ? {} : { hedge: false as const }) }));
  /** The app's default while the faults run; off for the final redeploy (see there). */
  let restWhenIdle = true;
  const instances = new ChaosInstances(
    () => ({
      ...inheritedEnv(),
      AzureWebJobsStorage: proxied,
      BATON_HUB: hub,
      BATON_LEASE_SECONDS: String(LEASE_SECONDS),
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
      BATON_MAX_IN_FLIGHT: '256',
      BATON_QUEUE_SHARDS: String(options.queueShards ?? 1),
      BATON_MAX_ATTEMPTS: String(CHAOS_HOST_JSON.extensions.queues.maxDequeueCount),
      BATON_HOST_JSON: join(data, 'host.json'),
      // A killed or paused instance's messages come back after 10 s rather than 30 s, so the runs
      // those faults hit end sooner; renewed every 5 s, a slow item still stays hidden.
      BATON_LOCAL_VISIBILITY_SECONDS: String(LOCAL_VISIBILITY_SECONDS),
      BATON_SYNTHETIC_JOBS: JSON.stringify(jobs),
      BATON_CHAOS_DIE_AFTER_SENDING: dieAfterSending,
      // What each worker holds: the straggler is stopped, and an instance drained, as it takes up a message.
      BATON_CHAOS_REPORT_WORK: '1',
      BATON_REST_WHEN_IDLE: String(restWhenIdle),
    }),
    join(data, 'instances.log'),
  );
  const direct = () => createBlobServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
  const leaseStore = (): BlobLeaseStore =>
    new BlobLeaseStore(
      createBlobServiceClient(
        { kind: 'connectionString', connectionString: azurite.connectionString },
        { retryOptions: LEASE_RETRY_OPTIONS },
      ),
      hub,
    );
  const leaseHolder = async (): Promise<string | undefined> => {
    const lease = await leaseStore()
      .read()
      .catch(() => undefined);
    return lease?.leased ? lease.holder : undefined;
  };
  const waitForLeader = async (withinMs: number): Promise<string | undefined> => {
    const until = Date.now() + patient(withinMs);
    for (;;) {
      const holder = await leaseHolder();
      if (holder && instances.byName(holder)) return holder;
      if (Date.now() > until) return undefined;
      await sleep(250);
    }
  };

  const docs = new BlobDocumentStore(direct().getContainerClient(container));
  // Pauses and broken leases are aimed at a leader with work in hand, where they can do harm.
  const waitForOpenRun = async (withinMs: number): Promise<void> => {
    const until = Date.now() + patient(withinMs);
    while (Date.now() < until) {
      const status = await readHubStatus(docs, leaseStore()).catch(() => undefined);
      if (status?.activeRuns.length) return;
      await sleep(250);
    }
  };

  const jobStateOf = async (job: string): Promise<JobState | undefined> =>
    (
      await new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) })
        .read(jobStateKey(job))
        .catch(() => undefined)
    )?.value;

  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  const targets: FaultTarget[] = [];
  let keyedTriggers = 0;
  /** When faults that can cut any delivery short were on: kill -9, a bare SIGTERM, a drain, pause, storage restart. */
  const disturbed: Array<{ from: number; to: number }> = [];
  const disturbing = new Set<FaultKind>(['kill', 'bare-sigterm', 'drain-abort', 'pause', 'storage-restart']);
  /** Every fault injected, from its start to its end: what may explain a late or missed occurrence. */
  const faultWindows: Array<{ kind: FaultKind; from: number; to: number }> = [];
  const rng = new SeededRandom(options.seed ^ 0x5eed);
  /**
   * Orders the hook of the job's next run to hang. With overlap `skip`, an occurrence that comes
   * while a run of the job is open starts nothing, so it aims at the next one until one starts;
   * the job's state says what became of an occurrence once the leader has checked past it.
   * Every order stays: a run that starts late still meets its hang and is judged by it.
   */
  const aimHang = async (hook: HungHook, item: number | undefined): Promise<boolean> => {
    const schedule = scheduleOfJob(accounted(HUNG_JOB));
    for (let attempt = 0; attempt < 4; attempt++) {
      // One hang per run, so each is judged by its own documented end.
      let occurrence = schedule.next(new Date(Date.now() + 2000)) as Date;
      while (targets.some((t) => t.kind === 'hung-hook' && t.run === scheduledRunId(HUNG_JOB.name, occurrence)))
        occurrence = schedule.next(occurrence) as Date;
      const run = scheduledRunId(HUNG_JOB.name, occurrence);
      writeFileSync(join(hangOrders, hangOrderName(run, hook, item)), '');
      const target: FaultTarget = { kind: 'hung-hook', hook, run, ...(item === undefined ? {} : { item }), started: false };
      targets.push(target);
      instances.log(`fault: the ${hook} hook of ${run}${item === undefined ? '' : ` (item ${item})`} will hang`);
      const until = dueAtOf(accounted(HUNG_JOB), occurrence) + 60_000;
      while (Date.now() < until) {
        const state = await jobStateOf(HUNG_JOB.name);
        if (state?.active.includes(run) || state?.recent.some((e) => e.outcome === 'started' && e.runId === run)) {
          target.started = true;
          return true;
        }
        if (state?.lastChecked && Date.parse(state.lastChecked) >= occurrence.getTime()) break;
        await sleep(250);
      }
      instances.log(`  ${run} was not started`);
    }
    return false;
  };
  const aimed: Array<Promise<void>> = [];

  const runOpen = async (run: string): Promise<boolean> => {
    const record = await new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) })
      .read(runKeys.record(run))
      .catch(() => undefined);
    return record?.value.state === 'dispatching' || record?.value.state === 'running';
  };
  /**
   * Stops `instance` (SIGSTOP) as its worker takes up a work message of an open run of the
   * straggler job, due since the last fault ended, that no other fault was aimed at, and says what it holds then, once every line
   * it wrote before the stop has been read. A stop that finds it holding nothing (it finished
   * first), a message of another run, or the lease, is undone at once, and the next message waited for.
   */
  const stopHolding = async (
    instance: ChaosInstance,
    withinMs: number,
  ): Promise<{ held: HeldMessage[]; stoppedAt: number; tries: number } | undefined> => {
    const until = Date.now() + withinMs;
    let tries = 0;
    // Its makespan is judged from its creation, so it must be the straggler's alone: a run due
    // before the last fault ended may have been held up by it already (a record unavailable
    // holds up the leader's other runs too), as the clean runs it is measured by were not.
    const quietSince = Math.max(0, ...faultWindows.map((w) => w.to));
    const eligible = (run: string): boolean =>
      run.startsWith(`${STRAGGLER_JOB.name}/`) &&
      !targets.some((t) => runsAimedAt(t).includes(run)) &&
      dueOfRun(run) >= quietSince;
    while (instance.alive && Date.now() < until) {
      let stoppedAt: number | undefined;
      // Called as the line is read, so the stop lands while the handler still waits on storage.
      instance.onWork = (message, held) => {
        if (stoppedAt !== undefined || !held || !eligible(message.run)) return;
        instance.proc.kill('SIGSTOP');
        stoppedAt = Date.now();
      };
      while (stoppedAt === undefined && instance.alive && Date.now() < until) await sleep(50);
      instance.onWork = undefined;
      if (stoppedAt === undefined) return undefined;
      tries++;
      while (Date.now() - Math.max(stoppedAt, instance.lastLineAt) < 300) await sleep(50);
      const held = [...instance.held.values()];
      const open = await Promise.all(held.map((m) => runOpen(m.run)));
      if (held.length > 0 && held.every((m, i) => eligible(m.run) && open[i]) && (await leaseHolder()) !== instance.name)
        return { held, stoppedAt, tries };
      instance.proc.kill('SIGCONT');
    }
    return undefined;
  };
  /** Stops an instance the soak added, by the host's WorkerTerminate (killed 5 s after), running it first if it was stopped. */
  const scaleIn = async (instance: ChaosInstance): Promise<void> => {
    await instances.stop(instance, 'terminate');
  };
  /** Whether `message` holds a slow item of the drain job: one still running 1 to 3 s after it was taken up. */
  const runsLong = (message: HeldMessage): boolean => {
    const every = DRAIN_JOB.slowEvery ?? 0;
    if (!every || !message.run.startsWith(`${DRAIN_JOB.name}/`)) return false;
    for (let i = message.first; i < message.first + message.count; i++) if (i % every === every - 1) return true;
    return false;
  };
  /**
   * Drains the first live instance to take up a long work message of a run no other fault was
   * aimed at, as the line saying so is read: the invocation is then well within the host's 3 s,
   * and still running when it is aborted. From then on it follows each message the instance held
   * at the drain: whether its code there settled, and when another instance took it up. Resolves
   * with that, the stop under way and the watcher to remove, or undefined if no instance took up
   * such a message within `withinMs`.
   */
  const drainTakingUp = async (
    withinMs: number,
  ): Promise<
    | {
        victim: ChaosInstance;
        message: HeldMessage;
        at: number;
        fates: DrainedMessage[];
        stopping: Promise<HostStop>;
        unfollow: () => void;
      }
    | undefined
  > => {
    const key = (m: HeldMessage) => `${m.run}#${m.first}`;
    let caught: Awaited<ReturnType<typeof drainTakingUp>>;
    const follow = (victim: ChaosInstance, at: number, fates: Map<string, DrainedMessage>) => {
      return (instance: ChaosInstance, m: HeldMessage, taken: boolean): void => {
        const fate = fates.get(key(m));
        if (!fate) return;
        const now = Date.now();
        if (instance === victim && !taken) fate.settledAfterMs ??= now - at;
        if (instance === victim || !taken || fate.takenBy !== undefined || fate.settledAfterMs !== undefined) return;
        // The host lets a message go when it aborts its invocation (one taken up near the drain)
        // or when the process ends. Any other message of the same items is a copy the leader
        // hedged, or after its code here settled, its retry: not this one come back.
        const aborted = fate.heldForMs <= DRAIN_RULE.nearMs;
        if (!aborted && victim.alive) return;
        fate.takenBy = instance.name;
        fate.takenAfterMs = now - at;
        // Its code here was still running then.
        fate.ranOn = victim.alive;
      };
    };
    // A late copy or redelivery of a run that has ended is dropped at once, with nothing to
    // abort: the run must be open, or too new for the last look to know it.
    let open = new Set<string>();
    let lookedAt = 0;
    const openRun = (run: string): boolean => open.has(run) || dueOfRun(run) > lookedAt;
    const watch = (instance: ChaosInstance, message: HeldMessage, held: boolean): void => {
      if (caught || !held || !instance.alive || !runsLong(message) || !openRun(message.run)) return;
      if (targets.some((t) => runsAimedAt(t).includes(message.run))) return;
      const at = Date.now();
      const fates = new Map(
        [...instance.held.values()].map(
          (m) => [key(m), { ...m, heldForMs: at - (instance.heldSince.get(key(m)) ?? at) }] as const,
        ),
      );
      const following = follow(instance, at, fates);
      instances.workWatchers.add(following);
      caught = {
        victim: instance,
        message,
        at,
        fates: [...fates.values()],
        stopping: instances.stop(instance, 'drain'),
        unfollow: () => instances.workWatchers.delete(following),
      };
    };
    const look = async (): Promise<void> => {
      const at = Date.now();
      const status = await readHubStatus(docs, leaseStore()).catch(() => undefined);
      if (!status) return;
      open = new Set(status.activeRuns.filter((r) => r.state === 'dispatching' || r.state === 'running').map((r) => r.runId));
      lookedAt = at;
    };
    await look();
    instances.workWatchers.add(watch);
    const until = Date.now() + withinMs;
    while (!caught && Date.now() < until) {
      await sleep(250);
      if (!caught) await look();
    }
    instances.workWatchers.delete(watch);
    return caught;
  };

  /** Injects one fault: whether it did, or `later` when it counts itself once it has bitten. */
  const inject = async (step: FaultStep): Promise<boolean | 'later'> => {
    switch (step.kind) {
      case 'kill': {
        const victim = rng.pick(instances.alive);
        instances.log(`fault: kill -9 ${victim.name}`);
        victim.proc.kill('SIGKILL');
        await sleep(step.restartAfterMs);
        instances.spawn();
        return true;
      }
      case 'bare-sigterm': {
        let victim: ChaosInstance | undefined;
        if (step.target === 'leader') {
          // Aimed, as a pause is, at a leader with work in hand.
          await waitForOpenRun(10_000);
          victim = instances.byName(await waitForLeader(15_000));
        } else {
          const holder = await leaseHolder();
          const others = instances.alive.filter((i) => i.name !== holder);
          victim = others.length ? rng.pick(others) : undefined;
        }
        if (!victim) return false;
        const leader = (await leaseHolder()) === victim.name;
        instances.log(`fault: bare SIGTERM to ${victim.name}${leader ? ' (the leader)' : ''}, as a deleted container gets`);
        const at = Date.now();
        const stopping = instances.stop(victim, 'sigterm');
        await sleep(step.restartAfterMs);
        instances.spawn();
        await stopping;
        targets.push({ kind: 'bare-sigterm', instance: victim.name, leader, at });
        return true;
      }
      case 'drain-abort': {
        const caught = await drainTakingUp(patient(60_000));
        if (!caught) return false;
        const { victim, message, at, fates } = caught;
        const leader = (await leaseHolder()) === victim.name;
        instances.log(
          `fault: drain ${victim.name}${leader ? ' (the leader)' : ''} as it takes up ${message.run} items ` +
            `${message.first}..${message.first + message.count - 1}, holding ${fates.length} message(s)`,
        );
        await sleep(step.restartAfterMs);
        instances.spawn();
        await caught.stopping;
        // Each message it held comes back (an aborted one at once, one its exit cut short after
        // its visibility), unless its code there ended first.
        const settleBy = Date.now() + patient((LOCAL_VISIBILITY_SECONDS + 5) * 1000);
        while (fates.some((f) => f.takenBy === undefined && f.settledAfterMs === undefined) && Date.now() < settleBy)
          await sleep(100);
        caught.unfollow();
        const aborted = instances.warnings.filter(
          (w) => w.instance === victim.name && w.at >= at && /aborted by the host/.test(w.message),
        ).length;
        targets.push({
          kind: 'drain-abort',
          instance: victim.name,
          leader,
          at,
          // The runs it held messages of that did not simply finish there: the drain's to judge.
          runs: [
            ...new Set([
              message.run,
              ...fates.filter((f) => f.takenBy !== undefined || f.settledAfterMs === undefined).map((f) => f.run),
            ]),
          ],
          aborted,
          messages: fates,
        });
        return true;
      }
      case 'pause': {
        await waitForOpenRun(10_000);
        const leader = instances.byName(await waitForLeader(15_000));
        if (!leader) return false;
        instances.log(`fault: SIGSTOP ${leader.name} (the leader) for ${step.pauseMs} ms`);
        leader.proc.kill('SIGSTOP');
        await sleep(step.pauseMs);
        leader.proc.kill('SIGCONT');
        return true;
      }
      case 'storage-restart': {
        instances.log(`fault: storage restart, down ${step.downMs} ms`);
        await Promise.all(proxies.map((proxy) => proxy.setUpstreamDown(true)));
        await azurite.close();
        await sleep(step.downMs);
        azurite = await startAzurite({ persistTo: azuriteDir, blobPort: azurite.blobPort, queuePort: azurite.queuePort });
        await Promise.all(proxies.map((proxy) => proxy.setUpstreamDown(false)));
        return true;
      }
      case 'proxy': {
        instances.log(`fault: proxy faults for ${step.windowMs} ms`);
        for (const proxy of proxies) proxy.setProfile(step.profile);
        await sleep(step.windowMs);
        for (const proxy of proxies) proxy.setProfile(undefined);
        return true;
      }
      case 'lease-break': {
        await waitForOpenRun(10_000);
        const holder = await waitForLeader(15_000);
        const leader = instances.byName(holder);
        if (!leader) return false;
        // Right after a renewal the leader believes in its lease longest: a whole renew interval
        // in which a successor already leads. That is the window fencing has to cover.
        const since = Date.now();
        while (Date.now() - since < LEASE_SECONDS * 1000 && !((leader.lastRenewedAt ?? 0) > since)) await sleep(25);
        try {
          await direct().getContainerClient('leases').getBlobClient(hub).getBlobLeaseClient().breakLease(0);
        } catch (err) {
          if (storageErrorOf(err)?.status !== 409) throw err;
          return false; // the lease ended on its own meanwhile
        }
        instances.log(`fault: lease of ${leader.name} broken by an outside client`);
        return true;
      }
      case 'unreadable-record': {
        // A run whose items are out, so results keep coming while its record is unavailable: the
        // leader's drains then meet it among other runs' results. The most items out first.
        const candidates = async () => {
          const open = (await readHubStatus(docs, leaseStore()).catch(() => undefined))?.activeRuns ?? [];
          const out = (r: (typeof open)[number]) => r.counters.planned - r.counters.succeeded - r.counters.failed;
          // A run another fault was aimed at is left alone, so each fault's effect is its own to
          // judge: their delays add up (a poison copy waits a drain visibility into each term).
          const spared = new Set(
            targets.flatMap((t) =>
              t.kind === 'hung-hook' || t.kind === 'worker-death'
                ? [t.run]
                : t.kind === 'straggler' || t.kind === 'drain-abort'
                  ? t.runs
                  : [],
            ),
          );
          return open
            .filter((r) => (r.state === 'dispatching' || r.state === 'running') && !spared.has(r.runId))
            .sort((a, b) => out(b) - out(a));
        };
        const until = Date.now() + patient(20_000);
        let found = await candidates();
        while (found.length === 0 && Date.now() < until) {
          await sleep(100);
          found = await candidates();
        }
        const run = found[0]?.runId;
        if (run === undefined) return false;
        const key = runKeys.record(run);
        const before = blobProxy.counts.outage;
        const from = Date.now();
        instances.log(`fault: ${key} unavailable (500 InternalError) for ${step.windowMs} ms`);
        blobProxy.setOutage((_method, url) => blobKeyOf(url, container) === key);
        await sleep(step.windowMs);
        blobProxy.setOutage(undefined);
        const refused = blobProxy.counts.outage - before;
        targets.push({ kind: 'unreadable-record', run, from, to: Date.now(), refused, setAside: 0, stepErrors: 0 });
        // Injected even if nothing asked for the record meanwhile: trying again would double the outage on one run.
        return true;
      }
      case 'worker-death': {
        const dead = new Set(instances.all.filter((i) => i.death));
        const died = () => instances.all.find((i) => i.death && !dead.has(i));
        writeFileSync(dieAfterSending, '');
        instances.log("fault: the first worker to send an item's final failure will die before its message is deleted");
        const until = Date.now() + patient(step.withinMs);
        while (!died() && Date.now() < until) await sleep(100);
        if (!died()) {
          try {
            unlinkSync(dieAfterSending);
            return false;
          } catch {
            // An instance claimed the trigger meanwhile: its death is on the way.
            const soon = Date.now() + 10_000;
            while (!died() && Date.now() < soon) await sleep(100);
          }
        }
        const victim = died();
        if (!victim?.death) return false;
        targets.push({ kind: 'worker-death', ...victim.death });
        await victim.exited;
        await sleep(step.restartAfterMs);
        instances.spawn();
        return true;
      }
      case 'hung-hook': {
        let item: number | undefined;
        const failEvery = HUNG_JOB.failEvery ?? 0;
        // An item that would succeed, so that it failing is the hang's doing alone.
        if (step.hook === 'process')
          do item = rng.int(0, HUNG_JOB.items - 1);
          while (failEvery && item % failEvery === failEvery - 1);
        // The hook hangs when the run gets there, seconds on; the next faults go on meanwhile.
        aimed.push(
          aimHang(step.hook, item).then((started) => {
            if (started) faults['hung-hook']++;
          }),
        );
        return 'later';
      }
      case 'lease-delete': {
        await waitForOpenRun(10_000);
        const holder = await waitForLeader(15_000);
        if (!holder || !instances.byName(holder)) return false;
        const leases = direct().getContainerClient('leases');
        // Before the call: a new term can take the restarted lease as soon as storage has deleted it.
        const at = Date.now();
        try {
          if (step.target === 'container') await leases.delete();
          else {
            const blob = leases.getBlobClient(hub);
            // A leased blob can only be deleted by its holder; an operator breaks the lease first.
            await blob.getBlobLeaseClient().breakLease(0);
            await blob.delete();
          }
        } catch (err) {
          // Gone already, or leased again between the break and the delete: nothing was deleted.
          const status = storageErrorOf(err)?.status;
          if (status === 404 || status === 409 || status === 412) return false;
          throw err;
        }
        instances.log(`fault: the lease ${step.target} deleted under ${holder} by an outside client`);
        targets.push({ kind: 'lease-delete', target: step.target, holder, at });
        return true;
      }
      case 'keyed-trigger': {
        // Each client its own connection, as separate callers would be; then each retries once.
        const key = `soak-${options.seed}-${++keyedTriggers}`;
        const clients = Array.from({ length: step.clients }, () => new BlobDocumentStore(direct().getContainerClient(container)));
        const job = HUNG_JOB.name;
        const answered = await Promise.all(clients.map((client) => requestRun(client, job, { key })));
        await sleep(1000);
        answered.push(...(await Promise.all(clients.map((client) => requestRun(client, job, { key })))));
        const runs = [...new Set(answered)];
        instances.log(
          `fault: ${answered.length} triggers of ${job} with key ${key} from ${step.clients} clients named ${runs.join(', ')}`,
        );
        targets.push({ kind: 'keyed-trigger', key, clients: step.clients, requests: answered.length, runs });
        return true;
      }
      case 'rolling-deploy': {
        const from = instances.version;
        const to = `${Number(from.split('.')[0]) + 1}.0.0`;
        instances.version = to;
        instances.log(`fault: rolling deploy of ${to} over ${from}, one instance at a time`);
        let startedAt = Date.now();
        let takeoverAt: number | null = null;
        await instances.replaceAll(async (fresh) => {
          startedAt = fresh.startedAt ?? Date.now();
          // The old ones stay until the new version leads (or clearly will not): a deploy that
          // stopped the old leader first would measure a failover, not the handover.
          const led = () => instances.terms.find((t) => t.at >= startedAt && t.version === to);
          const until = Date.now() + patient(30_000);
          while (!led() && Date.now() < until) await sleep(50);
          takeoverAt = led()?.at ?? null;
        });
        targets.push({ kind: 'rolling-deploy', version: to, from, startedAt, takeoverAt });
        return true;
      }
      case 'straggler': {
        // One more instance, as a scale-out brings, so the cluster keeps its N to do the rest.
        const straggler = instances.spawn({
          BATON_HOST_JSON: stragglerHostJson,
          BATON_LOCAL_VISIBILITY_SECONDS: String(STRAGGLER_VISIBILITY_SECONDS),
          BATON_CHAOS_REPORT_WORK: '1',
        });
        // A run of the job starts every 20 s; one may be skipped for an overlap.
        const caught = await stopHolding(straggler, patient(60_000));
        if (!caught) {
          await scaleIn(straggler);
          return false;
        }
        const runs = [...new Set(caught.held.map((m) => m.run))];
        const held = caught.held.map((m) => `${m.run} items ${m.first}..${m.first + m.count - 1}`).join(', ');
        const before = caught.tries > 1 ? ` (after ${caught.tries - 1} stop(s) undone at once)` : '';
        instances.log(
          `fault: SIGSTOP ${straggler.name} (a straggler, not the leader) for ${step.pauseMs} ms, holding ${held}${before}`,
        );
        await sleep(Math.max(0, caught.stoppedAt + step.pauseMs - Date.now()));
        straggler.proc.kill('SIGCONT');
        const resumedAt = Date.now();
        targets.push({
          kind: 'straggler',
          instance: straggler.name,
          runs,
          held: caught.held,
          stoppedAt: caught.stoppedAt,
          resumedAt,
        });
        instances.log(`fault: SIGCONT ${straggler.name}; then the host's WorkerTerminate, as for a restart`);
        await scaleIn(straggler);
        return true;
      }
      case 'frozen-timer': {
        instances.frozenTimers = true;
        instances.log(`fault: every instance replaced by one with its timers frozen, for ${step.windowMs} ms`);
        await instances.replaceAll();
        const from = Date.now();
        await sleep(step.windowMs);
        const to = Date.now();
        instances.frozenTimers = false;
        instances.log('fault: timers back: every instance replaced by one with its timers running');
        await instances.replaceAll();
        targets.push({ kind: 'frozen-timer', from, to });
        return true;
      }
    }
  };

  const report = async (): Promise<SoakReport> => {
    const steps = planFaults({
      seed: options.seed,
      durationMs: options.minutes * 60_000,
      kinds,
      leaseSeconds: LEASE_SECONDS,
      ...(options.minGapSeconds !== undefined ? { minGapMs: options.minGapSeconds * 1000 } : {}),
    });
    // The app's own sample job runs hourly beside the test jobs; give it an (empty) container to audit.
    await direct().getContainerClient('audit-demo').createIfNotExists();
    for (let i = 0; i < options.instances; i++) instances.spawn();
    if (!(await waitForLeader(30_000)))
      throw new Error(`no instance took the lease within ${Math.round(patient(30_000) / 1000)} s of starting`);
    const start = Date.now();
    options.log(
      `soak: ${options.instances} instances, ${steps.length} faults planned over ${options.minutes} min, seed ${options.seed}`,
    );
    let lastEnd = start;
    for (const step of steps) {
      // Planned times hold unless a fault overran (it waits for a leader or an open run); the
      // next one still gets a quiet gap, so runs make progress between faults.
      const wait = Math.max(start + step.atMs, lastEnd + MIN_QUIET_MS) - Date.now();
      if (wait > 0) await sleep(wait);
      const from = Date.now();
      let injected = await inject(step);
      // A fault that found nothing to act on (no leader yet) is tried once more.
      if (!injected) injected = await inject(step);
      if (injected === true) faults[step.kind]++;
      lastEnd = Date.now();
      if (injected && disturbing.has(step.kind)) disturbed.push({ from, to: lastEnd });
      if (injected) faultWindows.push({ kind: step.kind, from, to: lastEnd });
      const note = injected === 'later' ? ' (aimed)' : injected ? '' : ' (not injected)';
      options.log(`  ${((lastEnd - start) / 1000).toFixed(0).padStart(4)} s  ${step.kind}${note}`);
    }
    const faultsStoppedAt = Date.now();
    await Promise.all(aimed);
    const longest = (options.settleSeconds ?? Math.max(...CHAOS_JOBS.map((j) => j.timeoutSeconds ?? 0)) + 20) * 1000;
    const allEnded = async (createdBy = Infinity): Promise<boolean> => {
      const runs = await everyRun(docs).catch(() => undefined);
      return runs !== undefined && runs.filter((r) => Date.parse(r.createdAt) <= createdBy).every((r) => isTerminal(r.state));
    };
    // A run its job's state counts as started may have no record yet: a redeploy that stops its
    // leader between the two writes leaves it to the next leader to create. Until then no list of
    // records shows it, and the queues would be judged before its late duplicates came and went.
    const startedEnded = async (): Promise<boolean> => {
      const runs = await everyRun(docs).catch(() => undefined);
      if (!runs) return false;
      const ended = new Set(runs.filter((r) => isTerminal(r.state)).map((r) => r.runId));
      const states = await Promise.all(CHAOS_JOBS.map((job) => jobStateOf(job.name)));
      return states.every((state) => state !== undefined && state.active.every((run) => ended.has(run)));
    };
    // The occurrence account judges every occurrence due before the faults stopped, and one due
    // under the last fault (a leader killed just before it) is decided only once a successor
    // leads, a lease later: the schedules stay on until each job's state is checked past it.
    // The occurrence (in the job's zone) of the last one due, with its jitter, by then: the state
    // is checked past an occurrence once the leader has decided it, which it does once it is due.
    const lastDue = (job: SyntheticJobSpec, by: number): number =>
      occurrencesDue(accounted(job), start, by).at(-1)?.occurrence.getTime() ?? 0;
    const checkedPast = async (at: number): Promise<boolean> =>
      (
        await Promise.all(
          CHAOS_JOBS.map(async (job) => {
            const checked = (await jobStateOf(job.name))?.lastChecked;
            return checked != null && Date.parse(checked) >= lastDue(job, at);
          }),
        )
      ).every(Boolean);
    const queues = createQueueServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
    // What is left on the queues: visible messages other than ticks (peeked), and hidden ones
    // (in a worker's hands, or the live leader's beacon, which stays hidden while it leads).
    // `pastPeek`: messages beyond what a peek shows, counted as visible work, among which a
    // hidden one cannot be told apart. Ticks travel on shard 0's work queue alone, so a hidden
    // message anywhere else (`hiddenElsewhere`: a result a drain holds, say) is never a tick.
    const tickQueue = hubResources(hub).workQueue;
    type Queued = { visible: number; hidden: number; hiddenElsewhere: number; pastPeek: number };
    const queued = async (): Promise<Queued> => {
      const counts = await Promise.all(
        (await messageQueuesOf(queues, hub)).map(async (q): Promise<Queued> => {
          const client = queues.getQueueClient(q);
          const count = await client.getProperties().then(
            (p) => p.approximateMessagesCount ?? 0,
            () => 0,
          );
          if (count === 0) return { visible: 0, hidden: 0, hiddenElsewhere: 0, pastPeek: 0 };
          const peeked = await client.peekMessages({ numberOfMessages: 32 }).then(
            (r) => r.peekedMessageItems,
            () => [],
          );
          const work = peeked.filter((m) => !isTickMessage(m.messageText)).length;
          // Past 32 visible, the rest count as work: the wait goes on either way.
          const pastPeek = Math.max(0, count - 32);
          const hidden = Math.max(0, count - peeked.length - pastPeek);
          return { visible: work + pastPeek, hidden, hiddenElsewhere: q === tickQueue ? 0 : hidden, pastPeek };
        }),
      );
      return counts.reduce(
        (a, b) => ({
          visible: a.visible + b.visible,
          hidden: a.hidden + b.hidden,
          hiddenElsewhere: a.hiddenElsewhere + b.hiddenElsewhere,
          pastPeek: a.pastPeek + b.pastPeek,
        }),
        { visible: 0, hidden: 0, hiddenElsewhere: 0, pastPeek: 0 },
      );
    };
    // The processes that lived through the faults must end the runs the faults hit, on their own.
    if (longest > 0) options.log('soak: faults stopped; waiting for the runs they hit to end');
    else options.log('soak: faults stopped; no settling (--settle-seconds 0): the check judges what is there now');
    while (Date.now() < faultsStoppedAt + longest && !((await allEnded(faultsStoppedAt)) && (await checkedPast(faultsStoppedAt))))
      await sleep(1000);
    const settledAt = Date.now();
    // Without settling there is nothing to redeploy for: no run would be given time to end.
    if (longest > 0) {
      // The deploy comes when no run is open, if one comes within a schedule period. A run open
      // across it has its slow items cut short and run again by the new instances, whose leader
      // hedges them, and the copies' late results wait for the idle drain, half a minute after the
      // run ends. Quiet, the old instances finish what they hold as they stop, and the new
      // leader's first drain sweeps it. Nothing judged depends on the moment: clean runs are
      // judged up to `settledAt`, occurrences up to the faults' end.
      const quietBy = Date.now() + Math.min(patient(startPeriodMs(CHAOS_JOBS, new Date(start))), longest);
      const noneActive = async (): Promise<boolean> =>
        (await Promise.all(CHAOS_JOBS.map((job) => jobStateOf(job.name)))).every((state) => state?.active.length === 0);
      let quiet = false;
      while (!(quiet = (await noneActive()) && (await allEnded()) && (await startedEnded())) && Date.now() < quietBy)
        await sleep(250);
      // Then a deploy with the schedules off, so the runs started since can end and none begins.
      options.log(
        `soak: redeploying with the schedules off ${quiet ? 'with no run open' : 'so the runs started since can end'} ` +
          `(${((Date.now() - settledAt) / 1000).toFixed(0)} s after the runs the faults hit ended)`,
      );
      await instances.stopAll();
      // Hang orders stay: a hung run still open must keep meeting its hang, as its documented end needs.
      jobs = jobs.map((job) => ({ ...job, schedule: '0 0 0 1 1 *' }));
      // With nothing due, a resting leader would sweep the late duplicates of ended runs only when
      // its rest ends, minutes on: the queues are checked drained, so this leader stands.
      restWhenIdle = false;
      for (let i = 0; i < options.instances; i++) instances.spawn();
      const redeployedAt = Date.now();
      while (Date.now() < redeployedAt + longest && !((await allEnded()) && (await startedEnded()))) await sleep(1000);
      // Results of ended runs are swept by the leader's idle drain; give it time to come round.
      // Hidden messages allowed for: the leader's beacon, and each tick a live instance's handler
      // holds (a term a tick woke keeps it hidden until the term ends). A hidden work message looks
      // the same from here, so the instances say how many ticks they hold; any more is work. The
      // count comes over a pipe and the queue's over HTTP, so the two must agree twice running.
      const drainFrom = Date.now();
      const settled = (q: Queued) => q.visible === 0 && q.hiddenElsewhere === 0 && q.hidden <= 1 + instances.ticksHeld;
      let draining = await queued();
      let agreed = settled(draining) ? 1 : 0;
      while (agreed < 2 && Date.now() - drainFrom < Math.min(QUEUE_SETTLE_MS, longest)) {
        await sleep(1000);
        draining = await queued();
        agreed = settled(draining) ? agreed + 1 : 0;
      }
      options.log(
        `soak: queues after ${((Date.now() - drainFrom) / 1000).toFixed(0)} s of draining: ${draining.visible} visible, ` +
          `${draining.hidden} hidden, ${draining.hiddenElsewhere} of them off the tick queue ` +
          `(allowed: the beacon and ${instances.ticksHeld} tick(s) that woke a term, on the tick queue)`,
      );
    }
    // Unsettled, the check looks at nothing the instances would finish on a graceful stop.
    await instances.stopAll(longest > 0 ? undefined : 2000);
    // Messages a stopped instance held stay hidden until their visibility timeout ends: wait for
    // them to come back, that long at most. The last leader's beacon surfaced when it released:
    // visible, and a tick, so it keeps nobody waiting.
    const surfaceBy = Date.now() + Math.min((LOCAL_VISIBILITY_SECONDS + 1) * 1000, longest);
    for (;;) {
      const left = await queued();
      if ((left.hidden === 0 && left.pastPeek === 0) || Date.now() >= surfaceBy) break;
      await sleep(250);
    }
    const snapshot = await readHubSnapshot(docs, queues, hub);
    for (const target of targets) {
      if (target.kind !== 'unreadable-record') continue;
      // How the leader met the record unavailable: its drains set the run's messages aside, or a
      // step of the run failed. The SDK's retries of one call outlast the window by up to 16 s.
      const met = instances.warnings.filter(
        (w) => w.at >= target.from && w.at <= target.to + 20_000 && w.message.includes(target.run),
      );
      target.setAside = met.filter((w) => /for a later pass/.test(w.message)).length;
      target.stepErrors = met.filter((w) => /failed, will retry/.test(w.message)).length;
    }
    const check = await checkInvariants({
      ...snapshot,
      expectations: chaosExpectations(),
      runExpectations: faultExpectations(
        CHAOS_JOBS,
        targets,
        new Map(snapshot.runs.map(({ record }) => [record.runId, record])),
        disturbed,
      ),
      terms: instances.terms,
      leaseDeletions: targets.flatMap((t) => (t.kind === 'lease-delete' ? [t.at] : [])),
      keyedTriggers: targets.flatMap((t) => (t.kind === 'keyed-trigger' ? [{ key: t.key, runs: t.runs }] : [])),
      deploys: targets.flatMap((t) =>
        t.kind === 'rolling-deploy' ? [{ version: t.version, startedAt: t.startedAt, takeoverAt: t.takeoverAt }] : [],
      ),
      deployTakeoverMs: patient(DEPLOY_TAKEOVER_MS),
      occurrences: {
        jobs: CHAOS_JOBS.map(accounted),
        from: start,
        to: faultsStoppedAt,
        faults: faultWindows,
        // The SIGKILL bound: a successor leads within the lease and a tick or two of its expiry.
        boundMs: patient((LEASE_SECONDS + 2) * 1000),
        recent: new Map(
          await Promise.all(CHAOS_JOBS.map(async (job) => [job.name, (await jobStateOf(job.name))?.recent ?? []] as const)),
        ),
      },
      frozenTimers: {
        windows: targets.flatMap((t) => (t.kind === 'frozen-timer' ? [{ from: t.from, to: t.to }] : [])),
        periodMs: startPeriodMs(CHAOS_JOBS, new Date(start)),
      },
      stragglers: {
        hits: targets.flatMap((t) =>
          t.kind === 'straggler' ? [{ instance: t.instance, runs: t.runs, stoppedAt: t.stoppedAt, resumedAt: t.resumedAt }] : [],
        ),
        // Clean runs ended before the settling redeploy, which stops every instance.
        from: start,
        to: settledAt,
        faults: faultWindows,
        aimed: new Set(targets.flatMap(runsAimedAt)),
        hedgeWaitMs: new Map(jobs.map((job) => [job.name, hedgeWaitMs(job)])),
      },
      audit: readAuditTrail(audit.file),
      faultsStoppedAt,
    });
    return {
      seed: options.seed,
      minutes: options.minutes,
      instances: options.instances,
      queueShards: options.queueShards ?? 1,
      kinds,
      hedge,
      faults,
      targets,
      targetRuns: Object.fromEntries(
        snapshot.runs
          .filter((r) =>
            targets.some((t) => ('run' in t && t.run === r.record.runId) || ('runs' in t && t.runs.includes(r.record.runId))),
          )
          .map(({ record }) => [
            record.runId,
            { state: record.state, endReason: record.endReason, finalizeError: record.finalizeError },
          ]),
      ),
      proxy: { ...sumCounts(proxies), forwarded: proxies.reduce((n, p) => n + p.forwarded, 0) },
      leaderChanges: instances.leaderChanges,
      stops: instances.stopOutcomes(),
      faultMs: faultsStoppedAt - start,
      settleMs: settledAt - faultsStoppedAt,
      check,
      data,
      kept: true,
    };
  };

  // If this process dies, no instance may outlive it (a SIGSTOPped one would never see its stdin close).
  const killChildren = (): void => instances.killAllNow();
  process.on('exit', killChildren);
  let result: SoakReport | undefined;
  try {
    result = await report();
    result.kept = Boolean(options.keep) || options.data !== undefined || result.check.violations.length > 0;
    writeFileSync(join(data, 'report.json'), `${JSON.stringify(result, null, 2)}\n`);
    return result;
  } finally {
    await instances.stopAll(2000);
    process.off('exit', killChildren);
    for (const proxy of proxies) await proxy.close();
    await azurite.close();
    // Kept when asked, when something was found, or when the soak itself failed.
    if (result && !result.kept) rmSync(data, { recursive: true, force: true });
  }
}

/**
 * The environment for instances: the soak sets every app setting itself, so none is inherited (a
 * lease container or hub left in the shell would point them where the soak does not look). The
 * test-only fencing switch passes through, as the broken-build test needs it to, and crash
 * takeover's setting, which that test turns off.
 */
function inheritedEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^(BATON_|AzureWebJobs)/i.test(key)) env[key] = value;
  for (const key of ['BATON_UNSAFE_DISABLE_FENCING', 'BATON_TAKEOVER_MS']) if (process.env[key]) env[key] = process.env[key];
  return env;
}

/** The runs a fault was aimed at or hit, as its target names them. */
function runsAimedAt(target: FaultTarget): string[] {
  if ('run' in target) return [target.run];
  if ('runs' in target) return target.runs;
  return [];
}

/**
 * How long a straggling message of `job` waits before its leader sends a copy: the job's hedge
 * floor, or while too few messages have reported a duration the longest one item may take
 * (process bound and grace), whichever is longer; 0 when the job does not hedge.
 */
function hedgeWaitMs(job: SyntheticJobSpec): number {
  const { hedge, hookTimeouts } = createSyntheticJob(job);
  if (!hedge) return 0;
  return Math.max(hedge.minWaitSeconds, hookTimeouts.processSeconds + hookTimeouts.graceSeconds) * 1000;
}

function sumCounts(proxies: readonly FaultProxy[]): Record<ProxyAction, number> {
  const out: Record<ProxyAction, number> = { latency: 0, unavailable: 0, resetBefore: 0, resetAfter: 0, refused: 0, outage: 0 };
  for (const proxy of proxies) for (const key of Object.keys(out) as ProxyAction[]) out[key] += proxy.counts[key];
  return out;
}

/** Every run record in the hub (the soak looks at all of them, not a page). */
async function everyRun(docs: DocumentStore): Promise<RunRecord[]> {
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const runs: RunRecord[] = [];
  for await (const key of docs.list('runs/')) {
    if (!key.endsWith('/run.json')) continue;
    const doc = await records.read(key);
    if (doc) runs.push(doc.value);
  }
  return runs;
}
