import * as df from 'durable-functions';
import { describe, expect, it } from 'vitest';
import { DURABLE_NAMES, runInstanceId, startDueRuns } from '../../../src/durable';
import { reconcileJob } from '../../../src/engine/reconcile';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { jobStateKey, jobStateSchema, newJobState, type JobEvent, type JobState } from '../../../src/hub/job-state';
import { recordCheck, type ScheduleCheck } from '../../../src/hub/occurrence-ledger';
import { newRunRecord, runKeys, runRecordSchema, scheduledRunId, transition, type RunRecord } from '../../../src/hub/run-record';
import { useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

const START = new Date('2026-01-01T00:00:00.000Z');
const at = (seconds: number): string => new Date(START.getTime() + seconds * 1000).toISOString();
const runAt = (seconds: number): string => scheduledRunId('tick', new Date(at(seconds)));

describe('recordCheck', () => {
  const started = (s: number): JobEvent => ({ at: at(s + 1), occurrence: at(s), outcome: 'started', runId: runAt(s) });
  const skipped = (s: number): JobEvent => ({ at: at(s + 1), occurrence: at(s), outcome: 'skipped', reason: 'overlap' });
  const missed = (s: number): JobEvent => ({ at: at(s + 1), occurrence: at(s), outcome: 'missed', reason: 'late' });
  const state = (fields: Partial<JobState>): JobState => ({ ...newJobState('tick'), ...fields });
  const check = (fields: Partial<ScheduleCheck>): ScheduleCheck => ({
    readFrom: state({ lastChecked: at(5) }),
    checkedUntil: at(45),
    events: [],
    missedCount: 0,
    leaves: () => false,
    watch: [],
    schedule: { expression: '*/10 * * * * *', timeZone: 'UTC', jitterSeconds: 0 },
    ...fields,
  });

  it.each([
    {
      what: 'nobody raced: every event counts, unlisted misses too, and the window moves on',
      latest: state({ lastChecked: at(5) }),
      check: check({ events: [missed(10), skipped(20), started(40)], missedCount: 3, watch: [runAt(40)] }),
      want: { lastChecked: at(45), active: [runAt(40)], totals: { started: 1, skipped: 1, missed: 3 }, recent: 3 },
    },
    {
      what: 'another leader checked up to 25: its skips and misses stand, and only the later ones are added',
      latest: state({
        lastChecked: at(25),
        recent: [started(10)],
        active: [runAt(10)],
        totals: { started: 1, skipped: 0, missed: 0 },
      }),
      check: check({
        events: [started(10), skipped(20), missed(30), started(40)],
        missedCount: 1,
        watch: [runAt(10), runAt(40)],
      }),
      want: { lastChecked: at(45), active: [runAt(10), runAt(40)], totals: { started: 2, skipped: 0, missed: 1 }, recent: 3 },
    },
    {
      what: 'another leader checked further: the window never moves back',
      latest: state({ lastChecked: at(55) }),
      check: check({ events: [skipped(20)], missedCount: 0 }),
      want: { lastChecked: at(55), active: [], totals: { started: 0, skipped: 0, missed: 0 }, recent: 0 },
    },
    {
      what: 'a check that leaves the window unchecked (a start failed) keeps where it was, and drops ended runs',
      latest: state({ lastChecked: at(5), active: [runAt(0), runAt(10)] }),
      check: check({ checkedUntil: null, events: [started(10)], leaves: (id) => id === runAt(0), watch: [runAt(10)] }),
      want: { lastChecked: at(5), active: [runAt(10)], totals: { started: 1, skipped: 0, missed: 0 }, recent: 1 },
    },
  ])('$what', ({ latest, check: made, want }) => {
    const next = recordCheck(latest, 'tick', made);
    expect({ ...next, recent: next.recent.length }).toMatchObject(want);
  });
});

describe('both engines keep one occurrence ledger', () => {
  const fakeDurable = useFakeDurable();
  // Every 10 s; a run open at the next occurrence makes it skip.
  const job = withMerge(
    sumJob({ name: 'tick', items: 1, schedule: '*/10 * * * * *', overlap: 'skip' }),
    (a: SumAcc, b: SumAcc) => ({
      count: a.count + b.count,
      sum: a.sum + b.sum,
      squares: a.squares + b.squares,
    }),
  );
  /**
   * The history both engines go through: the first check; the 00:10 run starts; the 00:20
   * occurrence is skipped while it runs; it ends; then a gap in which 00:30 to 00:60 are
   * superseded (catch-up `latest`) and 00:70 starts; and 00:80 skipped while that one runs.
   */
  const TICKS = [5, 12, 22, 'end 10', 75, 82] as const;

  async function endRun(docs: InMemoryDocumentStore, runId: string, now: Date): Promise<void> {
    const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
    const key = runKeys.record(runId);
    const stored = await records.read(key);
    const record =
      stored?.value ??
      newRunRecord({ runId, job: 'tick', trigger: 'schedule', occurrence: new Date(at(10)), now, timeoutSeconds: 3600 });
    let ended = record;
    for (const state of ['dispatching', 'running', 'finalizing', 'succeeded'] as const) ended = transition(ended, state, now);
    if (stored) await records.replace(key, 1, stored, ended);
    else await records.create(key, 1, ended);
  }

  async function queueEngineLedger(): Promise<JobState | undefined> {
    const engine = unitEngine([job], START);
    for (const tick of TICKS) {
      if (typeof tick === 'string') {
        await endRun(engine.docs, runAt(10), engine.clock.date());
        continue;
      }
      await engine.clock.advance(new Date(at(tick)).getTime() - engine.clock.date().getTime());
      const { book, term } = engine.book(1);
      await reconcileJob(engine.ctx, term, book, job);
    }
    return engine.jobState('tick');
  }

  async function durableEngineLedger(): Promise<JobState | undefined> {
    const docs = new InMemoryDocumentStore();
    const durable = await fakeDurable();
    let now = START;
    for (const tick of TICKS) {
      if (typeof tick === 'string') {
        durable.set(runInstanceId(runAt(10)), df.OrchestrationRuntimeStatus.Completed);
        await endRun(docs, runAt(10), now);
        continue;
      }
      now = new Date(at(tick));
      const summary = await startDueRuns({ jobs: [job], client: durable.port(), docs, epoch: 1, now });
      expect(summary.errors).toEqual([]);
    }
    expect(durable.starts.map((s) => [s.name, s.instanceId])).toEqual([
      [DURABLE_NAMES.orchestrator, runInstanceId(runAt(10))],
      [DURABLE_NAMES.orchestrator, runInstanceId(runAt(70))],
    ]);
    const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
    return (await states.read(jobStateKey('tick')))?.value;
  }

  it('over the same schedule history, the queue engine and the durable engine record the same job state', async () => {
    const queue = await queueEngineLedger();
    const durable = await durableEngineLedger();
    expect(queue).toMatchObject({
      lastChecked: at(82),
      active: [runAt(70)],
      totals: { started: 2, skipped: 2, missed: 4 },
    });
    expect(queue?.recent.map((e) => [e.outcome, e.occurrence])).toEqual([
      ['started', at(10)],
      ['skipped', at(20)],
      ['missed', at(30)],
      ['missed', at(40)],
      ['missed', at(50)],
      ['missed', at(60)],
      ['started', at(70)],
      ['skipped', at(80)],
    ]);
    expect(durable).toEqual(queue);
  });
});
