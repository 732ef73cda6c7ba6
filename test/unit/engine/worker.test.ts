import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FakeClock } from '../../../src/clock/fake-clock';
import { poisonNoteSchema, resultMessageSchema, type ResultMessage, type WorkMessage } from '../../../src/engine/messages';
import type { ItemOutcome } from '../../../src/jobs/item-outcome';
import { RunStateCache } from '../../../src/engine/run-state-cache';
import { handleWorkMessage, type WorkerDeps } from '../../../src/engine/worker';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { defineJob } from '../../../src/jobs/define-job';
import type { ProcessContext } from '../../../src/jobs/job-definition';
import type { ItemRetryOptions } from '../../../src/jobs/retry-policy';
import { InMemoryQueue } from '../../../src/queue/in-memory-queue';
import { newRunRecord, runKeys, runRecordSchema, type RunRecord, type RunState } from '../../../src/hub/run-record';

const RUN = 'square/manual-w1';
const SECRET_TAIL = 'y'.repeat(2000);

interface Setup {
  deps: WorkerDeps;
  clock: FakeClock;
  docs: InMemoryDocumentStore;
  work: InMemoryQueue;
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
  options: {
    state?: RunState;
    planned?: number;
    failOn?: number[];
    leakOn?: number[];
    maxAttempts?: number;
    retry?: ItemRetryOptions;
  } = {},
): Promise<Setup> {
  const clock = new FakeClock();
  const docs = new InMemoryDocumentStore();
  const work = new InMemoryQueue('work', { clock });
  const results = new InMemoryQueue('results', { clock });
  const poison = new InMemoryQueue('work-poison', { clock });
  const calls: Setup['calls'] = [];
  const logs: string[] = [];
  const job = defineJob<number, number, number>({
    name: 'square',
    schedule: '0 0 0 1 1 *',
    itemsPerMessage: 3,
    ...(options.retry ? { retry: options.retry } : {}),
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
    work,
    results,
    poison,
    runs: new RunStateCache(docs, { clock }),
    maxAttempts: options.maxAttempts ?? 3,
    log: (level, message) => logs.push(`${level} ${message}`),
  };
  return { deps, clock, docs, work, results, poison, calls, logs };
}

function work(first: number, items: number[]): WorkMessage {
  return { v: 1, t: 'work', run: RUN, job: 'square', first, count: items.length, items };
}

function sentResults(queue: InMemoryQueue): ResultMessage[] {
  return queue.peekAll().map((text) => resultMessageSchema.parse(JSON.parse(text)));
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
    expect(outcome).toEqual({ kind: 'processed', succeeded: 3, failed: 0, retrying: 0 });
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

  it.each([
    [1, undefined, 1, 1],
    [2, undefined, 2, 2],
    [1, 1, 2, 2],
  ])(
    'an item failing (delivery %i, tried %s: try %i of 3) goes back to the queue for %i s; only successes are reported',
    async (dequeueCount, tried, attempt, delaySeconds) => {
      const s = await setup({ failOn: [1] });
      const message = { ...work(0, [0, 1, 2]), ...(tried ? { tried } : {}) };
      const outcome = await handleWorkMessage(JSON.stringify(message), { dequeueCount }, s.deps);
      expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 0, retrying: 1 });
      const [result] = sentResults(s.results);
      expect(result?.outcomes).toEqual([
        { i: 0, ok: true, r: 0 },
        { i: 2, ok: true, r: 4 },
      ]);
      expect(result?.retrying).toEqual({ items: [1], inMs: delaySeconds * 1000 });
      expect(s.calls.map((c) => c.ctx.attempt)).toEqual([attempt, attempt, attempt]);
      // Hidden until its next try is due, then there with only the failed item and its tries.
      expect(await s.work.receive(32, 30)).toEqual([]);
      await s.clock.advance(delaySeconds * 1000 - 1);
      expect(await s.work.receive(32, 30)).toEqual([]);
      await s.clock.advance(1);
      const again = await s.work.receive(32, 30);
      expect(again.map((m) => JSON.parse(m.text) as unknown)).toEqual([{ ...work(1, [1]), tried: attempt }]);
      expect(s.logs.some((l) => l.startsWith('info') && l.includes(`failed try ${attempt} of 3`))).toBe(true);
    },
  );

  it.each([
    { case: 'on its first delivery', dequeueCount: 1, tried: undefined, sentTried: undefined },
    { case: 'on a later try, failing at the last', dequeueCount: 3, tried: undefined, sentTried: 2 },
  ])(
    "starts no item that could not end before the host's functionTimeout; the rest go back untried ($case)",
    async ({ dequeueCount, tried, sentTried }) => {
      const s = await setup({ failOn: [1], planned: 6 });
      // Each item may take 120 s plus 10 s of grace; the invocation has 300 s. Each one takes 100 s
      // here: after two, a third could end 330 s in, so it is not started.
      let at = 0;
      const job = s.deps.jobs.get('square')!;
      const slow = { ...job, process: async (item: number, ctx: ProcessContext) => ((at += 100_000), job.process(item, ctx)) };
      const deps: WorkerDeps = { ...s.deps, jobs: new Map([['square', slow]]), invocationBudgetMs: 300_000, now: () => at };
      const message = { ...work(0, [0, 1, 2]), ...(tried ? { tried } : {}) };
      const outcome = await handleWorkMessage(JSON.stringify(message), { dequeueCount }, deps);
      const final = dequeueCount === 3;
      expect(outcome).toEqual({ kind: 'processed', succeeded: 1, failed: final ? 1 : 0, retrying: final ? 1 : 2 });
      const [result] = sentResults(s.results);
      // Its failure final at the last try, and reported; otherwise only the success is.
      expect(result?.outcomes).toEqual(
        final
          ? [
              { i: 0, ok: true, r: 0 },
              { i: 1, ok: false, e: expect.any(String), a: 3 },
            ]
          : [{ i: 0, ok: true, r: 0 }],
      );
      expect(result?.retrying).toEqual({ items: final ? [2] : [1, 2], inMs: final ? 0 : 1000 });
      // Item 2 is back at once, not counted as tried by this delivery.
      const back = (await s.work.receive(32, 30)).map((m) => JSON.parse(m.text) as WorkMessage);
      expect(back).toEqual([{ ...work(2, [2]), ...(sentTried ? { tried: sentTried } : {}) }]);
      expect(s.logs.some((l) => l.includes('1 item(s) of run square/manual-w1 sent back unstarted'))).toBe(true);
    },
  );

  it('without a functionTimeout, starts every item however long they take', async () => {
    const s = await setup({ planned: 6 });
    let at = 0;
    const job = s.deps.jobs.get('square')!;
    const slow = { ...job, process: async (item: number, ctx: ProcessContext) => ((at += 1_000_000), job.process(item, ctx)) };
    const deps: WorkerDeps = { ...s.deps, jobs: new Map([['square', slow]]), now: () => at };
    expect(await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, deps)).toEqual({
      kind: 'processed',
      succeeded: 3,
      failed: 0,
      retrying: 0,
    });
    expect(await s.work.receive(32, 30)).toEqual([]);
  });

  it("asks the start gate before each item and tells it how long the item's process held the loop", async () => {
    const s = await setup({ planned: 6 });
    let at = 0;
    const seen: string[] = [];
    const job = s.deps.jobs.get('square')!;
    // Item 1 holds the loop for 700 ms before its first await; the others hand it back at once.
    const holding = {
      ...job,
      process: async (item: number, ctx: ProcessContext) => {
        seen.push(`process ${item}`);
        if (item === 1) at += 700;
        await Promise.resolve();
        at += 5;
        return job.process(item, ctx);
      },
    };
    const gate = {
      beforeItem: async (name: string) => {
        seen.push(`ask ${name}`);
        return { started: (ms: number) => seen.push(`held ${name} ${ms}`), dropped: () => seen.push('dropped') };
      },
    };
    const deps: WorkerDeps = { ...s.deps, jobs: new Map([['square', holding]]), now: () => at, gate };
    await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, deps);
    // Only the hold up to the first await counts: the 5 ms after it are the item's own time.
    expect(seen).toEqual([
      'ask square',
      'process 0',
      'held square 0',
      'ask square',
      'process 1',
      'held square 700',
      'ask square',
      'process 2',
      'held square 0',
    ]);
    // The result tells the leader the longest hold, whichever instance this is.
    expect(sentResults(s.results)).toMatchObject([{ held: 700 }]);
  });

  it('leaves the time an item waited at the gate out of the message time, and frees a slot it will not use', async () => {
    const s = await setup({ planned: 6 });
    let at = 0;
    const seen: string[] = [];
    const job = s.deps.jobs.get('square')!;
    const bound = (job.hookTimeouts.processSeconds + job.hookTimeouts.graceSeconds) * 1000;
    const gate = {
      // Each item waits 4 s at the gate; the second wait leaves too little of the invocation.
      beforeItem: async () => {
        at += 4000;
        return { started: () => seen.push('started'), dropped: () => seen.push('dropped') };
      },
    };
    const deps: WorkerDeps = { ...s.deps, now: () => at, gate, invocationBudgetMs: bound + 6000 };
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1])), { dequeueCount: 1 }, deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 1, failed: 0, retrying: 1 });
    expect(seen).toEqual(['started', 'dropped']);
    expect(sentResults(s.results)[0]?.ms).toBe(0);
  });

  it('a retried message is tried on until the job says, then its failures are final', async () => {
    const s = await setup({ failOn: [1] });
    let text = JSON.stringify(work(0, [0, 1, 2]));
    const tries: number[] = [];
    for (;;) {
      const outcome = await handleWorkMessage(text, { dequeueCount: 1 }, s.deps);
      tries.push(s.calls.at(-1)!.ctx.attempt);
      if (outcome.kind !== 'processed' || outcome.retrying === 0) {
        expect(outcome).toEqual({ kind: 'processed', succeeded: 0, failed: 1, retrying: 0 });
        break;
      }
      await s.clock.advance(60_000);
      const [next] = await s.work.receive(1, 30);
      await s.work.delete(next!);
      text = next!.text;
    }
    expect(tries).toEqual([1, 2, 3]);
    expect(sentResults(s.results).map((r) => [r.outcomes ?? [], r.retrying?.items ?? []])).toEqual([
      [
        [
          { i: 0, ok: true, r: 0 },
          { i: 2, ok: true, r: 4 },
        ],
        [1],
      ],
      [[], [1]],
      [[{ i: 1, ok: false, e: 'Error: item 1 is cursed', a: 3 }], []],
    ]);
    expect(await s.work.approximateCount()).toBe(0);
  });

  it.each<[string, ItemRetryOptions, number | undefined, number, number | 'final']>([
    ['attempts 1: no retry', { attempts: 1 }, undefined, 1, 'final'],
    ['attempts past the host: the host bounds one message', { attempts: 10 }, undefined, 3, 'final'],
    ['attempts past the host: a new message starts its count again', { attempts: 10 }, 5, 1, 32],
    ['delay × backoff^(try − 1)', { delaySeconds: 2, backoff: 3, maxDelaySeconds: 100 }, 1, 1, 6],
    ['capped at maxDelaySeconds', { attempts: 9, delaySeconds: 2, backoff: 3, maxDelaySeconds: 10 }, 5, 1, 10],
    ['a fraction of a second is hidden for a whole one', { delaySeconds: 0.2, backoff: 1 }, undefined, 1, 1],
    ['no delay', { delaySeconds: 0 }, undefined, 1, 0],
  ])('the job retry option: %s', async (_name, retry, tried, dequeueCount, expected) => {
    const s = await setup({ failOn: [4], retry });
    const message = { ...work(3, [3, 4, 5]), ...(tried ? { tried } : {}) };
    const outcome = await handleWorkMessage(JSON.stringify(message), { dequeueCount }, s.deps);
    if (expected === 'final') {
      expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 1, retrying: 0 });
      expect(await s.work.approximateCount()).toBe(0);
      return;
    }
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 0, retrying: 1 });
    expect(sentResults(s.results)[0]?.retrying).toEqual({ items: [4], inMs: expected * 1000 });
    if (expected > 0) {
      await s.clock.advance(expected * 1000 - 1);
      expect(await s.work.receive(32, 30)).toEqual([]);
      await s.clock.advance(1);
    }
    expect(await s.work.receive(32, 30)).toHaveLength(1);
  });

  it('failed items go back as one message per run of neighbours, each with its own items', async () => {
    const s = await setup({ failOn: [3, 4, 6], planned: 9 });
    const outcome = await handleWorkMessage(JSON.stringify(work(3, [3, 4, 5, 6])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 1, failed: 0, retrying: 3 });
    await s.clock.advance(1000);
    const again = (await s.work.receive(32, 30)).map((m) => JSON.parse(m.text) as WorkMessage);
    expect(again.sort((a, b) => a.first - b.first)).toEqual([
      { ...work(3, [3, 4]), tried: 1 },
      { ...work(6, [6]), tried: 1 },
    ]);
    expect(sentResults(s.results)[0]?.retrying?.items).toEqual([3, 4, 6]);
  });

  it('a failed retry send fails the delivery, so the host delivers the message again', async () => {
    const s = await setup({ failOn: [1] });
    s.work.send = () => Promise.reject(new Error('ServerBusy'));
    await expect(handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, s.deps)).rejects.toThrow(
      'ServerBusy',
    );
    // Nothing says the item is being tried again when it is not.
    expect(s.results.peekAll()).toEqual([]);
  });

  it('when every item fails before the last try, the result carries only the retry note', async () => {
    const s = await setup({ failOn: [0, 1, 2] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'processed', failed: 0, retrying: 3 });
    expect(sentResults(s.results)).toEqual([
      { v: 1, t: 'result', run: RUN, job: 'square', retrying: { items: [0, 1, 2], inMs: 1000 } },
    ]);
  });

  it.each([3, 4])('on dequeue %i of max 3 the failure is final and sent with its attempt', async (dequeueCount) => {
    const s = await setup({ failOn: [1] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0, 1, 2])), { dequeueCount }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 1, retrying: 0 });
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

  it('the retry line is masked too, since the host logs it', async () => {
    const s = await setup({ leakOn: [0] });
    const outcome = await handleWorkMessage(JSON.stringify(work(0, [0])), { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'processed', retrying: 1 });
    const line = s.logs.find((l) => l.includes('trying again'));
    expect(line).toContain('AccountKey=***');
    expect(line).not.toContain('abc123');
    expect(line!.length).toBeLessThanOrEqual(700);
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
    expect(outcome).toEqual({ kind: 'processed', succeeded: 1, failed: 0, retrying: 0 });
  });

  it('an already-parsed object body is processed like its JSON text', async () => {
    const asText = await setup({ failOn: [4] });
    const asObject = await setup({ failOn: [4] });
    const message = work(3, [3, 4, 5]);
    const a = await handleWorkMessage(JSON.stringify(message), { dequeueCount: 3 }, asText.deps);
    const b = await handleWorkMessage(structuredClone(message), { dequeueCount: 3 }, asObject.deps);
    expect(b).toEqual(a);
    expect(b).toEqual({ kind: 'processed', succeeded: 2, failed: 1, retrying: 0 });
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

  // A rolling deploy runs two versions on one queue: a message a newer version added (a new kind,
  // or a new envelope) is not malformed, it is for an instance that knows it.
  it.each<[string, unknown, string]>([
    ['a kind this version does not know', JSON.stringify({ v: 1, t: 'rebalance', shard: 3 }), 'a rebalance message'],
    ['a kind, already parsed by the host', { v: 1, t: 'tick-v2', epoch: 4 }, 'a tick-v2 message'],
    [
      'a newer envelope',
      JSON.stringify({ v: 2, t: 'work', run: RUN, job: 'square', first: 0, count: 1 }),
      'a message of version 2',
    ],
  ])('%s is left for another instance, not poisoned', async (_name, body, what) => {
    const s = await setup();
    const outcome = await handleWorkMessage(body, { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'retry', failed: 0, firstError: `${what}, which this version of Baton does not know` });
    expect(s.poison.peekAll()).toEqual([]);
    expect(s.results.peekAll()).toEqual([]);
    expect(s.calls).toEqual([]);
  });

  it.each<[string, unknown]>([
    ['a known kind of the wrong shape', { v: 1, t: 'tick', epoch: -1 }],
    ['a kind that is not a name', { v: 1, t: 'Work!' }],
    ['a version that is not a whole number', { v: 1.5, t: 'work' }],
  ])('%s is still poisoned', async (_name, body) => {
    const s = await setup();
    const outcome = await handleWorkMessage(JSON.stringify(body), { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'poisoned', reason: expect.stringMatching(/^wrong shape/) });
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
    expect(outcome).toEqual({ kind: 'processed', succeeded: 0, failed: 1, retrying: 0 });
    expect(s.calls).toEqual([]);
    const [outcomes] = sentOutcomes(s.results);
    expect(outcomes?.[0]).toMatchObject({ i: 0, ok: false, e: expect.stringMatching(/item schema/), a: 3 });
  });
});
