import dc from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { BlobServiceClient } from '@azure/storage-blob';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { jobStateKey, type JobState } from '../../src/hub/job-state';
import { firstItemLagMs, isTerminal, startLagMs } from '../../src/hub/run-record';
import { readRunDetails } from '../../src/hub/status';
import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { storageOperationName, type StorageService } from '../../src/storage/request-counter';
import { jitterMs } from '../../src/schedule/jitter';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { BenchCluster } from '../lib/bench-cluster';
import { lagStats, percentile, printableGoalRatio, tickGrid, type LagStats } from '../lib/failover-trials';
import { sideBySide } from '../lib/side-by-side';
import { inexactness } from '../lib/synthetic-runs';
import { formatLine, report, type BenchOptions, type BenchResult, type Goal } from '../lib/report';

/**
 * herd: a thundering herd of scheduled runs, and what jitter does to it. Two hundred synthetic
 * jobs share one schedule, so at each occurrence 200 runs fall due in the same second. Two
 * scenarios, each on a fresh local cluster of three real instance processes ticking every second
 * (the app's defaults: an idle leader rests the lease between occurrences):
 * - herd: every minute, no jitter: all 200 runs are due at the occurrence's instant; two
 *   occurrences (`BENCH_HERD_OCCURRENCES`), the second after the leader has rested the lease;
 * - jittered: every 5 minutes, `jitterSeconds` 240: each occurrence's start is moved by a
 *   fraction of 240 s drawn from a hash of the job and the occurrence (`src/schedule/jitter.ts`),
 *   so the 200 starts spread over 4 minutes; one occurrence.
 * The first measured occurrence is due once the cluster is up and its leader has written every
 * job's state. Per scenario:
 * - peak storage requests per second: every request Azurite serves to the cluster (the instances'
 *   own and their local host's queue polling), timestamped as it arrives, in this process, and the
 *   most of them in any one second (a sliding 1 s window), from 3 s before the occurrence until
 *   a second after its last run has ended; the most in one whole second of the clock is beside it;
 * - start lag (`startLagMs`: run record created, by storage's clock, minus when it was due: the
 *   occurrence, or with jitter the jittered start, `dueAt`), p50, p99 and max; and first-item lag;
 * - occurrences without a run, and whether each run ended with its exact output.
 *
 * The headline is the jittered peak against the herd's: the goal is a fall of at least 5×
 * (ratio ≤ 0.2). The start-lag goal is absolute (p99 ≤ 250 ms with jitter, every run created),
 * written as a ratio to a floor measured in the same run: a plain scheduler in this process,
 * during the jittered windows: a timer aimed at each of the 200 jittered starts, then one
 * conditional create (`If-None-Match: *`) of a blob with the plain SDK on the same Azurite; the
 * floor is when storage answered that create, after the due time (p99), and when the timer ran
 * (the instant a record's `createdAt` would be stamped) is kept beside it. Its requests are told
 * apart by their user agent and left out of the counts.
 */
export const name = 'herd';

const INSTANCES = 3;
const JOBS = 200;
/**
 * The jittered jobs run every 5 minutes, spread over 4 of them: how an app with hundreds of jobs
 * due at one time spreads them (a minute's schedule leaves under a minute to spread over, and a
 * herd takes this cluster 10 to 15 s to work off, so the peak could fall only a few times).
 */
const JITTER_SECONDS = 240;
const JITTER_PERIOD_MINUTES = 5;
const OCCURRENCES = Number(process.env.BENCH_HERD_OCCURRENCES ?? 2);
/** A smoke run: two instances, 20 jobs, 5 s of jitter, one occurrence, both clusters side by side. */
const SMOKE_INSTANCES = 2;
const SMOKE_JOBS = 20;
const SMOKE_JITTER_SECONDS = 5;
const TICK = DEFAULT_CLUSTER.coordinatorSchedule;
const TICK_MS = tickGrid(TICK).periodMs;
const PEAK_FALL = 5;
const LAG_LIMIT_MS = 250;
/** The window of an occurrence opens this long before it: a resting leader comes back up to 1.5 s ahead. */
const BEFORE_MS = 3000;
/** And closes this long after its last run ended. */
const AFTER_MS = 1000;
/** How long after its (jittered) start a run may still be created, and then end. */
const CREATE_WITHIN_MS = 60_000;
const END_WITHIN_MS = 120_000;
/**
 * How long after the clusters start their schedule's first occurrence falls. An instance needs a
 * few seconds to start (here defining 200 jobs with jitter takes seconds: see the notes), and the
 * leader's first turn writes every job's state; an occurrence due before that is passed over for
 * the next one, a minute later.
 */
