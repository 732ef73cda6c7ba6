import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/clock/fake-clock';
import { DISCOVER_EVERY_MS, HubQueues } from '../../../src/engine/queue-shards';
import { requestRun } from '../../../src/hub/requests';
import { parseShardQueueName, shardQueueNames } from '../../../src/hub/resources';
import type { RunOutput } from '../../../src/hub/run-output';
import { runKeys } from '../../../src/hub/run-record';
import { InMemoryQueueDirectory } from '../../../src/queue/in-memory-queue';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { describePatience, patience } from '../../support/slowdown';
import { expectedSum, sumJob } from '../../support/sample-jobs';

const HUB = 'hub';
const names = (shard: number) => shardQueueNames(HUB, shard);

describe('shard queue names', () => {
  it.each<[number, string, string, string]>([
    [0, 'hub-work', 'hub-results', 'hub-work-poison'],
    [1, 'hub-work-s1', 'hub-results-s1', 'hub-work-s1-poison'],
    [15, 'hub-work-s15', 'hub-results-s15', 'hub-work-s15-poison'],
  ])('shard %i is %s, %s and %s, and each name parses back', (shard, work, results, poison) => {
    expect(names(shard)).toEqual({ work, results, poison });
    expect(parseShardQueueName(HUB, work)).toEqual({ shard, role: 'work' });
    expect(parseShardQueueName(HUB, results)).toEqual({ shard, role: 'results' });
    expect(parseShardQueueName(HUB, poison)).toEqual({ shard, role: 'poison' });
  });

  it.each([
    ['another hub whose name starts with this one', 'hub-work-s2-work'],
    ['a results poison queue, which nothing makes', 'hub-results-poison'],
    ['a shard past the most a hub may have', 'hub-work-s16'],
    ['a shard number with a leading zero', 'hub-work-s01'],
    ['shard 0 spelt out', 'hub-work-s0'],
    ['another hub', 'other-work'],
    ['a queue that is not Baton’s', 'hub-audit'],
  ])('does not take %s (%s) for a shard of the hub', (_what, name) => {
    expect(parseShardQueueName(HUB, name)).toBeUndefined();
  });
});

describe('HubQueues', () => {
  it('sends message k of a run to shard k mod N', () => {
    const queues = HubQueues.forHub(HUB, 3, new InMemoryQueueDirectory(), new FakeClock());
    expect([0, 1, 2, 3, 4, 5].map((k) => queues.workFor(k).name)).toEqual([
      'hub-work',
      'hub-work-s1',
      'hub-work-s2',
      'hub-work',
      'hub-work-s1',
      'hub-work-s2',
    ]);
  });

  it('finds the shards past its count that exist, drains them until seen empty, and looks again a minute later', async () => {
    const clock = new FakeClock();
    const directory = new InMemoryQueueDirectory({ clock });
    const queues = HubQueues.forHub(HUB, 2, directory, clock);
    await queues.ensure();
    for (const name of [names(3).work, names(3).results, names(3).poison, names(5).results, 'hub-audit', 'hubx-results-s3']) {
      await directory.queue(name).ensure();
    }
    await queues.discover();
    expect(queues.resultsToDrain().map((q) => q.name)).toEqual([
      'hub-results',
      'hub-results-s1',
      'hub-results-s3',
      'hub-results-s5',
    ]);
    expect(queues.poisonToDrain().map((q) => q.name)).toEqual(['hub-work-poison', 'hub-work-s1-poison', 'hub-work-s3-poison']);
    expect(queues.strandedWork().map((q) => q.name)).toEqual(['hub-work-s3']);

    queues.seenEmpty(directory.queue(names(3).results));
    queues.seenEmpty(directory.queue(names(0).results)); // its own shards are always drained
    expect(queues.resultsToDrain().map((q) => q.name)).toEqual(['hub-results', 'hub-results-s1', 'hub-results-s5']);

    await clock.advance(DISCOVER_EVERY_MS - 1);
    await queues.discover();
    expect(queues.resultsToDrain().map((q) => q.name)).not.toContain('hub-results-s3');
    await clock.advance(1);
    await queues.discover();
    expect(queues.resultsToDrain().map((q) => q.name)).toContain('hub-results-s3');
  });
});

