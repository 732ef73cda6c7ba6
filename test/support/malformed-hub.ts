import { HubQueues } from '../../src/engine/queue-shards';
import { indexRun } from '../../src/hub/run-index';
import { InvocationContext } from '@azure/functions';
import { setMaxListeners } from 'node:events';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { createWorkerHandler } from '../../src/app/worker-handler';
import { sleep, type Clock } from '../../src/clock/clock';
import { FakeClock } from '../../src/clock/fake-clock';
import { DEAD_LETTER_PREFIX, type DeadLetter } from '../../src/engine/dead-letters';
import { drainPoison, drainResults, type DrainStats } from '../../src/engine/drain';
import { DEFAULT_TUNING, type EngineContext, type EngineTuning, type TermContext } from '../../src/engine/engine-context';
import { finalizeRun } from '../../src/engine/finalizer';
import { type RunOutput } from '../../src/hub/run-output';
import type { ItemOutcome } from '../../src/jobs/item-outcome';
import type { ResultMessage, WorkMessage } from '../../src/engine/messages';
import { RunBook } from '../../src/engine/run-book';
import { RunStateCache } from '../../src/engine/run-state-cache';
import type { WorkerDeps, WorkOutcome } from '../../src/engine/worker';
import type { DocumentStore } from '../../src/fencing/document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import type { QueuePort } from '../../src/queue/queue-port';
import { Bitset } from '../../src/hub/bitset';
import { newRunRecord, runKeys, runRecordSchema, transition, type RunRecord } from '../../src/hub/run-record';
import { RecordingQueue } from './edge-support';
import { expectedSum, sumJob, type SumAcc } from './sample-jobs';
import { handLeadership, termOf } from './unit-engine';

export interface HubPorts {
  docs: DocumentStore;
  work: QueuePort;
  results: QueuePort;
  poison: QueuePort;
}

/**
 * The runs of one hub. Malformed messages aim at `target`; `bystander` (same job) and `other`
 * (another job) are unrelated runs whose records must come out exactly as if nothing bad had
 * arrived; `ended` was cancelled before anything arrived; `unknown` was never created.
 */
export const RUNS = {
  target: 'sum/manual-target',
  bystander: 'sum/manual-bystander',
  other: 'tally/manual-other',
  ended: 'sum/manual-ended',
  unknown: 'sum/manual-nobody',
} as const;

export const PLANNED = { target: 4, bystander: 6, other: 3, ended: 4 } as const;

/** The bystander's last item travels behind a claim check, still in flight while the bad messages arrive. */
export const BYSTANDER_CLAIM = runKeys.claim(RUNS.bystander, 'in-flight');
export const BYSTANDER_CLAIMED_ITEM = PLANNED.bystander - 1;

const JOB_OF: Record<string, string> = { sum: 'sum', tally: 'tally' };

/** Item i of every run: `{ i }`, result `{ v: 2i }` (see sumJob). */
export function workText(run: string, first: number, count = 1): string {
  const message: WorkMessage = {
    v: 1,
    t: 'work',
    run,
    job: jobOf(run),
    first,
    count,
    items: Array.from({ length: count }, (_, k) => ({ i: first + k })),
  };
  return JSON.stringify(message);
}

export function resultText(run: string, outcomes: ItemOutcome[]): string {
  const message: ResultMessage = { v: 1, t: 'result', run, job: jobOf(run), outcomes };
  return JSON.stringify(message);
}

export function okOutcome(i: number, v = 2 * i): ItemOutcome {
  return { i, ok: true, r: { v } };
}

function jobOf(run: string): string {
  return JOB_OF[run.split('/')[0] ?? ''] ?? 'sum';
}

