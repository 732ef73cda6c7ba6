/**
 * `jitterSeconds`: each occurrence starts at its instant plus a jitter drawn from a hash of the
 * job and the occurrence, the same in every process and both engines; its run keeps the
 * occurrence as id, records when it was due, and its start lag counts from then.
 */
import { describe, expect, it } from 'vitest';
import { reconcileJob } from '../../../src/engine/reconcile';
import { startDueRuns } from '../../../src/durable';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { dueAtOf, nextDueAt } from '../../../src/hub/occurrence-ledger';
import { startLagMs } from '../../../src/hub/run-record';
import { InvalidConfigError } from '../../../src/errors';
import { jitterMs } from '../../../src/schedule/jitter';
import { useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});
/** Due on the hour, spread over ten minutes. */
const hourly = (name = 'hourly') => withMerge(sumJob({ name, items: 1, schedule: '0 0 * * * *', jitterSeconds: 600 }), mergeSum);
const NOON = new Date('2026-06-01T12:00:00.000Z');

describe('jitterMs', () => {
  it('is the same for the same job and occurrence, within [0, window), and spread across it', () => {
    expect(jitterMs('hourly', NOON, 600)).toBe(jitterMs('hourly', new Date(NOON.getTime()), 600));
    expect(jitterMs('hourly', NOON, 0)).toBe(0);
    const spread = Array.from({ length: 500 }, (_, i) => jitterMs(`job-${i}`, NOON, 600));
    for (const ms of spread) expect(ms >= 0 && ms < 600_000).toBe(true);
    // 500 jobs due at one instant: every tenth of the window holds some of them, none most.
    const tenths = Array.from({ length: 10 }, (_, k) => spread.filter((ms) => Math.floor(ms / 60_000) === k).length);
    for (const n of tenths) expect(n).toBeGreaterThan(20);
    expect(new Set(spread).size).toBeGreaterThan(490);
  });

  it('must stay shorter than the schedule’s shortest gap, and at most an hour', () => {
    expect(() => sumJob({ items: 1, schedule: '0 */5 * * * *', jitterSeconds: 300 })).toThrow(InvalidConfigError);
    expect(() => sumJob({ items: 1, schedule: '0 */5 * * * *', jitterSeconds: 300 })).toThrow(
      /^job sum: jitterSeconds \(300\) must be shorter than the schedule's shortest gap between occurrences \(300 s\)$/,
    );
    expect(() => sumJob({ items: 1, schedule: '0 0 0 * * *', jitterSeconds: 3601 })).toThrow(
      /jitterSeconds must be at most 3600/,
    );
    expect(sumJob({ items: 1, schedule: '0 */5 * * * *', jitterSeconds: 299 }).jitterSeconds).toBe(299);
  });
});

describe('a job with jitter', () => {
  const job = hourly();
  const due = dueAtOf(job, NOON);

  it('the leader wakes for the jittered start, also once the occurrence itself has passed', () => {
    expect(due.getTime()).toBe(NOON.getTime() + jitterMs('hourly', NOON, 600));
    expect(nextDueAt(job, new Date(NOON.getTime() - 1000))).toBe(due.getTime());
    expect(nextDueAt(job, new Date(due.getTime() - 1))).toBe(due.getTime());
    // After its start, the next hour's.
    expect(nextDueAt(job, due)).toBe(dueAtOf(job, new Date(NOON.getTime() + 3_600_000)).getTime());
  });

  it('queue engine: no run before the jittered start; then one, whose start lag counts from it', async () => {
    const engine = unitEngine([job], new Date(NOON.getTime() - 30_000));
    const check = async () => {
      const { book, term } = engine.book(1);
      return reconcileJob(engine.ctx, term, book, job);
    };
    expect(await check()).toEqual([]);
    await engine.clock.advance(due.getTime() - 1 - engine.clock.date().getTime());
    expect(await check()).toEqual([]);
    // The window stops short of the waiting occurrence, so the next check still sees it.
    expect(Date.parse((await engine.jobState('hourly'))!.lastChecked!)).toBeLessThan(NOON.getTime());
    await engine.clock.advance(1 + 40);
    expect(await check()).toEqual([`hourly/${NOON.toISOString()}`]);
    const [run] = await engine.runs('hourly');
    expect(run).toMatchObject({ occurrence: NOON.toISOString(), dueAt: due.toISOString() });
    expect(startLagMs(run!)).toBe(40);
  });

  it('durable engine: the same start', async () => {
    const durable = await fakeDurable();
    const deps = { jobs: [job], client: durable.port(), docs: new InMemoryDocumentStore(), epoch: 1 };
    await startDueRuns({ ...deps, now: new Date(NOON.getTime() - 30_000) });
    expect((await startDueRuns({ ...deps, now: new Date(due.getTime() - 1) })).started).toEqual([]);
    expect((await startDueRuns({ ...deps, now: new Date(due.getTime() + 40) })).started).toEqual([
      `hourly/${NOON.toISOString()}`,
    ]);
  });
});

const fakeDurable = useFakeDurable();
