/**
 * The throughput floor, run as its own process (so its client work does not share the event loop
 * of the Azurite it measures): plain `@azure/storage-queue` calls doing what a fan-out/fan-in
 * needs and nothing else. One sender sends N work messages on `sendLanes` lanes; `workers`
 * consumers each receive batches of `batch` and, per message, send a result and delete the work
 * message; one drainer receives results in batches of 32 and deletes them. Everything runs at
 * once, as Baton's pipeline does. It prints JSON lines: progress every 250 ms, then the summary.
 *
 * With `BENCH_SHARDS` = S > 1 it has S work and S results queues, shaped like a hub's shards: the
 * sender sends round robin over the work queues, each consumer runs one receive loop per work
 * queue (as each instance runs one queue trigger per shard) and sends each result to the results
 * queue of the same shard, and the drainer receives every results queue at once.
 *
 *   BENCH_CONNECTION=… BENCH_ITEMS=2000 [BENCH_SHARDS=1] node --import tsx bench/lib/throughput-floor.ts
 */
import { randomUUID } from 'node:crypto';
import type { QueueClient } from '@azure/storage-queue';
import { createQueueServiceClient } from '../../src/storage/client-factory';
import { StorageRequestCounter } from '../../src/storage/request-counter';

export interface FloorSummary {
  kind: 'summary';
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

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

async function main(): Promise<void> {
  const items = Number(env('BENCH_ITEMS', '2000'));
  const workers = Number(env('BENCH_WORKERS', '3'));
  const batch = Number(env('BENCH_BATCH', '16'));
  const sendLanes = Number(env('BENCH_SEND_LANES', '16'));
  const shards = Number(env('BENCH_SHARDS', '1'));
  const counter = new StorageRequestCounter();
  const service = createQueueServiceClient(
    { kind: 'connectionString', connectionString: env('BENCH_CONNECTION') },
    { requestCounter: counter },
  );
  const id = randomUUID().slice(0, 8);
  // Shard 0 keeps the one-queue names; the others add `-s<k>`, as a hub's shards do.
  const suffix = (shard: number) => (shard === 0 ? '' : `-s${shard}`);
  const queues = Array.from({ length: shards }, (_, shard) => ({
    work: service.getQueueClient(`floor-work-${id}${suffix(shard)}`),
    results: service.getQueueClient(`floor-results-${id}${suffix(shard)}`),
  }));
  const all = queues.flatMap((q) => [q.work, q.results]);
  await Promise.all(all.map((q) => q.create()));
  const setup = counter.snapshot();

  let emptyReceives = 0;
  let processed = 0;
  let drained = 0;
  const started = performance.now();
  const progress = setInterval(() => {
    const line: FloorProgress = { kind: 'progress', atMs: performance.now() - started, done: drained };
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

  const consume = async (
    queue: QueueClient,
    size: number,
    handle: (m: { messageId: string; popReceipt: string; messageText: string }) => Promise<void>,
    until: () => boolean,
  ): Promise<void> => {
    while (!until()) {
      const got = await queue.receiveMessages({ numberOfMessages: size, visibilityTimeout: 60 });
      if (got.receivedMessageItems.length === 0) {
        emptyReceives++;
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      await Promise.all(got.receivedMessageItems.map(handle));
    }
  };

  await Promise.all([
    send(),
    ...Array.from({ length: workers }, () =>
      queues.map(({ work, results }) =>
        consume(
          work,
          batch,
          async (m) => {
            await results.sendMessage(JSON.stringify({ v: 1, t: 'result', ok: true, of: m.messageText.length }));
            await work.deleteMessage(m.messageId, m.popReceipt);
            processed++;
          },
          () => processed >= items,
        ),
      ),
    ).flat(),
    ...queues.map(({ results }) =>
      consume(
        results,
        32,
        async (m) => {
          await results.deleteMessage(m.messageId, m.popReceipt);
          drained++;
        },
        () => drained >= items,
      ),
    ),
  ]);
  const ms = performance.now() - started;
  clearInterval(progress);
  const requests = Object.fromEntries(
    Object.entries(counter.snapshot())
      .map(([op, n]) => [op, n - (setup[op] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
  await Promise.all(all.map((q) => q.delete()));
  const summary: FloorSummary = { kind: 'summary', items, ms, itemsPerSecond: (items / ms) * 1000, requests, emptyReceives };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
