import { describe, expect, it } from 'vitest';
import { renderShow, renderStatus } from '../../../src/cli/format';
import { dispatchSlice } from '../../../src/engine/dispatcher';
import { drainResults } from '../../../src/engine/drain';
import { finalizeRun } from '../../../src/engine/finalizer';
import { RunBook } from '../../../src/engine/run-book';
import { FAILURES_LISTED, runView, showView, statusView } from '../../../src/hub/read-model';
import { newRunRecord, OUTSTANDING_KEPT, runRecordSchema } from '../../../src/hub/run-record';
import { firstRunFailures, readRunDetails } from '../../../src/hub/status';
import { sumJob } from '../../support/sample-jobs';
import {
  handLeadership,
  termOf,
  unitEngine,
  receiveAll,
  firstOf,
  sumRunRecord as record,
  activeRun,
  dispatchedSumRun,
} from '../../support/unit-engine';

const RUN = 'sum/manual-open';
const ITEMS = 20;
const FAILING = new Set([3, 11]);

/** A run of `ITEMS` one-item messages (items 3 and 11 fail every try), dispatched by the leader of epoch 1. */
async function openRun() {
  const engine = unitEngine([sumJob({ items: ITEMS, failWhen: (i) => FAILING.has(i) })]);
  return { engine, ...(await dispatchedSumRun(engine, RUN)) };
}

describe('an open run, read while it is open', () => {
  it('shows the failures its checkpoints counted so far and its oldest outstanding messages with their age', async () => {
    const { engine, term, book, dispatchedAt, process } = await openRun();
    const received = await receiveAll(engine);
    // Two workers are paused while they hold messages 7 and 15; the rest are done.
    const held = received.filter((m) => [7, 15].includes(firstOf(m)));
    await process(received.filter((m) => !held.includes(m)));
    await engine.clock.advance(1000);
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: ITEMS - 2 });

    const mid = await record(engine);
    expect(mid.state).toBe('running');
    expect(mid.counters).toMatchObject({ planned: ITEMS, succeeded: ITEMS - 4, failed: 2 });
    expect(mid.failureParts.length).toBeGreaterThan(0);
    expect(mid.outstanding).toEqual([
      { message: 7, first: 7, count: 1, since: dispatchedAt.toISOString() },
      { message: 15, first: 15, count: 1, since: dispatchedAt.toISOString() },
    ]);

    // Read half a minute later, as `baton show` and the run API read it.
    await engine.clock.advance(30_000);
    const now = engine.clock.date();
    const details = (await readRunDetails(engine.docs, RUN))!;
    expect(details.manifest).toBeUndefined();
    const view = showView('baton', 'baton-runs', details, await firstRunFailures(engine.docs, details, FAILURES_LISTED), now);
    expect(view.failures).toEqual({
      failed: [
        { item: 3, reason: expect.stringContaining('item 3 is cursed'), attempts: 1 },
        { item: 11, reason: expect.stringContaining('item 11 is cursed'), attempts: 1 },
      ],
      failedCount: 2,
      missing: [],
      missingCount: 2,
      soFar: true,
    });
    expect(view.run.outstanding.map((o) => [o.message, o.ageMs])).toEqual([
      [7, 31_000],
      [15, 31_000],
    ]);
    const text = renderShow(view, now);
    expect(text).toMatch(/failures\s+2 failed so far \(as of the last checkpoint\), 2 not counted yet/);
    expect(text).toMatch(/waiting\s+oldest 2 work message\(s\) sent and not counted:/);
    expect(text).toMatch(/^\s+7\s+7\s+31s \(since /m);
    expect(text).toMatch(/^\s+3\s+1\s+Error: item 3 is cursed/m);
    // The status lists the open run with the message it has waited for longest.
    const status = statusView(
      'baton',
      'http://storage',
      {
        leader: undefined,
        lastLeader: undefined,
        restingUntil: undefined,
        leadershipChanges: [],
        jobs: [],
        activeRuns: [details.record],
      },
      now,
    );
    expect(renderStatus(status, now)).toContain('message 7 (item 7) for 31s');

    // A new leader takes the run over: the ages go on from the first send, not from its term.
    const next = new RunBook(engine.ctx, termOf(handLeadership(2)));
    const nextTerm = termOf(handLeadership(2));
    await dispatchSlice(engine.ctx, nextTerm, next, await activeRun(next, RUN), engine.clock.now() + 60_000);
    await process(held.filter((m) => firstOf(m) === 7));
    expect(await drainResults(engine.ctx, nextTerm, next)).toMatchObject({ folded: 1 });
    expect((await record(engine)).outstanding).toEqual([{ message: 15, first: 15, count: 1, since: dispatchedAt.toISOString() }]);

    // The last one is counted: nothing is outstanding, and the ended run lists none.
    await process(held.filter((m) => firstOf(m) === 15));
    expect(await drainResults(engine.ctx, nextTerm, next)).toMatchObject({ folded: 1 });
    expect((await record(engine)).outstanding).toEqual([]);
    await finalizeRun(engine.ctx, nextTerm, next, await activeRun(next, RUN));
    const ended = await record(engine);
    // Two items failed and the job tolerates none.
    expect(ended.state).toBe('failed');
    expect(runView({ ...ended, outstanding: mid.outstanding }, now).outstanding).toEqual([]);
  });

  it('keeps at most the oldest few outstanding messages in the record, the longest out first', async () => {
    const { engine, term, book, process } = await openRun();
    const received = await receiveAll(engine);
    // Only the last message is done: every other one is outstanding.
    await process(received.filter((m) => firstOf(m) === ITEMS - 1));
    expect(await drainResults(engine.ctx, term, book)).toMatchObject({ folded: 1 });
    const outstanding = (await record(engine)).outstanding;
    expect(outstanding).toHaveLength(OUTSTANDING_KEPT);
    expect(outstanding.map((o) => o.message)).toEqual([0, 1, 2, 3, 4]);
  });

  it('reads a record written before outstanding messages were kept, and shows none', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const { outstanding: _dropped, ...old } = newRunRecord({
      runId: RUN,
      job: 'sum',
      trigger: 'manual',
      occurrence: undefined,
      now,
      timeoutSeconds: 60,
    });
    const parsed = runRecordSchema.parse(JSON.parse(JSON.stringify(old)));
    expect(parsed.outstanding).toEqual([]);
    expect(runView(parsed, now).outstanding).toEqual([]);
  });
});
