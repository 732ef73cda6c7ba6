import { HubQueues } from '../../src/engine/queue-shards';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { systemClock } from '../../src/clock/clock';
import { dispatchSlice } from '../../src/engine/dispatcher';
import { DEFAULT_TUNING, type EngineContext, type TermContext } from '../../src/engine/engine-context';
import type { WorkMessage } from '../../src/engine/messages';
import { planRun } from '../../src/engine/planner';
import { RunBook, type ActiveRun } from '../../src/engine/run-book';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import type { DocumentCallOptions, StoredDocument, WriteCondition } from '../../src/fencing/document-store';
import { defineJob } from '../../src/jobs/define-job';
import type { JobDefinition } from '../../src/jobs/job-definition';
import type { Leadership } from '../../src/lease/term';
import { startAzurite } from '../../src/local/azurite';
import { AzureQueue } from '../../src/queue/azure-queue';
import type { MessageReceipt, QueuePort } from '../../src/queue/queue-port';
import { newRunRecord } from '../../src/hub/run-record';
import { createBlobServiceClient, createQueueServiceClient } from '../../src/storage/client-factory';
import { ForwardingDocumentStore } from '../../test/support/forwarding-document-store';
import { ForwardingQueue, type SendOptions } from '../../test/support/forwarding-queue';
import { noLeaseToRaise } from '../../test/support/unit-engine';
import { median, report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * dispatch: the leader's enqueue rate (dispatchSlice from a planned run to `running`) against a
 * plain parallel QueueClient.sendMessage of the same message texts, same concurrency, same
 * in-process Azurite, each on a fresh queue, alternating floor/ours. A third, diagnostic arm
 * ("windowed") sends the same texts with the SDK in windows of dispatchConcurrency × 4 with a
 * barrier between windows, the dispatcher's send pattern without its reads and encoding.
 */
export const name = 'dispatch';

const ITEMS = Number(process.env.BENCH_DISPATCH_ITEMS ?? 10_000);
const TRIALS = Number(process.env.BENCH_DISPATCH_TRIALS ?? 2);
/** The diagnostic third arm costs a third of the run time; on request only. */
const WINDOWED = process.env.BENCH_DISPATCH_WINDOWED === '1';
const VERBOSE = process.env.BENCH_VERBOSE === '1';
const TRACE = process.env.BENCH_TRACE === '1';
// Azurite's own sweep interval (1 minute), not startAzurite's 2 s: with 10,000 messages waiting
// and no consumer, a sweep walks them all every 2 s and takes the CPU the sends need.
const AZURITE_OPTIONS = {
  gcIntervalMs: 60_000,
  ...(process.env.BENCH_AZURITE_MEM ? { memoryLimitBytes: Number(process.env.BENCH_AZURITE_MEM) } : {}),
};
const warmupItems = (items: number): number => Math.min(500, items);
const CONCURRENCY = DEFAULT_TUNING.dispatchConcurrency;
const WINDOW = CONCURRENCY * 4; // as in src/engine/dispatcher.ts
const GOAL = { ratio: 0.9, direction: 'atLeast' as const };

interface Item {
  n: number;
}

function benchJob(items: number): JobDefinition {
  return defineJob<Item, number, number>({
    name: 'bench-dispatch',
    schedule: '0 0 0 1 1 *',
    itemsPerMessage: 1,
    async *split() {
      for (let n = 0; n < items; n++) yield { n };
    },
    process: (item) => item.n,
    aggregate: { initial: () => 0, add: (acc, r) => acc + r },
  }) as unknown as JobDefinition;
}

/** Tracks in-flight sends over time: how busy the send lanes were. */
class Lanes {
  private inflight = 0;
  private last = 0;
  private busyArea = 0; // ∫ inflight dt
  private idleMs = 0; // time with nothing in flight
  private start = 0;
  sends = 0;

  begin(): void {
    this.start = this.last = performance.now();
  }
  private tick(): void {
    const now = performance.now();
    const dt = now - this.last;
    this.busyArea += this.inflight * dt;
    if (this.inflight === 0) this.idleMs += dt;
    this.last = now;
  }
  enter(): void {
    this.tick();
    this.inflight++;
    this.sends++;
  }
  exit(): void {
    this.tick();
    this.inflight--;
  }
  finish(): { meanInFlight: number; noSendInFlightMs: number } {
    this.tick();
    const total = this.last - this.start;
    return { meanInFlight: total > 0 ? this.busyArea / total : 0, noSendInFlightMs: this.idleMs };
  }
}

/** A QueuePort that counts and tracks the sends of the one it wraps. */
class TrackedQueue extends ForwardingQueue {
  constructor(
    inner: QueuePort,
    readonly lanes: Lanes,
  ) {
    super(inner);
  }
  override async send(text: string, options?: SendOptions): Promise<MessageReceipt> {
    this.lanes.enter();
    if (TRACE && this.lanes.sends % 1000 === 0) console.error(`    send ${this.lanes.sends} at ${Math.round(performance.now())}`);
    try {
      return await this.inner.send(text, options);
    } finally {
      this.lanes.exit();
    }
  }
}

/** A DocumentStore that counts what the dispatcher does with documents while `on`. */
class CountingDocs extends ForwardingDocumentStore {
  on = false;
  recordWrites = 0;
  claimWrites = 0;
  otherWrites = 0;
  chunkReads = 0;
  otherReads = 0;
  readMs = 0;
  writeMs = 0;
  reset(): void {
    this.recordWrites = this.claimWrites = this.otherWrites = this.chunkReads = this.otherReads = 0;
    this.readMs = this.writeMs = 0;
  }
  override async read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    const t0 = performance.now();
    if (TRACE && this.on) console.error(`    read ${key} at ${Math.round(t0)}`);
    try {
      return await this.inner.read(key, options);
    } finally {
      if (this.on) {
        this.readMs += performance.now() - t0;
        if (key.includes('/plan/')) this.chunkReads++;
        else this.otherReads++;
      }
    }
  }
  override async write(
    key: string,
    body: string,
    condition: WriteCondition,
    options?: DocumentCallOptions,
  ): Promise<{ etag: string }> {
    const t0 = performance.now();
    if (TRACE && this.on) console.error(`    write ${key} at ${Math.round(t0)}`);
    try {
      return await this.inner.write(key, body, condition, options);
    } finally {
      if (this.on) {
        this.writeMs += performance.now() - t0;
        if (key.endsWith('/run.json')) this.recordWrites++;
        else if (key.includes('/claims/')) this.claimWrites++;
        else this.otherWrites++;
      }
    }
  }
}

