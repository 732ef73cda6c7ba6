import { describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../src/clock/clock';
import type { DocumentStore } from '../../src/fencing/document-store';
import type { FailuresManifest, RunOutput } from '../../src/hub/run-output';
import { poisonNoteSchema, resultMessageSchema, workMessageSchema, type PoisonNote } from '../../src/engine/messages';
import { requestCancel, requestRun } from '../../src/hub/requests';
import { handleWorkMessage } from '../../src/engine/worker';
import type { LeadSummary } from '../../src/engine/coordinator';
import { MAX_QUEUE_MESSAGE_BYTES } from '../../src/queue/queue-port';
import { isTerminal, runKeys } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { keysUnder } from '../support/retention-runs';
import { azuritePorts } from '../support/azurite-engine';
import { buildEngine, type Engine } from '../support/engine-harness';
import {
  bigResultJob,
  edgeWorkerDeps,
  gate,
  gatedSumJob,
  padFor,
  paddedSumJob,
  receiveExactly,
  RecordingQueue,
  waitFor,
} from '../support/edge-support';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

function terminal(engine: Engine, runId: string): () => Promise<boolean> {
  return async () => {
    const state = (await engine.readRun(runId))?.state;
    return state !== undefined && isTerminal(state);
  };
}

function claimKeys(docs: DocumentStore, runId: string): Promise<string[]> {
  return keysUnder(docs, runKeys.claimsPrefix(runId));
}

/** One more leader term after the run ended, to drain whatever came in late. */
async function lateTerm(engine: Engine): Promise<LeadSummary> {
  return engine.elector('late-leader').runWhenLeader((l) => engine.coordinator.lead(l, { termMs: 3000, returnWhenIdle: true }));
}

/** The system clock, except that its wall-clock date can be moved forward. */
function wallClockOffset(): Clock & { advance(ms: number): void } {
  let offset = 0;
  return {
    now: () => systemClock.now(),
    date: () => new Date(Date.now() + offset),
    setTimeout: (callback, ms) => systemClock.setTimeout(callback, ms),
    clearTimeout: (handle) => systemClock.clearTimeout(handle),
    advance: (ms) => void (offset += ms),
  };
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k);

describe('job engine edges on Azurite: timeout and cancel', () => {
  it('a run past timeoutSeconds ends timed-out: missing items listed, no output, late results stray, later work dropped', async () => {
    const ports = azuritePorts(fixture, 'timeout');
    const work = new RecordingQueue(ports.work);
    const slow = gate();
    const n = 10;
    const fast = 4;
    const job = gatedSumJob({ name: 'slow', items: n, fastBelow: fast, slow: slow.promise, timeoutSeconds: 30 });
    // The deadline passes when the test says, not when a busy machine happens to be slow: the
    // wall clock the engine reads jumps past it once the fast items are counted.
    const clock = wallClockOffset();
    const engine = buildEngine({ ...ports, work }, [job], { workerVisibilitySeconds: 30, clock });
    const stopWorkers = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'slow');
    try {
      await engine.leadUntil(
        'leader',
        async () => {
          const counters = (await engine.readRun(runId))?.counters;
          return counters?.dispatched === n && counters.succeeded === fast;
        },
        60_000,
      );
      clock.advance(31_000);
      await engine.leadUntil('leader', terminal(engine, runId), 30_000);
    } finally {
      slow.open(); // the slow items now finish, after their run has ended
      await stopWorkers();
    }

    const record = await engine.readRun(runId);
    expect(record?.state).toBe('timed-out');
    expect(record?.endReason).toMatch(/deadline/);
    expect(Date.parse(record!.deadlineAt) - Date.parse(record!.createdAt)).toBe(30_000);
    expect(Date.parse(record!.endedAt!)).toBeGreaterThan(Date.parse(record!.deadlineAt));
    expect(record?.counters).toMatchObject({ planned: n, dispatched: n, succeeded: fast, failed: 0 });
    expect(record?.outputKey).toBeNull();
    expect(record?.manifestKey).toBe(runKeys.manifest(runId));
    expect(await ports.docs.read(runKeys.output(runId))).toBeUndefined();
    const manifest = await engine.readJson<FailuresManifest>(runKeys.manifest(runId));
    expect(manifest).toEqual({
      runId,
      state: 'timed-out',
      failedCount: 0,
      failureParts: [],
      missing: range(fast, n),
      missingCount: n - fast,
    });

    // The slow items' results arrive after the end: the leader counts them as stray and the run does not change.
    const late = await lateTerm(engine);
    expect(late.stray).toBe(n - fast);
    expect(late.folded).toBe(0);
    expect(await engine.readRun(runId)).toEqual(record);
    expect(await ports.results.approximateCount()).toBe(0);

    // The missing items' messages delivered again: the worker drops them and reports nothing.
    const resent = work.sent.filter((text) => workMessageSchema.parse(JSON.parse(text)).first >= fast);
    expect(resent).toHaveLength(n - fast);
    for (const text of resent) await ports.work.send(text);
    const results = new RecordingQueue(ports.results);
    const deps = edgeWorkerDeps({ ...ports, results }, [job]);
    for (const message of await receiveExactly(ports.work, n - fast)) {
      const outcome = await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, deps);
      expect(outcome).toEqual({ kind: 'dropped', reason: 'run is timed-out' });
    }
    expect(results.sent).toEqual([]);
  });

  it('requestCancel on a running run ends it cancelled with its reason, lists the missing items, and workers drop its messages', async () => {
    const ports = azuritePorts(fixture, 'cancel');
    const work = new RecordingQueue(ports.work);
    const slow = gate();
    const n = 10;
    const fast = 3;
    const job = gatedSumJob({ name: 'stuck', items: n, fastBelow: fast, slow: slow.promise });
    const engine = buildEngine({ ...ports, work }, [job], { workerVisibilitySeconds: 30 });
    const stopWorkers = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'stuck');
    const leading = engine.leadUntil('leader', terminal(engine, runId), 30_000);
    leading.catch(() => undefined);
    let stateWhenCancelled: string | undefined;
    try {
      await waitFor('the fast items to be folded', async () => (await engine.readRun(runId))?.counters.succeeded === fast);
      stateWhenCancelled = (await engine.readRun(runId))?.state;
      await requestCancel(ports.docs, runId, 'cancelled by the operator');
      await leading;
    } finally {
      slow.open();
      await stopWorkers();
    }
    expect(stateWhenCancelled).toBe('running');

    const record = await engine.readRun(runId);
    expect(record?.state).toBe('cancelled');
    expect(record?.endReason).toBe('cancelled by the operator');
    expect(record?.cancelRequested).toBe(true);
    expect(record?.endedAt).not.toBeNull();
    expect(record?.counters).toMatchObject({ planned: n, succeeded: fast, failed: 0 });
    expect(await ports.docs.read(runKeys.output(runId))).toBeUndefined();
    const manifest = await engine.readJson<FailuresManifest>(runKeys.manifest(runId));
    expect(manifest).toEqual({
      runId,
      state: 'cancelled',
      failedCount: 0,
      failureParts: [],
      missing: range(fast, n),
      missingCount: n - fast,
    });

    const late = await lateTerm(engine);
    expect(late.stray).toBe(n - fast);
    expect(await engine.readRun(runId)).toEqual(record);

    const resent = work.sent.filter((text) => workMessageSchema.parse(JSON.parse(text)).first >= fast);
    for (const text of resent) await ports.work.send(text);
    const results = new RecordingQueue(ports.results);
    const deps = edgeWorkerDeps({ ...ports, results }, [job]);
    const outcomes = [];
    for (const message of await receiveExactly(ports.work, n - fast)) {
      outcomes.push(await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, deps));
    }
    expect(outcomes).toEqual(Array.from({ length: n - fast }, () => ({ kind: 'dropped', reason: 'run is cancelled' })));
    expect(results.sent).toEqual([]);
  });
});