const LEAD_MS = { herd: 15_000, jittered: 35_000 };
const SMOKE_LEAD_MS = 10_000;
/** The first measured occurrence is due at least this long after every job's state was written. */
const SETTLE_MS = 1000;
const FLOOR_USER_AGENT = 'baton-bench-herd-floor';
const VERBOSE = process.env.BENCH_VERBOSE === '1';

type ScenarioName = 'herd' | 'jittered';

interface Scenario {
  name: ScenarioName;
  what: string;
  jitterSeconds: number;
  /** Minutes between occurrences: the jitter must stay under the period. */
  periodMinutes: number;
  /** Occurrences measured. */
  occurrences: number;
}

interface OccurrenceResult {
  occurrence: string;
  /** Whether a leader rested the lease before it (the term that starts its runs began after it rested). */
  afterRest: boolean;
  windowMs: number;
  due: number;
  created: number;
  notCreated: { skipped: number; missed: number; unrecorded: number };
  runs: { exact: number; inexact: number; unended: number };
  inexact: { runId: string; reasons: string[] }[];
  /** Runs whose record says another due time than the job's jitter gives (should be none). */
  dueAtMismatches: number;
  startLagMs: LagStats;
  firstItemLagMs: LagStats;
  /** Every request Azurite served to the cluster in the window. */
  requests: number;
  /** The most in any 1 s (sliding window), and when that second began, ms after the occurrence. */
  peakPerSecond: number;
  peakAtMs: number;
  /** The most in one whole second of the clock. */
  peakPerClockSecond: number;
  /** The requests of the peak second by operation, and of the whole window. */
  peakOperations: Record<string, number>;
  operations: Record<string, number>;
  /**
   * Requests per second with no run under way: the median of the whole seconds in the 10 s before
   * the window (after every job's state was written).
   */
  baselinePerSecond: number;
  /** Requests in each whole second of the window, from the one the window opens in. */
  perSecond: number[];
  /** When the last run was created and the last ended, ms after the occurrence. */
  lastCreatedMs: number | null;
  lastEndedMs: number | null;
  leaderChanges: number;
  /** When each term began (an `acquired` event) from 10 s before the window to its end, ms after the occurrence. */
  termsBeganAtMs: number[];
  takeovers: number;
  /** Requests in the window beyond the baseline, per run created. */
  requestsPerRun: number;
}

interface ScenarioResult {
  name: ScenarioName;
  what: string;
  jitterSeconds: number;
  schedule: string;
  /** From the instances' spawn until the first leader had written every job's state. */
  startupMs: number;
  occurrences: OccurrenceResult[];
  /** Over every measured occurrence. */
  due: number;
  created: number;
  notCreated: number;
  runs: { exact: number; inexact: number; unended: number };
  startLagMs: LagStats;
  firstItemLagMs: LagStats;
  peakPerSecond: number;
  peakPerClockSecond: number;
}

/** One run, for the samples: when it was due (ms after its occurrence) and its lags. */
interface RunSample {
  job: string;
  dueMs: number;
  startLagMs: number | null;
  firstItemLagMs: number | null;
}

interface FloorSample {
  /** The timer's lateness: when the plain scheduler would stamp `createdAt`, minus the due time. */
  timerMs: number;
  /** The conditional create's answer, minus the due time. */
  createdMs: number;
}

/**
 * Every HTTP request the Azurite servers in this process receive on `ports`, timestamped as it
 * arrives (Node's `http.server.request.start` diagnostics channel: no proxy, no extra hop). The
 * plain floor's requests, told apart by their user agent, are left out.
 */