function handTerm(epoch: number): TermContext {
  const controller = new AbortController();
  // The dispatcher passes this signal to 16 sends at once, as the coordinator's term does.
  setMaxListeners(0, controller.signal);
  const leadership: Leadership = {
    identity: `bench-leader-${epoch}`,
    epoch,
    signal: controller.signal,
    yieldSignal: new AbortController().signal,
    heartbeat() {},
    remainingMs: () => 1e9,
    raiseEpoch: noLeaseToRaise,
    restUntil: () => undefined,
  };
  return { leadership, epoch, signal: controller.signal };
}

interface Env {
  queueService: QueueServiceClient;
  docs: CountingDocs;
  job: JobDefinition;
}

async function freshQueue(env: Env, prefix: string): Promise<QueueClient> {
  const client = env.queueService.getQueueClient(`${prefix}-${randomUUID().slice(0, 8)}`);
  await client.create();
  return client;
}

async function dropQueue(client: QueueClient, expected: number): Promise<number> {
  const props = await client.getProperties();
  await client.delete();
  const count = props.approximateMessagesCount ?? 0;
  if (count !== expected) throw new Error(`queue ${client.name} holds ${count} messages, expected ${expected}`);
  return count;
}

/** The texts the dispatcher sends for a run of `items` items, one per message. */
function workTexts(runId: string, job: string, items: number): string[] {
  const texts: string[] = [];
  for (let first = 0; first < items; first++) {
    const message: WorkMessage = { v: 1, t: 'work', run: runId, job, first, count: 1, items: [{ n: first }] };
    texts.push(JSON.stringify(message));
  }
  return texts;
}

async function sendParallel(texts: string[], concurrency: number, send: (t: string) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, texts.length) }, async () => {
      while (next < texts.length) await send(texts[next++] as string);
    }),
  );
}

