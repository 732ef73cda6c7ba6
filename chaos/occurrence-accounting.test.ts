import { describe, expect, it } from 'vitest';
import {
  accountForOccurrences,
  type AccountedJob,
  type OccurrenceAccount,
  type OccurrenceAccountInput,
} from './occurrence-accounting';
import type { JobEvent } from '../src/hub/job-state';
import { newRunRecord, scheduledRunId, type RunRecord } from '../src/hub/run-record';
import { jitterMs } from '../src/schedule/jitter';

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
    {
      name: 'one with two run records',
      over: {
        runs: [0, 20, 40, 60, 80, 100]
          .map((s) => run(s, 50))
          .concat({ ...run(40, 900), runId: `${JOB.name}/again-${at(40).toISOString()}` }),
      },
      tally: { onTime: 6 },
      evidence: /2 runs: chaos-sum\/2026-11-27T10:00:40.000Z, chaos-sum\/again-2026-11-27T10:00:40.000Z/,
    },
    {
      name: 'one the job state says started twice, as two runs',
      over: {
        recent: new Map([
          [JOB.name, [0, 20, 40, 60, 80, 100].map(started).concat({ ...started(40), runId: `${JOB.name}/other` })],
        ]),
      },
      tally: { onTime: 6 },
      evidence: /2 runs: chaos-sum\/2026-11-27T10:00:40.000Z, chaos-sum\/other/,
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

/** A scheduled run of `job` for the occurrence at `occurrence` (ms), due at `dueAt` as its record says, created at `createdAt`. */
const runAt = (job: AccountedJob, occurrence: number, createdAt: number, dueAt = occurrence): RunRecord =>
  newRunRecord({
    runId: scheduledRunId(job.name, new Date(occurrence)),
    job: job.name,
    trigger: 'schedule',
    occurrence: new Date(occurrence),
    dueAt: new Date(dueAt),
    now: new Date(createdAt),
    timeoutSeconds: 120,
  });
const startedAt = (job: AccountedJob, occurrence: number): JobEvent => ({
  at: new Date(occurrence + 20_000).toISOString(),
  occurrence: new Date(occurrence).toISOString(),
  outcome: 'started',
  runId: scheduledRunId(job.name, new Date(occurrence)),
});

const NONE = { due: 0, onTime: 0, lateButExplained: 0, skipped: 0, missed: 0, unchecked: 0 };

interface Case {
  name: string;
  over: Partial<OccurrenceAccountInput>;
  tally: Partial<OccurrenceAccount>;
  /** The violations' evidence, in order; none when absent. */
  evidence?: RegExp[];
}
function expectAccount(input: OccurrenceAccountInput, { tally, evidence = [] }: Case): void {
  const account = accountForOccurrences(input);
  expect(account).toMatchObject(tally);
  expect(account.violations.map((v) => v.evidence)).toEqual(evidence.map((e) => expect.stringMatching(e)));
  for (const v of account.violations) expect(v.rule).toBe('occurrences-accounted');
}

/**
 * A job in Pacific/Chatham, 12:45 ahead of UTC in winter and 13:45 in summer: 45 minutes off
 * any whole hour, so its even wall minutes are odd minutes in UTC, all year round.
 */
const ZONED: AccountedJob = { name: 'chaos-zoned', schedule: '*/15 */2 * * * *', timeZone: 'Pacific/Chatham' };
/** In the window of T0's two minutes, the zone's occurrences: 10:01 UTC is 23:46 in Chatham (13:45 ahead in November). */
const ZONED_AT = [60, 75, 90, 105].map((s) => T0 + s * 1000);
/** What the same fields name read in UTC: 10:00 is an even minute there. */
const UTC_AT = [0, 15, 30, 45].map((s) => T0 + s * 1000);

describe('occurrences read in the job’s zone', () => {
  const zonedInput = (over: Partial<OccurrenceAccountInput>): OccurrenceAccountInput => ({
    jobs: [ZONED],
    from: T0,
    to: T0 + 119_000,
    faults: [],
    boundMs: BOUND_MS,
    runs: ZONED_AT.map((t) => runAt(ZONED, t, t + 50)),
    recent: new Map([[ZONED.name, ZONED_AT.map((t) => startedAt(ZONED, t))]]),
    ...over,
  });
  it.each<Case>([
    {
      name: 'runs at the zone’s instants, which the UTC reading does not name',
      over: {},
      tally: {
        due: 4,
        onTime: 4,
        jobs: { [ZONED.name]: { ...NONE, due: 4, onTime: 4, timeZone: 'Pacific/Chatham', jitterSeconds: 0 } },
      },
    },
    {
      name: 'runs at the instants the same fields name in UTC',
      over: {
        runs: UTC_AT.map((t) => runAt(ZONED, t, t + 50)),
        recent: new Map([[ZONED.name, UTC_AT.map((t) => startedAt(ZONED, t))]]),
      },
      tally: { due: 4, onTime: 0 },
      evidence: [
        ...ZONED_AT.map(() => /^no run, and the job state records it neither as skipped nor as missed$/),
        ...UTC_AT.map(
          (t) =>
            new RegExp(
              `^a run of ${new Date(t).toISOString()}, which is not an occurrence of "\\*/15 \\*/2 \\* \\* \\* \\*" in Pacific/Chatham$`,
            ),
        ),
      ],
    },
  ])('$name', (c) => expectAccount(zonedInput(c.over), c));

  /** Every even wall minute in Chatham, at second 0. */
  const DST: AccountedJob = { name: 'chaos-dst', schedule: '0 */2 * * * *', timeZone: 'Pacific/Chatham' };
  const minutes = (fromIso: string, count: number, step = 2): number[] =>
    Array.from({ length: count }, (_, i) => Date.parse(fromIso) + i * step * 60_000);
  const all = (instants: number[]): Partial<OccurrenceAccountInput> => ({
    runs: instants.map((t) => runAt(DST, t, t + 50)),
    recent: new Map([[DST.name, instants.map((t) => startedAt(DST, t))]]),
  });
  // 2026-04-05 03:45 CHADT is 02:45 CHAST (14:00 UTC): the wall hour 02:45-03:45 comes twice, 13:00-15:00 UTC.
  const fallBack = { from: Date.parse('2026-04-04T13:00:00Z'), to: Date.parse('2026-04-04T15:59:59Z') };
  const onceEach = [...minutes('2026-04-04T13:01:00Z', 30), ...minutes('2026-04-04T15:01:00Z', 30)];
  // 2026-09-27 02:45 CHAST is 03:45 CHADT (14:00 UTC): the wall times between never happen.
  const springForward = { from: Date.parse('2026-09-26T13:00:00Z'), to: Date.parse('2026-09-26T14:59:59Z') };
  const aroundGap = [
    ...minutes('2026-09-26T13:01:00Z', 30),
    // The 30 even wall minutes 02:46-03:44 the clocks skip are one occurrence, the first instant after the gap.
    Date.parse('2026-09-26T14:00:00Z'),
    ...minutes('2026-09-26T14:01:00Z', 30),
  ];
  it.each<Case & { window: { from: number; to: number } }>([
    {
      name: 'clocks going back: a wall time passed twice is one occurrence, its first pass',
      window: fallBack,
      over: all(onceEach),
      tally: { due: 60, onTime: 60 },
    },
    {
      name: 'clocks going back: a run of the second pass as well',
      window: fallBack,
      over: all([...onceEach, Date.parse('2026-04-04T14:01:00Z')]),
      tally: { due: 60, onTime: 60 },
      evidence: [/^a run of 2026-04-04T14:01:00.000Z, which is not an occurrence of "0 \*\/2 \* \* \* \*" in Pacific\/Chatham$/],
    },
    {
      name: 'clocks going forward: the wall times skipped are one occurrence after the gap',
      window: springForward,
      over: all(aroundGap),
      tally: { due: 61, onTime: 61 },
    },
    {
      name: 'clocks going forward: the occurrence after the gap not run',
      window: springForward,
      over: all(aroundGap.filter((t) => t !== Date.parse('2026-09-26T14:00:00Z'))),
      tally: { due: 61, onTime: 60 },
      evidence: [/^no run, and the job state records it neither as skipped nor as missed$/],
    },
  ])('$name', (c) =>
    expectAccount({ jobs: [DST], ...c.window, faults: [], boundMs: BOUND_MS, runs: [], recent: new Map(), ...c.over }, c),
  );
});

/**
 * A job every 20 s whose starts are spread over 15 s. Its jitter at T0 + 0, 20, ... 120 s:
 * 14088, 11692, 11446, 4779, 6435, 5826 and 10859 ms, so the occurrence at 120 s is due after
 * a window that ends at 125 s, and the one at 0 s after a window's start at 10 s.
 */
const JITTERED: AccountedJob = { name: 'chaos-jitter', schedule: '0,20,40 * * * * *', jitterSeconds: 15 };
const JITTER = [0, 20, 40, 60, 80, 100, 120].map((s) => jitterMs(JITTERED.name, at(s), 15));
const dueOf = (s: number) => at(s).getTime() + JITTER[s / 20]!;
/** A run of the jittered job's occurrence `s` seconds in, created `lagMs` after it was due, its record saying when that was. */
const jitteredRun = (s: number, lagMs: number, recordedDue = dueOf(s)) =>
  runAt(JITTERED, at(s).getTime(), dueOf(s) + lagMs, recordedDue);
const jitteredEvent = (s: number, outcome: JobEvent['outcome'], reason?: string): JobEvent => ({
  at: new Date(dueOf(s) + 100).toISOString(),
  occurrence: at(s).toISOString(),
  outcome,
  ...(outcome === 'started' ? { runId: scheduledRunId(JITTERED.name, at(s)), dueAt: new Date(dueOf(s)).toISOString() } : {}),
  ...(reason ? { reason } : {}),
});

describe('occurrences due at their jittered time', () => {
  it('draws the jitter the table below is written for', () => {
    expect(JITTER).toEqual([14088, 11692, 11446, 4779, 6435, 5826, 10859]);
  });
  const jitteredInput = (over: Partial<OccurrenceAccountInput>): OccurrenceAccountInput => ({
    jobs: [JITTERED],
    from: T0,
    to: T0 + 125_000,
    faults: [],
    boundMs: BOUND_MS,
    runs: [0, 20, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)),
    recent: new Map([[JITTERED.name, [0, 20, 40, 60, 80, 100].map((s) => jitteredEvent(s, 'started'))]]),
    ...over,
  });
  it.each<Case>([
    {
      name: 'the occurrence whose jitter takes it past the window is not due in it',
      over: {},
      tally: { due: 6, onTime: 6, jobs: { [JITTERED.name]: { ...NONE, due: 6, onTime: 6, timeZone: 'UTC', jitterSeconds: 15 } } },
    },
    {
      name: 'one due before the window opens, by its instant, is due in it by its jitter',
      over: {
        from: T0 + 10_000,
        to: T0 + 100_000,
        runs: [0, 20, 40, 60, 80].map((s) => jitteredRun(s, 50)),
        recent: new Map([[JITTERED.name, [0, 20, 40, 60, 80].map((s) => jitteredEvent(s, 'started'))]]),
      },
      tally: { due: 5, onTime: 5 },
    },
    {
      name: 'one started the bound after its jittered due time, more than the bound after its instant',
      over: { runs: [20, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)).concat(jitteredRun(0, BOUND_MS)) },
      tally: { onTime: 6 },
    },
    {
      name: 'one started past the bound after its jittered due time',
      over: { runs: [20, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)).concat(jitteredRun(0, BOUND_MS + 1)) },
      tally: { onTime: 5 },
      evidence: [/^started 17001 ms after it was due \(bound 17000 ms\), and no fault was under way/],
    },
    {
      name: 'one started after its instant but before its jittered due time',
      over: { runs: [20, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)).concat(jitteredRun(0, -9088)) },
      tally: { onTime: 5 },
      evidence: [/^started 9088 ms before it was due$/],
    },
    {
      name: 'one whose record says it was due at its instant, without the jitter',
      over: { runs: [0, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)).concat(jitteredRun(20, 50, at(20).getTime())) },
      tally: { onTime: 6 },
      evidence: [
        /^its run record says it was due at 2026-11-27T10:00:20.000Z, and its job's jitter \(15 s\) puts it at 2026-11-27T10:00:31.692Z$/,
      ],
    },
    {
      name: 'one missed under a fault that began within the bound of its jittered due time, not of its instant',
      over: {
        runs: [20, 40, 60, 80, 100].map((s) => jitteredRun(s, 50)),
        recent: new Map([
          [
            JITTERED.name,
            [jitteredEvent(0, 'missed', 'superseded'), ...[20, 40, 60, 80, 100].map((s) => jitteredEvent(s, 'started'))],
          ],
        ]),
        faults: [{ kind: 'kill', from: T0 + 20_000, to: T0 + 21_000 }],
      },
      tally: { onTime: 5, missed: 1 },
    },
    {
      name: 'one skipped for a run that ended after its instant and before its jittered due time',
      over: {
        runs: [0, 60, 80, 100]
          .map((s) => jitteredRun(s, 50))
          .concat({ ...jitteredRun(20, 50), endedAt: at(45).toISOString(), state: 'succeeded' }),
        recent: new Map([
          [
            JITTERED.name,
            [
              jitteredEvent(0, 'started'),
              jitteredEvent(20, 'started'),
              jitteredEvent(40, 'skipped', `run ${scheduledRunId(JITTERED.name, at(20))} is still active`),
              jitteredEvent(60, 'started'),
              jitteredEvent(80, 'started'),
            ],
          ],
        ]),
      },
      tally: { onTime: 5, skipped: 1 },
      evidence: [
        /^skipped for chaos-jitter\/2026-11-27T10:00:20.000Z, which had ended at 2026-11-27T10:00:45.000Z, before it was due$/,
      ],
    },
    {
      name: 'one skipped for a run still open at its jittered due time',
      over: {
        runs: [0, 60, 80, 100]
          .map((s) => jitteredRun(s, 50))
          .concat({ ...jitteredRun(20, 50), endedAt: at(55).toISOString(), state: 'succeeded' }),
        recent: new Map([
          [
            JITTERED.name,
            [
              jitteredEvent(0, 'started'),
              jitteredEvent(20, 'started'),
              jitteredEvent(40, 'skipped', `run ${scheduledRunId(JITTERED.name, at(20))} is still active`),
              jitteredEvent(60, 'started'),
            ],
          ],
        ]),
      },
      tally: { onTime: 5, skipped: 1 },
    },
  ])('$name', (c) => expectAccount(jitteredInput(c.over), c));
});
