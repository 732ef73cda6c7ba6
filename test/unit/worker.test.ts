import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FakeClock } from '../../src/clock/fake-clock';
import { poisonNoteSchema, resultMessageSchema, type WorkMessage } from '../../src/engine/messages';
import type { ItemOutcome } from '../../src/jobs/item-outcome';
import { RunStateCache } from '../../src/engine/run-state-cache';
import { handleWorkMessage, type WorkerDeps } from '../../src/engine/worker';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { defineJob } from '../../src/jobs/define-job';
import type { ProcessContext } from '../../src/jobs/job-definition';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { newRunRecord, runKeys, runRecordSchema, type RunRecord, type RunState } from '../../src/hub/run-record';

const RUN = 'square/manual-w1';
const SECRET_TAIL = 'y'.repeat(2000);

interface Setup {
  deps: WorkerDeps;
  docs: InMemoryDocumentStore;
  results: InMemoryQueue;
  poison: InMemoryQueue;
  calls: Array<{ item: number; ctx: ProcessContext }>;
  logs: string[];
}

/**
 * A job that squares numbers; `failOn` items throw every time, `leakOn` items throw an error
 * carrying a connection string and a long tail.
 */
async function setup(
  options: { state?: RunState; planned?: number; failOn?: number[]; leakOn?: number[]; maxAttempts?: number } = {},
): Promise<Setup> {
  const clock = new FakeClock();
  const docs = new InMemoryDocumentStore();
  const results = new InMemoryQueue('results', { clock });
  const poison = new InMemoryQueue('work-poison', { clock });
  const calls: Setup['calls'] = [];
  const logs: string[] = [];
  const job = defineJob<number, number, number>({
    name: 'square',
    schedule: '0 0 0 1 1 *',
    itemsPerMessage: 3,
    itemSchema: z.number().int(),
    resultSchema: z.number(),
    split: () => [],
    process: (item, ctx) => {
      calls.push({ item, ctx });
      if (options.failOn?.includes(item)) throw new Error(`item ${item} is cursed`);
      if (options.leakOn?.includes(item)) {
        throw new Error(
          `upload failed:\n DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abc123;EndpointSuffix=core.windows.net ${SECRET_TAIL}`,
        );
      }
      return item * item;
    },
    aggregate: { initial: () => 0, add: (a, r) => a + r },
  });
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const record = newRunRecord({
    runId: RUN,
    job: 'square',
    trigger: 'manual',
    occurrence: undefined,
    now: clock.date(),
    timeoutSeconds: 600,
  });
  const planned = options.planned ?? 6;
  await records.create(runKeys.record(RUN), 1, {
    ...record,
    state: options.state ?? 'running',
    counters: { ...record.counters, planned, dispatched: planned },
  });
  const deps: WorkerDeps = {
    jobs: new Map([[job.name, job]]),
    docs,
    results,
    poison,
    runs: new RunStateCache(docs, { clock }),
    maxAttempts: options.maxAttempts ?? 3,
    log: (level, message) => logs.push(`${level} ${message}`),
  };
  return { deps, docs, results, poison, calls, logs };
}

function work(first: number, items: number[]): WorkMessage {
  return { v: 1, t: 'work', run: RUN, job: 'square', first, count: items.length, items };
}

function sentOutcomes(queue: InMemoryQueue): ItemOutcome[][] {
  return queue.peekAll().map((text) => {
    const message = resultMessageSchema.parse(JSON.parse(text));
    expect(message).toMatchObject({ run: RUN, job: 'square' });
    return message.outcomes ?? [];
  });
}

