import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { formatLine, goalMet, ratioOf, report, type BenchOptions, type BenchResult } from '../lib/report';
import { BenchCluster } from '../lib/bench-cluster';
import {
  alternateRounds,
  medianRun,
  smokeRound,
  startThroughputCluster,
  type FloorRun,
  type MeasuredRun,
} from '../lib/throughput-run';

/**
 * sharded-throughput: the throughput benchmark's run (N items, one item per message, a trivial
 * `process`, three instance processes, run record created → output written and the run ended)
 * with `BATON_QUEUE_SHARDS` = 1, 2 and 4, each shard count on a fresh cluster and Azurite. Its
 * floor is the throughput floor on as many queue pairs: the sender round robin over S work
 * queues, each of the three consumers receiving every work queue (one loop per queue, as each
 * instance runs one queue trigger per shard) and answering on the same shard's results queue, and
 * one drainer receiving every results queue at once. It has a process per consumer, as the
 * cluster has an instance per worker (the sender and drainer share the first, as the leader
 * shares its instance); the same floor with every consumer in one process is measured beside it
 * and reported. Floors and ours alternate on the same Azurite.
 *
 * On Azurite every queue lives in one process, so more shards cannot add capacity here: what is
 * measured is whether Baton keeps up with the raw SDK on the same number of queues. The headline
 * is the worst of the three ratios; each shard count's goal is in `summary.goals`.
 */
export const name = 'sharded-throughput';

const GOAL = { ratio: 0.8, direction: 'atLeast' as const };
const INSTANCES = 3;
/**
 * A smoke run's cluster: two instances (two consumers in the floor), no warm-up run, and the
 * floors run while it starts and elects its leader.
 */
const SMOKE_INSTANCES = 2;
const SHARDS = [1, 2, 4];
const JOB = 'sum';
const TICK = DEFAULT_CLUSTER.coordinatorSchedule;

interface ShardedMeasurement {
  shards: number;
  /** The median rounds by items/s. */
  floor: FloorRun;
  floorOneProcess: FloorRun;
  ours: MeasuredRun;
  rounds: { floor: FloorRun[]; floorOneProcess: FloorRun[]; ours: MeasuredRun[] };
  wallSeconds: number;
}

async function measureShards(shards: number, items: number, rounds: number, smoke: boolean): Promise<ShardedMeasurement> {
  const started = performance.now();
  const options = {
    instances: smoke ? SMOKE_INSTANCES : INSTANCES,
    coordinatorSchedule: TICK,
    jobs: [{ name: JOB, items, itemsPerMessage: 1 }],
    env: { BATON_QUEUE_SHARDS: String(shards) },
  };
  const cluster = smoke ? await BenchCluster.start(options) : await startThroughputCluster(options);
  try {
    const job = { name: JOB, items };
    const workers = options.instances;
    const measured = smoke
      ? (await smokeRound(cluster, job, { workers, shards }, () => cluster.waitFor(() => cluster.leader(), 60_000, 'a leader')))
          .rounds
      : await alternateRounds(cluster, job, { rounds, workers, shards });
    return {
      shards,
      floor: medianRun(measured.floor),
      floorOneProcess: medianRun(measured.floorOneProcess),
      ours: medianRun(measured.ours),
      rounds: measured,
      wallSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    await cluster.stop();
  }
}

/** Queue requests (send, receive, delete) per item: for reading a queue's scale target as requests. */
function queueRequestsPerItem(run: MeasuredRun): number {
  const queue = Object.entries(run.requests).filter(([op]) => op.startsWith('queue.messages.'));
  return queue.reduce((a, [, n]) => a + n, 0) / run.items;
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const started = performance.now();
  // Each shard count needs its own cluster, and a cluster with its warm-up costs far more than a
  // tiny run, so the smoke run measures one count, the least that has more than one shard; the
  // one-shard path is the throughput benchmark's, smoked there.
  const counts = options.smoke ? [2] : (process.env.BENCH_SHARDED_COUNTS?.split(',').map(Number) ?? SHARDS);
  const items = options.smoke ? 30 : Number(process.env.BENCH_SHARDED_ITEMS ?? 8000);
  const rounds = options.smoke ? 1 : Number(process.env.BENCH_SHARDED_ROUNDS ?? 3);
  const instances = options.smoke ? SMOKE_INSTANCES : INSTANCES;
  const samples: ShardedMeasurement[] = [];
  for (const shards of counts) samples.push(await measureShards(shards, items, rounds, options.smoke === true));

  const perShards = samples.map((m) => ({
    shards: m.shards,
    oursItemsPerSecond: m.ours.itemsPerSecond,
    floorItemsPerSecond: m.floor.itemsPerSecond,
    ratio: ratioOf(m.ours.itemsPerSecond, m.floor.itemsPerSecond),
    oneProcessFloor: {
      itemsPerSecond: m.floorOneProcess.itemsPerSecond,
      ratio: ratioOf(m.ours.itemsPerSecond, m.floorOneProcess.itemsPerSecond),
    },
    oursSeconds: m.ours.ms / 1000,
    floorSeconds: m.floor.ms / 1000,
    requestsPerItem: { ours: m.ours.requestsTotal / items, floor: m.floor.requestsTotal / items },
    queueRequestsPerItem: { ours: queueRequestsPerItem(m.ours), floor: queueRequestsPerItem(m.floor) },
    perRound: m.rounds.ours.map((o, i) => ({
      ours: o.itemsPerSecond,
      floor: m.rounds.floor[i]!.itemsPerSecond,
      floorOneProcess: m.rounds.floorOneProcess[i]!.itemsPerSecond,
    })),
    wallSeconds: m.wallSeconds,
  }));
  const goals = perShards.map((s) => ({
    name: `shards-${s.shards}`,
    measure: `${s.shards} shard${s.shards === 1 ? '' : 's'}, ours / floor on ${s.shards} queue pair${s.shards === 1 ? '' : 's'}`,
    ours: s.oursItemsPerSecond,
    floor: s.floorItemsPerSecond,
    unit: 'items/s',
    ratio: s.ratio,
    goal: GOAL,
    result: goalMet(s.ratio, GOAL) ? 'met' : 'missed',
  }));
  const worst = perShards.reduce((a, b) => (b.ratio < a.ratio ? b : a));
  const result = report(
    name,
    {
      samples: samples.map((m) => ({ shards: m.shards, rounds: m.rounds })),
      summary: {
        headline: `the worst ratio of ours to its same-run floor over ${counts.join(', ')} shards; every shard count is in \`goals\``,
        items,
        instances,
        itemsPerMessage: 1,
        rounds,
        worstShards: worst.shards,
        perShards,
        goals,
        measuredFrom: 'ours: run record createdAt → endedAt (output written first); floor: first send → last result deleted',
        floorShape:
          `S work and S results queues; ${instances} consumers in ${instances} processes (polling before the clock starts) ` +
          '× one receive-16 loop per work queue, per message send the result to the same shard + delete; 16 send lanes ' +
          'round robin over the work queues and one drainer receiving every results queue at once (32 per receive), both ' +
          'in the first consumer’s process; all concurrent. oneProcessFloor: every consumer in that one process',
        order: 'each shard count on a fresh cluster (Azurite and instances), floor and ours alternating',
        coordinatorTick: TICK,
        wallSeconds: (performance.now() - started) / 1000,
      },
      ours: worst.oursItemsPerSecond,
      floor: worst.floorItemsPerSecond,
      unit: 'items/s',
      goal: GOAL,
    },
    options,
  );
  for (const g of goals) console.log(formatLine({ ...g, name: `${name}.${g.name}` }));
  return result;
}
