import { isTerminal, runKeys, type RunRecord } from '../../src/hub/run-record';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { probeEnv, readProbe, type ProbeLine } from '../lib/live-heap-probe';
import { BenchCluster, type BenchInstance } from '../lib/bench-cluster';
import { checkpointInexactness, inexactness, SCALE_ITEMS_PER_MESSAGE, scaleJobSpec } from '../lib/synthetic-runs';
import { formatLine, goalMet, ratioOf, report, type BenchOptions, type BenchResult, type Goal } from '../lib/report';

/**
 * scale: does a run's cost per item stay flat as the run grows? Synthetic runs of 10k, 100k and
 * 1M items (itemsPerMessage 100) on a local cluster of three instance processes, each size on a
 * fresh cluster (fresh in-process Azurite, fresh instances; the smoke run's two tiny sizes share
 * one). For each size:
 * - bytes written to storage per item: the request body bytes every instance sent while the run
 *   went (blob uploads, queue messages), from their own counters;
 * - storage requests per item, from the same counters (idle polling included: it is the run's
 *   cost too);
 * - the leader's peak live heap: bench/lib/memory-probe.cjs is preloaded into every instance and
 *   forces a full collection every PROBE_MS (or less often, see the probe), reporting the heap still live after it; the largest
 *   on the leader during the run (see leader-memory for why live heap, not heap used);
 * - wall time (run record created → ended, output written first) and items/s;
 * - whether the output is exact (the synthetic job's answer is known in advance) and every item
 *   counted once.
 *
 * The goals are ratios within one run: the largest size against the smallest for bytes, requests
 * and heap, and the largest against the one before it for items/s. The headline (ours / floor in
 * the table) is bytes per item; every goal is in `summary.goals`, each met or missed. The probe's
 * collections cost every size alike, so they leave the ratios alone.
 *
 * A size that does not finish within BENCH_SCALE_TIMEOUT_MS is reported with how far it got.
 *
 * BENCH_SCALE_ONE_PER_MESSAGE=1 adds 1M items at 1 item per message, on a fresh cluster after the
 * sizes, under the same time limit. Every item is then a message of its own, so Azurite's
 * receive and delete rate (a few hundred messages/s here) bounds it to hours; it is opt-in and
 * reported apart from the goals (`summary.extraRuns`), finished or with how far it got. A run has
 * no output to check until it ends; until then what can be checked is its last checkpoint.
 */
export const name = 'scale';

const INSTANCES = 3;
/**
 * A smoke run: a cluster of two (a leader and a worker beside it), its run record read every
 * 250 ms rather than every second, so the next size is triggered soon after a run ends, and the
 * probe's forced collections once a second (every 500 ms they took a tenth of each instance).
 */
const SMOKE = { instances: 2, pollMs: 250, probeMs: 1000 };
const PROBE_MS = Number(process.env.BENCH_SCALE_PROBE_MS ?? 500);
const TIMEOUT_MS = Number(process.env.BENCH_SCALE_TIMEOUT_MS ?? 15 * 60_000);
const ONE_PER_MESSAGE = process.env.BENCH_SCALE_ONE_PER_MESSAGE === '1';
/** The smoke run's version is small: enough to see the case plan, dispatch and count. */
const ONE_PER_MESSAGE_ITEMS = { full: 1_000_000, smoke: 300 };
const VERBOSE = process.env.BENCH_VERBOSE === '1';
const SETTLE_MS = 1000;
const MiB = 1024 * 1024;

const GOALS = {
  bytesPerItem: { ratio: 1.5, direction: 'atMost' },
  requestsPerItem: { ratio: 1.1, direction: 'atMost' },
  peakLiveHeap: { ratio: 1.5, direction: 'atMost' },
  itemsPerSecond: { ratio: 0.8, direction: 'atLeast' },
} as const satisfies Record<string, Goal>;

export interface ScaleSample {
  items: number;
  itemsPerMessage: number;
  messages: number;
  /** False when the run did not end within the time limit; `done` says how far it got. */
  finished: boolean;
  done: number;
  exact: boolean;
  /** The last run record read: its accumulator is the fold of exactly the items it marks counted. */
  exactSoFar: boolean;
  counters?: RunRecord['counters'];
  /** Run record created → ended (or → the time limit), ms. */
  runMs: number;
  itemsPerSecond: number;
  bytes: number;
  bytesPerItem: number;
  bytesByOperation: Record<string, number>;
  requests: number;
  requestsPerItem: number;
  requestsByOperation: Record<string, number>;
  peakLiveHeapMiB: number;
  baselineLiveHeapMiB: number;
  liveSamples: number;
  /** Bytes of the run record document at the end: the checkpoint the leader rewrites. */
  recordBytes: number;
  leaderChanged: boolean;
  wallSeconds: number;
}