describe('a hub with several queue shards', () => {
  const job = sumJob({ items: 30 });

  it('spreads a run over every shard, each shard’s results come back on its own queue, and the output is exact', async () => {
    const ports = memoryPorts();
    const directory = new InMemoryQueueDirectory();
    const engine = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 3, directory } });
    const runId = await requestRun(ports.docs, 'sum');
    // Dispatch with no worker running: the work is still on the queues to look at.
    await dispatch(engine, runId);
    expect([0, 1, 2].map((k) => directory.queue(names(k).work).peekAll().length)).toEqual([10, 10, 10]);

    const stop = engine.startWorkers(1);
    const queued = (k: number) => directory.queue(names(k).results).peekAll().length;
    await waitFor(() => queued(0) + queued(1) + queued(2) === 30);
    expect([queued(0), queued(1), queued(2)]).toEqual([10, 10, 10]);
    await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded');
    await stop();
    expect((await engine.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(30));
    expect((await engine.readRun(runId))?.counters).toMatchObject({ planned: 30, succeeded: 30, failed: 0, duplicates: 0 });
  });

  it('a message out of the plan on a shard is noted on that shard’s poison queue and counted by the leader', async () => {
    const ports = memoryPorts();
    const directory = new InMemoryQueueDirectory();
    const engine = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 3, directory } });
    const runId = await requestRun(ports.docs, 'sum');
    await dispatch(engine, runId);
    await directory.queue(names(2).work).send(outOfRange(runId));
    const stop = engine.startWorkers(1);
    await waitFor(() => directory.queue(names(2).poison).peekAll().length === 1);
    expect([0, 1].map((k) => directory.queue(names(k).poison).peekAll().length)).toEqual([0, 0]);
    await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded');
    await stop();
    expect((await engine.readRun(runId))?.counters).toMatchObject({ succeeded: 30, rejected: 1 });
    expect(directory.queue(names(2).poison).peekAll()).toEqual([]);
  });

  it('lowering the count mid-run loses nothing: stranded work moves, results and poison notes on old shards are counted', async () => {
    const ports = memoryPorts();
    const directory = new InMemoryQueueDirectory();
    const before = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 3, directory } });
    const runId = await requestRun(ports.docs, 'sum');
    await dispatch(before, runId);
    await directory.queue(names(2).work).send(outOfRange(runId));
    // Shard 2's trigger runs its messages before the change: results and a note wait on shard 2.
    const stopOld = before.startWorkers(1, undefined, [2]);
    await waitFor(
      () => directory.queue(names(2).results).peekAll().length === 10 && directory.queue(names(2).poison).peekAll().length === 1,
    );
    await stopOld();
    expect(directory.queue(names(1).work).peekAll()).toHaveLength(10);

    const after = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 1, directory } });
    const stop = after.startWorkers(2);
    await after.leadUntil('new', async () => (await after.readRun(runId))?.state === 'succeeded');
    await stop();
    expect((await after.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(30));
    expect((await after.readRun(runId))?.counters).toMatchObject({ planned: 30, succeeded: 30, failed: 0, rejected: 1 });
    for (const k of [1, 2]) {
      for (const queue of Object.values(names(k))) expect(directory.queue(queue).peekAll(), queue).toEqual([]);
    }
  });

  it('raising the count mid-run loses nothing: a leader on the old count collects what new workers send to new shards', async () => {
    const ports = memoryPorts();
    const directory = new InMemoryQueueDirectory();
    const newer = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 3, directory } });
    const runId = await requestRun(ports.docs, 'sum');
    await dispatch(newer, runId);
    const stop = newer.startWorkers(1);
    // An instance still on one shard wins the lease and leads the run to its end.
    const older = buildEngine(ports, [job], { sharded: { hub: HUB, shards: 1, directory } });
    await older.leadUntil('old', async () => (await older.readRun(runId))?.state === 'succeeded');
    await stop();
    expect((await older.readJson<RunOutput>(runKeys.output(runId)))?.output).toEqual(expectedSum(30));
    expect((await older.readRun(runId))?.counters).toMatchObject({ planned: 30, succeeded: 30, failed: 0 });
  });
});

/** Leads one short term after another until the run is dispatched, so its work waits on the queues. */
async function dispatch(engine: ReturnType<typeof buildEngine>, runId: string): Promise<void> {
  const elector = engine.elector('dispatcher');
  while ((await engine.readRun(runId))?.state !== 'running') {
    await elector.runIfLeader((leadership) => engine.coordinator.lead(leadership, { termMs: 200 }));
  }
}

/** A work message naming items past the plan: its worker notes it on the poison queue, naming the run. */
function outOfRange(runId: string): string {
  return JSON.stringify({ v: 1, t: 'work', run: runId, job: 'sum', first: 30, count: 1, items: [{ i: 30 }] });
}

/** Polls a condition of in-memory queues; the bound (scaled by `patience`) is a hang guard for a loaded machine. */
async function waitFor(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const started = Date.now();
  const capMs = patience(timeoutMs);
  while (!condition()) {
    if (Date.now() - started > capMs) throw new Error(`condition not met within ${describePatience(timeoutMs)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
