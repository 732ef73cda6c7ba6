import { describe, expect, it } from 'vitest';
import { Coordinator } from '../../../src/engine/coordinator';
import { abortRun, failRun, finalizeRun } from '../../../src/engine/finalizer';
import { type FailuresManifest, type RunOutput } from '../../../src/hub/run-output';
import { jobStateKey, jobStateSchema, newJobState, type JobState } from '../../../src/hub/job-state';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import type { ActiveRun } from '../../../src/engine/run-book';
import type { DocumentCallOptions, WriteCondition } from '../../../src/fencing/document-store';
import { Bitset } from '../../../src/hub/bitset';
import { newRunRecord, runKeys, runRecordSchema, transition, type RunRecord } from '../../../src/hub/run-record';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { expectedSum, sumJob } from '../../support/sample-jobs';
import { handLeadership, unitEngine, type UnitEngine } from '../../support/unit-engine';
import { failuresOf } from '../../support/failures';

const RUN = 'sum/manual-end';
const PLANNED = 3;

/** Runs `interrupt` once, right after the `at`-th write the old leader makes has landed. */
class InterruptAfterWrite extends ForwardingDocumentStore {
  writes = 0;
  oldLeaderActive = true;
  constructor(
    inner: ConstructorParameters<typeof ForwardingDocumentStore>[0],
    private readonly at: number,
    private readonly interrupt: () => Promise<void>,
  ) {
    super(inner);
  }
  override async write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
    const written = await super.write(key, body, condition, options);
    if (this.oldLeaderActive && ++this.writes === this.at) {
      this.oldLeaderActive = false;
      await this.interrupt();
    }
    return written;
  }
}

/** A running run of 3 items: the first two counted (item 1 failed), item 2's result still queued. */
async function seed(engine: UnitEngine, allCounted: boolean, change: (r: RunRecord) => RunRecord = (r) => r): Promise<void> {
  const at = engine.clock.date();
  const seen = Bitset.empty(PLANNED);
  seen.add(0);
  seen.add(1);
  if (allCounted) seen.add(2);
  const base = newRunRecord({ runId: RUN, job: 'sum', trigger: 'manual', occurrence: undefined, now: at, timeoutSeconds: 3600 });
  const failurePart = runKeys.failurePart(RUN, 1, 0, 'seeded');
  await engine.docs.write(failurePart, `${JSON.stringify({ item: 1, reason: 'item 1 is cursed', attempts: 5 })}\n`, {
    ifNoneMatch: '*',
  });
  const record: RunRecord = {
    ...transition(transition(base, 'dispatching', at), 'running', at),
    counters: { ...base.counters, planned: PLANNED, dispatched: PLANNED, succeeded: allCounted ? 2 : 1, failed: 1 },
    planEpoch: 1,
    messages: PLANNED,
    cursor: PLANNED,
    acc: allCounted ? { count: 2, sum: 4, squares: 16 } : expectedSum(1),
    seen: seen.toBase64(),
    failureParts: [failurePart],
  };
  await new FencedDocuments<RunRecord>(engine.docs, { parse: (v) => runRecordSchema.parse(v) }).create(
    runKeys.record(RUN),
    1,
    change(record),
  );
  await new FencedDocuments<JobState>(engine.docs, { parse: (v) => jobStateSchema.parse(v) }).create(jobStateKey('sum'), 1, {
    ...newJobState('sum'),
    active: [RUN],
  });
  if (!allCounted) {
    await engine.results.send(
      JSON.stringify({ v: 1, t: 'result', run: RUN, job: 'sum', outcomes: [{ i: 2, ok: true, r: { v: 4 } }] }),
    );
  }
}

type Ending = 'fail' | 'time out' | 'cancel' | 'finalize';
const ENDINGS: Array<{ ending: Ending; allCounted: boolean }> = [
  { ending: 'fail', allCounted: false },
  { ending: 'time out', allCounted: false },
  { ending: 'cancel', allCounted: false },
  { ending: 'finalize', allCounted: true },
];