interface Sample {
  arm: 'floor' | 'ours' | 'windowed';
  round: number;
  items: number;
  ms: number;
  itemsPerSecond: number;
  meanInFlight: number;
  noSendInFlightMs: number;
  [extra: string]: unknown;
}

/** Floor: pre-built texts, QueueClient.sendMessage, `CONCURRENCY` lanes, no barrier. */
async function floorTrial(env: Env, round: number, items: number, windowed: boolean): Promise<Sample> {
  const queue = await freshQueue(env, windowed ? 'bench-win' : 'bench-floor');
  const texts = workTexts(`${env.job.name}/bench-${randomUUID()}`, env.job.name, items);
  const lanes = new Lanes();
  const send = async (text: string): Promise<void> => {
    lanes.enter();
    try {
      await queue.sendMessage(text);
    } finally {
      lanes.exit();
    }
  };
  const t0 = performance.now();
  lanes.begin();
  if (windowed) {
    for (let at = 0; at < texts.length; at += WINDOW) await sendParallel(texts.slice(at, at + WINDOW), CONCURRENCY, send);
  } else {
    await sendParallel(texts, CONCURRENCY, send);
  }
  const ms = performance.now() - t0;
  const l = lanes.finish();
  await dropQueue(queue, items);
  return { arm: windowed ? 'windowed' : 'floor', round, items, ms, itemsPerSecond: (items / ms) * 1000, ...l };
}

/** Ours: a real run record, planned outside the timing; time dispatchSlice until `running`. */
async function oursTrial(env: Env, round: number, items: number): Promise<Sample> {
  const queue = await freshQueue(env, 'bench-ours');
  const lanes = new Lanes();
  const work = new TrackedQueue(new AzureQueue(env.queueService, queue.name), lanes);
  const job = benchJob(items);
  const ctx: EngineContext = {
    jobs: new Map([[job.name, job]]),
    docs: env.docs,
    queues: HubQueues.of({ work, results: work, poison: work }),
    clock: systemClock,
    log: { info() {}, warn: (m) => console.warn(m) },
    // No workers here: the in-flight window would stop the dispatch it measures.
    tuning: { ...DEFAULT_TUNING, maxInFlightMessages: Number.POSITIVE_INFINITY },
  };
  const term = handTerm(1);
  const book = new RunBook(ctx, term);
  const runId = `${job.name}/manual-${randomUUID()}`;
  const record = newRunRecord({
    runId,
    job: job.name,
    trigger: 'manual',
    occurrence: undefined,
    now: new Date(),
    timeoutSeconds: 3600,
  });
  if (!(await book.create(job, record))) throw new Error(`run ${runId} already exists`);
  const run = book.active.get(runId) as ActiveRun;
  const tp = performance.now();
  await planRun(ctx, term, book, run);
  if (VERBOSE) console.error(`  (ours round ${round}: planned in ${Math.round(performance.now() - tp)} ms)`);
  if (run.doc.value.state !== 'dispatching' || run.doc.value.messages !== items) {
    throw new Error(`planning left run in ${run.doc.value.state} with ${run.doc.value.messages} messages`);
  }

  env.docs.reset();
  env.docs.on = true;
  const t0 = performance.now();
  lanes.begin();
  await dispatchSlice(ctx, term, book, run, Infinity);
  const ms = performance.now() - t0;
  env.docs.on = false;
  const l = lanes.finish();

  const after = run.doc.value;
  if (after.state !== 'running' || after.cursor !== after.messages) {
    throw new Error(`dispatch ended in ${after.state} at cursor ${after.cursor}/${after.messages}`);
  }
  const td = performance.now();
  await dropQueue(queue, items);
  if (VERBOSE)
    console.error(
      `  (ours round ${round}: dispatched in ${Math.round(ms)} ms, queue dropped in ${Math.round(performance.now() - td)} ms)`,
    );
  return {
    arm: 'ours',
    round,
    items,
    ms,
    itemsPerSecond: (items / ms) * 1000,
    ...l,
    sends: lanes.sends,
    checkpoints: env.docs.recordWrites,
    chunkReads: env.docs.chunkReads,
    claimWrites: env.docs.claimWrites,
    otherReads: env.docs.otherReads,
    otherWrites: env.docs.otherWrites,
    chunkReadMs: env.docs.readMs,
    checkpointWriteMs: env.docs.writeMs,
  };
}

