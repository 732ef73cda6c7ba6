import { describe, expect, it } from 'vitest';
import type { OrchestrationContext } from 'durable-functions';
import { requestRun } from '../../../src/hub/requests';
import { readRunDetails, type RunDetails } from '../../../src/hub/status';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import type { DocumentStore } from '../../../src/fencing/document-store';
import { isTerminal, runKeys } from '../../../src/hub/run-record';
import { createSyntheticJob, expectedSynthetic, type SyntheticJobSpec } from '../../../functions/synthetic-job';
import {
  chunkInstanceId,
  createChunkOrchestrator,
  createRunOrchestrator,
  DURABLE_NAMES,
  resolveDurableSettings,
  runInstanceId,
  settleAll,
  type ChunkInput,
  type ChunkResult,
  type RunInput,
  type RunProgress,
} from '../../../src/durable';
import { buildEngine } from '../../support/engine-harness';
import { comparableRun, durableEngine, durableSynthetic, withMerge } from '../../support/durable-jobs';
import { HistoryBuilder, instancesOf, replay, type ActionView } from '../../support/durable-history';
import { memoryPorts } from '../../support/memory-ports';
import { expectedSum, sumJob, type SumAcc } from '../../support/sample-jobs';
import { failuresOf } from '../../support/failures';

const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});
const sum = withMerge(sumJob({ items: 1200, itemsPerMessage: 2 }), mergeSum);
const jobs = new Map([[sum.name, sum]]);
const runOrchestrator = createRunOrchestrator(jobs);
const chunkOrchestrator = createChunkOrchestrator(jobs);

const OCCURRENCE = '2026-03-01T02:00:00.000Z';
const RUN_ID = `sum/${OCCURRENCE}`;
const INSTANCE = runInstanceId(RUN_ID);
const runInput: RunInput = {
  runId: RUN_ID,
  job: 'sum',
  occurrence: OCCURRENCE,
  trigger: 'schedule',
  settings: { chunkItems: 500, maxAttempts: 3 },
};

/** A chunk's result as a chunk orchestration would report it: items first..first+count-1, `failing` failed. */
function chunkResult(first: number, count: number, failing: number[] = []): ChunkResult {
  const acc = { count: 0, sum: 0, squares: 0 };
  for (let i = first; i < first + count; i++) {
    if (failing.includes(i)) continue;
    acc.count++;
    acc.sum += 2 * i;
    acc.squares += 4 * i * i;
  }
  return {
    acc,
    succeeded: count - failing.length,
    failed: failing.length,
    failures: failing.map((item) => ({ item, reason: `Error: item ${item} is cursed`, attempts: 3 })),
  };
}

const names = (actions: ActionView[]) => actions.map((a) => `${a.kind}:${a.name}`);

