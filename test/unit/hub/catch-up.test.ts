/**
 * Catch-up after the whole hub stops: nobody checks a job's schedule for an hour (every instance
 * frozen, scaled to zero, a subscription suspended), then a leader looks again. What follows is
 * exactly what `catchUp` and `startingDeadlineSeconds` promise, in both engines: `latest`, the
 * newest occurrence within the deadline; `all`, each one within it; every other occurrence of the
 * hour recorded as missed with its reason, and told to telemetry one by one (the alert on
 * `baton.schedule.not_run` fires from those).
 */
import { describe, expect, it } from 'vitest';
import { reconcileJob } from '../../../src/engine/reconcile';
import { startDueRuns } from '../../../src/durable';
import { jobStateKey, jobStateSchema, type JobState } from '../../../src/hub/job-state';
import type { RecordedOccurrences } from '../../../src/hub/occurrence-ledger';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import type { RunTelemetry } from '../../../src/telemetry/run-telemetry';
import { useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

const STOPPED_AT = new Date('2026-06-01T09:59:30.000Z');
/** An hour and a few seconds later: sixty occurrences of an every-minute job went by unchecked. */
const BACK_AT = new Date('2026-06-01T11:00:05.000Z');
const DEADLINE_S = 300;
/** The occurrences of the hour, 10:00 to 11:00. */
const HOUR = Array.from({ length: 61 }, (_, i) => new Date(Date.UTC(2026, 5, 1, 10, i)).toISOString());
/** Within the starting deadline at BACK_AT: 10:55:05 or later. */
const WITHIN = HOUR.filter((o) => BACK_AT.getTime() - Date.parse(o) <= DEADLINE_S * 1000);

class Told implements Pick<RunTelemetry, 'occurrencesRecorded' | 'runStarted' | 'runEnded' | 'firstItemCounted'> {
  recorded: RecordedOccurrences[] = [];
  occurrencesRecorded(_job: string, recorded: RecordedOccurrences): void {
    this.recorded.push(recorded);
  }
  runStarted(): void {}
  runEnded(): void {}
  firstItemCounted(): void {}
}

const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});

/** Due every minute; `allow`, so no run of the backlog is skipped for overlapping another. */
const everyMinute = (catchUp: 'latest' | 'all') =>
  withMerge(
    sumJob({
      name: 'minutely',
      items: 1,
      schedule: '0 * * * * *',
      overlap: 'allow',
      catchUp,
      startingDeadlineSeconds: DEADLINE_S,
    }),
    mergeSum,
  );

function promised(catchUp: 'latest' | 'all'): { run: string[]; missed: string[] } {
  const run = catchUp === 'all' ? WITHIN : WITHIN.slice(-1);
  return { run, missed: HOUR.filter((o) => !run.includes(o)) };
}

function expectKept(catchUp: 'latest' | 'all', started: string[], state: JobState | undefined, told: Told): void {
  const { run, missed } = promised(catchUp);
  expect(started).toEqual(run.map((o) => `minutely/${o}`));
  expect(state?.totals).toEqual({ started: run.length, skipped: 0, missed: missed.length });
  // Each missed occurrence told once, with its reason: what the alert on missed occurrences reads.
  const events = told.recorded.flatMap((r) => r.events);
  expect(events.map((e) => e.occurrence)).toEqual(missed);
  expect(new Set(events.map((e) => e.outcome))).toEqual(new Set(['missed']));
  for (const e of events) expect(e.reason).toMatch(/not started within 300 s|superseded/);
}

const fakeDurable = useFakeDurable();

describe.each(['latest', 'all'] as const)('catch-up %s after the whole hub stopped for an hour', (catchUp) => {
  it('queue engine: the runs that follow are exactly the promised ones, and every other occurrence is missed, told', async () => {
    const engine = unitEngine([everyMinute(catchUp)], STOPPED_AT);
    const told = new Told();
    (engine.ctx as { telemetry?: unknown }).telemetry = told;
    const check = async () => {
      const { book, term } = engine.book(1);
      return reconcileJob(engine.ctx, term, book, engine.ctx.jobs.get('minutely')!);
    };
    expect(await check()).toEqual([]);
    await engine.clock.advance(BACK_AT.getTime() - STOPPED_AT.getTime());
    const started = await check();
    expectKept(catchUp, started, await engine.jobState('minutely'), told);
    expect((await engine.runs('minutely')).map((r) => r.occurrence).sort()).toEqual(promised(catchUp).run);
  });

  it('durable engine: the same', async () => {
    const durable = await fakeDurable();
    const docs = new InMemoryDocumentStore();
    const told = new Told();
    const jobs = [everyMinute(catchUp)];
    const deps = { jobs, client: durable.port(), docs, epoch: 1, telemetry: told };
    expect((await startDueRuns({ ...deps, now: STOPPED_AT })).started).toEqual([]);
    const { started } = await startDueRuns({ ...deps, now: BACK_AT });
    const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
    expectKept(catchUp, started, (await states.read(jobStateKey('minutely')))?.value, told);
  });
});