describe('job engine edges on Azurite: claim check', () => {
  it('items over 64 KiB travel behind claim checks that exist while dispatching, arrive intact, and are deleted at the end', async () => {
    const base = azuritePorts(fixture, 'claim');
    const n = 6;
    const padBytes = 70_000;
    const seenAtSend: Array<{
      claim: string | undefined;
      inline: boolean;
      bytes: number;
      blobItems: unknown;
      state: string | undefined;
      claimsListed: number;
    }> = [];
    let runId = '';
    const work = new RecordingQueue(base.work, async (text) => {
      const message = workMessageSchema.parse(JSON.parse(text));
      const blob = message.claim ? await base.docs.read(message.claim) : undefined;
      const record = await engine.readRun(message.run);
      const claims: string[] = [];
      for await (const key of base.docs.list(runKeys.claimsPrefix(message.run))) claims.push(key);
      seenAtSend.push({
        claim: message.claim,
        inline: message.items !== undefined,
        bytes: Buffer.byteLength(text),
        blobItems: blob ? JSON.parse(blob.body) : undefined,
        state: record?.state,
        claimsListed: claims.length,
      });
    });
    const ports = { ...base, work };
    const job = paddedSumJob({ name: 'padded', items: n, padBytes });
    const engine = buildEngine(ports, [job], { workerVisibilitySeconds: 30 });
    const stopWorkers = engine.startWorkers(2);
    runId = await requestRun(ports.docs, 'padded');
    try {
      await engine.leadUntil('leader', terminal(engine, runId), 60_000);
    } finally {
      await stopWorkers();
    }

    expect(seenAtSend).toHaveLength(n);
    for (const seen of seenAtSend) {
      expect(seen.inline).toBe(false);
      expect(seen.claim?.startsWith(runKeys.claimsPrefix(runId))).toBe(true);
      expect(seen.bytes).toBeLessThan(1024);
      expect(seen.state).toBe('dispatching');
      expect(seen.claimsListed).toBeGreaterThanOrEqual(1);
    }
    const firsts = work.sent.map((t) => workMessageSchema.parse(JSON.parse(t)).first).sort((a, b) => a - b);
    expect(firsts).toEqual(range(0, n));
    for (const [k, text] of work.sent.entries()) {
      const { first } = workMessageSchema.parse(JSON.parse(text));
      expect(seenAtSend[k]?.blobItems).toEqual([{ i: first, pad: padFor(first, padBytes) }]);
    }

    const record = await engine.readRun(runId);
    expect(record?.state).toBe('succeeded');
    expect(record?.counters).toMatchObject({ planned: n, succeeded: n, failed: 0 });
    expect(await engine.readJson<RunOutput>(runKeys.output(runId))).toMatchObject({ state: 'succeeded', output: expectedSum(n) });
    expect(await claimKeys(ports.docs, runId)).toEqual([]);
    // Nothing sends the run's work again once it has ended: its plan goes with the claims.
    expect(await keysUnder(ports.docs, runKeys.planPrefix(runId))).toEqual([]);
    expect(record?.planChunks).toBeGreaterThan(0);
  });

  it('results over the queue limit travel behind claim checks, fold exactly, and the claims are deleted at the end', async () => {
    const base = azuritePorts(fixture, 'bigres');
    const n = 5;
    const resultBytes = 70_000;
    const claimBlobsAtSend: boolean[] = [];
    const results = new RecordingQueue(base.results, async (text) => {
      const message = resultMessageSchema.parse(JSON.parse(text));
      claimBlobsAtSend.push(message.claim !== undefined && (await base.docs.read(message.claim)) !== undefined);
    });
    const ports = { ...base, results };
    const job = bigResultJob({ name: 'bigres', items: n, resultBytes });
    const engine = buildEngine(ports, [job], { workerVisibilitySeconds: 30 });
    const stopWorkers = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, 'bigres');
    try {
      await engine.leadUntil('leader', terminal(engine, runId), 60_000);
    } finally {
      await stopWorkers();
    }

    expect(results.sent).toHaveLength(n);
    for (const text of results.sent) {
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_QUEUE_MESSAGE_BYTES);
      const message = resultMessageSchema.parse(JSON.parse(text));
      expect(message.outcomes).toBeUndefined();
      expect(message.claim?.startsWith(runKeys.claimsPrefix(runId))).toBe(true);
    }
    expect(claimBlobsAtSend).toEqual(Array.from({ length: n }, () => true));
    const record = await engine.readRun(runId);
    expect(record?.state).toBe('succeeded');
    expect(record?.counters).toMatchObject({ planned: n, succeeded: n, failed: 0 });
    const output = await engine.readJson<RunOutput>(runKeys.output(runId));
    expect(output?.output).toEqual({ count: n, chars: n * resultBytes, intact: n, indexSum: (n * (n - 1)) / 2 });
    expect(await claimKeys(ports.docs, runId)).toEqual([]);
  });
});

