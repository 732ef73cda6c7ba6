import { describe, expect, it } from 'vitest';
import { StaleEpochError } from '../../../src/errors';
import { cancelRun, reconcileJob } from '../../../src/engine/reconcile';
import { defineJob } from '../../../src/jobs/define-job';
import type { JobOptions } from '../../../src/jobs/job-definition';
import { runKeys, transition } from '../../../src/hub/run-record';
import { unitEngine, type UnitEngine } from '../../support/unit-engine';

const START = new Date('2026-01-01T00:00:00.000Z');
const at = (seconds: number): string => new Date(START.getTime() + seconds * 1000).toISOString();

/** Every 10 s, on the wall clock the fake clock starts at. */
function job(options: Partial<JobOptions<number, number, number, number>> = {}) {
  return defineJob<number, number, number>({
    name: 'tick',
    schedule: '*/10 * * * * *',
    split: () => [1],
    process: (n) => n,
    aggregate: { initial: () => 0, add: (a, r) => a + r },
    ...options,
  });
}

async function reconcile(engine: UnitEngine, epoch = 1): Promise<string[]> {
  const { book, term } = engine.book(epoch);
  const definition = engine.ctx.jobs.get('tick')!;
  return reconcileJob(engine.ctx, term, book, definition);
}

/** An engine whose job has just started its first run (the 00:00:10 occurrence). */
async function withFirstRun(overlap: 'skip' | 'allow' | 'replace') {
  const engine = unitEngine([job({ overlap })], START);
  await reconcile(engine);
  await engine.clock.advance(10_000);
  await reconcile(engine);
  return engine;
}