/** What the Node worker hands a queue handler under `messageEncoding: none`: JSON bodies parsed, other text as is. */
export function hostEntry(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** One delivery to the worker handler: its outcome, or what it threw (the host then redelivers). */
export type Delivery = { outcome: WorkOutcome } | { threw: unknown };

/**
 * A hub on the given ports (in memory on a fake clock, or Azurite): run records seeded as the
 * leader would have left them, the real worker handler, and the leader's drains with a hand-made
 * term. Nothing here stands in for the code under test.
 */
export class MalformedHub {
  readonly ctx: EngineContext;
  readonly records: FencedDocuments<RunRecord>;
  readonly logs: string[] = [];
  readonly workerDeps: WorkerDeps;
  /** The worker's side of the poison queue: every note it wrote. */
  readonly workerPoison: RecordingQueue;
  private readonly handler: ReturnType<typeof createWorkerHandler>;
  /** The records as seeded, to compare against. */
  readonly seeded = new Map<string, RunRecord>();

  constructor(
    readonly ports: HubPorts,
    readonly clock: Clock,
    tuning: Partial<EngineTuning> = {},
  ) {
    const jobs = [sumJob({ name: 'sum', items: 0 }), sumJob({ name: 'tally', items: 0 })];
    this.ctx = {
      jobs: new Map(jobs.map((j) => [j.name, j])),
      docs: ports.docs,
      queues: HubQueues.of({ work: ports.work, results: ports.results, poison: ports.poison }),
      clock,
      log: { info: (m) => this.logs.push(`info ${m}`), warn: (m) => this.logs.push(`warn ${m}`) },
      tuning: { ...DEFAULT_TUNING, maxAttempts: 3, ...tuning },
    };
    this.records = new FencedDocuments<RunRecord>(ports.docs, { parse: (v) => runRecordSchema.parse(v) });
    this.workerPoison = new RecordingQueue(ports.poison);
    this.workerDeps = {
      jobs: this.ctx.jobs,
      docs: ports.docs,
      work: ports.work,
      results: ports.results,
      poison: this.workerPoison,
      // Cold: every message reads its run's current state.
      runs: new RunStateCache(ports.docs, { clock, ttlMs: 0 }),
      maxAttempts: this.ctx.tuning.maxAttempts,
      log: (level, m) => this.logs.push(`worker-${level} ${m}`),
    };
    this.handler = createWorkerHandler(this.workerDeps);
  }

  /**
   * Creates the run records under epoch 1: target, bystander and other running with nothing
   * counted (or, with `counted`, the bystander's first items already folded), ended cancelled;
   * writes the bystander's in-flight claim-check blob and a few blobs the cases point at.
   */
  async seed(options: { bystanderCounted?: number } = {}): Promise<void> {
    const counted = options.bystanderCounted ?? 0;
    await this.seedRun(RUNS.target, PLANNED.target, 'running');
    await this.seedRun(RUNS.bystander, PLANNED.bystander, 'running', counted);
    await this.seedRun(RUNS.other, PLANNED.other, 'running');
    await this.seedRun(RUNS.ended, PLANNED.ended, 'cancelled');
    await this.ports.docs.write(BYSTANDER_CLAIM, JSON.stringify([okOutcome(BYSTANDER_CLAIMED_ITEM)]), { ifNoneMatch: '*' });
  }

  private async seedRun(runId: string, planned: number, state: 'running' | 'cancelled', counted = 0): Promise<void> {
    const at = this.clock.date();
    const base = newRunRecord({
      runId,
      job: jobOf(runId),
      trigger: 'manual',
      occurrence: undefined,
      now: at,
      timeoutSeconds: 3600,
    });
    const seen = Bitset.empty(planned);
    for (let i = 0; i < counted; i++) seen.add(i);
    let record: RunRecord = {
      ...transition(transition(base, 'dispatching', at), 'running', at),
      counters: { ...base.counters, planned, dispatched: planned, succeeded: counted },
      planEpoch: 1,
      messages: planned,
      cursor: planned,
      acc: expectedSum(counted),
      seen: seen.toBase64(),
    };
    if (state === 'cancelled') record = { ...transition(record, 'cancelled', at, 'cancelled on request'), cancelRequested: true };
    await indexRun(this.ports.docs, 1, record);
    await this.records.create(runKeys.record(runId), 1, record);
    this.seeded.set(runId, record);
  }

  /**
   * Every item's work message of the three open runs, interleaved across runs, except the
   * bystander's claim-checked item and the bystander's already counted ones.
   */
  realWork(bystanderCounted = 0): string[] {
    const texts: string[] = [];
    for (let i = 0; i < PLANNED.bystander; i++) {
      if (i < PLANNED.target) texts.push(workText(RUNS.target, i));
      if (i >= bystanderCounted && i !== BYSTANDER_CLAIMED_ITEM) texts.push(workText(RUNS.bystander, i));
      if (i < PLANNED.other) texts.push(workText(RUNS.other, i));
    }
    return texts;
  }

  /** The bystander's claim-checked result, as a worker with a big result sends it. */
  bystanderClaimResult(): string {
    return JSON.stringify({ v: 1, t: 'result', run: RUNS.bystander, job: 'sum', claim: BYSTANDER_CLAIM });
  }

  /** A leader term of `epoch` with its own run book. */
  term(epoch: number): { book: RunBook; term: TermContext } {
    const term = termOf(handLeadership(epoch));
    // As Coordinator.lead does: drains pass this one signal to dozens of storage calls at once.
    setMaxListeners(0, term.signal);
    return { book: new RunBook(this.ctx, term), term };
  }

  /** Calls the real worker handler as the Functions host would on delivery `dequeueCount`. */
  async deliver(entry: unknown, dequeueCount = 1): Promise<Delivery> {
    const context = new InvocationContext({
      functionName: 'baton-worker',
      invocationId: `malformed-${dequeueCount}`,
      triggerMetadata: { dequeueCount },
    });
    try {
      return { outcome: await this.handler(entry, context) };
    } catch (threw) {
      return { threw };
    }
  }

  /**
   * Receives every visible work message and hands each to the worker the way the host does:
   * deleted on success; on a throw redelivered, and after the last attempt moved as is to the
   * poison queue. Items a worker sent back to be tried again are delivered once their try is
   * due. Returns the deliveries by message text.
   */
  async workerPass(): Promise<Map<string, Delivery[]>> {
    const seen = new Map<string, Delivery[]>();
    for (let round = 0; round < 50; round++) {
      const batch = await this.ports.work.receive(32, 30);
      if (batch.length === 0) {
        if ((await this.ports.work.approximateCount()) === 0) break;
        await this.wait(1000);
        continue;
      }
      for (const message of batch) {
        const delivery = await this.deliver(hostEntry(message.text), message.dequeueCount);
        seen.set(message.text, [...(seen.get(message.text) ?? []), delivery]);
        if ('outcome' in delivery) await this.ports.work.delete(message);
        else if (message.dequeueCount >= this.ctx.tuning.maxAttempts) {
          await this.ports.poison.send(message.text);
          await this.ports.work.delete(message);
        } else await this.ports.work.setVisibility(message, 0);
      }
    }
    return seen;
  }

  /**
   * The leader's two drains, repeated until both queues come back empty and no poison copy is
   * held back; the stats summed, with a message received again after a hold counted once.
   */
  async drainAll(lead: { book: RunBook; term: TermContext }, maxPasses = 20): Promise<DrainStats> {
    const total: DrainStats = { received: 0, folded: 0, duplicates: 0, stray: 0, malformed: 0, deferred: 0, held: 0 };
    let holding = false;
    for (let pass = 0; pass < maxPasses; pass++) {
      let received = 0;
      for (const drain of [drainResults, drainPoison]) {
        const stats = await drain(this.ctx, lead.term, lead.book);
        received += stats.received;
        holding ||= stats.held > 0;
        for (const key of Object.keys(total) as Array<keyof DrainStats>) total[key] += stats[key];
        total.received -= stats.held;
      }
      if (received > 0) continue;
      if (!holding) return total;
      // Held copies are hidden for a few seconds and count only a drain visibility into the term.
      holding = false;
      await this.wait((this.ctx.tuning.drainVisibilitySeconds + 1) * 1000);
    }
    throw new Error(`the queues were not empty after ${maxPasses} drain passes`);
  }

  private async wait(ms: number): Promise<void> {
    // On a real clock this is the rule under test, not a guess: copies count only this much later.
    if (this.clock instanceof FakeClock) await this.clock.advance(ms);
    else await sleep(this.clock, ms);
  }

  async record(runId: string): Promise<RunRecord | undefined> {
    return (await this.records.read(runKeys.record(runId)))?.value;
  }

  async deadLetters(): Promise<DeadLetter[]> {
    const letters: DeadLetter[] = [];
    for await (const key of this.ports.docs.list(DEAD_LETTER_PREFIX)) {
      const stored = await this.ports.docs.read(key);
      if (stored) letters.push(JSON.parse(stored.body) as DeadLetter);
    }
    return letters;
  }

  /** Messages left on the three queues, visible or not. */
  async leftOnQueues(): Promise<number> {
    const counts = await Promise.all([this.ports.work, this.ports.results, this.ports.poison].map((q) => q.approximateCount()));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Ends a run whose every item is counted, as the leader's step does; returns its output document. */
  async finalize(lead: { book: RunBook; term: TermContext }, runId: string): Promise<RunOutput | undefined> {
    const run = await lead.book.get(runId);
    if (!run || 'terminal' in run || 'unregistered' in run) throw new Error(`run ${runId} is not open`);
    await finalizeRun(this.ctx, lead.term, lead.book, run);
    const stored = await this.ports.docs.read(runKeys.output(runId));
    return stored ? (JSON.parse(stored.body) as RunOutput) : undefined;
  }
}

/** The bystander's and other's records, the parts malformed input must never move. */
export function fingerprint(
  record: RunRecord | undefined,
): Pick<RunRecord, 'state' | 'counters' | 'seen' | 'acc' | 'failureParts'> | undefined {
  return (
    record && {
      state: record.state,
      counters: record.counters,
      seen: record.seen,
      acc: record.acc,
      failureParts: record.failureParts,
    }
  );
}

export function fullySeen(planned: number): string {
  const seen = Bitset.empty(planned);
  for (let i = 0; i < planned; i++) seen.add(i);
  return seen.toCheckpoint();
}

export type { SumAcc };

/**
 * Records every unhandled rejection while the file's tests run and fails the test during which
 * one surfaced (after a turn of the event loop, so a late one is not missed).
 */
export function failOnUnhandledRejections(): void {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => seen.push(reason);
  beforeAll(() => {
    process.on('unhandledRejection', listener);
  });
  afterEach(async () => {
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(seen.splice(0).map(String)).toEqual([]);
  });
  afterAll(() => {
    process.off('unhandledRejection', listener);
  });
}

/** A hub on the in-memory ports and a fake clock (the fast tests' setting). */
export function inMemoryHub(): { hub: MalformedHub; clock: FakeClock } {
  const clock = new FakeClock();
  const hub = new MalformedHub(
    {
      docs: new InMemoryDocumentStore(),
      work: new InMemoryQueue('work', { clock }),
      results: new InMemoryQueue('results', { clock }),
      poison: new InMemoryQueue('work-poison', { clock }),
    },
    clock,
  );
  return { hub, clock };
}