describe('job engine edges on Azurite: malformed work messages', () => {
  it('not JSON, wrong shape, unknown run and out-of-range messages go to poison with a reason; the run output is exact', async () => {
    const ports = azuritePorts(fixture, 'poison');
    const n = 50;
    const job = sumJob({ items: n });
    const engine = buildEngine(ports, [job]);
    const runId = await requestRun(ports.docs, 'sum');
    const summaries: LeadSummary[] = [];
    const leading = engine.leadUntil('leader', terminal(engine, runId), 60_000).then((s) => summaries.push(...s));
    leading.catch(() => undefined);
    let stopWorkers: (() => Promise<void>) | undefined;
    const poison = new RecordingQueue(ports.poison);
    const bad: Record<string, string> = {};
    try {
      // Every real message is on the queue and nobody works: the run stays open while the bad ones go by.
      await waitFor('the run to be dispatched', async () => (await engine.readRun(runId))?.state === 'running');
      const unknownRun = 'sum/manual-00000000-0000-0000-0000-000000000000';
      Object.assign(bad, {
        notJson: 'this is {not JSON',
        wrongShape: JSON.stringify({ v: 1, t: 'work', run: runId, job: 'sum', first: 0, items: [{ i: 0 }] }),
        unknownRun: JSON.stringify({ v: 1, t: 'work', run: unknownRun, job: 'sum', first: 0, count: 1, items: [{ i: 0 }] }),
        beyondPlan: JSON.stringify({ v: 1, t: 'work', run: runId, job: 'sum', first: n, count: 1, items: [{ i: n }] }),
        straddlesPlan: JSON.stringify({
          v: 1,
          t: 'work',
          run: runId,
          job: 'sum',
          first: n - 1,
          count: 2,
          items: [{ i: n - 1 }, { i: n }],
        }),
      });
      for (const text of Object.values(bad)) await ports.work.send(text);

      // A worker picks the bad messages out of the queue (the real ones reappear a second later).
      const deps = edgeWorkerDeps({ ...ports, poison }, [job]);
      const outcomes: Record<string, unknown> = {};
      const badTexts = new Map(Object.entries(bad).map(([k, v]) => [v, k]));
      await waitFor('the bad messages to be handled', async () => {
        for (const message of await ports.work.receive(32, 1)) {
          const which = badTexts.get(message.text);
          if (!which) continue;
          outcomes[which] = await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, deps);
          await ports.work.delete(message);
        }
        return Object.keys(outcomes).length === Object.keys(bad).length;
      });
      expect(outcomes).toEqual({
        notJson: { kind: 'poisoned', reason: 'not JSON' },
        wrongShape: { kind: 'poisoned', reason: expect.stringMatching(/^wrong shape: count/) },
        unknownRun: { kind: 'poisoned', reason: `unknown run ${unknownRun}` },
        beyondPlan: { kind: 'poisoned', reason: `items ${n}..${n} are out of range: the run planned ${n}` },
        straddlesPlan: { kind: 'poisoned', reason: `items ${n - 1}..${n} are out of range: the run planned ${n}` },
      });

      // What reached the poison queue, read back as the worker wrote it.
      const notes = poison.sent.map((text) => poisonNoteSchema.parse(JSON.parse(text)));
      expect(notes).toHaveLength(Object.keys(bad).length);
      const noteFor = (text: string): PoisonNote | undefined => notes.find((note) => note.body === text);
      expect(noteFor(bad.notJson!)).toEqual({ v: 1, t: 'poison', reason: 'not JSON', body: bad.notJson });
      expect(noteFor(bad.wrongShape!)?.reason).toMatch(/^wrong shape: count/);
      expect(noteFor(bad.unknownRun!)).toMatchObject({ reason: `unknown run ${unknownRun}`, run: unknownRun });
      expect(noteFor(bad.beyondPlan!)).toMatchObject({ reason: expect.stringMatching(/out of range/), run: runId });
      expect(noteFor(bad.straddlesPlan!)).toMatchObject({ reason: expect.stringMatching(/out of range/), run: runId });
      const namingRun = notes.filter((note) => note.run === runId).length;
      expect(namingRun).toBe(2);

      // The leader reads the notes while the run is open, and counts the ones that name it.
      await waitFor('the notes to be counted', async () => (await engine.readRun(runId))?.counters.rejected === namingRun);
      expect((await engine.readRun(runId))?.state).toBe('running');

      stopWorkers = engine.startWorkers(2);
      await leading;
    } finally {
      await stopWorkers?.();
    }

    const record = await engine.readRun(runId);
    expect(record?.state).toBe('succeeded');
    expect(record?.counters).toMatchObject({ planned: n, succeeded: n, failed: 0, rejected: 2 });
    expect(await engine.readJson<RunOutput>(runKeys.output(runId))).toMatchObject({ state: 'succeeded', output: expectedSum(n) });
    expect(summaries.reduce((t, s) => t + s.malformed, 0)).toBe(Object.keys(bad).length);
    expect(summaries.reduce((t, s) => t + s.stray, 0)).toBe(1); // the unknown run's note
    expect(await ports.poison.approximateCount()).toBe(0);
  });
});

