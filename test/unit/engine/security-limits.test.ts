/**
 * Job payloads and results are checked before use, with a size limit on each: items against the
 * job's itemSchema and `maxItemBytes` (the leader when planning, the worker before `process`),
 * results against its resultSchema and `maxResultBytes` (the worker before reporting, the leader
 * before folding). Too big is a clear reason, never a crash.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidConfigError } from '../../../src/errors';
import type { FailuresManifest, RunOutput } from '../../../src/hub/run-output';
import { foldOutcomes } from '../../../src/hub/fold';
import { resultMessageSchema, type WorkMessage } from '../../../src/engine/messages';
import type { ItemOutcome } from '../../../src/jobs/item-outcome';
import { requestRun } from '../../../src/hub/requests';
import { RunStateCache } from '../../../src/engine/run-state-cache';
import { handleWorkMessage, type WorkerDeps } from '../../../src/engine/worker';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { defineJob } from '../../../src/jobs/define-job';
import { InMemoryQueue } from '../../../src/queue/in-memory-queue';
import { Bitset } from '../../../src/hub/bitset';
import { newRunRecord, runKeys, runRecordSchema, type RunCounters, type RunRecord } from '../../../src/hub/run-record';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { failuresOf } from '../../support/failures';

const MiB = 1024 * 1024;

interface Item {
  i: number;
  pad?: string;
}
interface Result {
  v: number;
  pad: string;
}

/** JSON bytes of `{"v":0,"pad":""}` plus the pad: results of item 0 are exactly this long. */
const resultBytes = (pad: number) => Buffer.byteLength(JSON.stringify({ v: 0, pad: 'x'.repeat(pad) }));

/**
 * Items `{ i }` (item `big` padded to `bigItemPad` characters); each result pads to
 * `resultPad(i)` characters; `folded` records every result the leader's fold receives.
 */
function padJob(
  options: {
    items?: number;
    maxItemBytes?: number;
    maxResultBytes?: number;
    big?: number;
    bigItemPad?: number;
    resultPad?: (i: number) => number;
    result?: (i: number) => unknown;
    /** Leave out the result schema (it would strip what JSON cannot carry). */
    noResultSchema?: boolean;
  } = {},
) {
  const processed: number[] = [];
  const folded: number[] = [];
  const job = defineJob<Item, Result, number>({
    name: 'pad',
    schedule: '0 0 0 1 1 *',
    ...(options.maxItemBytes !== undefined ? { maxItemBytes: options.maxItemBytes } : {}),
    ...(options.maxResultBytes !== undefined ? { maxResultBytes: options.maxResultBytes } : {}),
    failureTolerance: { count: 1000 },
    itemSchema: z.object({ i: z.number().int().nonnegative(), pad: z.string().optional() }),
    ...(options.noResultSchema ? {} : { resultSchema: z.object({ v: z.number(), pad: z.string() }) }),
    *split() {
      for (let i = 0; i < (options.items ?? 6); i++)
        yield i === options.big ? { i, pad: 'x'.repeat(options.bigItemPad ?? 0) } : { i };
    },
    process(item) {
      processed.push(item.i);
      if (options.result) return options.result(item.i) as Result;
      return { v: item.i, pad: 'x'.repeat(options.resultPad?.(item.i) ?? 0) };
    },
    aggregate: {
      initial: () => 0,
      add: (acc, r, ref) => {
        folded.push(ref.itemIndex);
        return acc + r.v;
      },
    },
  });
  return { job, processed, folded };
}

