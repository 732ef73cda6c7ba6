import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { isTerminal, runKeys, type RunRecord } from '../../src/hub/run-record';
import { requestCountsSince } from '../../src/storage/request-counter';
import { describePatience, patience } from '../../test/support/slowdown';
import { BenchCluster, type BenchClusterOptions } from './bench-cluster';
import { sideBySide } from './side-by-side';
import type { FloorProgress, FloorShape, FloorSummary } from './throughput-floor';

/** [seconds since start, items/s over the preceding window] */
export type SeriesPoint = [number, number];

export interface MeasuredRun {
  items: number;
  ms: number;
  itemsPerSecond: number;
  series: SeriesPoint[];
  /** Storage requests by operation while it ran, summed over every process that took part. */
  requests: Record<string, number>;
  requestsTotal: number;
}

const total = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);

/**
 * Turns cumulative (ms, done) samples into items/s over the trailing `windowMs` (default 1 s):
 * the leader checkpoints its counts in bursts, so a shorter window shows the bursts, not the rate.
 */
export function rateSeries(samples: readonly { atMs: number; done: number }[], windowMs = 1000): SeriesPoint[] {
  const series: SeriesPoint[] = [[0, 0]];
  let from = 0;
  for (let i = 1; i < samples.length; i++) {
    const b = samples[i]!;
    while (from < i - 1 && b.atMs - samples[from + 1]!.atMs >= windowMs) from++;
    const a = samples[from]!;
    const dt = (b.atMs - a.atMs) / 1000;
    if (dt > 0) series.push([Number((b.atMs / 1000).toFixed(3)), Number(((b.done - a.done) / dt).toFixed(1))]);
  }
  return series;
}

export type FloorRun = MeasuredRun & { emptyReceives: number; shape: FloorShape };

/**
 * The plain-SDK floor against the same Azurite, on `shards` pairs of queues: its consumers in
 * one process with the sender and drainer, or each in a process of its own (see throughput-floor).
 */
export async function runFloor(
  connectionString: string,
  items: number,
  workers: number,
  shards = 1,
  shape: FloorShape = 'one-process',
): Promise<FloorRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'throughput-floor.ts')], {
    env: {
      ...process.env,
      BENCH_CONNECTION: connectionString,
      BENCH_ITEMS: String(items),
      BENCH_WORKERS: String(workers),
      BENCH_SHARDS: String(shards),
      BENCH_FLOOR_SHAPE: shape,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const progress: { atMs: number; done: number }[] = [{ atMs: 0, done: 0 }];
  let summary: FloorSummary | undefined;
  const stderr: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const parsed = JSON.parse(line) as FloorProgress | FloorSummary;
    if (parsed.kind === 'progress') progress.push({ atMs: parsed.atMs, done: parsed.done });
    else summary = parsed;
  });
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  // 'close', not 'exit': the summary line may still be in the pipe when the process exits.
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0 || !summary) throw new Error(`throughput floor exited ${code}: ${stderr.join('')}`);
  progress.push({ atMs: summary.ms, done: summary.items });
  return {
    items: summary.items,
    ms: summary.ms,
    itemsPerSecond: summary.itemsPerSecond,
    series: rateSeries(progress),
    requests: summary.requests,
    requestsTotal: total(summary.requests),
    emptyReceives: summary.emptyReceives,
    shape: summary.shape,
  };
}

/**
 * One run of `job` on the cluster, end to end: from the run record's creation to its end
 * (the output is written before the record turns terminal). Progress is sampled from the run
 * record every 250 ms; requests are the instances' own counts before and after.
 *
 * `rightAfter`: a run has just ended on this cluster, and its counts, read fresh after it, are
 * this one's start (a smoke run's). It is triggered at once: an idle leader looks at its requests
 * less and less often (every 5 s at last), so a trigger right after a run is taken up sooner.
 */