// The run takes 30 to 60 s on an idle 2-core machine, the leader, three workers and Azurite all in
// this one process: the cap says only that it hung, so it is five minutes, scaled.
describe('job engine edges on Azurite: scale', { timeout: patience(330_000) }, () => {
  it('100,000 tiny items, 100 per message, three workers: the exact aggregate; prints peak heap and checkpoint size', async () => {
    const ports = azuritePorts(fixture, 'scale');
    const n = 100_000;
    const engine = buildEngine(ports, [sumJob({ name: 'tiny', items: n, itemsPerMessage: 100 })], {
      workerVisibilitySeconds: 30,
    });
    let peakHeap = process.memoryUsage().heapUsed;
    const baselineHeap = peakHeap;
    const sampler = setInterval(() => {
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
    }, 100);
    const started = Date.now();
    const stopWorkers = engine.startWorkers(3);
    let runId = '';
    try {
      runId = await requestRun(ports.docs, 'tiny');
      await engine.leadUntil('leader', terminal(engine, runId), 300_000);
    } finally {
      clearInterval(sampler);
      await stopWorkers();
    }
    const elapsedMs = Date.now() - started;
    const stored = await ports.docs.read(runKeys.record(runId));
    const checkpointBytes = Buffer.byteLength(stored?.body ?? '');
    const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
    console.log(
      `[engine scale] ${n} items / ${n / 100} messages in ${(elapsedMs / 1000).toFixed(1)} s; ` +
        `test-process peak heap (leader, 3 workers and Azurite together) ${mib(peakHeap)} (baseline ${mib(baselineHeap)}, +${mib(peakHeap - baselineHeap)}); ` +
        `checkpoint ${checkpointBytes} bytes`,
    );

    const record = await engine.readRun(runId);
    expect(record?.state).toBe('succeeded');
    expect(record?.counters).toMatchObject({ planned: n, dispatched: n, succeeded: n, failed: 0, rejected: 0 });
    expect(record?.messages).toBe(n / 100);
    expect(await engine.readJson<RunOutput>(runKeys.output(runId))).toMatchObject({ state: 'succeeded', output: expectedSum(n) });
    // One bit per item (base64) plus a fixed part: nothing in the checkpoint grows per item beyond that.
    expect(checkpointBytes).toBeLessThan(Math.ceil(n / 8 / 3) * 4 + 4096);
  });
});
