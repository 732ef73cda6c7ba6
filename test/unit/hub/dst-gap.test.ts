/**
 * `dstGap`: a wall time the clocks skip (spring forward) runs once at the first instant after the
 * gap by default; with `skip`, it is recorded as skipped, with its reason, and not run. In both
 * engines, since both check schedules through the one ledger. A wall time the expression names
 * at the gap's end (03:00 when the clocks jump from 02:00 to 03:00) is not in the gap: it runs.
 */
import { describe, expect, it } from 'vitest';
import { reconcileJob } from '../../../src/engine/reconcile';
import { startDueRuns } from '../../../src/durable';
import { InvalidConfigError } from '../../../src/errors';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { jobStateKey, jobStateSchema, type JobState } from '../../../src/hub/job-state';
import { useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});

// 29 March 2026 in Berlin: 02:00 CET becomes 03:00 CEST (01:00Z). 02:30 does not happen.
const BEFORE = new Date('2026-03-28T23:00:00.000Z'); // 00:00 CET
const AFTER = new Date('2026-03-29T01:45:00.000Z'); // 03:45 CEST
const GAP_END = '2026-03-29T01:00:00.000Z';

const berlin = (schedule: string, dstGap?: 'run' | 'skip') =>
  withMerge(
    sumJob({
      name: 'nightly',
      items: 1,
      schedule,
      timeZone: 'Europe/Berlin',
      overlap: 'allow',
      catchUp: 'all',
      startingDeadlineSeconds: 10_800,
      ...(dstGap ? { dstGap } : {}),
    }),
    mergeSum,
  );

interface Outcome {
  started: string[];
  state: JobState | undefined;
}

async function queueEngine(job: ReturnType<typeof berlin>): Promise<Outcome> {
  const engine = unitEngine([job], BEFORE);
  const check = async () => {
    const { book, term } = engine.book(1);
    return reconcileJob(engine.ctx, term, book, engine.ctx.jobs.get('nightly')!);
  };
  expect(await check()).toEqual([]);
  await engine.clock.advance(AFTER.getTime() - BEFORE.getTime());
  return { started: await check(), state: await engine.jobState('nightly') };
}

const fakeDurable = useFakeDurable();

async function durableEngine(job: ReturnType<typeof berlin>): Promise<Outcome> {
  const durable = await fakeDurable();
  const docs = new InMemoryDocumentStore();
  const deps = { jobs: [job], client: durable.port(), docs, epoch: 1 };
  expect((await startDueRuns({ ...deps, now: BEFORE })).started).toEqual([]);
  const { started } = await startDueRuns({ ...deps, now: AFTER });
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return { started, state: (await states.read(jobStateKey('nightly')))?.value };
}

describe.each([
  ['queue engine', queueEngine],
  ['durable engine', durableEngine],
] as const)('a daily 02:30 in Europe/Berlin on the night the clocks go forward (%s)', (_engine, check) => {
  it('runs once at 03:00 CEST by default', async () => {
    const { started, state } = await check(berlin('0 30 2 * * *'));
    expect(started).toEqual([`nightly/${GAP_END}`]);
    expect(state?.totals).toEqual({ started: 1, skipped: 0, missed: 0 });
  });

  it("with dstGap 'skip', is recorded as skipped with its reason and not run", async () => {
    const { started, state } = await check(berlin('0 30 2 * * *', 'skip'));
    expect(started).toEqual([]);
    expect(state?.totals).toEqual({ started: 0, skipped: 1, missed: 0 });
    const skipped = state?.recent.filter((e) => e.outcome === 'skipped');
    expect(skipped?.map((e) => e.occurrence)).toEqual([GAP_END]);
    expect(skipped?.[0]?.reason).toMatch(/^dstGap: the clocks in Europe\/Berlin skipped the wall time/);
  });

  it("with dstGap 'skip', every 30 minutes still runs 03:00, which happens, and skips nothing", async () => {
    // 02:00 and 02:30 fall in the gap and would share 03:00's instant; 03:00 itself is real.
    const { started, state } = await check(berlin('0 */30 * * * *', 'skip'));
    expect(started).toEqual(
      [
        '2026-03-28T23:30:00.000Z',
        '2026-03-29T00:00:00.000Z',
        '2026-03-29T00:30:00.000Z',
        GAP_END,
        '2026-03-29T01:30:00.000Z',
      ].map((o) => `nightly/${o}`),
    );
    expect(state?.totals.skipped).toBe(0);
  });
});

it('dstGap takes run or skip, and says so otherwise', () => {
  expect(berlin('0 30 2 * * *').dstGap).toBe('run');
  expect(() => sumJob({ items: 1, dstGap: 'later' as 'skip' })).toThrow(InvalidConfigError);
  expect(() => sumJob({ items: 1, dstGap: 'later' as 'skip' })).toThrow(/^job sum: dstGap must be 'run' or 'skip'$/);
});