describe('defineJob: maxItemBytes and maxResultBytes', () => {
  const base = () => padJob().job;

  it('default to 1 MiB each and keep what they are given', () => {
    expect(base()).toMatchObject({ maxItemBytes: MiB, maxResultBytes: MiB });
    const job = padJob({ maxItemBytes: 2048, maxResultBytes: 64 * MiB }).job;
    expect(job).toMatchObject({ maxItemBytes: 2048, maxResultBytes: 64 * MiB });
  });

  it.each<[string, unknown]>([
    ['zero', 0],
    ['negative', -1],
    ['fractional', 1.5],
    ['over 64 MiB', 64 * MiB + 1],
    ['a string', '1024'],
    ['NaN', Number.NaN],
  ])('refuse %s at construction, naming the option', (_, value) => {
    for (const option of ['maxItemBytes', 'maxResultBytes'] as const) {
      let thrown: unknown;
      try {
        defineJob({ ...base(), [option]: value } as Parameters<typeof defineJob>[0]);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(InvalidConfigError);
      expect((thrown as InvalidConfigError).option).toBe(`pad.${option}`);
      expect((thrown as Error).message).toMatch(new RegExp(`^job pad: ${option} `));
      expect((thrown as Error).message).not.toContain('\n');
    }
  });
});

const RUN = 'pad/manual-limits';

async function workerSetup(job: ReturnType<typeof padJob>['job'], planned = 6, maxAttempts = 1) {
  const docs = new InMemoryDocumentStore();
  const workQueue = new InMemoryQueue('work');
  const results = new InMemoryQueue('results');
  const poison = new InMemoryQueue('work-poison');
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const record = newRunRecord({
    runId: RUN,
    job: job.name,
    trigger: 'manual',
    occurrence: undefined,
    now: new Date(),
    timeoutSeconds: 600,
  });
  await records.create(runKeys.record(RUN), 1, {
    ...record,
    state: 'running',
    counters: { ...record.counters, planned, dispatched: planned },
  });
  const deps: WorkerDeps = {
    jobs: new Map([[job.name, job]]),
    docs,
    work: workQueue,
    results,
    poison,
    runs: new RunStateCache(docs),
    maxAttempts,
  };
  const sent = (): ItemOutcome[] =>
    results.peekAll().flatMap((text) => resultMessageSchema.parse(JSON.parse(text)).outcomes ?? []);
  return { deps, sent, workQueue, results, poison };
}

const work = (first: number, items: unknown[]): string =>
  JSON.stringify({ v: 1, t: 'work', run: RUN, job: 'pad', first, count: items.length, items } satisfies WorkMessage);

describe('the worker', () => {
  it('checks each item against the item schema and maxItemBytes before process; the others still run', async () => {
    const { job, processed } = padJob({ maxItemBytes: 64 });
    const s = await workerSetup(job);
    const fits = { i: 2, pad: 'x'.repeat(64 - Buffer.byteLength('{"i":2,"pad":""}')) };
    const outcome = await handleWorkMessage(
      work(0, [{ i: 0 }, { i: 'one' }, fits, { i: 3, pad: 'x'.repeat(200) }]),
      { dequeueCount: 1 },
      s.deps,
    );
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 2, retrying: 0 });
    expect(processed).toEqual([0, 2]);
    const byItem = new Map(s.sent().map((o) => [o.i, o]));
    expect(byItem.get(1)).toMatchObject({
      ok: false,
      e: expect.stringMatching(/^item does not match the job's item schema: i: /),
    });
    expect(byItem.get(2)).toMatchObject({ ok: true });
    expect(byItem.get(3)).toMatchObject({
      ok: false,
      e: `item is ${Buffer.byteLength(JSON.stringify({ i: 3, pad: 'x'.repeat(200) }))} bytes as JSON, over the job's maxItemBytes (64)`,
    });
  });

  it('reports a result over maxResultBytes as that item failing, with its size and the limit; one at the limit passes', async () => {
    const limit = resultBytes(100);
    // Item i's result is i bytes longer than the limit allows, less one: items 0 and 1 fit exactly or under.
    const { job } = padJob({ maxResultBytes: limit, resultPad: (i) => 100 + i - 1 });
    const s = await workerSetup(job);
    const outcome = await handleWorkMessage(work(0, [{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 2, retrying: 0 });
    const sent = s.sent();
    expect(sent.filter((o) => o.ok).map((o) => o.i)).toEqual([0, 1]);
    for (const i of [2, 3]) {
      const size = Buffer.byteLength(JSON.stringify({ v: i, pad: 'x'.repeat(100 + i - 1) }));
      expect(size).toBeGreaterThan(limit);
      expect(sent.find((o) => o.i === i)).toEqual({
        i,
        ok: false,
        e: `result is ${size} bytes as JSON, over the job's maxResultBytes (${limit})`,
        a: 1,
      });
    }
    // The oversized results never travel: only their size does.
    expect(s.results.peekAll().join('')).not.toContain('x'.repeat(101));
    expect(s.poison.peekAll()).toEqual([]);
  });

  it('before the last try, an oversized result goes back to be tried again like any failure', async () => {
    const { job } = padJob({ maxResultBytes: resultBytes(10), resultPad: () => 50 });
    const s = await workerSetup(job, 6, 3);
    const outcome = await handleWorkMessage(work(0, [{ i: 0 }]), { dequeueCount: 1 }, s.deps);
    expect(outcome).toMatchObject({ kind: 'processed', failed: 0, retrying: 1 });
    expect(s.workQueue.peekAll().map((t) => JSON.parse(t) as unknown)).toEqual([
      expect.objectContaining({ first: 0, count: 1, tried: 1 }),
    ]);
  });

  it('reports a result JSON cannot carry as that item failing, not as a crash of the message', async () => {
    const { job } = padJob({
      noResultSchema: true,
      result: (i) => (i === 1 ? { v: 1, pad: '', n: BigInt(1) } : { v: i, pad: '' }),
    });
    const s = await workerSetup(job);
    const outcome = await handleWorkMessage(work(0, [{ i: 0 }, { i: 1 }, { i: 2 }]), { dequeueCount: 1 }, s.deps);
    expect(outcome).toEqual({ kind: 'processed', succeeded: 2, failed: 1, retrying: 0 });
    expect(s.sent().find((o) => o.i === 1)).toMatchObject({ ok: false, e: expect.stringMatching(/^result is not JSON: /) });
  });
});

describe('the leader', () => {
  const zero: RunCounters = { planned: 0, dispatched: 0, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 };
  const state = (planned: number) => ({
    acc: 0,
    seen: Bitset.empty(planned),
    counters: { ...zero, planned, dispatched: planned },
  });

  it('does not fold a result over maxResultBytes or one that fails the result schema; each is that item failing', () => {
    const limit = resultBytes(20);
    const { job, folded } = padJob({ maxResultBytes: limit });
    const big = { v: 2, pad: 'x'.repeat(21) };
    const out = foldOutcomes(job, state(4), [
      { i: 0, ok: true, r: { v: 5, pad: 'x'.repeat(20) } },
      { i: 1, ok: true, r: { v: 'not a number', pad: '' } },
      { i: 2, ok: true, r: big },
      { i: 3, ok: true, r: { v: 7, pad: '' } },
    ]);
    expect(folded).toEqual([0, 3]);
    expect(out.acc).toBe(12);
    expect(out.counters).toMatchObject({ succeeded: 2, failed: 2 });
    expect(out.failures).toEqual([
      { item: 1, reason: "result does not match the job's result schema", attempts: 1 },
      {
        item: 2,
        reason: `result is ${Buffer.byteLength(JSON.stringify(big))} bytes as JSON, over the job's maxResultBytes (${limit})`,
        attempts: 1,
      },
    ]);
  });

  it('masks and shortens the failure reasons it keeps, whoever wrote the result message', () => {
    const { job } = padJob();
    const reason = `upload failed: https://acct.blob.core.windows.net/c/b?sv=2024-01-01&sig=S3cr3tSig%2Bvalue ${'z'.repeat(2000)}`;
    const out = foldOutcomes(job, state(1), [{ i: 0, ok: false, e: reason, a: 5 }]);
    const kept = out.failures[0]!.reason;
    expect(kept).toContain('sig=***');
    expect(kept).not.toContain('S3cr3tSig');
    expect(kept.length).toBeLessThan(reason.length);
  });

  it('fails the run while planning when split yields an item over maxItemBytes, naming it; nothing is sent', async () => {
    const ports = memoryPorts();
    const { job, processed } = padJob({ maxItemBytes: 256, big: 4, bigItemPad: 300 });
    const engine = buildEngine(ports, [job]);
    const stop = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'pad');
    try {
      await engine.leadUntil('l', async () => (await engine.readRun(runId))?.state === 'failed', 10_000);
    } finally {
      await stop();
    }
    const record = await engine.readRun(runId);
    const size = Buffer.byteLength(JSON.stringify({ i: 4, pad: 'x'.repeat(300) }));
    expect(record).toMatchObject({
      state: 'failed',
      endReason: `item 4 is ${size} bytes as JSON, over the job's maxItemBytes (256)`,
      counters: { planned: 0, dispatched: 0 },
    });
    expect(processed).toEqual([]);
    expect(ports.work.peekAll()).toEqual([]);
  });

  it('a run whose worker returns one oversized result ends with that item failed and the rest folded exactly', async () => {
    const ports = memoryPorts();
    const limit = resultBytes(40);
    const { job } = padJob({ items: 8, maxResultBytes: limit, resultPad: (i) => (i === 5 ? 4000 : 1) });
    const engine = buildEngine(ports, [job]);
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'pad');
    try {
      const done = async () => ['succeeded', 'failed'].includes((await engine.readRun(runId))?.state ?? '');
      await engine.leadUntil('l', done, 20_000);
    } finally {
      await stop();
    }
    expect(await engine.readRun(runId)).toMatchObject({ state: 'succeeded', counters: { planned: 8, succeeded: 7, failed: 1 } });
    const output = await engine.readJson<RunOutput>(runKeys.output(runId));
    expect(output?.output).toBe(0 + 1 + 2 + 3 + 4 + 6 + 7);
    const manifest = await engine.readJson<FailuresManifest>(runKeys.manifest(runId));
    expect(await failuresOf(ports.docs, manifest)).toEqual([
      {
        item: 5,
        reason: `result is ${Buffer.byteLength(JSON.stringify({ v: 5, pad: 'x'.repeat(4000) }))} bytes as JSON, over the job's maxResultBytes (${limit})`,
        attempts: 3,
      },
    ]);
  });
});
