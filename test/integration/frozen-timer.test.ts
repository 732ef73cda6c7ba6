/**
 * Every instance's coordinator timer frozen (BATON_LOCAL_FREEZE_TIMERS, for this test only): the
 * start-up tick begins leadership, and each term's beacon wakes the next term when it releases,
 * so a job due every 5 s (longer on a slower machine) still runs every occurrence, none late by more than period + 30 s,
 * through a bare SIGTERM of the leader half-way, which Baton's signal handler turns into a release.
 *
 * `BATON_FROZEN_OCCURRENCES` sets how many occurrences in a row must run (default 6 here; the
 * issue's long form is at least 10). Each occurrence's lag is printed either way.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { BenchCluster } from '../../bench/lib/bench-cluster';
import { markDistInUse } from '../support/cluster-process';
import { positiveIntegerFromEnv } from '../support/env-knob';
import { waitFor } from '../support/edge-support';
import { patience, periodSeconds } from '../support/slowdown';

/**
 * Every 5 s on the reference machine, longer on a slower one: a run still open when the next
 * occurrence falls due (its items waiting for a starved leader to fold them) rightly skips that
 * occurrence under the default overlap policy, which is not what this test is about.
 */
const PERIOD_S = periodSeconds(5);
const PERIOD_MS = PERIOD_S * 1000;
const JOB = { name: 'periodic', schedule: `*/${PERIOD_S} * * * * *`, items: 3 };
const OCCURRENCES = positiveIntegerFromEnv('BATON_FROZEN_OCCURRENCES', 6);
/** Generous for a busy machine: three periods an occurrence, and never less than 150 s. */
const WAIT_MS = Math.max(150_000, OCCURRENCES * PERIOD_MS * 3);

const release = markDistInUse();
let cluster: BenchCluster | undefined;

afterAll(async () => {
  await cluster?.stop();
  release();
});

describe('with every coordinator timer frozen', () => {
  it(
    `still starts each of ${OCCURRENCES} occurrences in time, through a graceful stop of the leader`,
    { timeout: patience(2 * WAIT_MS + 60_000) },
    async () => {
      const c = await BenchCluster.start({
        instances: 3,
        jobs: [JOB],
        // Short terms, so the beacon's wake at each term's end carries leadership too.
        env: { BATON_LOCAL_FREEZE_TIMERS: '1', BATON_TERM_SECONDS: '8' },
      });
      cluster = c;
      onTestFailed(() => void process.stderr.write(`\n${c.dump()}\n`));
      const first = await c.waitFor(() => c.leader(), 60_000, 'a first leader, from the start-up tick alone');
      const succeeded = async (n: number) => (await c.runsOf(JOB.name)).filter((r) => r.state === 'succeeded').length >= n;
      const half = Math.ceil(OCCURRENCES / 2);
      await waitFor(`${half} runs`, () => succeeded(half), WAIT_MS, 500);
      // A bare SIGTERM, as a container delete sends, no hook: Baton's own handler releases the
      // lease (or hands it over) and its beacon wakes a successor (no timer will).
      const leader = c.leader() ?? first;
      await c.stopInstance(leader, 'sigterm');
      expect(c.stopOf(leader)).toMatchObject({ path: 'signal', lease: expect.stringMatching(/^(handed-over|released)$/) });
      expect(c.stopOf(leader)!.durationMs).toBeLessThanOrEqual(patience(3000));
      // It then ended as the signal would have ended it, before the kill that follows it.
      expect(leader.exit).toEqual({ code: null, signal: 'SIGTERM' });
      c.spawn();
      const terms = () => c.instances.flatMap((i) => i.events.filter((e) => e.kind === 'leader' && e.type === 'acquired'));
      // Terms end every 8 s: by three terms, leadership has also passed at a term's end.
      await waitFor(
        `${OCCURRENCES} runs and 3 terms`,
        async () => (await succeeded(OCCURRENCES)) && terms().length >= 3,
        WAIT_MS,
        500,
      );

      const all = await c.runsOf(JOB.name);
      const scheduled = all.filter((r) => r.occurrence !== null);
      expect(scheduled.length).toBeGreaterThanOrEqual(OCCURRENCES);
      const lags = scheduled.map((r) => Date.parse(r.createdAt) - Date.parse(r.occurrence!));
      process.stderr.write(`frozen timers: ${scheduled.length} occurrences, created this late (ms): ${lags.join(', ')}\n`);
      onTestFailed(() => {
        const t0 = Date.parse(scheduled[0]?.occurrence ?? '') || 0;
        const lines = scheduled.map(
          (r) =>
            `${r.occurrence} created +${Date.parse(r.createdAt) - Date.parse(r.occurrence!)} ms ${r.state} ${r.endReason ?? ''}`,
        );
        const terms = c.instances.map(
          (i) =>
            `${i.name}: ${i.events
              .filter((e) => e.kind === 'leader' && ['acquired', 'released', 'lost'].includes(e.type))
              .map((e) => `${e.kind === 'leader' ? e.type : ''}@${e.at - t0}`)
              .join(' ')}`,
        );
        process.stderr.write(`\n${[...lines, ...terms].join('\n')}\n`);
      });
      const times = scheduled.map((r) => Date.parse(r.occurrence!));
      // None missed between the first and the last: consecutive occurrences of the schedule.
      for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(PERIOD_MS);
      for (const run of scheduled) {
        expect(Date.parse(run.createdAt) - Date.parse(run.occurrence!)).toBeLessThanOrEqual(PERIOD_MS + 30_000);
      }
      expect(scheduled.slice(0, OCCURRENCES).every((r) => r.state === 'succeeded')).toBe(true);
      // Leadership changed hands, every time without a timer.
      expect(terms().length).toBeGreaterThanOrEqual(3);
      expect(c.instances.some((i) => i !== leader && i.events.some((e) => e.kind === 'leader' && e.type === 'acquired'))).toBe(
        true,
      );
    },
  );
});
