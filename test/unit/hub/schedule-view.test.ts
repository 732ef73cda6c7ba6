/**
 * What the status says about a job's schedule: the leader records the schedule it read in the
 * job state, and the read model (CLI, page and API alike) names its zone and jitter and lists the
 * next occurrences on the zone's wall clock and in UTC, without the job's code.
 */
import { describe, expect, it } from 'vitest';
import { reconcileJob } from '../../../src/engine/reconcile';
import { newJobState } from '../../../src/hub/job-state';
import { jobView, statusView } from '../../../src/hub/read-model';
import type { HubStatus } from '../../../src/hub/status';
import { renderStatus } from '../../../src/cli/format';
import { jitterMs } from '../../../src/schedule/jitter';
import { sumJob } from '../../support/sample-jobs';
import { unitEngine } from '../../support/unit-engine';

const BEFORE_SPRING = new Date('2026-03-28T12:00:00.000Z');
const berlin = { expression: '0 30 2 * * *', timeZone: 'Europe/Berlin', jitterSeconds: 600 };

describe('a job’s schedule in the status', () => {
  it('lists the next occurrences in the zone and in UTC, with when each starts after its jitter', () => {
    const view = jobView({ ...newJobState('nightly'), schedule: berlin }, BEFORE_SPRING);
    const first = new Date('2026-03-29T01:00:00.000Z'); // 02:30 is skipped that night: 03:00 CEST
    expect(view.schedule).toEqual({
      ...berlin,
      next: [
        {
          at: first.toISOString(),
          local: '2026-03-29T03:00:00+02:00',
          dueAt: new Date(first.getTime() + jitterMs('nightly', first, 600)).toISOString(),
        },
        expect.objectContaining({ at: '2026-03-30T00:30:00.000Z', local: '2026-03-30T02:30:00+02:00' }),
        expect.objectContaining({ at: '2026-03-31T00:30:00.000Z', local: '2026-03-31T02:30:00+02:00' }),
      ],
    });
  });

  it('says nothing of a schedule a state does not record, and lists none for a zone this runtime does not know', () => {
    expect(jobView(newJobState('old'), BEFORE_SPRING).schedule).toBeNull();
    const unknown = jobView({ ...newJobState('far'), schedule: { ...berlin, timeZone: 'Mars/Olympus_Mons' } }, BEFORE_SPRING);
    expect(unknown.schedule).toMatchObject({ timeZone: 'Mars/Olympus_Mons', next: [] });
  });

  it('is recorded by the leader’s first check, and again when the job’s schedule changes', async () => {
    const engine = unitEngine(
      [sumJob({ name: 'nightly', items: 1, schedule: '0 30 2 * * *', timeZone: 'Europe/Berlin' })],
      BEFORE_SPRING,
    );
    const check = async (job = engine.ctx.jobs.get('nightly')!) => {
      const { book, term } = engine.book(1);
      await reconcileJob(engine.ctx, term, book, job);
    };
    await check();
    expect((await engine.jobState('nightly'))?.schedule).toEqual({
      expression: '0 30 2 * * *',
      timeZone: 'Europe/Berlin',
      jitterSeconds: 0,
    });
    await engine.clock.advance(1000);
    const moved = sumJob({ name: 'nightly', items: 1, schedule: '0 30 2 * * *', timeZone: 'Europe/Berlin', jitterSeconds: 600 });
    await check(moved);
    expect((await engine.jobState('nightly'))?.schedule?.jitterSeconds).toBe(600);
  });

  it('baton status prints the zone, the jitter and the next occurrence on both clocks', () => {
    const status: HubStatus = {
      leader: undefined,
      lastLeader: undefined,
      restingUntil: undefined,
      leadershipChanges: [],
      activeRuns: [],
      jobs: [{ ...newJobState('nightly'), schedule: berlin }],
    };
    const text = renderStatus(statusView('hub', 'http://storage', status, BEFORE_SPRING), BEFORE_SPRING);
    expect(text).toContain(
      'nightly: 0 30 2 * * * in Europe/Berlin, jitter 600 s; next 2026-03-29T03:00:00+02:00 (2026-03-29T01:00:00Z)',
    );
  });
});
