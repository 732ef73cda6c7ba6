import { describe, expect, it } from 'vitest';
import { accountForOccurrences, type OccurrenceAccountInput } from './occurrence-accounting';
import type { JobEvent } from '../src/hub/job-state';
import { newRunRecord, scheduledRunId } from '../src/hub/run-record';

/** A job due every 20 s, on the minute and at :20 and :40; the window holds six of its occurrences. */
const T0 = Date.parse('2026-11-27T10:00:00.000Z');
const JOB = { name: 'chaos-sum', schedule: '0,20,40 * * * * *' };
const BOUND_MS = 17_000;
const at = (seconds: number) => new Date(T0 + seconds * 1000);

/** A run of the occurrence `dueS` seconds in, created `lagMs` after it. */
const run = (dueS: number, lagMs: number) =>
  newRunRecord({
    runId: scheduledRunId(JOB.name, at(dueS)),
    job: JOB.name,
    trigger: 'schedule',
    occurrence: at(dueS),
    now: new Date(at(dueS).getTime() + lagMs),
    timeoutSeconds: 120,
  });
const event = (dueS: number, outcome: JobEvent['outcome'], reason?: string): JobEvent => ({
  at: at(dueS + 1).toISOString(),
  occurrence: at(dueS).toISOString(),
  outcome,
  ...(reason ? { reason } : {}),
});
const started = (dueS: number): JobEvent => event(dueS, 'started');
const runId = (dueS: number) => scheduledRunId(JOB.name, at(dueS));

function input(over: Partial<OccurrenceAccountInput>): OccurrenceAccountInput {
  return {
    jobs: [JOB],
    from: T0,
    to: T0 + 119_000,
    faults: [],
    boundMs: BOUND_MS,
    runs: [0, 20, 40, 60, 80, 100].map((s) => run(s, 50)),
    recent: new Map([[JOB.name, [0, 20, 40, 60, 80, 100].map(started)]]),
    ...over,
  };
}

describe('accounting for every occurrence due while the faults ran', () => {
  it.each<{ name: string; over: Partial<OccurrenceAccountInput>; tally: Record<string, number>; evidence?: RegExp }>([
    { name: 'all six on time', over: {}, tally: { due: 6, onTime: 6 } },
    {
      name: 'one started just within the bound',
      over: { runs: [0, 20, 40, 60, 80].map((s) => run(s, 50)).concat(run(100, BOUND_MS)) },
      tally: { onTime: 6 },
    },
    {
      name: 'one started past the bound with no fault under way',
      over: { runs: [0, 20, 40, 60, 80].map((s) => run(s, 50)).concat(run(100, BOUND_MS + 1)) },
      tally: { onTime: 5 },
      evidence: /started 17001 ms after it was due \(bound 17000 ms\), and no fault was under way/,
    },
    {
      name: 'one started late after a storage restart that was under way when it came due',
      over: {
        runs: [0, 20, 40, 60, 80].map((s) => run(s, 50)).concat(run(100, 30_000)),
        faults: [{ kind: 'storage-restart', from: T0 + 95_000, to: T0 + 115_000 }],
      },
      tally: { onTime: 5, lateButExplained: 1 },
    },
    {
      name: 'a fault that was over long before does not explain a late start',
      over: {
        runs: [0, 20, 40, 60, 80].map((s) => run(s, 50)).concat(run(100, 30_000)),
        faults: [{ kind: 'kill', from: T0 + 10_000, to: T0 + 12_000 }],
      },
      tally: { onTime: 5, lateButExplained: 0 },
      evidence: /no fault was under way/,
    },
    {
      name: 'one skipped while the run before it was still open',
      over: {
        runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([
          [JOB.name, [started(0), started(20), event(40, 'skipped', `run ${runId(20)} is still active`), started(60)]],
        ]),
      },
      tally: { onTime: 5, skipped: 1 },
    },
    {
      name: 'one skipped for a run that had ended before it was due',
      over: {
        runs: [0, 60, 80, 100]
          .map((s) => run(s, 50))
          .concat({ ...run(20, 50), endedAt: at(30).toISOString(), state: 'succeeded' }),
        recent: new Map([
          [JOB.name, [started(0), started(20), event(40, 'skipped', `run ${runId(20)} is still active`), started(60)]],
        ]),
      },
      tally: { skipped: 1 },
      evidence: /skipped for chaos-sum\/2026-11-27T10:00:20.000Z, which had ended at 2026-11-27T10:00:30.000Z, before it was due/,
    },
    {
      name: 'one skipped for a run that does not exist',
      over: {
        runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([
          [JOB.name, [started(0), event(40, 'skipped', `runs ${runId(20)}, ${JOB.name}/nowhere are still active`)]],
        ]),
      },
      tally: { skipped: 1 },
      evidence: /skipped for chaos-sum\/nowhere, which has no run record/,
    },
    {
      name: 'one skipped for another reason',
      over: {
        runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([[JOB.name, [started(0), event(40, 'skipped', 'paused by hand')]]]),
      },
      tally: { skipped: 1 },
      evidence: /skipped for "paused by hand", not for an overlap/,
    },
    {
      name: 'one missed while a leader was killed',
      over: {
        runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([[JOB.name, [started(0), started(20), event(40, 'missed', 'superseded'), started(60)]]]),
        faults: [{ kind: 'kill', from: T0 + 35_000, to: T0 + 36_000 }],
      },
      tally: { onTime: 5, missed: 1 },
    },
    {
      name: 'one missed with no fault anywhere near',
      over: {
        runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([[JOB.name, [started(0), started(20), event(40, 'missed', 'superseded'), started(60)]]]),
        faults: [{ kind: 'kill', from: T0 + 90_000, to: T0 + 91_000 }],
      },
      tally: { missed: 1 },
      evidence: /recorded as missed, and no fault was under way/,
    },
    {
      name: 'one neither run nor recorded',
      over: { runs: [0, 20, 60, 80, 100].map((s) => run(s, 50)) },
      tally: { onTime: 5 },
      evidence: /no run, and the job state records it neither as skipped nor as missed/,
    },
    {
      name: 'one not run and older than the recent events: unchecked, not a violation',
      over: {
        runs: [20, 40, 60, 80, 100].map((s) => run(s, 50)),
        recent: new Map([[JOB.name, [20, 40, 60, 80, 100].map(started)]]),
      },
      tally: { onTime: 5, unchecked: 1 },
    },
  ])('$name', ({ over, tally, evidence }) => {
    const account = accountForOccurrences(input(over));
    expect(account).toMatchObject(tally);
    if (evidence) {
      expect(account.violations).toHaveLength(1);
      expect(account.violations[0]).toMatchObject({ rule: 'occurrences-accounted', evidence: expect.stringMatching(evidence) });
    } else {
      expect(account.violations).toEqual([]);
    }
  });
});