describe('run orchestrator, replayed by durable-functions', () => {
  it('schedules only the split on its first episode, with the run settings as the retry policy', async () => {
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, runInput);
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.done).toBe(false);
    expect(episode.actions).toEqual([
      {
        kind: 'activityWithRetry',
        name: DURABLE_NAMES.split,
        input: { runId: RUN_ID, job: 'sum', occurrence: OCCURRENCE, trigger: 'schedule', chunkItems: 500 },
        retry: expect.objectContaining({ firstRetryIntervalInMilliseconds: 1000, maxNumberOfAttempts: 3, backoffCoefficient: 2 }),
      },
    ]);
    expect(episode.customStatus).toEqual({ done: 0, failed: 0, total: 0 });
  });

  /** The history up to the chunks being created: split done, three chunks of 500, 500 and 200 items. */
  function planned(): HistoryBuilder {
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, runInput);
    history.scheduled(0, DURABLE_NAMES.split).nextEpisode();
    history.completed(0, { kind: 'planned', planned: 1200, planEpoch: 7, chunkItems: 500, chunks: 3 });
    for (let i = 0; i < 3; i++) history.subCreated(i + 1, DURABLE_NAMES.chunk, chunkInstanceId(INSTANCE, i));
    return history.nextEpisode();
  }

  it('fans out one sub-orchestration per chunk, with fixed instance ids and the plan in each input', async () => {
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, runInput);
    history.scheduled(0, DURABLE_NAMES.split).nextEpisode();
    history.completed(0, { kind: 'planned', planned: 1200, planEpoch: 7, chunkItems: 500, chunks: 3 });
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    const subs = episode.actions.slice(1);
    expect(subs.map((a) => [a.kind, a.name, a.instanceId])).toEqual(
      [0, 1, 2].map((i) => ['subOrchestration', DURABLE_NAMES.chunk, `${INSTANCE}~chunk-${i}`]),
    );
    expect(
      subs
        .map((a) => a.input as ChunkInput)
        .map(({ chunk, first, count, planEpoch, chunkItems, itemsPerMessage }) => ({
          chunk,
          first,
          count,
          planEpoch,
          chunkItems,
          itemsPerMessage,
        })),
    ).toEqual([
      { chunk: 0, first: 0, count: 500, planEpoch: 7, chunkItems: 500, itemsPerMessage: 2 },
      { chunk: 1, first: 500, count: 500, planEpoch: 7, chunkItems: 500, itemsPerMessage: 2 },
      { chunk: 2, first: 1000, count: 200, planEpoch: 7, chunkItems: 500, itemsPerMessage: 2 },
    ]);
    expect((subs[0]!.input as ChunkInput).settings).toEqual(resolveDurableSettings({ chunkItems: 500, maxAttempts: 3 }));
    expect(episode.customStatus).toEqual({ done: 0, failed: 0, total: 1200 });
    // A replay of the same history asks for exactly the same things.
    const again = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(again.actions).toEqual(episode.actions);
  });

  it('collects chunk by chunk: progress moves as chunks are taken in order, and finalize gets the merged accumulator', async () => {
    const results = [chunkResult(0, 500, [3, 400]), chunkResult(500, 500, [777]), chunkResult(1000, 200)];
    const history = planned();
    history.subCompleted(2, results[1]); // chunk 1 first: chunk 0 is still running
    let episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.actions).toHaveLength(4);
    expect(episode.customStatus).toEqual({ done: 0, failed: 0, total: 1200 });
    history.nextEpisode().subCompleted(1, results[0]);
    episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.customStatus).toEqual({ done: 1000, failed: 3, total: 1200 });
    expect(episode.actions).toHaveLength(4);
    history.nextEpisode().subCompleted(3, results[2]);
    episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.customStatus).toEqual({ done: 1200, failed: 3, total: 1200 });
    const finalize = episode.actions[4]!;
    expect(names(episode.actions)).toEqual([
      `activityWithRetry:${DURABLE_NAMES.split}`,
      ...Array(3).fill(`subOrchestration:${DURABLE_NAMES.chunk}`),
      `activityWithRetry:${DURABLE_NAMES.finalize}`,
    ]);
    expect(finalize.input).toEqual({
      kind: 'complete',
      runId: RUN_ID,
      job: 'sum',
      acc: expectedSum(1200, (i) => [3, 400, 777].includes(i)),
      counts: { planned: 1200, succeeded: 1197, failed: 3 },
      failures: [...results[0]!.failures, ...results[1]!.failures],
    });

    // The run's result is whatever finalize reports.
    const result = {
      runId: RUN_ID,
      state: 'failed',
      counts: { planned: 1200, succeeded: 1197, failed: 3 },
      outputKey: 'o',
      manifestKey: 'm',
    };
    history.scheduled(4, DURABLE_NAMES.finalize).nextEpisode().completed(4, result);
    episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode).toMatchObject({ done: true, output: result });
  });

  it("passes finalize the earliest of the chunks' first-item times, whichever chunk had it", async () => {
    const results = [
      { ...chunkResult(0, 500), firstDoneAt: '2026-03-01T02:00:05.000Z' },
      { ...chunkResult(500, 500), firstDoneAt: '2026-03-01T02:00:03.500Z' },
      // A chunk from an older version reports no time.
      chunkResult(1000, 200),
    ];
    const history = planned();
    history.subCompleted(3, results[2]).subCompleted(1, results[0]).subCompleted(2, results[1]);
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.actions[4]?.input).toMatchObject({ kind: 'complete', firstItemAt: '2026-03-01T02:00:03.500Z' });
  });

  it('gives finalize the same input whatever order the chunks finish in', async () => {
    const results = [chunkResult(0, 500, [1]), chunkResult(500, 500), chunkResult(1000, 200, [1199])];
    const finalizeInputs: unknown[] = [];
    for (const order of [
      [0, 1, 2],
      [2, 1, 0],
      [1, 2, 0],
    ]) {
      const history = planned();
      order.forEach((chunk, k) => {
        if (k > 0) history.nextEpisode();
        history.subCompleted(chunk + 1, results[chunk]);
      });
      const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
      finalizeInputs.push(episode.actions[4]?.input);
    }
    expect(finalizeInputs[0]).toMatchObject({ counts: { planned: 1200, succeeded: 1198, failed: 2 } });
    expect(finalizeInputs[1]).toEqual(finalizeInputs[0]);
    expect(finalizeInputs[2]).toEqual(finalizeInputs[0]);
  });

  it('counts every item of a chunk that fails as a whole as failed, with the reason, and still finalizes', async () => {
    const history = planned();
    history
      .subCompleted(1, chunkResult(0, 500))
      .subFailed(2, 'the chunk host ran out of memory')
      .subCompleted(3, chunkResult(1000, 200));
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.error).toBeUndefined();
    expect(episode.customStatus).toEqual({ done: 1200, failed: 500, total: 1200 });
    const input = episode.actions[4]!.input as {
      counts: unknown;
      failures: Array<{ item: number; reason: string; attempts: number }>;
      acc: unknown;
    };
    expect(input.counts).toEqual({ planned: 1200, succeeded: 700, failed: 500 });
    expect(input.failures.map((f) => f.item)).toEqual(Array.from({ length: 500 }, (_, k) => 500 + k));
    expect(new Set(input.failures.map((f) => `${f.reason}|${f.attempts}`))).toEqual(
      new Set(['chunk 1 (items 500..999) failed: the chunk host ran out of memory|0']),
    );
    expect(input.acc).toEqual(expectedSum(1200, (i) => i >= 500 && i < 1000));
  });

  it('ends the run through finalize (abort) when the split activity keeps failing', async () => {
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, runInput);
    history.scheduled(0, DURABLE_NAMES.split).nextEpisode();
    // Three tries (maxAttempts 3): TaskFailed, a retry timer, the next try, ... as Durable writes them.
    let id = 0;
    for (let attempt = 1; attempt <= 3; attempt++) {
      history.failed(id, 'storage is unreachable');
      const timer = ++id;
      const fireAt = new Date(history.now.getTime() + 1000 * 2 ** (attempt - 1));
      history.timerCreated(timer, fireAt).nextEpisode().timerFired(timer, fireAt);
      if (attempt < 3) history.scheduled(++id, DURABLE_NAMES.split).nextEpisode();
    }
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode.actions.map((a) => a.name)).toEqual([DURABLE_NAMES.split, DURABLE_NAMES.finalize]);
    expect(episode.actions[1]!.input).toEqual({
      kind: 'abort',
      runId: RUN_ID,
      job: 'sum',
      reason: 'the split activity failed: storage is unreachable',
    });
  });

  it('reports an ended run without fanning out (an orchestration restarted for an old occurrence)', async () => {
    const result = {
      runId: RUN_ID,
      state: 'succeeded',
      counts: { planned: 10, succeeded: 10, failed: 0 },
      outputKey: 'o',
      manifestKey: 'm',
    };
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, runInput);
    history.scheduled(0, DURABLE_NAMES.split).nextEpisode().completed(0, { kind: 'ended', result });
    const episode = await replay(runOrchestrator, { instanceId: INSTANCE, history: history.events, input: runInput });
    expect(episode).toMatchObject({ done: true, output: result });
    expect(episode.actions).toHaveLength(1);
  });

  it('fails at once, naming the job, when the job has no aggregate.merge', async () => {
    const bare = sumJob({ items: 3, name: 'bare' });
    const orchestrator = createRunOrchestrator(new Map([[bare.name, bare]]));
    const input = { ...runInput, runId: `bare/${OCCURRENCE}`, job: 'bare' };
    const history = new HistoryBuilder().start(DURABLE_NAMES.orchestrator, input);
    const episode = await replay(orchestrator, { instanceId: runInstanceId(input.runId), history: history.events, input });
    expect(episode.error).toMatch(/^job bare: aggregate\.merge is required by the durable engine/);
    expect(episode.actions).toEqual([]);
  });
});