class ServedRequests {
  readonly at: number[] = [];
  readonly operations: string[] = [];
  /** The jobs whose state (`jobs/<job>.json`) has been written. */
  readonly jobStates = new Set<string>();
  private readonly listener = (message: unknown): void => {
    const { request, socket } = message as { request: IncomingMessage; socket: Socket };
    const service = this.ports.get(socket.localPort ?? -1);
    if (!service) return;
    if (request.headers['user-agent']?.startsWith(FLOOR_USER_AGENT)) return;
    this.at.push(Date.now());
    const header = (name: string): string | undefined => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    this.operations.push(storageOperationName(service, request.method ?? 'GET', `http://127.0.0.1${request.url ?? '/'}`, header));
    const jobState = request.method === 'PUT' ? /^\/[^/]+\/[^/]+\/jobs\/([^/?]+)\.json(?:\?|$)/.exec(request.url ?? '') : null;
    if (jobState) this.jobStates.add(decodeURIComponent(jobState[1]!));
  };

  constructor(private readonly ports: ReadonlyMap<number, StorageService>) {
    dc.subscribe('http.server.request.start', this.listener);
  }

  close(): void {
    dc.unsubscribe('http.server.request.start', this.listener);
  }

  /** The timestamps in [from, to), in order (they arrive in order). */
  between(from: number, to: number): number[] {
    return this.at.filter((t) => t >= from && t < to);
  }

  /** The requests in [from, to) by operation, most first. */
  operationsBetween(from: number, to: number): Record<string, number> {
    const counts = new Map<string, number>();
    for (let i = 0; i < this.at.length; i++) {
      const t = this.at[i]!;
      if (t >= from && t < to) counts.set(this.operations[i]!, (counts.get(this.operations[i]!) ?? 0) + 1);
    }
    return Object.fromEntries([...counts.entries()].sort(([a, x], [b, y]) => y - x || a.localeCompare(b)));
  }
}

/** The most timestamps in any half-open window of `widthMs`, and where it begins. */
function slidingPeak(times: readonly number[], widthMs = 1000): { count: number; from: number } {
  let best = { count: 0, from: Number.NaN };
  let j = 0;
  for (let i = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= widthMs) j++;
    if (i - j + 1 > best.count) best = { count: i - j + 1, from: times[j]! };
  }
  return best;
}

/** Requests in each whole second from the one `from` is in to the one before `to`. */
function perClockSecond(times: readonly number[], from: number, to: number): number[] {
  const first = Math.floor(from / 1000);
  const counts = new Array<number>(Math.max(0, Math.ceil(to / 1000) - first)).fill(0);
  for (const t of times) {
    const k = Math.floor(t / 1000) - first;
    if (k >= 0 && k < counts.length) counts[k]!++;
  }
  return counts;
}

/**
 * The runs each instance's log says were created and ended (`run <id> created`, `run <id>
 * succeeded: …`), read incrementally: waiting on them costs no storage request.
 */
class RunLog {
  readonly created = new Map<string, number>();
  readonly ended = new Map<string, number>();
  private readonly cursors = new Map<object, number>();

  constructor(private readonly cluster: BenchCluster) {}

  scan(): this {
    for (const instance of this.cluster.instances) {
      const events = instance.events;
      for (let i = this.cursors.get(instance) ?? 0; i < events.length; i++) {
        const e = events[i]!;
        if (e.kind !== 'log') continue;
        const created = /^run (\S+) (?:created \(epoch|was recorded but never created)/.exec(e.message);
        if (created && !this.created.has(created[1]!)) this.created.set(created[1]!, e.at);
        const ended = /^run (\S+) (succeeded|failed|cancelled|timed-out): /.exec(e.message);
        if (ended && !this.ended.has(ended[1]!)) this.ended.set(ended[1]!, e.at);
      }
      this.cursors.set(instance, events.length);
    }
    return this;
  }
}

/** Waits on the cluster's events until `check` holds or `deadline` (ms since epoch) passes; whether it held. */
async function waitUntil(cluster: BenchCluster, check: () => boolean, deadline: number, what: string): Promise<boolean> {
  try {
    await cluster.waitFor(() => (check() ? true : undefined), Math.max(1, deadline - Date.now()), what);
    return true;
  } catch {
    return false;
  }
}

function jobSpecs(count: number, schedule: string, jitterSeconds: number): SyntheticJobSpec[] {
  return Array.from({ length: count }, (_, k) => ({
    name: `herd-${String(k).padStart(3, '0')}`,
    schedule,
    items: 1,
    ...(jitterSeconds > 0 ? { jitterSeconds } : {}),
  }));
}

const dueOf = (job: string, occurrence: number, jitterSeconds: number): number =>
  occurrence + jitterMs(job, new Date(occurrence), jitterSeconds);

/** Runs `task` over `items`, `concurrency` at a time. */
async function eachLimited<T>(items: readonly T[], concurrency: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await task(items[next++]!);
    }),
  );
}