describe('handleWorkMessage', () => {
  it('processes every item and sends one result message', async () => {
    const s = await setup();
    const outcome = await handleWorkMessage(JSON.stringify(work(3, [3, 4, 5])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 3, failed: 0 });
    expect(sentOutcomes(s.results)).toEqual([
      [
        { i: 3, ok: true, r: 9 },
        { i: 4, ok: true, r: 16 },
        { i: 5, ok: true, r: 25 },
      ],
    ]);
    expect(s.poison.peekAll()).toEqual([]);
    expect(s.calls.map((c) => [c.item, c.ctx.itemIndex, c.ctx.attempt, c.ctx.runId])).toEqual([
      [3, 3, 1, RUN],
      [4, 4, 1, RUN],
      [5, 5, 1, RUN],
    ]);
    expect(s.calls.every((c) => c.ctx.signal instanceof AbortSignal && !c.ctx.signal.aborted)).toBe(true);
  });

  it.each([1, 2])('an item failing on attempt %i of 3 asks for a retry and reports only the successes', async (dequeueCount) => {
    const s = await setup({ failOn: [1] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount }, s.deps);
    expect(outcome).toEqual({ kind: 'retry', failed: 1, firstError: 'Error: item 1 is cursed' });
    expect(sentOutcomes(s.results)).toEqual([
      [
        { i: 0, ok: true, r: 0 },
        { i: 2, ok: true, r: 4 },
      ],
    ]);
    expect(s.calls.map((c) => c.ctx.attempt)).toEqual([dequeueCount, dequeueCount, dequeueCount]);
  });

  it('when every item fails before the last attempt, nothing is sent', async () => {
    const s = await setup({ failOn: [0, 1, 2] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'retry', failed: 3 });
    expect(s.results.peekAll()).toEqual([]);
  });

  it.each([3, 4])('on dequeue %i of max 3 the failure is final and sent with its attempt', async (dequeueCount) => {
    const s = await setup({ failOn: [1] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 1 });
    expect(sentOutcomes(s.results)).toEqual([
      [
        { i: 0, ok: true, r: 0 },
        { i: 1, ok: false, e: 'Error: item 1 is cursed', a: dequeueCount },
        { i: 2, ok: true, r: 4 },
      ],
    ]);
  });

  it('the final failure text is one short line with no secret in it', async () => {
    const s = await setup({ leakOn: [4] });
    const outcome = await handleWorkMessage(JSON.stringify(work(3, [3, 4, 5])), { dequeueCount: 3 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'processed', failed: 1 });
    const [outcomes] = sentOutcomes(s.results);
    const failure = outcomes?.find((o) => !o.ok);
    if (!failure || failure.ok) throw new Error('expected a failure outcome');
    expect(failure.i).toBe(4);
    expect(failure.e).not.toContain('abc123');
    expect(failure.e).toContain('AccountKey=***');
    expect(failure.e).toMatch(/^Error: upload failed: /);
    expect(failure.e).not.toMatch(/[\r\n]/);
    expect(failure.e.length).toBeLessThanOrEqual(501);
    expect(failure.e.length).toBeGreaterThan(400);
    // The message on the queue as a whole carries neither the secret nor the long tail.
    const text = s.results.peekAll()[0]!;
    expect(text).not.toContain('abc123');
    expect(text).not.toContain(SECRET_TAIL);
  });

  it('the retry reason is redacted too, since the host logs it', async () => {
    const s = await setup({ leakOn: [0] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0])), { dequeueCount: 1 }, s.deps);
    if (outcome.kind !== 'retry') throw new Error(`expected retry, got ${outcome.kind}`);
    expect(outcome.firstError).not.toContain('abc123');
    expect(outcome.firstError.length).toBeLessThanOrEqual(501);
  });

  it.each<RunState>(['succeeded', 'failed', 'cancelled', 'timed-out'])(
    'a message of a %s run is dropped unprocessed',
    async (state) => {
      const s = await setup({ state });
      const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, s.deps);
      expect(outcome).toEqual({ kind: 'dropped', reason: `run is ${state}` });
      expect(s.calls).toEqual([]);
      expect(s.results.peekAll()).toEqual([]);
      expect(s.poison.peekAll()).toEqual([]);
      expect(s.logs.some((l) => l.startsWith('info') && l.includes(RUN) && l.includes(state))).toBe(true);
    },
  );

  it.each<RunState>(['planning', 'dispatching', 'running', 'finalizing'])('a message of a %s run is processed', async (state) => {
    const s = await setup({ state });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [2])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 1, failed: 0 });
  });

  it('an already-parsed object body is processed like its JSON text', async () => {
    const asText = await setup({ failOn: [4] });
    const asObject = await setup({ failOn: [4] });
    const message = work(3, [3, 4, 5]);
    const a = await handleWorkMessage(JSON.stringify(message), { dequeueCount: 3 }, asText.deps);
    const b = await handleWorkMessage(structuredClone(message), { dequeueCount: 3 }, asObject.deps);
    expect(b).toEqual(a);
    expect(b).toEqual({ kind: 'processed', succeeded: 2, failed: 1 });
    expect(sentOutcomes(asObject.results)).toEqual(sentOutcomes(asText.results));
    expect(asObject.poison.peekAll()).toEqual([]);
  });

  it('an already-parsed object body of a terminal run is dropped', async () => {
    const s = await setup({ state: 'cancelled' });
    expect(await handleWorkMessage(work(0, [0]), { dequeueCount: 1 }, s.deps)).toEqual({
      kind: 'dropped',
      reason: 'run is cancelled',
    });
  });

  it.each<[string, unknown, RegExp]>([
    ['not JSON', '{"v":1,', /not JSON/],
    ['a number body', 42, /not JSON/],
    ['the wrong shape', JSON.stringify({ v: 1, t: 'work', run: RUN }), /wrong shape/],
    ['an unknown run', JSON.stringify({ ...work(0, [0]), run: 'square/manual-nope' }), /unknown run/],
    ['items out of range', JSON.stringify(work(5, [5, 6])), /out of range/],
  ])('%s goes to poison with a reason', async (_name, raw, reason) => {
    const s = await setup({ planned: 6 });
    const outcome = await handleWorkMessage(raw, { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'poisoned', reason: expect.stringMatching(reason) });
    expect(s.calls).toEqual([]);
    expect(s.results.peekAll()).toEqual([]);
    const notes = s.poison.peekAll().map((t) => poisonNoteSchema.parse(JSON.parse(t)));
    expect(notes).toHaveLength(1);
    expect(notes[0]?.reason).toMatch(reason);
  });

  it('a job this instance does not have is retried, not poisoned (another instance may have it)', async () => {
    const s = await setup();
    const outcome = await handleWorkMessage(JSON.stringify({ ...work(0, [0]), job: 'cube' }), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'retry', failed: 1, firstError: 'job cube is not registered on this instance' });
    expect(s.poison.peekAll()).toEqual([]);
    expect(s.results.peekAll()).toEqual([]);
  });

  it('an item failing the item schema fails without calling process', async () => {
    const s = await setup();
    const outcome = await handleWorkMessage(JSON.stringify({ ...work(0, [0]), items: ['zero'] }), { dequeueCount: 3 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 0, failed: 1 });
    expect(s.calls).toEqual([]);
    const [outcomes] = sentOutcomes(s.results);
    expect(outcomes?.[0]).toMatchObject({ i: 0, ok: false, e: expect.stringMatching(/item schema/), a: 3 });
  });
});
