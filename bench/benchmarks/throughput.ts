import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { Schedule } from '../../src/schedule/schedule';
import { requestCountsSince } from '../../src/storage/request-counter';
import { BenchCluster } from '../lib/bench-cluster';
import { report, type BenchOptions, type BenchResult } from '../lib/report';
import {
  alternateRounds,
  medianRun,
  runOurs,
  smokeRound,
  startThroughputCluster,
  type FloorRun,
  type MeasuredRun,
} from '../lib/throughput-run';

/**
 * throughput: a fan-out/fan-in of N items with a trivial `process` on three instance processes,
 * end to end (run record created → output written and the run ended), against a plain-SDK
 * floor on the same Azurite with the same total concurrency (3 consumers × batches of 16, 16
 * send lanes): send N work messages, receive and delete them while sending N results, receive
 * and delete the N results, all at once. Then the same job with itemsPerMessage 50.
 *
 * The goal's floor has a process per consumer, as the cluster has an instance per worker (the
 * sender and drainer share the first, as the leader shares its instance); the floor with every
 * consumer in one process is measured beside it and reported: on two cores it saves the
 * per-process cost that any multi-instance shape pays.
 *
 * The run's storage request counts are kept for the transactions benchmark, which reuses this
 * run when both run in one `npm run bench`.
 */
export const name = 'throughput';

const GOAL = { ratio: 0.8, direction: 'atLeast' as const };
const INSTANCES = 3;
/**
 * A smoke run: two instances (and two consumers in the floor), no warm-up run, a short idle
 * window after a short settle, and the floors run while the cluster elects and idles.
 */
const SMOKE = { instances: 2, settleMs: 1000 };

export interface ThroughputMeasurement {
  items: number;
  floor: FloorRun;
  ours: MeasuredRun;
  packed: MeasuredRun;
  /** The floor with every consumer in one process (median round); reported beside the goal. */
  floorOneProcess: FloorRun;
  /** Every round; `floor` and `ours` above are the median rounds by items/s. */
  rounds: { floor: FloorRun[]; floorOneProcess: FloorRun[]; ours: MeasuredRun[] };
  idle: { windowMs: number; tickMs: number; perInstance: { name: string; leader: boolean; requests: Record<string, number> }[] };
}

let lastMeasurement: ThroughputMeasurement | undefined;

/** The measurement of the last throughput run in this process, if any (for transactions). */
export function lastThroughputMeasurement(items: number): ThroughputMeasurement | undefined {
  return lastMeasurement?.items === items ? lastMeasurement : undefined;
}

const TICK = DEFAULT_CLUSTER.coordinatorSchedule;
const TICK_MS = Schedule.parse(TICK).fixedPeriod()!.periodMs;

/**
 * Starts the cluster, warms it up, measures idle cost, the floor and both runs of ours. A smoke
 * run (one round) skips the warm-up and measures the floors beside the election and idle window.
 */
export async function measureThroughput(
  items: number,
  idleWindowMs: number,
  rounds = 1,
  smoke = false,
): Promise<ThroughputMeasurement> {
  const options = {
    instances: smoke ? SMOKE.instances : INSTANCES,
    coordinatorSchedule: TICK,
    jobs: [
      { name: 'sum', items, itemsPerMessage: 1 },
      { name: 'sum50', items, itemsPerMessage: 50 },
    ],
  };
  const cluster = smoke ? await BenchCluster.start(options) : await startThroughputCluster(options);
  try {
    const job = { name: 'sum', items };
    let idle: Awaited<ReturnType<typeof measureIdle>>;
    let measured: ThroughputMeasurement['rounds'];
    if (smoke) {
      ({ beside: idle, rounds: measured } = await smokeRound(cluster, job, { workers: options.instances }, async () => {
        await cluster.waitFor(() => cluster.leader(), 60_000, 'a leader');
        return measureIdle(cluster, idleWindowMs, SMOKE.settleMs);
      }));
    } else {
      idle = await measureIdle(cluster, idleWindowMs);
      measured = await alternateRounds(cluster, job, { rounds, workers: INSTANCES });
    }
    const packed = await runOurs(cluster, 'sum50', items, undefined, smoke);
    lastMeasurement = {
      items,
      floor: medianRun(measured.floor),
      floorOneProcess: medianRun(measured.floorOneProcess),
      ours: medianRun(measured.ours),
      rounds: measured,
      packed,
      idle: { ...idle, tickMs: TICK_MS },
    };
    return lastMeasurement;
  } finally {
    await cluster.stop();
  }
}