/**
 * The plain scheduler, for one occurrence: a timer aimed at each job's jittered start, then a
 * conditional create of one blob with the plain SDK.
 */
async function plainScheduler(
  connectionString: string,
  jobs: readonly SyntheticJobSpec[],
  occurrence: number,
  jitterSeconds: number,
): Promise<FloorSample[]> {
  const container = BlobServiceClient.fromConnectionString(connectionString, {
    userAgentOptions: { userAgentPrefix: FLOOR_USER_AGENT },
  }).getContainerClient('herdfloor');
  await container.createIfNotExists();
  // Sub-millisecond: Date.now() would round a timer that fires on time down to a floor of 0.
  const now = () => performance.timeOrigin + performance.now();
  return Promise.all(
    jobs.map(async (job) => {
      const due = dueOf(job.name, occurrence, jitterSeconds);
      await sleep(Math.max(0, due - now()));
      const timerMs = now() - due;
      const body = JSON.stringify({ job: job.name, occurrence: new Date(occurrence).toISOString() });
      await container
        .getBlockBlobClient(`${job.name}/${new Date(occurrence).toISOString()}.json`)
        .upload(body, Buffer.byteLength(body), { conditions: { ifNoneMatch: '*' } });
      return { timerMs: Math.round(timerMs * 1000) / 1000, createdMs: Math.round((now() - due) * 1000) / 1000 };
    }),
  );
}

