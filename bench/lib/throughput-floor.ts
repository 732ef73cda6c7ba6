/**
 * The throughput floor: plain `@azure/storage-queue` calls doing what a fan-out/fan-in needs and
 * nothing else. One sender sends N work messages on `sendLanes` lanes; `workers` consumers each
 * receive batches of `batch` and, per message, send a result and delete the work message; one
 * drainer receives results in batches of 32 and deletes them. Everything runs at once, as
 * Baton's pipeline does. It prints JSON lines: progress every 250 ms, then the summary. It runs
 * in its own process, so its client work does not share the event loop of the Azurite it measures.
 *
 * With `BENCH_SHARDS` = S > 1 it has S work and S results queues, shaped like a hub's shards: the
 * sender sends round robin over the work queues, each consumer runs one receive loop per work
 * queue (as each instance runs one queue trigger per shard) and sends each result to the results
 * queue of the same shard, and the drainer receives every results queue at once.
 *
 * A message whose visibility runs out before it is deleted (a starved machine) comes back and is
 * handled again, as any queue consumer's would be: the delete with the old receipt is refused,
 * and items are counted by their index, once each, however many results arrive for them.
 *
 * `BENCH_FLOOR_SHAPE` says where the consumers run:
 * - `one-process` (default): in this process, beside the sender and the drainer.
 * - `per-instance`: one process per consumer, as a cluster has one instance per worker: the first
 *   consumer beside the sender and drainer (as the leader's instance also works), the others each
 *   in a process of its own, started and polling before the clock starts. On a small machine
 *   every process pays its own event loop, HTTP stack and garbage collector, so this is the floor
 *   for the shape Baton actually runs in.
 *
 *   BENCH_CONNECTION=… BENCH_ITEMS=2000 [BENCH_SHARDS=1] [BENCH_FLOOR_SHAPE=per-instance] \
 *     node --import tsx bench/lib/throughput-floor.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { isGoneOrStale } from '../../src/queue/azure-queue';
import { createQueueServiceClient } from '../../src/storage/client-factory';
import { StorageRequestCounter, requestCountsSince, sumRequestCounts } from '../../src/storage/request-counter';

export type FloorShape = 'one-process' | 'per-instance';

export interface FloorSummary {
  kind: 'summary';
  shape: FloorShape;
  items: number;
  ms: number;
  itemsPerSecond: number;
  requests: Record<string, number>;
  /** Receives that returned no message (polling while the pipeline fills or drains). */
  emptyReceives: number;
}

export interface FloorProgress {
  kind: 'progress';
  atMs: number;
  done: number;
}

/** What a consumer process prints when it stops. */
interface ConsumerReport {
  requests: Record<string, number>;
  emptyReceives: number;
}

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

interface ShardQueues {
  work: QueueClient;
  results: QueueClient;
}

function connect(): { counter: StorageRequestCounter; service: QueueServiceClient } {
  const counter = new StorageRequestCounter();
  const service = createQueueServiceClient(
    { kind: 'connectionString', connectionString: env('BENCH_CONNECTION') },
    { requestCounter: counter },
  );
  return { counter, service };
}

// Shard 0 keeps the one-queue names; the others add `-s<k>`, as a hub's shards do.
function shardQueues(service: QueueServiceClient, id: string, shards: number): ShardQueues[] {
  const suffix = (shard: number) => (shard === 0 ? '' : `-s${shard}`);
  return Array.from({ length: shards }, (_, shard) => ({
    work: service.getQueueClient(`floor-work-${id}${suffix(shard)}`),
    results: service.getQueueClient(`floor-results-${id}${suffix(shard)}`),
  }));
}

type Received = { messageId: string; popReceipt: string; messageText: string };

/** The item a work or result message is about: both carry its index as `first`. */
const itemOf = (m: Received): number => (JSON.parse(m.messageText) as { first: number }).first;

/**
 * Deletes a received message. False when its receipt is stale or it is gone: its visibility ran
 * out and it was received again, so whoever holds it now deletes it.
 */
async function remove(queue: QueueClient, m: Received): Promise<boolean> {
  try {
    await queue.deleteMessage(m.messageId, m.popReceipt);
    return true;
  } catch (err) {
    if (isGoneOrStale(err)) return false;
    throw err;
  }
}

/** Receives `size` at a time until `until()`, handling each batch at once; polls every 20 ms when empty. */
async function consume(
  queue: QueueClient,
  size: number,
  handle: (m: Received) => Promise<void>,
  until: () => boolean,
  onEmpty: () => void,
): Promise<void> {
  while (!until()) {
    const got = await queue.receiveMessages({ numberOfMessages: size, visibilityTimeout: 60 });
    if (got.receivedMessageItems.length === 0) {
      onEmpty();
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    await Promise.all(got.receivedMessageItems.map(handle));
  }
}

/** One consumer: a receive loop per shard, answering each work message on its shard's results queue. */
function consumeWork(
  queues: ShardQueues[],
  batch: number,
  until: () => boolean,
  onEmpty: () => void,
  onDone: (item: number) => void = () => {},
) {
  return queues.map(({ work, results }) =>
    consume(
      work,
      batch,
      async (m) => {
        const item = itemOf(m);
        await results.sendMessage(JSON.stringify({ v: 1, t: 'result', ok: true, first: item }));
        await remove(work, m);
        onDone(item);
      },
      until,
      onEmpty,
    ),
  );
}

/** Starts `count` consumer processes and resolves once each has its clients built and is polling. */
async function startConsumers(count: number, id: string, shards: number, batch: number): Promise<ChildProcess[]> {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', __filename], {
      env: {
        ...process.env,
        BENCH_ROLE: 'consumer',
        BENCH_QUEUE_ID: id,
        BENCH_SHARDS: String(shards),
        BENCH_BATCH: String(batch),
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve, reject) => {
          child.stdout!.once('data', () => resolve());
          child.once('exit', (code) => reject(new Error(`floor consumer exited ${code} before it started`)));
        }),
    ),
  );
  return children;
}