describe('reconcileJob', () => {
  it('the first check starts nothing and records lastChecked', async () => {
    const engine = unitEngine([job()], START);
    await engine.clock.advance(5_000);
    expect(await reconcile(engine)).toEqual([]);
    expect(await engine.runs('tick')).toEqual([]);
    const state = await engine.jobState('tick');
    expect(state).toMatchObject({ job: 'tick', lastChecked: at(5), active: [], totals: { started: 0, skipped: 0, missed: 0 } });
  });

  it("reads the schedule on the job's zone: two Berlin wall times the clocks skip are one run, at 03:00", async () => {
    // 29 March 2026: Berlin's 02:00 CET is 03:00 CEST; 02:15 and 02:45 never happen.
    const start = new Date('2026-03-29T00:50:00.000Z');
    const engine = unitEngine([job({ schedule: '0 15,45 2 * * *', timeZone: 'Europe/Berlin' })], start);
    await reconcile(engine);
    await engine.clock.advance(15 * 60_000);
    expect(await reconcile(engine)).toEqual(['tick/2026-03-29T01:00:00.000Z']);
    await engine.clock.advance(60 * 60_000);
    expect(await reconcile(engine)).toEqual([]);
    expect((await engine.runs('tick')).map((r) => r.occurrence)).toEqual(['2026-03-29T01:00:00.000Z']);
  });

  it('a due occurrence creates exactly one run with id job/<ISO>', async () => {
    const engine = unitEngine([job()], START);
    await reconcile(engine);
    await engine.clock.advance(12_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(10)}`]);
    const runs = await engine.runs('tick');
    expect(runs.map((r) => r.runId)).toEqual([`tick/${at(10)}`]);
    expect(runs[0]).toMatchObject({ trigger: 'schedule', occurrence: at(10), state: 'planning', createdAt: at(12) });
    const state = await engine.jobState('tick');
    expect(state?.lastChecked).toBe(at(12));
    expect(state?.active).toEqual([`tick/${at(10)}`]);
    expect(state?.totals).toEqual({ started: 1, skipped: 0, missed: 0 });
    expect(state?.recent).toEqual([{ at: at(12), occurrence: at(10), outcome: 'started', runId: `tick/${at(10)}` }]);

    // Checking again without time passing starts nothing new.
    expect(await reconcile(engine)).toEqual([]);
    expect(await engine.runs('tick')).toHaveLength(1);
  });

  it('the run record is fenced with the epoch of the term that created it', async () => {
    const engine = unitEngine([job()], START);
    await reconcile(engine, 4);
    await engine.clock.advance(10_000);
    await reconcile(engine, 4);
    const stored = await engine.docs.read(runKeys.record(`tick/${at(10)}`));
    expect(JSON.parse(stored!.body)).toMatchObject({ epoch: 4, value: { runId: `tick/${at(10)}` } });
  });

  it('two coordinators reconciling the same occurrence at once make exactly one run', async () => {
    const engine = unitEngine([job({ overlap: 'allow' })], START);
    await reconcile(engine, 1);
    await engine.clock.advance(10_000);
    const a = engine.book(1);
    const b = engine.book(2);
    const definition = engine.ctx.jobs.get('tick')!;
    const results = await Promise.allSettled([
      reconcileJob(engine.ctx, a.term, a.book, definition),
      reconcileJob(engine.ctx, b.term, b.book, definition),
    ]);
    // The older epoch may lose its job-state write to the newer one; nothing else may fail.
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(StaleEpochError);
    expect(results.some((r) => r.status === 'fulfilled')).toBe(true);

    const runs = await engine.runs('tick');
    expect(runs.map((r) => r.runId)).toEqual([`tick/${at(10)}`]);
    // Exactly one of the two terms created it.
    expect([a.book.active.has(`tick/${at(10)}`), b.book.active.has(`tick/${at(10)}`)].filter(Boolean)).toHaveLength(1);
    expect((await engine.jobState('tick'))?.active).toEqual([`tick/${at(10)}`]);
  });

  it('two coordinators reconciling the same occurrence at once record its start once', async () => {
    const engine = unitEngine([job({ overlap: 'allow' })], START);
    await reconcile(engine, 1);
    await engine.clock.advance(10_000);
    const a = engine.book(1);
    const b = engine.book(2);
    const definition = engine.ctx.jobs.get('tick')!;
    await Promise.allSettled([
      reconcileJob(engine.ctx, a.term, a.book, definition),
      reconcileJob(engine.ctx, b.term, b.book, definition),
    ]);
    // The job state says the occurrence started once, not once per coordinator.
    const state = await engine.jobState('tick');
    expect(state?.active).toEqual([`tick/${at(10)}`]);
    expect(state?.recent.filter((e) => e.outcome === 'started' && e.occurrence === at(10))).toHaveLength(1);
    expect(state?.totals.started).toBe(1);
  });

  it('many coordinators of one epoch racing the same occurrence still make one run', async () => {
    const engine = unitEngine([job({ overlap: 'allow' })], START);
    await reconcile(engine, 3);
    await engine.clock.advance(10_000);
    const definition = engine.ctx.jobs.get('tick')!;
    const books = [0, 1, 2, 3, 4].map(() => engine.book(3));
    await Promise.allSettled(books.map(({ book, term }) => reconcileJob(engine.ctx, term, book, definition)));
    expect((await engine.runs('tick')).map((r) => r.runId)).toEqual([`tick/${at(10)}`]);
  });

  it('an occurrence past startingDeadlineSeconds is recorded as missed, not run', async () => {
    const engine = unitEngine([job({ startingDeadlineSeconds: 5 })], START);
    await reconcile(engine);
    // The 00:00:10 occurrence is 7 s old when the leader looks: past its 5 s deadline.
    await engine.clock.advance(17_000);
    expect(await reconcile(engine)).toEqual([]);
    expect(await engine.runs('tick')).toEqual([]);
    const state = await engine.jobState('tick');
    expect(state?.totals).toEqual({ started: 0, skipped: 0, missed: 1 });
    expect(state?.recent).toEqual([
      expect.objectContaining({ at: at(17), occurrence: at(10), outcome: 'missed', reason: expect.stringMatching(/5 s/) }),
    ]);
    expect(state?.lastChecked).toBe(at(17));
  });

  it('an occurrence within startingDeadlineSeconds still starts', async () => {
    const engine = unitEngine([job({ startingDeadlineSeconds: 5 })], START);
    await reconcile(engine);
    await engine.clock.advance(15_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(10)}`]);
  });

  it("overlap 'skip' with an active run: no new run, and a skipped event naming the active run", async () => {
    const engine = await withFirstRun('skip');
    await engine.clock.advance(10_000);
    expect(await reconcile(engine, 2)).toEqual([]);
    expect((await engine.runs('tick')).map((r) => r.runId)).toEqual([`tick/${at(10)}`]);
    const state = await engine.jobState('tick');
    expect(state?.totals).toEqual({ started: 1, skipped: 1, missed: 0 });
    expect(state?.recent.at(-1)).toEqual({
      at: at(20),
      occurrence: at(20),
      outcome: 'skipped',
      reason: `run tick/${at(10)} is still active`,
    });
    expect(state?.active).toEqual([`tick/${at(10)}`]);
  });

  it("overlap 'skip' starts the next occurrence once the earlier run has ended", async () => {
    const engine = await withFirstRun('skip');
    const first = `tick/${at(10)}`;
    const { book } = engine.book(1);
    const run = await book.get(first);
    if (!run || 'terminal' in run || 'unregistered' in run) throw new Error('expected an open run');
    await book.save(run, transition(run.doc.value, 'cancelled', engine.clock.date(), 'test'));
    await engine.clock.advance(10_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(20)}`]);
    const state = await engine.jobState('tick');
    expect(state?.active).toEqual([`tick/${at(20)}`]);
  });

  it("overlap 'allow' starts a second run beside the active one", async () => {
    const engine = await withFirstRun('allow');
    await engine.clock.advance(10_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(20)}`]);
    const runs = await engine.runs('tick');
    expect(runs.map((r) => r.runId).sort()).toEqual([`tick/${at(10)}`, `tick/${at(20)}`]);
    expect(runs.every((r) => r.state === 'planning' && !r.cancelRequested)).toBe(true);
    const state = await engine.jobState('tick');
    expect([...(state?.active ?? [])].sort()).toEqual([`tick/${at(10)}`, `tick/${at(20)}`]);
    expect(state?.totals).toEqual({ started: 2, skipped: 0, missed: 0 });
  });

  it("overlap 'replace' asks the old run to cancel, records it, and starts the new one", async () => {
    const engine = await withFirstRun('replace');
    await engine.clock.advance(10_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(20)}`]);
    const runs = new Map((await engine.runs('tick')).map((r) => [r.runId, r]));
    expect(runs.size).toBe(2);
    expect(runs.get(`tick/${at(10)}`)).toMatchObject({ cancelRequested: true, endReason: expect.stringMatching(/replaced/) });
    expect(runs.get(`tick/${at(20)}`)).toMatchObject({ cancelRequested: false, state: 'planning' });
    const state = await engine.jobState('tick');
    expect(state?.recent).toContainEqual(expect.objectContaining({ at: at(20), outcome: 'cancelled', runId: `tick/${at(10)}` }));
    expect(state?.recent.at(-1)).toMatchObject({ outcome: 'started', runId: `tick/${at(20)}` });
    // The old run stays listed until the coordinator's next step actually ends it.
    expect(state?.active).toContain(`tick/${at(20)}`);
  });

  it("catchUp 'latest' after an outage creates only the latest run and records the rest as missed", async () => {
    const engine = unitEngine([job({ catchUp: 'latest' })], START);
    await reconcile(engine);
    // Down for a minute: 00:00:10 … 00:01:00 fell due, all within the 300 s deadline.
    await engine.clock.advance(61_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(60)}`]);
    expect((await engine.runs('tick')).map((r) => r.runId)).toEqual([`tick/${at(60)}`]);
    const state = await engine.jobState('tick');
    expect(state?.totals).toEqual({ started: 1, skipped: 0, missed: 5 });
    expect(state?.recent.filter((e) => e.outcome === 'missed').map((e) => e.occurrence)).toEqual([
      at(10),
      at(20),
      at(30),
      at(40),
      at(50),
    ]);
  });

  it("catchUp 'all' after an outage starts every due occurrence (with overlap 'allow')", async () => {
    const engine = unitEngine([job({ catchUp: 'all', overlap: 'allow' })], START);
    await reconcile(engine);
    await engine.clock.advance(31_000);
    expect(await reconcile(engine)).toEqual([`tick/${at(10)}`, `tick/${at(20)}`, `tick/${at(30)}`]);
    expect(await engine.runs('tick')).toHaveLength(3);
  });

  it('cancelRun refuses an unknown or ended run', async () => {
    const engine = unitEngine([job()], START);
    await reconcile(engine);
    await engine.clock.advance(10_000);
    await reconcile(engine);
    const { book } = engine.book(1);
    expect(await cancelRun(engine.ctx, book, 'tick/nope', 'x')).toBe(false);
    const run = await book.get(`tick/${at(10)}`);
    if (!run || 'terminal' in run || 'unregistered' in run) throw new Error('expected an open run');
    await book.save(run, transition(run.doc.value, 'timed-out', engine.clock.date()));
    expect(await cancelRun(engine.ctx, book, `tick/${at(10)}`, 'x')).toBe(false);
    const [stored] = await engine.runs('tick');
    expect(stored).toMatchObject({ state: 'timed-out', cancelRequested: false });
  });
});
