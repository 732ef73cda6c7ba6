/**
 * An idle leader that may rest (`restWhenIdle`) returns as soon as a turn finds nothing open and
 * nothing due for a while, having said until when (`Leadership.restUntil`); it leads on when the
 * next occurrence is close, while a run is open, and after a turn whose step failed.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/clock/fake-clock';
import { MAX_REST_MS, MIN_REST_MS } from '../../../src/engine/coordinator';
import { JOB_STATES_HANDOFF_KEY } from '../../../src/engine/job-state-handoff';
import type { WriteCondition, DocumentCallOptions } from '../../../src/fencing/document-store';
import { requestRun } from '../../../src/hub/requests';
import type { Leadership } from '../../../src/lease/term';
import { buildEngine } from '../../support/engine-harness';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { memoryPorts } from '../../support/memory-ports';
import { sumJob } from '../../support/sample-jobs';
import { noLeaseToRaise } from '../../support/unit-engine';

const WAKE_AHEAD_MS = 2000;
const rest = { wakeAt: (dueAt: number) => dueAt - WAKE_AHEAD_MS };

function restingLeadership(epoch = 1) {
  const rests: Array<Date | undefined> = [];
  const leadership: Leadership = {
    identity: `leader-${epoch}`,
    epoch,
    signal: new AbortController().signal,
    yieldSignal: new AbortController().signal,
    heartbeat: () => undefined,
    remainingMs: () => 60_000,
    raiseEpoch: noLeaseToRaise,
    restUntil: (at) => void rests.push(at),
  };
  return { leadership, rests };
}

/** Leads until the term returns, advancing the fake clock; the summary and when it returned. */
async function leadOn(clock: FakeClock, lead: Promise<{ turns: number }>, limitMs: number) {
  let done = false;
  const leading = lead.finally(() => (done = true));
  const until = clock.now() + limitMs;
  while (!done && clock.now() < until) await clock.advance(50);
  return { done, summary: done ? await leading : undefined, at: clock.date() };
}

describe('an idle leader that may rest', () => {
  it.each([
    { case: 'a minute-ly job, 10 s after an occurrence', start: '2026-01-01T00:00:10Z', rests: '2026-01-01T00:00:58.000Z' },
    {
      case: 'a job due in a week: the longest rest',
      start: '2026-01-01T00:00:10Z',
      schedule: '0 0 0 8 1 *',
      rests: new Date(Date.parse('2026-01-01T00:00:10Z') + MAX_REST_MS).toISOString(),
    },
  ])('returns after one turn and rests until a leader is needed: $case', async ({ start, schedule, rests: expected }) => {
    const clock = new FakeClock({ wallOrigin: new Date(start) });
    const engine = buildEngine(memoryPorts(), [sumJob({ items: 1, schedule: schedule ?? '0 * * * * *' })], { clock });
    const { leadership, rests } = restingLeadership();
    const { done, summary } = await leadOn(
      clock,
      engine.coordinator.lead(leadership, { termMs: 60_000, restWhenIdle: rest }),
      1000,
    );
    expect(done).toBe(true);
    expect(summary?.turns).toBe(1);
    expect(rests.map((d) => d?.toISOString())).toEqual([expected]);
  });

  it(`leads on, and starts the occurrence on time, when it is due within ${MIN_REST_MS} ms of the wake`, async () => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:54Z') });
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 1, schedule: '0 * * * * *' })], { clock });
    const { leadership, rests } = restingLeadership();
    const lead = engine.coordinator.lead(leadership, { termMs: 8000, restWhenIdle: rest });
    const { done } = await leadOn(clock, lead, 6500);
    // Past the occurrence at 00:01:00, and still leading: the run it started is open.
    expect(done).toBe(false);
    expect(rests).toEqual([]);
    expect(await engine.readRun('sum/2026-01-01T00:01:00.000Z')).toMatchObject({ occurrence: '2026-01-01T00:01:00.000Z' });
    await leadOn(clock, lead, 5000);
  });

  it('leads on while a run is open', async () => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:10Z') });
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 3, schedule: '0 * * * * *' })], { clock });
    await requestRun(ports.docs, 'sum');
    const { leadership, rests } = restingLeadership();
    const { done } = await leadOn(clock, engine.coordinator.lead(leadership, { termMs: 5000, restWhenIdle: rest }), 4000);
    // No worker runs its items: the run stays open, and so does the term.
    expect(done).toBe(false);
    expect(rests).toEqual([]);
  });

  it('does not rest after a turn whose step failed, and rests after the next one', async () => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:10Z') });
    const ports = memoryPorts();
    let failures = 1;
    class FailingJobStates extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        if (key.startsWith('jobs/') && failures-- > 0) return Promise.reject(new Error('503 ServerBusy'));
        return super.write(key, body, condition, options);
      }
    }
    const engine = buildEngine(
      { ...ports, docs: new FailingJobStates(ports.docs) },
      [sumJob({ items: 1, schedule: '0 * * * * *' })],
      {
        clock,
      },
    );
    const { leadership, rests } = restingLeadership();
    const { done, summary } = await leadOn(
      clock,
      engine.coordinator.lead(leadership, { termMs: 60_000, restWhenIdle: rest }),
      5000,
    );
    expect(done).toBe(true);
    expect(summary?.turns).toBe(2);
    expect(rests).toHaveLength(1);
  });
});