/** Closes each consumer's stdin (its signal to stop) and collects what it reports. */
async function stopConsumers(children: ChildProcess[]): Promise<ConsumerReport[]> {
  return Promise.all(
    children.map(
      (child) =>
        new Promise<ConsumerReport>((resolve, reject) => {
          let out = '';
          child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
          // 'close', not 'exit': the report line may still be in the pipe when the process exits.
          child.once('close', (code) => {
            const last = out.trim().split('\n').pop();
            if (code !== 0 || !last) reject(new Error(`floor consumer exited ${code}`));
            else resolve(JSON.parse(last) as ConsumerReport);
          });
          child.stdin!.end();
        }),
    ),
  );
}

async function consumerMain(): Promise<void> {
  const { counter, service } = connect();
  const shards = Number(env('BENCH_SHARDS', '1'));
  const queues = shardQueues(service, env('BENCH_QUEUE_ID'), shards);
  let stopped = false;
  process.stdin.on('end', () => (stopped = true)).resume();
  // Ready once every loop has polled a few times: sockets open and code warm, as a cluster's
  // instances are when a run starts. What it did until then is not counted.
  const warmUp = 3 * shards;
  let emptyReceives = 0;
  let since: Record<string, number> = {};
  const polling = consumeWork(
    queues,
    Number(env('BENCH_BATCH', '16')),
    () => stopped,
    () => {
      if (++emptyReceives !== warmUp) return;
      since = counter.snapshot();
      process.stdout.write('ready\n');
    },
  );
  await Promise.all(polling);
  const requests = requestCountsSince(counter.snapshot(), since);
  const report: ConsumerReport = { requests, emptyReceives: Math.max(0, emptyReceives - warmUp) };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

async function main(): Promise<void> {
  if (process.env.BENCH_ROLE === 'consumer') return consumerMain();
  const items = Number(env('BENCH_ITEMS', '2000'));
  const workers = Number(env('BENCH_WORKERS', '3'));
  const batch = Number(env('BENCH_BATCH', '16'));
  const sendLanes = Number(env('BENCH_SEND_LANES', '16'));
  const shards = Number(env('BENCH_SHARDS', '1'));
  const shape = env('BENCH_FLOOR_SHAPE', 'one-process');
  if (shape !== 'one-process' && shape !== 'per-instance') {
    throw new Error(`BENCH_FLOOR_SHAPE must be one-process or per-instance, not ${shape}`);
  }
  const { counter, service } = connect();
  const id = randomUUID().slice(0, 8);
  const queues = shardQueues(service, id, shards);
  const all = queues.flatMap((q) => [q.work, q.results]);
  await Promise.all(all.map((q) => q.create()));
  const setup = counter.snapshot();
  const children = shape === 'per-instance' ? await startConsumers(workers - 1, id, shards, batch) : [];

  let emptyReceives = 0;
  const processed = new Set<number>();
  const drained = new Set<number>();
  const started = performance.now();
  const progress = setInterval(() => {
    const line: FloorProgress = { kind: 'progress', atMs: performance.now() - started, done: drained.size };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }, 250);

  // The same shape of message Baton sends: a small JSON document naming run, job and item.
  const text = (i: number) => JSON.stringify({ v: 1, t: 'work', run: `floor/${id}`, job: 'floor', first: i, items: [{ i }] });

  const send = async (): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: sendLanes }, async () => {
        for (let i = next++; i < items; i = next++) await queues[i % shards]!.work.sendMessage(text(i));
      }),
    );
  };
  const empty = () => emptyReceives++;
  const inProcess = shape === 'per-instance' ? 1 : workers;
  // With consumers elsewhere, this process cannot count what they processed; it stops on the drain.
  const consumed = shape === 'per-instance' ? () => drained.size >= items : () => processed.size >= items;

  await Promise.all([
    send(),
    ...Array.from({ length: inProcess }, () => consumeWork(queues, batch, consumed, empty, (i) => processed.add(i))).flat(),
    ...queues.map(({ results }) =>
      consume(
        results,
        32,
        async (m) => {
          await remove(results, m);
          drained.add(itemOf(m));
        },
        () => drained.size >= items,
        empty,
      ),
    ),
  ]);
  const ms = performance.now() - started;
  clearInterval(progress);
  const reports = await stopConsumers(children);
  // Each consumer reports only what it did after it was ready; this process's setup is left out.
  const requests = requestCountsSince(sumRequestCounts(counter.snapshot(), ...reports.map((r) => r.requests)), setup);
  emptyReceives += reports.reduce((a, r) => a + r.emptyReceives, 0);
  await Promise.all(all.map((q) => q.delete()));
  const summary: FloorSummary = {
    kind: 'summary',
    shape,
    items,
    ms,
    itemsPerSecond: (items / ms) * 1000,
    requests,
    emptyReceives,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