export async function runOurs(
  cluster: BenchCluster,
  job: string,
  items: number,
  timeoutMs = 300_000,
  rightAfter = false,
): Promise<MeasuredRun> {
  if (!rightAfter) await cluster.freshRequestReports(Date.now());
  const before = cluster.totalRequests().byOperation;
  const runId = await cluster.trigger(job);
  const samples: { at: number; done: number }[] = [];
  // Only a hang exceeds it, so it scales with the test suite's measured slowdown (1 in a run by hand).
  const deadline = Date.now() + patience(timeoutMs);
  for (;;) {
    // One read per sample: the record carries both the progress and whether the run ended.
    const stored = await cluster.docs.read(runKeys.record(runId)).catch(() => undefined);
    if (stored) {
      const { state, counters } = (JSON.parse(stored.body) as { value: RunRecord }).value;
      samples.push({ at: Date.now(), done: counters.succeeded + counters.failed });
      if (isTerminal(state)) break;
    }
    if (Date.now() > deadline) throw new Error(`run ${runId} did not finish within ${describePatience(timeoutMs)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const { record } = await cluster.waitForRun(runId, 10_000);
  if (record.state !== 'succeeded' || record.counters.succeeded !== items) {
    throw new Error(`run ${runId} ended ${record.state} with ${JSON.stringify(record.counters)}`);
  }
  await cluster.freshRequestReports(Date.now());
  const after = cluster.totalRequests().byOperation;
  const requests = requestCountsSince(after, before);
  const createdAt = Date.parse(record.createdAt);
  const ms = Date.parse(record.endedAt!) - createdAt;
  const progress = [
    { atMs: 0, done: 0 },
    ...samples.filter((s) => s.at >= createdAt).map((s) => ({ atMs: s.at - createdAt, done: s.done })),
    { atMs: ms, done: items },
  ];
  return {
    items,
    ms,
    itemsPerSecond: (items / ms) * 1000,
    series: rateSeries(progress),
    requests,
    requestsTotal: total(requests),
  };
}

const WARM = { name: 'warm', items: 50 };

/**
 * A bench cluster with a leader, and by default one small run already through it (not measured):
 * JIT, sockets, queues and containers warm in every process before anything is timed. A smoke
 * run skips the warm-up, as it checks that the arms work, not how fast they are.
 */
export async function startThroughputCluster(options: BenchClusterOptions, warmUp = true): Promise<BenchCluster> {
  const cluster = await BenchCluster.start({ ...options, jobs: [WARM, ...(options.jobs ?? [])] });
  try {
    await cluster.waitFor(() => cluster.leader(), 60_000, 'a leader');
    if (warmUp) await runOurs(cluster, WARM.name, WARM.items);
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/**
 * `rounds` rounds of both floors then `job` on the same Azurite, alternating: the machine's noise
 * is larger than the gap between the arms, so each trio is measured under the same load.
 * `floor` is the floor in the shape Baton runs in (a process per consumer, as a cluster has an
 * instance per worker); `floorOneProcess` is the same work with every consumer in one process.
 */
export async function alternateRounds(
  cluster: BenchCluster,
  job: { name: string; items: number },
  options: { rounds: number; workers: number; shards?: number },
): Promise<{ floor: FloorRun[]; floorOneProcess: FloorRun[]; ours: MeasuredRun[] }> {
  const floor: FloorRun[] = [];
  const floorOneProcess: FloorRun[] = [];
  const ours: MeasuredRun[] = [];
  for (let round = 0; round < options.rounds; round++) {
    floor.push(await runFloor(cluster.connectionString, job.items, options.workers, options.shards, 'per-instance'));
    floorOneProcess.push(await runFloor(cluster.connectionString, job.items, options.workers, options.shards, 'one-process'));
    ours.push(await runOurs(cluster, job.name, job.items));
  }
  return { floor, floorOneProcess, ours };
}

/**
 * A smoke run's one round: both floors, one shape after the other, while the cluster does
 * `beside` (its election, an idle window: anything that does not run ours), then `job` once. It
 * checks that every arm works, not how they compare, so the floors need not have the Azurite to
 * themselves.
 */
export async function smokeRound<T>(
  cluster: BenchCluster,
  job: { name: string; items: number },
  options: { workers: number; shards?: number },
  beside: () => Promise<T>,
): Promise<{ rounds: { floor: FloorRun[]; floorOneProcess: FloorRun[]; ours: MeasuredRun[] }; beside: T }> {
  const [{ floor, floorOneProcess }, besideResult] = await sideBySide([
    async () => ({
      floor: await runFloor(cluster.connectionString, job.items, options.workers, options.shards, 'per-instance'),
      floorOneProcess: await runFloor(cluster.connectionString, job.items, options.workers, options.shards, 'one-process'),
    }),
    beside,
  ] as const);
  const ours = await runOurs(cluster, job.name, job.items);
  return { rounds: { floor: [floor], floorOneProcess: [floorOneProcess], ours: [ours] }, beside: besideResult };
}

/** The round with the median rate (the lower middle one for an even count). */
export function medianRun<T extends MeasuredRun>(runs: T[]): T {
  const sorted = [...runs].sort((a, b) => a.itemsPerSecond - b.itemsPerSecond);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