const minus = (after: Record<string, number>, before: Record<string, number>): Record<string, number> =>
  Object.fromEntries(
    Object.entries(after)
      .map(([op, n]) => [op, n - (before[op] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
const sum = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);

interface Started {
  cluster: BenchCluster;
  probes: Map<BenchInstance, ProbeLine[]>;
}

/** A fresh cluster (Azurite and instances, the probe in each) with a job for each spec. */
async function startCluster(specs: readonly SyntheticJobSpec[], instances: number, probeMs: number): Promise<Started> {
  const cluster = await BenchCluster.start({ instances, jobs: [...specs], env: probeEnv(probeMs) });
  return { cluster, probes: new Map(cluster.instances.map((i) => [i, readProbe(i)])) };
}

/** Every instance's request counts and request body bytes so far, by operation. */
interface Counts {
  requests: Record<string, number>;
  bytes: Record<string, number>;
}

/**
 * One run of `spec` on the cluster; and the counts fresh after it. With `previous`, those counts
 * of a run just before on the same cluster (a smoke run's sizes share one), the run is triggered
 * at once and counted from them: an idle leader looks at its requests less and less often (every
 * 5 s at last), so a trigger right after a run is taken up sooner than one after the usual settle.
 */
async function measure(
  { cluster, probes }: Started,
  spec: SyntheticJobSpec,
  pollMs: number,
  previous?: Counts,
): Promise<{ sample: ScaleSample; counts: Counts }> {
  const { items } = spec;
  const leader = await cluster.waitFor(() => cluster.leader(), 60_000, 'a leader');
  const live = probes.get(leader) as ProbeLine[];
  if (!previous) {
    const acquired = cluster.acquiredSince(0)?.at ?? Date.now();
    await new Promise((r) => setTimeout(r, Math.max(0, acquired + SETTLE_MS - Date.now())));
    const settled = Date.now();
    await cluster.waitFor(() => live.find((p) => p.at >= settled), 10_000, 'a baseline probe line');
    await cluster.freshRequestReports(Date.now());
  }
  const requestsBefore = previous?.requests ?? cluster.totalRequests().byOperation;
  const bytesBefore = previous?.bytes ?? cluster.totalBytes().byOperation;

  const triggered = Date.now();
  const runId = await cluster.trigger(spec.name);
  const deadline = triggered + TIMEOUT_MS;
  let record: RunRecord | undefined;
  let recordBytes = 0;
  for (;;) {
    // The run record alone: it carries the counters and whether the run ended.
    const stored = await cluster.docs.read(runKeys.record(runId)).catch(() => undefined);
    if (stored) {
      record = (JSON.parse(stored.body) as { value: RunRecord }).value;
      recordBytes = Buffer.byteLength(stored.body);
      if (isTerminal(record.state)) break;
    }
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  const ended = Date.now();
  await cluster.freshRequestReports(Date.now());
  const counts: Counts = { requests: cluster.totalRequests().byOperation, bytes: cluster.totalBytes().byOperation };
  const requestsByOperation = minus(counts.requests, requestsBefore);
  const bytesByOperation = minus(counts.bytes, bytesBefore);
  if (!record) throw new Error(`run ${runId} has no run record after ${TIMEOUT_MS} ms`);

  const finished = isTerminal(record.state);
  const c = record.counters;
  const exact = finished && inexactness(spec, await cluster.waitForRun(runId, 10_000)).length === 0;
  const exactSoFar = checkpointInexactness(spec, record).length === 0;
  const createdAt = Date.parse(record.createdAt);
  const runMs = finished && record.endedAt ? Date.parse(record.endedAt) - createdAt : ended - createdAt;
  const done = c.succeeded + c.failed;
  const during = live.filter((p) => p.at >= triggered && p.at <= ended);
  const before = live.filter((p) => p.at < triggered).at(-1);
  const bytes = sum(bytesByOperation);
  const requests = sum(requestsByOperation);
  const sample: ScaleSample = {
    items,
    itemsPerMessage: spec.itemsPerMessage ?? 1,
    messages: record.messages,
    finished,
    done,
    exact,
    exactSoFar,
    counters: c,
    runMs,
    itemsPerSecond: (done / runMs) * 1000,
    bytes,
    bytesPerItem: bytes / Math.max(1, done),
    bytesByOperation,
    requests,
    requestsPerItem: requests / Math.max(1, done),
    requestsByOperation,
    peakLiveHeapMiB: Math.max(0, ...during.map((p) => p.liveHeap)) / MiB,
    baselineLiveHeapMiB: (before?.liveHeap ?? Number.NaN) / MiB,
    liveSamples: during.length,
    recordBytes,
    // A new term of the same instance is fine; another instance leading is not one leader's heap.
    leaderChanged: cluster.leader() !== leader || cluster.acquiredSince(triggered, leader) !== undefined,
    wallSeconds: 0,
  };
  return { sample, counts };
}

function printSize(s: ScaleSample, options: BenchOptions): void {
  if (!VERBOSE && options.smoke) return;
  const packing = s.itemsPerMessage === SCALE_ITEMS_PER_MESSAGE ? '' : ` at ${s.itemsPerMessage} per message`;
  console.error(
    `  ${s.items} items${packing}: ${s.finished ? '' : `NOT FINISHED (${s.done} done), `}${s.bytesPerItem.toFixed(1)} B/item, ` +
      `${s.requestsPerItem.toFixed(4)} requests/item, peak live heap ${s.peakLiveHeapMiB.toFixed(1)} MiB, ` +
      `${(s.runMs / 1000).toFixed(1)} s, ${s.itemsPerSecond.toFixed(0)} items/s, exact ${s.exact}`,
  );
}

function sizes(options: BenchOptions): number[] {
  if (options.smoke) return [1_000, 2_000];
  const fromEnv = process.env.BENCH_SCALE_SIZES?.split(',').map(Number);
  return fromEnv && fromEnv.length >= 2 ? fromEnv : [10_000, 100_000, 1_000_000];
}

/** The sizes, then the opt-in run at 1 item per message. */
function cases(options: BenchOptions): SyntheticJobSpec[] {
  const sized = sizes(options).map((items) => scaleJobSpec(items));
  if (!ONE_PER_MESSAGE) return sized;
  return [...sized, scaleJobSpec(options.smoke ? ONE_PER_MESSAGE_ITEMS.smoke : ONE_PER_MESSAGE_ITEMS.full, 1)];
}

/**
 * The opt-in run as `summary.extraRuns` has it. One that did not end has no output to check, so
 * `exact` is null and `exactSoFar` says whether its last checkpoint folded each counted item once.
 */
function extraRun(s: ScaleSample) {
  return {
    name: 'onePerMessage',
    items: s.items,
    itemsPerMessage: s.itemsPerMessage,
    finished: s.finished,
    done: s.done,
    runSeconds: s.runMs / 1000,
    timeoutSeconds: TIMEOUT_MS / 1000,
    itemsPerSecond: s.itemsPerSecond,
    // So far, the plan of every item included: it is written before the first item is dispatched.
    bytesPerItem: s.bytesPerItem,
    bytesByOperation: s.bytesByOperation,
    requestsPerItem: s.requestsPerItem,
    requestsByOperation: s.requestsByOperation,
    exact: s.finished ? s.exact : null,
    exactSoFar: s.exactSoFar,
  };
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const { instances, pollMs, probeMs } = options.smoke ? SMOKE : { instances: INSTANCES, pollMs: 1000, probeMs: PROBE_MS };
  const started = performance.now();
  const all: ScaleSample[] = [];
  // A fresh cluster per case, so none inherits another's queues, blobs or heap; the smoke run
  // shares one, since starting and stopping a cluster costs more than its tiny runs.
  const groups = options.smoke ? [cases(options)] : cases(options).map((spec) => [spec]);
  for (const group of groups) {
    const t0 = performance.now();
    const started = await startCluster(group, instances, probeMs);
    try {
      // A smoke run's sizes share a cluster: each after the first is counted from the one before.
      let counts: Counts | undefined;
      for (const spec of group) {
        const t1 = performance.now();
        let s: ScaleSample;
        ({ sample: s, counts } = await measure(started, spec, pollMs, options.smoke ? counts : undefined));
        // The first case on a cluster carries its start-up.
        s.wallSeconds = (performance.now() - (spec === group[0] ? t0 : t1)) / 1000;
        all.push(s);
        printSize(s, options);
      }
    } finally {
      await started.cluster.stop();
      if (VERBOSE)
        console.error(
          `  (${group.map((g) => g.name).join(', ')}: cluster up and down in ${Math.round(performance.now() - t0)} ms)`,
        );
    }
  }
  const samples = all.filter((s) => s.itemsPerMessage === SCALE_ITEMS_PER_MESSAGE);
  const extra = all.filter((s) => s.itemsPerMessage !== SCALE_ITEMS_PER_MESSAGE);
  const smallest = samples[0]!;
  const largest = samples.at(-1)!;
  const previous = samples.at(-2)!;
  const goal = (
    key: keyof typeof GOALS,
    unit: string,
    ours: ScaleSample,
    floor: ScaleSample,
    pick: (s: ScaleSample) => number,
  ) => {
    const ratio = ratioOf(pick(ours), pick(floor));
    // A size that did not finish measured nothing to hold a goal to.
    const measured = ours.finished && floor.finished;
    return {
      name: key,
      measure: `${ours.items} / ${floor.items} items`,
      ours: pick(ours),
      floor: pick(floor),
      unit,
      ratio,
      goal: GOALS[key],
      result: !measured ? 'not measured' : goalMet(ratio, GOALS[key]) ? 'met' : 'missed',
    };
  };
  const goals = [
    goal('bytesPerItem', 'B/item', largest, smallest, (s) => s.bytesPerItem),
    // Per 1,000 items: per item they are a few hundredths, which two decimals would blur.
    goal('requestsPerItem', 'requests/1k items', largest, smallest, (s) => s.requestsPerItem * 1000),
    goal('peakLiveHeap', 'MiB', largest, smallest, (s) => s.peakLiveHeapMiB),
    goal('itemsPerSecond', 'items/s', largest, previous, (s) => s.itemsPerSecond),
  ];
  const summary = {
    headline:
      'bytes written to storage per item (request body bytes of every instance, the run start to its end) at the ' +
      'largest size against the smallest; every goal is in `goals`.',
    instances,
    itemsPerMessage: SCALE_ITEMS_PER_MESSAGE,
    probeMs,
    timeoutSeconds: TIMEOUT_MS / 1000,
    sizes: samples.map((s) => ({
      items: s.items,
      finished: s.finished,
      done: s.done,
      exact: s.exact,
      bytesPerItem: s.bytesPerItem,
      requestsPerItem: s.requestsPerItem,
      peakLiveHeapMiB: s.peakLiveHeapMiB,
      runSeconds: s.runMs / 1000,
      itemsPerSecond: s.itemsPerSecond,
      recordBytes: s.recordBytes,
      leaderChanged: s.leaderChanged,
    })),
    allExact: samples.every((s) => s.exact),
    goals,
    // Opt-in (BENCH_SCALE_ONE_PER_MESSAGE=1), outside the goals: 1M items at 1 item per message.
    extraRuns: extra.map(extraRun),
    order: 'sizes from smallest to largest, each on a fresh cluster (Azurite and instances), then any extra run',
    wallSeconds: (performance.now() - started) / 1000,
  };
  const headline = goals[0]!;
  const result = report(
    name,
    { samples: all, summary, ours: headline.ours, floor: headline.floor, unit: 'B/item', goal: GOALS.bytesPerItem },
    options,
  );
  for (const g of goals.slice(1)) {
    const line = formatLine({ name: `${name}.${g.name}`, ours: g.ours, floor: g.floor, unit: g.unit, goal: g.goal });
    console.log(g.result === 'not measured' ? `${line} (not measured: a size did not finish)` : line);
  }
  if (!summary.allExact) console.log(`${name}: an output was not exact or a run did not finish; see summary.sizes`);
  for (const x of summary.extraRuns) {
    const so = x.finished ? '' : ' so far';
    console.log(
      `${name}.${x.name}: ${x.items} items at ${x.itemsPerMessage} per message ` +
        (x.finished
          ? `finished in ${x.runSeconds.toFixed(0)} s, exact ${x.exact}`
          : `not finished within ${x.timeoutSeconds} s`) +
        `: ${x.done} counted, ${x.itemsPerSecond.toFixed(0)} items/s, ${x.bytesPerItem.toFixed(1)} B/item and ` +
        `${x.requestsPerItem.toFixed(2)} requests/item${so}, last checkpoint exact ${x.exactSoFar}` +
        (x.finished ? '' : ' (the output is written only when the run ends)'),
    );
  }
  return result;
}