describe('chunk orchestrator, replayed by durable-functions', () => {
  const settings = resolveDurableSettings({ maxAttempts: 3 });
  const chunk: ChunkInput = {
    runId: RUN_ID,
    job: 'sum',
    planEpoch: 7,
    chunkItems: 500,
    chunk: 0,
    first: 0,
    count: 5,
    itemsPerMessage: 2,
    settings,
  };
  const ok = (...items: number[]) => ({ outcomes: items.map((i) => ({ i, ok: true, r: { v: 2 * i } })) });
  const start = () => new HistoryBuilder().start(DURABLE_NAMES.chunk, chunk);
  const play = (history: HistoryBuilder) =>
    replay(chunkOrchestrator, { instanceId: chunkInstanceId(INSTANCE, 0), history: history.events, input: chunk });

  it('schedules one process activity per message, each with all but the last try under the retry policy', async () => {
    const episode = await play(start());
    expect(episode.actions.map((a) => [a.kind, a.name, a.input, a.retry?.maxNumberOfAttempts])).toEqual(
      [
        [0, 2],
        [2, 2],
        [4, 1],
      ].map(([first, count]) => [
        'activityWithRetry',
        DURABLE_NAMES.process,
        { runId: RUN_ID, job: 'sum', planEpoch: 7, chunkItems: 500, first, count, final: false, attempt: 1 },
        2,
      ]),
    );
  });

  it('reports the earliest time one of its activities had outcomes', async () => {
    const history = start();
    [0, 1, 2].forEach((id) => history.scheduled(id, DURABLE_NAMES.process));
    history
      .nextEpisode()
      .completed(2, { ...ok(4), doneAt: '2026-03-01T02:00:09.000Z' })
      .completed(0, { ...ok(0, 1), doneAt: '2026-03-01T02:00:04.000Z' })
      .completed(1, ok(2, 3));
    const episode = await play(history);
    expect(episode).toMatchObject({ done: true, output: { succeeded: 5, firstDoneAt: '2026-03-01T02:00:04.000Z' } });
  });

  it('folds the outcomes with aggregate.add from aggregate.initial()', async () => {
    const history = start();
    [0, 1, 2].forEach((id) => history.scheduled(id, DURABLE_NAMES.process));
    history.nextEpisode().completed(2, ok(4)).completed(0, ok(0, 1)).completed(1, ok(2, 3));
    const episode = await play(history);
    expect(episode).toMatchObject({ done: true, output: { acc: expectedSum(5), succeeded: 5, failed: 0, failures: [] } });
  });

  it('retries a failing message under the policy (timers between tries), then counts its last try item by item', async () => {
    const history = start();
    [0, 1, 2].forEach((id) => history.scheduled(id, DURABLE_NAMES.process));
    history
      .nextEpisode()
      .completed(1, ok(2, 3))
      .completed(2, ok(4))
      .failed(0, '1 of 2 item(s) failed; item 1: Error: item 1 is cursed');
    // The SDK answers the failed try with a retry timer, the next task id (3).
    let fireAt = new Date(history.now.getTime() + 1000);
    history.timerCreated(3, fireAt);
    let episode = await play(history);
    expect(episode.actions).toHaveLength(3); // a retry is the policy's business: no new action
    history.nextEpisode().timerFired(3, fireAt).scheduled(4, DURABLE_NAMES.process);
    history.nextEpisode().failed(4, '1 of 2 item(s) failed; item 1: Error: item 1 is cursed');
    fireAt = new Date(history.now.getTime() + 2000);
    history.timerCreated(5, fireAt).nextEpisode().timerFired(5, fireAt);
    episode = await play(history);
    // Both tries of the policy are spent: the last, reporting try of that message.
    expect(episode.actions).toHaveLength(4);
    expect(episode.actions[3]).toEqual({
      kind: 'activityWithRetry',
      name: DURABLE_NAMES.process,
      input: { runId: RUN_ID, job: 'sum', planEpoch: 7, chunkItems: 500, first: 0, count: 2, final: true, attempt: 3 },
      retry: expect.objectContaining({ maxNumberOfAttempts: 3 }),
    });
    history.scheduled(6, DURABLE_NAMES.process).nextEpisode();
    history.completed(6, {
      outcomes: [
        { i: 0, ok: true, r: { v: 0 } },
        { i: 1, ok: false, e: 'Error: item 1 is cursed', a: 3 },
      ],
    });
    episode = await play(history);
    expect(episode).toMatchObject({
      done: true,
      output: {
        acc: expectedSum(5, (i) => i === 1),
        succeeded: 4,
        failed: 1,
        failures: [{ item: 1, reason: 'Error: item 1 is cursed', attempts: 3 }],
      },
    });
  });

  it("fails a message's items with the reason when even its last try fails", async () => {
    const once = { ...chunk, settings: resolveDurableSettings({ maxAttempts: 1 }) };
    const history = new HistoryBuilder().start(DURABLE_NAMES.chunk, once);
    [0, 1, 2].forEach((id) => history.scheduled(id, DURABLE_NAMES.process));
    history
      .nextEpisode()
      .completed(1, ok(2, 3))
      .completed(2, ok(4))
      .failed(0, 'plan chunk runs/x/plan/e7/000000.ndjson is missing');
    const fireAt = new Date(history.now.getTime() + 1000);
    history.timerCreated(3, fireAt).nextEpisode().timerFired(3, fireAt);
    const episode = await replay(chunkOrchestrator, { instanceId: 'c', history: history.events, input: once });
    const reason = 'the last try of items 0..1 failed: plan chunk runs/x/plan/e7/000000.ndjson is missing';
    expect(episode.actions.every((a) => (a.input as { final: boolean }).final)).toBe(true);
    expect(episode).toMatchObject({
      done: true,
      output: {
        acc: expectedSum(5, (i) => i < 2),
        succeeded: 3,
        failed: 2,
        failures: [
          { item: 0, reason, attempts: 1 },
          { item: 1, reason, attempts: 1 },
        ],
      },
    });
  });

  it('fails the items of a message whose activity reports the wrong items, not the whole chunk', async () => {
    const history = start();
    [0, 1, 2].forEach((id) => history.scheduled(id, DURABLE_NAMES.process));
    history.nextEpisode().completed(0, ok(0, 1)).completed(1, ok(7)).completed(2, ok(4));
    const episode = await play(history);
    expect(episode.done).toBe(true);
    const output = episode.output as ChunkResult;
    expect(output).toMatchObject({ acc: expectedSum(5, (i) => i === 2 || i === 3), succeeded: 3, failed: 2 });
    expect(output.failures.map((f) => f.item)).toEqual([2, 3]);
    expect(output.failures[0]!.reason).toMatch(/did not report one outcome per item of items 2\.\.3/);
  });
});