function endAs(ending: Ending, engine: UnitEngine, lead: ReturnType<UnitEngine['book']>, run: ActiveRun): Promise<void> {
  const { book, term } = lead;
  if (ending === 'finalize') return finalizeRun(engine.ctx, term, book, run);
  if (ending === 'fail') return failRun(engine.ctx, term, book, run, 'its step failed 5 times in a row');
  return abortRun(engine.ctx, term, book, run, ending === 'cancel' ? 'cancelled' : 'timed-out', `ended by a ${ending}`);
}

describe('a run ends one way, whoever completes its end', () => {
  // The old leader (epoch 2) ends the run and loses its lease after its k-th write; a new
  // leader (epoch 3) takes over, with the run's last result on the queue, and leads until idle.
  const cases = ENDINGS.flatMap(({ ending, allCounted }) => [1, 2, 3, 4].map((at) => ({ ending, allCounted, at })));

  it.each(cases)('$ending, the old leader stopped after write $at: record, manifest and output agree', async (c) => {
    const engine = unitEngine([sumJob({ items: PLANNED })]);
    await seed(engine, c.allCounted);
    const store = new InterruptAfterWrite(engine.docs, c.at, async () => {
      await new Coordinator(engine.ctx).lead(handLeadership(3), { termMs: 60_000, returnWhenIdle: true });
    });
    engine.ctx.docs = store;
    const old = engine.book(2);
    const run = await old.book.get(RUN);
    if (!run || !('seen' in run)) throw new Error('the seeded run did not load');
    await endAs(c.ending, engine, old, run).catch(() => undefined);
    // The new leader's term, when the interrupt never came (fewer writes than `at`), to end the run.
    if (store.oldLeaderActive) {
      store.oldLeaderActive = false;
      await new Coordinator(engine.ctx).lead(handLeadership(3), { termMs: 60_000, returnWhenIdle: true });
    }

    const record = (await engine.runs('sum'))[0];
    expect(['succeeded', 'failed', 'cancelled', 'timed-out']).toContain(record?.state);
    const manifest = JSON.parse((await engine.docs.read(runKeys.manifest(RUN)))?.body ?? 'null') as FailuresManifest;
    expect(manifest.state).toBe(record?.state);
    expect(manifest.failedCount).toBe(record?.counters.failed);
    expect(await failuresOf(engine.docs, manifest)).toEqual([{ item: 1, reason: 'item 1 is cursed', attempts: 5 }]);
    const missing = PLANNED - (record?.counters.succeeded ?? 0) - (record?.counters.failed ?? 0);
    expect(manifest.missingCount).toBe(missing);
    const output = await engine.docs.read(runKeys.output(RUN));
    if (output) expect((JSON.parse(output.body) as RunOutput).state).toBe(record?.state);
    else expect(record?.state).not.toBe('succeeded');
  });
});

describe('a run past its deadline', () => {
  // Every item is counted and the end decided; the leader that decided it stopped before the
  // terminal write, and the deadline passes before the next leader comes.
  it.each([
    { what: 'finalizing with its end recorded', ending: { state: 'failed', reason: null, output: true } as const },
    { what: 'finalizing, written before ends were recorded', ending: null },
  ])('$what ends as decided, not timed-out', async ({ ending }) => {
    const engine = unitEngine([sumJob({ items: PLANNED })]);
    await seed(engine, true, (r) => ({ ...transition(r, 'finalizing', engine.clock.date()), ending }));
    await engine.clock.advance(3600_000 + 1000);
    await new Coordinator(engine.ctx).lead(handLeadership(2), { termMs: 60_000, returnWhenIdle: true });
    const record = (await engine.runs('sum'))[0];
    expect(record).toMatchObject({ state: 'failed', endReason: null });
    const output = JSON.parse((await engine.docs.read(runKeys.output(RUN)))?.body ?? 'null') as RunOutput;
    expect(output.state).toBe('failed');
  });
});
