import { FakeClock } from '../../src/clock/fake-clock';
import { LeaseLostError } from '../../src/errors';
import { DEFAULT_TUNING, type EngineContext, type TermContext } from '../../src/engine/engine-context';
import { jobStateKey, jobStateSchema, type JobState } from '../../src/hub/job-state';
import { RunBook, type ActiveRun } from '../../src/engine/run-book';
import type { StragglerWatch } from '../../src/engine/straggler-watch';
import { dispatchSlice } from '../../src/engine/dispatcher';
import { planRun } from '../../src/engine/planner';
import { RunStateCache } from '../../src/engine/run-state-cache';
import { handleWorkMessage, type WorkerDeps } from '../../src/engine/worker';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import type { JobDefinition } from '../../src/jobs/job-definition';
import type { Leadership } from '../../src/lease/term';
import { HubQueues } from '../../src/engine/queue-shards';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { newRunRecord, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import type { ReceivedMessage } from '../../src/queue/queue-port';

/**
 * The raise of a hand-made term: it holds no lease to raise its epoch under, so, as a stale
 * leader's, its raise is refused and a newer stored epoch ends its term.
 */
export function noLeaseToRaise(): Promise<number> {
  return Promise.reject(new LeaseLostError('conflict', 'a hand-made term holds no lease to raise its epoch under'));
}

/** A leadership that never ends: the tests drive terms by hand. */
export function handLeadership(epoch: number, identity = `leader-${epoch}`): Leadership {
  return {
    identity,
    epoch,
    signal: new AbortController().signal,
    yieldSignal: new AbortController().signal,
    heartbeat() {},
    raiseEpoch: noLeaseToRaise,
    restUntil: () => undefined,
    remainingMs() {
      return 1e9;
    },
  };
}

export function termOf(leadership: Leadership): TermContext {
  return { leadership, epoch: leadership.epoch, signal: leadership.signal };
}

export interface UnitEngine {
  clock: FakeClock;
  docs: InMemoryDocumentStore;
  ctx: EngineContext;
  /** The one shard's queues `ctx.queues` holds. */
  work: InMemoryQueue;
  results: InMemoryQueue;
  poison: InMemoryQueue;
  logs: string[];
  /** A run book for a term of `epoch`, as a coordinator builds one per term. */
  book(epoch: number): { book: RunBook; term: TermContext };
  /** Run records stored under `runs/<job>/`. */
  runs(job: string): Promise<RunRecord[]>;
  jobState(job: string): Promise<JobState | undefined>;
}

/** An engine context on in-memory ports, with a fake clock whose wall time starts at `start`. */
export function unitEngine(jobs: JobDefinition[], start = new Date('2026-01-01T00:00:00Z')): UnitEngine {
  const clock = new FakeClock({ wallOrigin: start });
  const docs = new InMemoryDocumentStore();
  const logs: string[] = [];
  const queues = {
    work: new InMemoryQueue('work', { clock }),
    results: new InMemoryQueue('results', { clock }),
    poison: new InMemoryQueue('work-poison', { clock }),
  };
  const ctx: EngineContext = {
    jobs: new Map(jobs.map((j) => [j.name, j])),
    docs,
    queues: HubQueues.of(queues),
    clock,
    log: { info: (m) => logs.push(`info ${m}`), warn: (m) => logs.push(`warn ${m}`) },
    tuning: { ...DEFAULT_TUNING },
  };
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return {
    ...queues,
    clock,
    docs,
    ctx,
    logs,
    book(epoch) {
      const term = termOf(handLeadership(epoch));
      return { book: new RunBook(ctx, term), term };
    },
    async runs(job) {
      const out: RunRecord[] = [];
      for await (const key of docs.list(`runs/${job}/`)) {
        if (!key.endsWith('/run.json')) continue;
        const doc = await records.read(key);
        if (doc) out.push(doc.value);
      }
      return out;
    },
    async jobState(job) {
      return (await states.read(jobStateKey(job)))?.value;
    },
  };
}

/** A deterministic PRNG (mulberry32), so shuffled tests are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fisher-Yates with a seeded PRNG; returns a new array. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const random = seededRandom(seed);
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Every visible work message, received as a worker does (hidden for 10 minutes, as under the Functions host). */
export async function receiveAll(engine: UnitEngine): Promise<ReceivedMessage[]> {
  const out: ReceivedMessage[] = [];
  for (;;) {
    const batch = await engine.work.receive(32, 600);
    if (batch.length === 0) return out;
    out.push(...batch);
  }
}

/** The first item of a work message. */
export const firstOf = (message: ReceivedMessage): number => (JSON.parse(message.text) as { first: number }).first;

/** The record of the one run of the `sum` job. */
export async function sumRunRecord(engine: UnitEngine): Promise<RunRecord> {
  const [found] = await engine.runs('sum');
  if (!found) throw new Error('no run record');
  return found;
}

/** An open run in `book`, as the engine's steps take it. */
export async function activeRun(book: RunBook, runId: string): Promise<ActiveRun> {
  const run = await book.get(runId);
  if (!run || !('seen' in run)) throw new Error(`run ${runId} is not open`);
  return run;
}

/**
 * A manual run of the engine's `sum` job, planned and dispatched by the leader of epoch 1 (its
 * book keeping `watches`, when given, as a coordinator keeps them across terms), with a worker
 * (by default each try is the last, so a failure is reported at once) and a `process` that runs
 * messages through it; `keep` leaves them on the queue, to be delivered again.
 */
export async function dispatchedSumRun(
  engine: UnitEngine,
  runId: string,
  options: { watches?: Map<string, StragglerWatch>; maxAttempts?: number } = {},
) {
  const term = termOf(handLeadership(1));
  const book = new RunBook(engine.ctx, term, options.watches);
  const job = engine.ctx.jobs.get('sum');
  if (!job) throw new Error('the engine has no sum job');
  const now = engine.clock.date();
  await book.create(
    job,
    newRunRecord({ runId, job: 'sum', trigger: 'manual', occurrence: undefined, now, timeoutSeconds: 3600 }),
  );
  await planRun(engine.ctx, term, book, await activeRun(book, runId));
  const dispatchedAt = engine.clock.date();
  await dispatchSlice(engine.ctx, term, book, await activeRun(book, runId), engine.clock.now() + 60_000);
  const worker: WorkerDeps = {
    jobs: engine.ctx.jobs,
    docs: engine.docs,
    work: engine.work,
    results: engine.results,
    poison: engine.poison,
    runs: new RunStateCache(engine.docs, { clock: engine.clock, ttlMs: 0 }),
    maxAttempts: options.maxAttempts ?? 1,
  };
  const process = async (messages: readonly ReceivedMessage[], keep = false) => {
    for (const message of messages) {
      await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, worker);
      if (!keep) await engine.work.delete(message);
    }
  };
  return { term, book, worker, dispatchedAt, process };
}