describe('collecting every outcome (settleAll) in durable-functions 3.5.0', () => {
  it('schedules each task once, where a Task.any loop over the pending tasks schedules them again', async () => {
    function* anyLoop(context: OrchestrationContext): Generator<unknown, unknown, unknown> {
      const pending = [0, 1, 2].map((i) => context.df.callActivity('work', i));
      while (pending.length > 0) {
        const winner = (yield context.df.Task.any(pending)) as (typeof pending)[number];
        pending.splice(pending.indexOf(winner), 1);
      }
      return 'done';
    }
    function* settled(context: OrchestrationContext): Generator<unknown, unknown, unknown> {
      const tasks = [0, 1, 2].map((i) => context.df.callActivity('work', i));
      yield* settleAll(context.df, tasks, () => undefined);
      return 'done';
    }
    const history = new HistoryBuilder().start('x', null);
    [0, 1, 2].forEach((id) => history.scheduled(id, 'work'));
    history.nextEpisode().completed(1, 'b');
    const loop = await replay(anyLoop as never, { instanceId: 'x', history: history.events, input: null });
    const inputs = (episode: { actions: ActionView[] }) => episode.actions.map((a) => a.input);
    // The second Task.any carries the actions of tasks 0 and 2 again: the extension would run them twice.
    expect(inputs(loop)).toEqual([0, 1, 2, 0, 2]);
    const settle = await replay(settled as never, { instanceId: 'x', history: history.events, input: null });
    expect(inputs(settle)).toEqual([0, 1, 2]);
  });

  it('reads settled tasks instead of yielding them, so 20,000 of them replay without overflowing the stack', async () => {
    const n = 20_000;
    function* yieldEach(context: OrchestrationContext): Generator<unknown, unknown, unknown> {
      const tasks = Array.from({ length: n }, (_, i) => context.df.callActivity('work', i));
      yield context.df.Task.any(tasks);
      let total = 0;
      for (const task of tasks) total += (yield task) as number;
      return total;
    }
    function* settled(context: OrchestrationContext): Generator<unknown, unknown, unknown> {
      const tasks = Array.from({ length: n }, (_, i) => context.df.callActivity('work', i));
      let total = 0;
      yield* settleAll(context.df, tasks, (_, outcome) => {
        if (outcome.ok) total += outcome.result as number;
      });
      return total;
    }
    const history = new HistoryBuilder().start('x', null);
    for (let i = 0; i < n; i++) history.scheduled(i, 'work');
    history.nextEpisode();
    for (let i = n - 1; i >= 0; i--) history.completed(i, i);
    const naive = await replay(yieldEach as never, { instanceId: 'x', history: history.events, input: null });
    expect(naive.error).toMatch(/Maximum call stack size exceeded/);
    const settle = await replay(settled as never, { instanceId: 'x', history: history.events, input: null });
    expect(settle).toMatchObject({ done: true, output: (n * (n - 1)) / 2 });
  });
});