describe('an idle leader about to rest', () => {
  it('looks at the requests in its last turn: a trigger that came as the run before it ended is not left to the rest', async () => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:10Z') });
    const ports = memoryPorts();
    let second: Promise<string> | undefined;
    // The moment the first run's record is written as succeeded, a second trigger comes (its
    // wake would find this term still holding the lease, and go).
    class TriggerAsRunEnds extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        const written = super.write(key, body, condition, options);
        if (!second && key.endsWith('/run.json') && body.includes('"succeeded"')) {
          second = written.then(() => requestRun(ports.docs, 'sum'));
        }
        return written;
      }
    }
    const engine = buildEngine(
      { ...ports, docs: new TriggerAsRunEnds(ports.docs) },
      [sumJob({ items: 0, schedule: '0 * * * * *' })],
      {
        clock,
      },
    );
    const first = await requestRun(ports.docs, 'sum');
    const { leadership, rests } = restingLeadership();
    const { done } = await leadOn(clock, engine.coordinator.lead(leadership, { termMs: 60_000, restWhenIdle: rest }), 1500);
    expect(done).toBe(true);
    expect(rests).toHaveLength(1);
    expect(second).toBeDefined();
    for (const runId of [first, await second!]) expect((await engine.readRun(runId))?.state, runId).toBe('succeeded');
  });
});

describe('a leader whose pass over the jobs takes time', () => {
  it('starts an occurrence that fell due during the pass at once, not a reconcile period later', async () => {
    // Job `a` is checked first, 100 ms before its occurrence; reading `b`'s state then takes
    // 500 ms, so the occurrence is past when the pass ends. Its next check must come at once.
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:59.900Z') });
    const ports = memoryPorts();
    class SlowStateOfB extends ForwardingDocumentStore {
      override read(key: string, options?: DocumentCallOptions) {
        if (key === 'jobs/b.json') clock.jump(500);
        return super.read(key, options);
      }
    }
    const engine = buildEngine(
      { ...ports, docs: new SlowStateOfB(ports.docs) },
      [sumJob({ name: 'a', items: 1, schedule: '0 * * * * *' }), sumJob({ name: 'b', items: 1, schedule: '0 0 0 1 1 *' })],
      { clock },
    );
    const { leadership } = restingLeadership();
    const lead = engine.coordinator.lead(leadership, { termMs: 9000 });
    const run = 'a/2026-01-01T00:01:00.000Z';
    await leadOn(clock, lead, 8000);
    const record = await engine.readRun(run);
    expect(record, `${run} created`).toBeDefined();
    // At the next turn after the pass (00:01:00.400), not at the next periodic check, which an
    // idle leader spaces out to seconds (6 s here before the fix).
    expect(Date.parse(record!.createdAt) - Date.parse(record!.occurrence!)).toBeLessThan(1000);
    await leadOn(clock, lead, 5000);
  });
});

describe("a leader's successor", () => {
  class CountingReads extends ForwardingDocumentStore {
    stateReads = 0;
    override read(key: string, options?: DocumentCallOptions) {
      if (key.startsWith('jobs/')) this.stateReads++;
      return super.read(key, options);
    }
  }

  /** One term of `engine`'s coordinator at `epoch`, led to its end; the job states it read. */
  async function term(clock: FakeClock, engine: ReturnType<typeof buildEngine>, docs: CountingReads, epoch: number) {
    const before = docs.stateReads;
    const { leadership } = restingLeadership(epoch);
    const { done } = await leadOn(clock, engine.coordinator.lead(leadership, { termMs: 3000 }), 10_000);
    expect(done).toBe(true);
    return docs.stateReads - before;
  }

  it.each([
    { case: 'takes the job states its predecessor handed over, and reads none', between: 'nothing', reads: 0 },
    { case: 'reads a state written since the hand-off, and only that one', between: 'a state written', reads: 1 },
    { case: 'reads them all when the hand-off is damaged', between: 'a damaged hand-off', reads: 5 },
    { case: 'reads them all when there is no hand-off', between: 'no hand-off', reads: 5 },
  ])('$case', async ({ between, reads }) => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:10Z') });
    const ports = memoryPorts();
    const docs = new CountingReads(ports.docs);
    const jobs = Array.from({ length: 5 }, (_, i) => sumJob({ name: `job-${i}`, items: 1, schedule: '0 0 0 1 1 *' }));
    // The predecessor and the successor: two processes on one hub.
    const first = buildEngine({ ...ports, docs }, jobs, { clock });
    const next = buildEngine({ ...ports, docs }, jobs, { clock });
    // The first term writes each job's state (none was there to read), and hands them over.
    await term(clock, first, docs, 3);
    expect(docs.stateReads).toBeGreaterThanOrEqual(5);
    if (between === 'a state written') {
      const stored = (await ports.docs.read('jobs/job-2.json'))!;
      await ports.docs.write('jobs/job-2.json', stored.body.replace('"totals"', '"totals" '), { ifMatch: stored.etag });
    }
    if (between === 'a damaged hand-off') await ports.docs.write(JOB_STATES_HANDOFF_KEY, '{"v":1,', {});
    if (between === 'no hand-off') await ports.docs.delete(JOB_STATES_HANDOFF_KEY);
    expect(await term(clock, next, docs, 4)).toBe(reads);
    // The successor hands over in turn, fenced, whatever it found: a third term reads none.
    expect(await term(clock, first, docs, 5)).toBe(0);
  });
});