/** Every instance's requests over a window with no run open: what idle ticks cost. */
async function measureIdle(cluster: BenchCluster, windowMs: number, settleMs = 3000) {
  // Let the warm-up's tail (drains, visibility renewals) settle first.
  await new Promise((r) => setTimeout(r, settleMs));
  await cluster.freshRequestReports(Date.now());
  const before = cluster.instances.map((i) => ({ ...i.requests.byOperation }));
  const started = Date.now();
  await new Promise((r) => setTimeout(r, windowMs));
  await cluster.freshRequestReports(Date.now());
  const windowActual = Date.now() - started;
  const leader = cluster.leader();
  return {
    windowMs: windowActual,
    perInstance: cluster.instances
      .filter((i) => i.alive)
      .map((i, k) => ({
        name: i.name,
        leader: i === leader,
        requests: requestCountsSince(i.requests.byOperation, before[k]!),
      })),
  };
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const items = options.smoke ? 50 : 2000;
  const started = Date.now();
  const rounds = options.smoke ? 1 : Number(process.env.BENCH_THROUGHPUT_ROUNDS ?? 3);
  const instances = options.smoke ? SMOKE.instances : INSTANCES;
  const m = await measureThroughput(items, options.smoke ? 2000 : 10_000, rounds, options.smoke);
  const ours = m.ours.itemsPerSecond;
  const floor = m.floor.itemsPerSecond;
  return report(
    name,
    {
      samples: { rounds: m.rounds, itemsPerMessage50: m.packed },
      summary: {
        items,
        instances,
        rounds,
        perRound: m.rounds.ours.map((o, i) => ({
          ours: o.itemsPerSecond,
          floor: m.rounds.floor[i]!.itemsPerSecond,
          floorOneProcess: m.rounds.floorOneProcess[i]!.itemsPerSecond,
        })),
        oursItemsPerSecond: ours,
        floorItemsPerSecond: floor,
        ratio: ours / floor,
        oursSeconds: m.ours.ms / 1000,
        floorSeconds: m.floor.ms / 1000,
        oneProcessFloor: {
          itemsPerSecond: m.floorOneProcess.itemsPerSecond,
          seconds: m.floorOneProcess.ms / 1000,
          ratio: ours / m.floorOneProcess.itemsPerSecond,
        },
        itemsPerMessage50: {
          itemsPerSecond: m.packed.itemsPerSecond,
          seconds: m.packed.ms / 1000,
          ratioToFloor: m.packed.itemsPerSecond / floor,
        },
        requestsPerItem: {
          ours: m.ours.requestsTotal / items,
          floor: m.floor.requestsTotal / items,
          itemsPerMessage50: m.packed.requestsTotal / items,
        },
        measuredFrom: 'ours: run record createdAt → endedAt (output written first); floor: first send → last result deleted',
        floorShape:
          `${instances} consumers in ${instances} processes (polling before the clock starts) × receive 16, per message ` +
          'send result + delete; 16 send lanes and one results drainer (32 per receive) in the first consumer’s ' +
          'process; all concurrent. oneProcessFloor: every consumer in that one process',
        coordinatorTick: TICK,
        series: { ours: m.ours.series, floor: m.floor.series },
        wallSeconds: (Date.now() - started) / 1000,
      },
      ours,
      floor,
      unit: 'items/s',
      goal: GOAL,
    },
    options,
  );
}