describe('whole durable runs (orchestrations replayed by durable-functions, activities on an in-memory hub)', () => {
  /** The queue engine's run of the same job, on in-memory ports, as the CLI would read it. */
  async function queueRun(spec: SyntheticJobSpec, maxAttempts: number): Promise<{ docs: DocumentStore; details: RunDetails }> {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [createSyntheticJob(spec)], { tuning: { maxAttempts } });
    const stop = engine.startWorkers(2);
    const runId = await requestRun(ports.docs, spec.name);
    await engine.leadUntil('leader', async () => isTerminal((await engine.readRun(runId))?.state ?? 'planning'), 60_000);
    await stop();
    return { docs: ports.docs, details: (await readRunDetails(ports.docs, runId))! };
  }

  async function durableRun(spec: SyntheticJobSpec, settings: { chunkItems?: number; maxAttempts: number }, seed = 1) {
    const docs = new InMemoryDocumentStore();
    const engine = durableEngine([durableSynthetic(spec)], docs, { seed });
    const run = await engine.run(spec.name, OCCURRENCE, settings);
    return { run, docs, details: (await readRunDetails(docs, run.runId))!, calls: engine.simulator.calls };
  }

  it('a 2,000-item job gives the queue engine output, counters and failures manifest, with bounded histories', async () => {
    const spec: SyntheticJobSpec = { name: 'synth', items: 2000, failEvery: 97, failureTolerance: { percent: 5 } };
    const expected = expectedSynthetic(spec);
    const queue = await queueRun(spec, 3);
    const durable = await durableRun(spec, { maxAttempts: 3 }, 7);

    expect(durable.run.state).toBe('completed');
    expect(durable.details.output?.output).toEqual(expected.output);
    expect((await failuresOf(durable.docs, durable.details.manifest)).map((f) => f.item)).toEqual(expected.failed);
    expect(await comparableRun(durable.docs, durable.details)).toEqual(await comparableRun(queue.docs, queue.details));
    expect(durable.details.record).toMatchObject({
      state: 'succeeded',
      outputKey: runKeys.output(durable.run.runId),
      manifestKey: runKeys.manifest(durable.run.runId),
    });
    expect(durable.run.output).toEqual({
      runId: durable.run.runId,
      state: 'succeeded',
      counts: { planned: 2000, succeeded: 1980, failed: 20 },
      outputKey: runKeys.output(durable.run.runId),
      manifestKey: runKeys.manifest(durable.run.runId),
    });

    // Four chunks of 500; each history is bounded by its chunk, not by the run.
    const chunks = instancesOf(durable.run).slice(1);
    expect(chunks.map((c) => c.instanceId).sort()).toEqual(
      [0, 1, 2, 3].map((i) => chunkInstanceId(runInstanceId(durable.run.runId), i)),
    );
    for (const chunk of chunks) expect(chunk.historyLength).toBeLessThan(5 * 500);
    expect(durable.run.historyLength).toBeLessThan(40);
    // Each failing item: two tries under the policy, one last reporting try; every other item once.
    const processCalls = durable.calls.filter((c) => c.name === DURABLE_NAMES.process);
    expect(processCalls).toHaveLength(2000 + 20 * 2);

    const statuses = durable.run.customStatuses.filter((s): s is RunProgress => s !== undefined);
    expect(statuses.at(-1)).toEqual({ done: 2000, failed: 20, total: 2000 });
    for (let k = 1; k < statuses.length; k++) {
      expect(statuses[k]!.done).toBeGreaterThanOrEqual(statuses[k - 1]!.done);
      expect(statuses[k]!.failed).toBeGreaterThanOrEqual(statuses[k - 1]!.failed);
    }
    // Progress moves a whole chunk at a time (several when they were already in), from 0 to all.
    expect(statuses[0]).toEqual({ done: 0, failed: 0, total: 0 }); // before the split
    expect(statuses.filter((s) => s.total === 2000)[0]).toEqual({ done: 0, failed: 0, total: 2000 });
    expect(statuses.every((s) => (s.total === 0 && s.done === 0) || (s.total === 2000 && s.done % 500 === 0))).toBe(true);
  });

  it('packs items into messages like the queue engine: a failing item does not fail the others of its message', async () => {
    const spec: SyntheticJobSpec = {
      name: 'packed',
      items: 300,
      itemsPerMessage: 4,
      failEvery: 7,
      failureTolerance: { percent: 20 },
    };
    const queue = await queueRun(spec, 3);
    const durable = await durableRun(spec, { chunkItems: 100, maxAttempts: 3 }, 3);
    expect(durable.details.output?.output).toEqual(expectedSynthetic(spec).output);
    expect(await comparableRun(durable.docs, durable.details)).toEqual(await comparableRun(queue.docs, queue.details));
    expect(await failuresOf(durable.docs, durable.details.manifest)).toContainEqual({
      item: 6,
      reason: 'Error: synthetic item 6 fails by design',
      attempts: 3,
    });
  });

  it('gives the same output and manifest whatever order Durable delivers completions in', async () => {
    const spec: SyntheticJobSpec = { name: 'orders', items: 600, failEvery: 41, failureTolerance: { count: 100 } };
    const a = await durableRun(spec, { chunkItems: 100, maxAttempts: 2 }, 11);
    const b = await durableRun(spec, { chunkItems: 100, maxAttempts: 2 }, 12345);
    expect(await comparableRun(a.docs, a.details)).toEqual(await comparableRun(b.docs, b.details));
    expect(a.details.output?.output).toEqual(expectedSynthetic(spec).output);
  });

  it('succeeds with failures within the tolerance and fails beyond it, writing the output either way', async () => {
    const within = await durableRun(
      { name: 'tolerant', items: 400, failEvery: 50, failureTolerance: { percent: 5 } },
      { chunkItems: 150, maxAttempts: 2 },
    );
    const beyond = await durableRun(
      { name: 'strict', items: 400, failEvery: 50, failureTolerance: { count: 5 } },
      { chunkItems: 150, maxAttempts: 2 },
    );
    for (const [run, state] of [
      [within, 'succeeded'],
      [beyond, 'failed'],
    ] as const) {
      expect(run.details.record.state).toBe(state);
      expect(run.details.output?.state).toBe(state);
      expect(run.details.manifest?.state).toBe(state);
      expect(run.details.record.counters).toMatchObject({ planned: 400, succeeded: 392, failed: 8 });
      expect((await failuresOf(run.docs, run.details.manifest)).map((f) => f.item)).toEqual([
        49, 99, 149, 199, 249, 299, 349, 399,
      ]);
      expect(run.details.output?.output).toEqual(expectedSynthetic({ name: 'x', items: 400, failEvery: 50 }).output);
    }
  });

  it('a chunk that fails as a whole fails its items with the reason; the tolerance then decides the run', async () => {
    const spec: SyntheticJobSpec = { name: 'crashy', items: 1200, failureTolerance: { percent: 50 } };
    const docs = new InMemoryDocumentStore();
    const engine = durableEngine([durableSynthetic(spec)], docs, {
      failInstance: (id) => (id.endsWith('~chunk-1') ? 'the host running it was recycled' : undefined),
    });
    const run = await engine.run('crashy', OCCURRENCE, { chunkItems: 500, maxAttempts: 2 });
    const details = (await readRunDetails(docs, run.runId))!;
    expect(details.record).toMatchObject({ state: 'succeeded', counters: { planned: 1200, succeeded: 700, failed: 500 } });
    const items = Array.from({ length: 1200 }, (_, i) => i).filter((i) => i < 500 || i >= 1000);
    expect(details.output?.output).toEqual({
      count: items.length,
      sum: items.reduce((s, i) => s + 2 * i, 0),
      squares: items.reduce((s, i) => (s + ((4 * i * i) % 2_147_483_647)) % 2_147_483_647, 0),
    });
    const failures = await failuresOf(docs, details.manifest);
    expect(failures).toEqual(
      Array.from({ length: 500 }, (_, k) => ({
        item: 500 + k,
        reason: 'chunk 1 (items 500..999) failed: the host running it was recycled',
        attempts: 0,
      })),
    );
    expect(run.customStatuses.at(-1)).toEqual({ done: 1200, failed: 500, total: 1200 });
  });

  it('a restarted orchestration of an ended run redoes nothing and reports the run', async () => {
    const spec: SyntheticJobSpec = { name: 'again', items: 50 };
    const docs = new InMemoryDocumentStore();
    const first = await durableEngine([durableSynthetic(spec)], docs).run('again', OCCURRENCE, { maxAttempts: 2 });
    const output = await docs.read(runKeys.output(first.runId));
    const second = durableEngine([durableSynthetic(spec)], docs);
    const rerun = await second.run('again', OCCURRENCE, { maxAttempts: 2 });
    expect(rerun.output).toEqual(first.output);
    expect(second.simulator.calls.map((c) => c.name)).toEqual([DURABLE_NAMES.split]);
    expect((await docs.read(runKeys.output(first.runId)))?.etag).toBe(output?.etag);
  });
});