/**
 * Azurite 3.35 in memory stalls (one core at 100 %, no requests answered) after roughly 46,000
 * queue messages have been sent in its lifetime, even when the queues are deleted and whatever
 * memoryLimitBytes is: a plain SDK loop of 10,000-message queues stalls at the same point. So each
 * round gets its own in-process Azurite; floor and ours within a round share it.
 */
async function withAzurite<T>(items: number, fn: (env: Env) => Promise<T>): Promise<T> {
  const azurite = await startAzurite(AZURITE_OPTIONS);
  try {
    const settings = { kind: 'connectionString', connectionString: azurite.connectionString } as const;
    const queueService = createQueueServiceClient(settings);
    const blobService = createBlobServiceClient(settings);
    const docs = new CountingDocs(
      new BlobDocumentStore(blobService.getContainerClient(`bench-${randomUUID().slice(0, 8)}-runs`)),
    );
    return await fn({ queueService, docs, job: benchJob(items) });
  } finally {
    await azurite.close();
  }
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const [items, trials] = options.smoke ? [100, 1] : [ITEMS, TRIALS];
  const started = performance.now();
  const samples: Sample[] = [];
  const record = (s: Sample): void => {
    samples.push(s);
    if (VERBOSE) console.error(`  ${s.arm} round ${s.round}: ${Math.round(s.itemsPerSecond)} items/s in ${Math.round(s.ms)} ms`);
  };
  for (let round = 1; round <= trials; round++) {
    await withAzurite(items, async (env) => {
      // Warm-up, not recorded: JIT, sockets, containers.
      await floorTrial(env, 0, warmupItems(items), false);
      await oursTrial(env, 0, warmupItems(items));
      record(await floorTrial(env, round, items, false));
      record(await oursTrial(env, round, items));
      if (WINDOWED) record(await floorTrial(env, round, items, true));
    });
  }
  {
    const of = (arm: Sample['arm']) => samples.filter((s) => s.arm === arm);
    const ours = median(of('ours').map((s) => s.itemsPerSecond));
    const floor = median(of('floor').map((s) => s.itemsPerSecond));
    const windowed = median(of('windowed').map((s) => s.itemsPerSecond));
    const med = (arm: Sample['arm'], key: string) => median(of(arm).map((s) => Number(s[key])));
    const summary = {
      items,
      itemsPerMessage: 1,
      concurrency: CONCURRENCY,
      window: WINDOW,
      trials,
      order: `per round: floor, ours${WINDOWED ? ', windowed (diagnostic)' : ''}; fresh queue each, deleted after`,
      oursItemsPerSecond: ours,
      floorItemsPerSecond: floor,
      ratio: ours / floor,
      checkpoints: of('ours').map((s) => s.checkpoints),
      chunkReads: of('ours').map((s) => s.chunkReads),
      claimWrites: of('ours').map((s) => s.claimWrites),
      meanInFlight: {
        floor: med('floor', 'meanInFlight'),
        ours: med('ours', 'meanInFlight'),
        ...(WINDOWED ? { windowed: med('windowed', 'meanInFlight') } : {}),
      },
      noSendInFlightMs: {
        floor: med('floor', 'noSendInFlightMs'),
        ours: med('ours', 'noSendInFlightMs'),
        ...(WINDOWED ? { windowed: med('windowed', 'noSendInFlightMs') } : {}),
      },
      oursChunkReadMs: med('ours', 'chunkReadMs'),
      oursCheckpointWriteMs: med('ours', 'checkpointWriteMs'),
      diagnostic: WINDOWED
        ? { windowedItemsPerSecond: windowed, windowedOverFloor: windowed / floor, oursOverWindowed: ours / windowed }
        : 'BENCH_DISPATCH_WINDOWED=1 adds the windowed arm',
      azurite: 'one in-process Azurite per round (floor, ours and windowed of a round share it); see withAzurite',
      wallSeconds: (performance.now() - started) / 1000,
    };
    return report(name, { samples, summary, ours, floor, unit: 'items/s', goal: GOAL }, options);
  }
}