async function measureScenario(
  scenario: Scenario,
  options: { hub: string; instances: number; jobs: number; leadMs: number; floor?: FloorSample[] },
): Promise<{ result: ScenarioResult; runs: RunSample[][] }> {
  // One occurrence a period, at the second (and minute of the period) that falls a little after
  // the cluster should be up.
  const periodMs = scenario.periodMinutes * 60_000;
  const first = new Date(Date.now() + options.leadMs);
  const second = first.getUTCSeconds();
  const minutes =
    scenario.periodMinutes === 1 ? '*' : `${first.getUTCMinutes() % scenario.periodMinutes}/${scenario.periodMinutes}`;
  const schedule = `${second} ${minutes} * * * *`;
  const offsetMs = (first.getUTCMinutes() % scenario.periodMinutes) * 60_000 + second * 1000;
  const specs = jobSpecs(options.jobs, schedule, scenario.jitterSeconds);
  const cluster = await BenchCluster.start({
    instances: options.instances,
    hub: options.hub,
    jobs: specs,
    coordinatorSchedule: TICK,
    // The app's default: an idle leader rests the lease until the next occurrence.
    restWhenIdle: true,
  });
  const served = new ServedRequests(
    new Map([
      [cluster.azurite.blobPort, 'blob'],
      [cluster.azurite.queuePort, 'queue'],
    ]),
  );
  try {
    const startedAt = Date.now();
    await cluster.waitFor(
      () => (cluster.instances.every((i) => i.events.some((e) => e.kind === 'started')) ? true : undefined),
      120_000,
      'every instance started',
    );
    // The first measured occurrence is due once the first leader has written every job's state.
    await cluster.waitFor(
      () => (served.jobStates.size >= specs.length ? true : undefined),
      120_000,
      `the state of all ${specs.length} jobs written`,
    );
    const startupMs = Date.now() - startedAt;
    const ready = Date.now() + SETTLE_MS;
    if (VERBOSE) console.error(`  ${scenario.name}: every job's state written ${startupMs} ms after the cluster started`);
    let occurrence = Math.ceil(ready / periodMs) * periodMs + offsetMs;
    while (occurrence - periodMs >= ready) occurrence -= periodMs;
    const log = new RunLog(cluster);
    const occurrences: OccurrenceResult[] = [];
    const windows: { occurrence: number; from: number; to: number; afterRest: boolean; runIds: string[] }[] = [];
    for (let k = 0; k < scenario.occurrences; k++, occurrence += periodMs) {
      const runIds = specs.map((s) => `${s.name}/${new Date(occurrence).toISOString()}`);
      const dues = specs.map((s) => dueOf(s.name, occurrence, scenario.jitterSeconds));
      const lastDue = Math.max(...dues);
      const from = occurrence - BEFORE_MS;
      await sleep(Math.max(0, from - Date.now()));
      // Whether the term that starts these runs began after a rest: no leader held the lease at the window's opening.
      const afterRest = cluster.leader() === undefined;
      const floor = options.floor
        ? plainScheduler(cluster.connectionString, specs, occurrence, scenario.jitterSeconds)
        : undefined;
      const createdAll = await waitUntil(
        cluster,
        () => (log.scan(), runIds.every((id) => log.created.has(id))),
        lastDue + CREATE_WITHIN_MS,
        'every run created',
      );
      const endedAll = await waitUntil(
        cluster,
        () => (log.scan(), runIds.every((id) => log.ended.has(id) || !log.created.has(id))),
        lastDue + END_WITHIN_MS,
        'every run ended',
      );
      if (floor) options.floor!.push(...(await floor));
      const lastEnded = Math.max(...runIds.map((id) => log.ended.get(id) ?? Date.now()));
      const to = lastEnded + AFTER_MS;
      await sleep(Math.max(0, to - Date.now()));
      windows.push({ occurrence, from, to, afterRest, runIds });
      if (VERBOSE) {
        console.error(
          `  ${scenario.name} ${new Date(occurrence).toISOString()}: created all ${createdAll}, ended all ${endedAll}, window ${to - from} ms`,
        );
      }
    }
    // The tally reads storage, after every window has closed: its requests are in none.
    const states = new FencedDocuments<JobState>(cluster.docs);
    const lagsOf: { lags: number[]; firstItems: number[] }[] = [];
    const runSamples: RunSample[][] = [];
    for (const w of windows) {
      const times = served.between(w.from, w.to);
      const peak = slidingPeak(times);
      const perSecond = perClockSecond(times, w.from, w.to);
      const quiet = Math.max(ready, w.from - 10_000);
      const baseline = percentile(perClockSecond(served.between(quiet, w.from), quiet, w.from).slice(1, -1), 50);
      const lags: number[] = [];
      const firstItems: number[] = [];
      const runs = { exact: 0, inexact: 0, unended: 0 };
      const inexact: { runId: string; reasons: string[] }[] = [];
      const notCreated = { skipped: 0, missed: 0, unrecorded: 0 };
      let created = 0;
      let dueAtMismatches = 0;
      const samples: RunSample[] = [];
      await eachLimited(specs, 16, async (spec) => {
        const runId = `${spec.name}/${new Date(w.occurrence).toISOString()}`;
        const details = await readRunDetails(cluster.docs, runId);
        if (!details) {
          const state = await states.read(jobStateKey(spec.name)).catch(() => undefined);
          const iso = new Date(w.occurrence).toISOString();
          const outcome = state?.value.recent.find((e) => e.occurrence === iso && e.outcome !== 'started')?.outcome;
          if (outcome === 'skipped') notCreated.skipped++;
          else if (outcome === 'missed') notCreated.missed++;
          else notCreated.unrecorded++;
          return;
        }
        created++;
        const { record } = details;
        const due = dueOf(spec.name, w.occurrence, scenario.jitterSeconds);
        if (Date.parse(record.dueAt ?? record.occurrence ?? '') !== due) dueAtMismatches++;
        const lag = startLagMs(record);
        if (lag !== null) lags.push(lag);
        const firstItem = firstItemLagMs(record);
        if (firstItem !== null) firstItems.push(firstItem);
        samples.push({ job: spec.name, dueMs: due - w.occurrence, startLagMs: lag, firstItemLagMs: firstItem });
        if (!isTerminal(record.state)) {
          runs.unended++;
          return;
        }
        const reasons = inexactness(spec, details);
        if (reasons.length > 0) {
          runs.inexact++;
          inexact.push({ runId, reasons });
        } else runs.exact++;
      });
      const events = cluster.instances.flatMap((i) => i.events).filter((e) => e.at >= w.from && e.at < w.to);
      const createdTimes = w.runIds.map((id) => log.created.get(id)).filter((t): t is number => t !== undefined);
      const endedTimes = w.runIds.map((id) => log.ended.get(id)).filter((t): t is number => t !== undefined);
      occurrences.push({
        occurrence: new Date(w.occurrence).toISOString(),
        afterRest: w.afterRest,
        windowMs: w.to - w.from,
        due: specs.length,
        created,
        notCreated,
        runs,
        inexact,
        dueAtMismatches,
        startLagMs: lagStats(lags),
        firstItemLagMs: lagStats(firstItems),
        requests: times.length,
        peakPerSecond: peak.count,
        peakAtMs: peak.from - w.occurrence,
        peakPerClockSecond: Math.max(0, ...perSecond),
        peakOperations: served.operationsBetween(peak.from, peak.from + 1000),
        operations: served.operationsBetween(w.from, w.to),
        baselinePerSecond: baseline,
        perSecond,
        lastCreatedMs: createdTimes.length ? Math.max(...createdTimes) - w.occurrence : null,
        lastEndedMs: endedTimes.length ? Math.max(...endedTimes) - w.occurrence : null,
        leaderChanges: events.filter((e) => e.kind === 'leader' && e.type === 'acquired').length,
        termsBeganAtMs: cluster.instances
          .flatMap((i) => i.events)
          .filter((e) => e.kind === 'leader' && e.type === 'acquired' && e.at >= w.from - 10_000 && e.at < w.to)
          .map((e) => e.at - w.occurrence)
          .sort((a, b) => a - b),
        takeovers: events.filter((e) => e.kind === 'leader' && (e.type === 'lost' || e.type === 'broke')).length,
        requestsPerRun: created > 0 ? (times.length - ((baseline || 0) * (w.to - w.from)) / 1000) / created : Number.NaN,
      });
      lagsOf.push({ lags, firstItems });
      runSamples.push(samples.sort((a, b) => a.dueMs - b.dueMs || a.job.localeCompare(b.job)));
    }
    const sum = (f: (o: OccurrenceResult) => number) => occurrences.reduce((a, o) => a + f(o), 0);
    const result: ScenarioResult = {
      name: scenario.name,
      what: scenario.what,
      jitterSeconds: scenario.jitterSeconds,
      schedule,
      startupMs,
      occurrences,
      due: sum((o) => o.due),
      created: sum((o) => o.created),
      notCreated: sum((o) => o.due - o.created),
      runs: {
        exact: sum((o) => o.runs.exact),
        inexact: sum((o) => o.runs.inexact),
        unended: sum((o) => o.runs.unended),
      },
      startLagMs: lagStats(lagsOf.flatMap((o) => o.lags)),
      firstItemLagMs: lagStats(lagsOf.flatMap((o) => o.firstItems)),
      peakPerSecond: Math.max(...occurrences.map((o) => o.peakPerSecond)),
      peakPerClockSecond: Math.max(...occurrences.map((o) => o.peakPerClockSecond)),
    };
    return { result, runs: runSamples };
  } finally {
    served.close();
    await cluster.stop();
  }
}

