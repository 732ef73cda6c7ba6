/**
 * Idempotent starts: a trigger with a key names the same run every time, and the leader starts
 * that run once, however many requests carry the key and whenever they come.
 */
import { describe, expect, it } from 'vitest';
import { jobStateKey } from '../../../src/hub/job-state';
import { listRuns } from '../../../src/hub/run-index';
import { keyedRunSegment, MAX_RUN_KEY_LENGTH, pendingRequests, requestRun } from '../../../src/hub/requests';
import { defineJob } from '../../../src/jobs/define-job';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { expectedSum, sumJob } from '../../support/sample-jobs';

async function requestsLeft(ports: ReturnType<typeof memoryPorts>): Promise<number> {
  let n = 0;
  for await (const _ of pendingRequests(ports.docs)) n++;
  return n;
}

describe('a trigger with a key', () => {
  it('1,000 concurrent triggers with one key make exactly one run, started and counted once', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 20 })]);
    const stop = engine.startWorkers(1);
    const ids = await Promise.all(
      Array.from({ length: 1000 }, () => requestRun(ports.docs, 'sum', { key: 'nightly-2026-11-27' })),
    );
    expect(new Set(ids).size).toBe(1);
    const runId = ids[0]!;
    expect(runId).toMatch(/^sum\/manual-k-[A-Za-z0-9_-]{32}$/);

    await engine.leadUntil(
      'leader',
      async () => (await engine.readRun(runId))?.state === 'succeeded' && (await requestsLeft(ports)) === 0,
      60_000,
    );
    await stop();
    expect((await listRuns(ports.docs, { job: 'sum' })).runs.map((r) => r.runId)).toEqual([runId]);
    const state = JSON.parse((await ports.docs.read(jobStateKey('sum')))!.body).value;
    expect(state.totals.started).toBe(1);
    expect(state.recent.filter((e: { outcome: string }) => e.outcome === 'started')).toHaveLength(1);
    expect((await engine.readJson<{ output: unknown }>(`runs/${runId}/output.json`))?.output).toEqual(expectedSum(20));
  });

  it('asked again after its run ended, names that run and starts nothing; another key is another run', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 5 })]);
    const stop = engine.startWorkers(1);
    const first = await requestRun(ports.docs, 'sum', { key: 'k1' });
    await engine.leadUntil('leader', async () => (await engine.readRun(first))?.state === 'succeeded', 20_000);
    const ended = await engine.readRun(first);

    expect(await requestRun(ports.docs, 'sum', { key: 'k1' })).toBe(first);
    const other = await requestRun(ports.docs, 'sum', { key: 'k2' });
    expect(other).not.toBe(first);
    await engine.leadUntil(
      'leader',
      async () => (await engine.readRun(other))?.state === 'succeeded' && (await requestsLeft(ports)) === 0,
      20_000,
    );
    await stop();
    expect(await engine.readRun(first)).toEqual(ended);
    expect((await listRuns(ports.docs, { job: 'sum' })).runs.map((r) => r.runId)).toEqual([other, first]);
    // Two runs started, no more: the repeated key is not counted, nor made active again.
    const state = JSON.parse((await ports.docs.read(jobStateKey('sum')))!.body).value;
    expect(state.totals.started).toBe(2);
    expect(state.active).toEqual([]);
    expect(
      state.recent.filter((e: { outcome: string }) => e.outcome === 'started').map((e: { runId: string }) => e.runId),
    ).toEqual([first, other]);
  });

  it('is the same run for the same key and job only', () => {
    expect(keyedRunSegment('a')).toBe(keyedRunSegment('a'));
    expect(keyedRunSegment('a')).not.toBe(keyedRunSegment('b'));
    expect(keyedRunSegment('x'.repeat(MAX_RUN_KEY_LENGTH))).toMatch(/^k-[A-Za-z0-9_-]{32}$/);
  });

  it.each([
    ['empty', ''],
    ['too long', 'x'.repeat(MAX_RUN_KEY_LENGTH + 1)],
    ['a control character', 'a\nb'],
  ])('refuses a key that is %s, naming the key', (_name, key) => {
    expect(() => keyedRunSegment(key)).toThrow(/^key: must be 1 to 200 characters with no control characters$/);
  });
});

/** An engine with one run of a job whose items wait for `release()`, open and running. */
async function openGatedRun() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const job = defineJob({
    ...sumJob({ items: 2, overlap: 'allow' }),
    name: 'gated',
    async process(item) {
      await gate;
      return { v: 2 * item.i };
    },
  });
  const ports = memoryPorts();
  const engine = buildEngine(ports, [job]);
  const stop = engine.startWorkers(1);
  const first = await requestRun(ports.docs, 'gated');
  await engine.leadUntil('leader', async () => (await engine.readRun(first))?.state === 'running', 20_000);
  return { ports, engine, stop, first, release };
}

describe('a trigger while a run of its job is open', () => {
  it('wait: the leader starts it once every open run of the job has ended; start: at once, beside them', async () => {
    const { ports, engine, stop, first, release } = await openGatedRun();

    const waiting = await requestRun(ports.docs, 'gated', { ifActive: 'wait' });
    const started = await requestRun(ports.docs, 'gated', { ifActive: 'start' });
    await engine.leadUntil('leader', async () => (await engine.readRun(started))?.state === 'running', 20_000);
    expect(await engine.readRun(waiting)).toBeUndefined();
    expect(await requestsLeft(ports)).toBe(1);

    release();
    await engine.leadUntil('leader', async () => (await engine.readRun(waiting))?.state === 'succeeded', 20_000);
    await stop();
    const ends = await Promise.all([first, started].map(async (id) => Date.parse((await engine.readRun(id))!.endedAt!)));
    expect(Date.parse((await engine.readRun(waiting))!.createdAt)).toBeGreaterThanOrEqual(Math.max(...ends));
    expect(await requestsLeft(ports)).toBe(0);
  });

  it('skip: answers with the open run and asks for nothing; with none open, asks as usual', async () => {
    const { ports, engine, stop, first, release } = await openGatedRun();

    expect(await requestRun(ports.docs, 'gated', { ifActive: 'skip', key: 'k' })).toBe(first);
    expect(await requestsLeft(ports)).toBe(0);

    release();
    await engine.leadUntil('leader', async () => (await engine.readRun(first))?.state === 'succeeded', 20_000);
    await stop();
    const next = await requestRun(ports.docs, 'gated', { ifActive: 'skip' });
    expect(next).not.toBe(first);
    expect(await requestsLeft(ports)).toBe(1);
  });
});