const SCENARIOS = (jitterSeconds: number, periodMinutes: number, occurrences: number): Scenario[] => [
  {
    name: 'herd',
    what: 'no jitter, every minute: every run due at the occurrence’s instant',
    jitterSeconds: 0,
    periodMinutes: 1,
    occurrences,
  },
  {
    name: 'jittered',
    what: `jitterSeconds ${jitterSeconds}, every ${periodMinutes === 1 ? 'minute' : `${periodMinutes} minutes`}: each run due at the occurrence plus its job’s jitter (a hash of job and occurrence, 0 to ${jitterSeconds} s)`,
    jitterSeconds,
    periodMinutes,
    // One spread occurrence is 200 starts over minutes: enough for its p99, and a second would cost another period.
    occurrences: 1,
  },
];

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const smoke = options.smoke === true;
  const instances = smoke ? SMOKE_INSTANCES : INSTANCES;
  const jobs = smoke ? SMOKE_JOBS : JOBS;
  const jitterSeconds = smoke ? SMOKE_JITTER_SECONDS : JITTER_SECONDS;
  const occurrences = smoke ? 1 : OCCURRENCES;
  const started = performance.now();
  const loadAtStart = loadavg();
  const floor: FloorSample[] = [];
  const [herdScenario, jitteredScenario] = SCENARIOS(jitterSeconds, smoke ? 1 : JITTER_PERIOD_MINUTES, occurrences) as [
    Scenario,
    Scenario,
  ];
  const measure = (scenario: Scenario) =>
    measureScenario(scenario, {
      hub: `herd-${scenario.name}`,
      instances,
      jobs,
      leadMs: smoke ? SMOKE_LEAD_MS : LEAD_MS[scenario.name],
      ...(scenario.jitterSeconds > 0 ? { floor } : {}),
    });
  // A full run measures one scenario at a time, so neither's peak is the other's load; a smoke run
  // only checks that both work, side by side.
  const [herdRun, jitteredRun] = smoke
    ? await sideBySide([() => measure(herdScenario), () => measure(jitteredScenario)])
    : [await measure(herdScenario), await measure(jitteredScenario)];
  const [herd, jittered] = [herdRun.result, jitteredRun.result];
  for (const r of [herd, jittered]) {
    if (!VERBOSE && smoke) continue;
    for (const o of r.occurrences) {
      console.error(
        `  ${r.name} ${o.occurrence}${o.afterRest ? ' (after a rest)' : ''}: peak ${o.peakPerSecond} req/s ` +
          `(${o.peakPerClockSecond} in a clock second, at +${o.peakAtMs} ms; baseline ${o.baselinePerSecond}/s), ${o.requests} requests in ${o.windowMs} ms; ` +
          `start lag p50 ${o.startLagMs.p50} p99 ${o.startLagMs.p99} max ${o.startLagMs.max} ms; first item p99 ${o.firstItemLagMs.p99} ms; ` +
          `${o.created}/${o.due} created, runs ${JSON.stringify(o.runs)}; last created +${o.lastCreatedMs} ms, last ended +${o.lastEndedMs} ms; ` +
          `${o.requestsPerRun.toFixed(1)} requests per run; terms began at ${JSON.stringify(o.termsBeganAtMs)} ms, ${o.takeovers} takeovers` +
          (o.inexact.length > 0 ? `\n    inexact: ${JSON.stringify(o.inexact)}` : ''),
      );
    }
  }
  const floorTimer = floor.map((s) => s.timerMs);
  const floorCreated = floor.map((s) => s.createdMs);
  // The create's answer: always after its due time (a timer may run a fraction of a millisecond early).
  const floorP99 = percentile(floorCreated, 99);
  const counts = (r: ScenarioResult) => r.notCreated === 0 && r.runs.inexact === 0 && r.runs.unended === 0;
  const peakGoal: Goal = { ratio: 1 / PEAK_FALL, direction: 'atMost' };
  const lagGoal: Goal = { ratio: printableGoalRatio(LAG_LIMIT_MS / floorP99), direction: 'atMost' };
  const fall = herd.peakPerSecond / jittered.peakPerSecond;
  const goals = [
    {
      name: 'peak',
      measure: `peak storage requests per second with ${jitterSeconds} s of jitter at most 1/${PEAK_FALL} of the herd’s (a fall of ≥ ${PEAK_FALL}×), every run created, ended and exact in both`,
      ours: jittered.peakPerSecond,
      floor: herd.peakPerSecond,
      unit: 'req/s',
      goal: peakGoal,
      fall,
      result: fall >= PEAK_FALL && counts(herd) && counts(jittered) ? 'met' : 'missed',
    },
    {
      name: 'jittered-p99',
      measure: `start lag p99 ≤ ${LAG_LIMIT_MS} ms with jitter (from the jittered start), every run created, ended and exact`,
      ours: jittered.startLagMs.p99,
      floor: floorP99,
      unit: 'ms',
      goal: lagGoal,
      limitMs: LAG_LIMIT_MS,
      result: jittered.startLagMs.p99 <= LAG_LIMIT_MS && counts(jittered) ? 'met' : 'missed',
    },
  ];
  const result = report(
    name,
    {
      samples: {
        scenarios: [herdRun, jitteredRun].map(({ result: r, runs }) => ({
          name: r.name,
          occurrences: r.occurrences.map((o, k) => ({ occurrence: o.occurrence, runs: runs[k] })),
        })),
        floor,
      },
      summary: {
        what: 'a thundering herd: 200 jobs due in the same second, with and without jitter; peak storage requests per second (every request Azurite served to the cluster, in any 1 s) and start lag (run record created, by storage’s clock, minus when it was due: the jittered start with jitter), side by side',
        headline: `the jittered peak against the herd’s: a fall of ${fall.toFixed(1)}× (goal ≥ ${PEAK_FALL}×: ratio ≤ ${1 / PEAK_FALL})`,
        cluster: `${instances} real instance processes on one in-process Azurite, a coordinator tick every ${TICK_MS} ms, the app’s defaults (an idle leader rests the lease between occurrences); a fresh cluster per scenario${smoke ? ', side by side (smoke)' : ', one after the other'}`,
        jobs: `${jobs} synthetic jobs of 1 item on one schedule: herd every minute at one second, ${herdScenario.occurrences} occurrence${herdScenario.occurrences === 1 ? '' : 's'} measured; jittered every ${jitteredScenario.periodMinutes === 1 ? 'minute' : `${jitteredScenario.periodMinutes} minutes`} with jitterSeconds ${jitteredScenario.jitterSeconds}, ${jitteredScenario.occurrences} occurrence measured`,
        requests:
          'counted where Azurite receives them, in this process (Node’s http.server.request.start channel), timestamped on arrival: the instances’ own requests and their local host’s queue polling, SDK retries included; from 3 s before each occurrence to 1 s after its last run ended. peakPerSecond: the most in any 1 s (sliding); peakPerClockSecond: the most in one whole second of the clock',
        scenarios: [herd, jittered],
        fall,
        floor: {
          what: 'a plain scheduler in the benchmark process during the jittered windows: a timer aimed at each job’s jittered start, then one conditional create (If-None-Match: *) of a blob with the plain SDK on the same Azurite; createdMs is the create’s answer after the due time (its p99 is the floor of the start-lag goal), timerMs when its timer ran (when a createdAt would be stamped). Its requests are left out of the counts',
          n: floor.length,
          timerMs: lagStats(floorTimer),
          createdMs: lagStats(floorCreated),
        },
        goals,
        goalsNote:
          'peak: the herd’s peak is the floor and the goal is a fall of 5× (ratio ≤ 0.2); jittered-p99 is absolute, written as limit/floor (the p99 of the plain scheduler’s create, answered, after its due time), rounded up to 4 decimals; `result` is met only when the counts in its measure hold as well',
        percentiles: 'nearest rank, no interpolation',
        loadAverage: { start: loadAtStart, end: loadavg() },
        wallSeconds: (performance.now() - started) / 1000,
      },
      ours: jittered.peakPerSecond,
      floor: herd.peakPerSecond,
      unit: 'req/s',
      goal: peakGoal,
    },
    options,
  );
  for (const g of goals)
    console.log(`${formatLine({ ...g, name: `${name}.${g.name}` })}${g.result === 'missed' ? ' (limit or count missed)' : ''}`);
  return result;
}
