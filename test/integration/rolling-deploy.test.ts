/**
 * A rolling deploy on real processes: the three instances are replaced one by one with the next
 * version (a new one started, then an old one stopped by the host's WorkerTerminate), round after round, while a job is
 * due every 5 s (longer on a slower machine). The first instance of each new version must take over by a handover request,
 * and from then on no older version leads; every occurrence runs once, none is missed.
 *
 * `BATON_ROLLING_ROUNDS` sets the rounds (default 2 here; the long form is 20) and
 * `BATON_ROLLING_HANDOVER_MS` the bound on the takeover (default 10 s, loose for a busy machine;
 * the long form's is 2 s). The measured takeovers are printed either way.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { BenchCluster, type BenchInstance } from '../../bench/lib/bench-cluster';
import { compareVersions } from '../../src/lease/leader-rank';
import { markDistInUse } from '../support/cluster-process';
import { positiveIntegerFromEnv } from '../support/env-knob';
import { waitFor } from '../support/edge-support';
import { patience, periodSeconds } from '../support/slowdown';

const ROUNDS = positiveIntegerFromEnv('BATON_ROLLING_ROUNDS', 2);
const HANDOVER_BOUND_MS = positiveIntegerFromEnv('BATON_ROLLING_HANDOVER_MS', 10_000);
/**
 * Every 5 s on the reference machine, longer on a slower one: a new leader starved for longer
 * than a period finds the occurrence before the latest one past its starting deadline, which is
 * the catch-up policy working, not a handover losing it. Start lag is measured in bench/.
 */
const PERIOD_S = periodSeconds(5);
const PERIOD_MS = PERIOD_S * 1000;
const JOB = { name: 'periodic', schedule: `*/${PERIOD_S} * * * * *`, items: 3 };
const INSTANCES = 3;

const release = markDistInUse();
let cluster: BenchCluster | undefined;

afterAll(async () => {
  await cluster?.stop();
  release();
});

const version = (round: number): string => `${round + 1}.0.0`;

describe('a rolling deploy, one instance at a time', () => {
  it(
    `hands leadership to each new version at once and never back, over ${ROUNDS} rounds`,
    { timeout: patience(120_000 + ROUNDS * 60_000) },
    async () => {
      const c = await BenchCluster.start({ instances: 0, jobs: [JOB] });
      cluster = c;
      onTestFailed(() => void process.stderr.write(`\n${c.dump()}\n`));
      const versionOf = new Map<BenchInstance, string>();
      const start = (v: string): BenchInstance => {
        const instance = c.spawn({ BATON_APP_VERSION: v });
        versionOf.set(instance, v);
        return instance;
      };
      for (let i = 0; i < INSTANCES; i++) start(version(0));
      await c.waitFor(() => c.leader(), 60_000, 'a first leader');
      await waitFor('a first run', async () => (await c.runsOf(JOB.name)).some((r) => r.state === 'succeeded'), 60_000, 250);
      const firstDue = Math.min(...(await c.runsOf(JOB.name)).map((r) => Date.parse(r.occurrence ?? '') || Infinity));

      const takeovers: Array<{ round: number; at: number; ms: number; by: string }> = [];
      for (let round = 1; round <= ROUNDS; round++) {
        const next = version(round);
        const olds = c.instances.filter((i) => i.alive && versionOf.get(i) === version(round - 1));
        for (const [k, old] of olds.entries()) {
          const fresh = start(next);
          const started = await c.waitFor(
            () => fresh.events.find((e) => e.kind === 'started')?.at,
            30_000,
            `${fresh.name} to start`,
          );
          if (k === 0) {
            const takeover = await c.waitFor(
              () => c.acquiredSince(started, undefined),
              60_000,
              `a version ${next} instance to take over`,
            );
            expect(versionOf.get(takeover.instance)).toBe(next);
            takeovers.push({ round, at: takeover.at, ms: takeover.at - started, by: takeover.instance.name });
          }
          // The host's WorkerTerminate: the hook hands over or releases, and the process exits
          // by itself, inside the host's 5 s.
          await c.stopInstance(old, 'terminate');
          expect(c.stopOf(old)).toMatchObject({ path: 'hook' });
          expect(c.stopOf(old)!.lease).not.toBe('not-released');
          expect(c.stopOf(old)!.durationMs).toBeLessThanOrEqual(patience(3000));
          expect(old.exit).toEqual({ code: 0, signal: null });
        }
      }
      // One more occurrence under the last version, and at least three in all (a quick deploy on a
      // machine whose period was stretched takes less than two periods), then every run due by
      // then must have ended.
      const deployed = Date.now();
      const endedBy = Math.max(deployed + PERIOD_MS, firstDue + 2 * PERIOD_MS);
      await waitFor(
        'the runs due up to a period after the deploy',
        async () => {
          const due = (await c.runsOf(JOB.name)).filter((r) => Date.parse(r.occurrence ?? '') <= endedBy);
          return Date.now() > endedBy + 1000 && due.every((r) => r.state === 'succeeded');
        },
        60_000,
        500,
      );
      process.stdout.write(
        `rolling deploy takeovers (ms after the new version started): ${takeovers.map((t) => t.ms).join(', ')}\n`,
      );

      for (const takeover of takeovers) expect(takeover.ms).toBeLessThanOrEqual(HANDOVER_BOUND_MS);
      // From each takeover on, only that version or a newer one takes the lease.
      const acquisitions = c.instances.flatMap((i) =>
        i.events
          .filter((e) => e.kind === 'leader' && e.type === 'acquired')
          .map((e) => ({ at: e.at, version: versionOf.get(i)! })),
      );
      for (const takeover of takeovers) {
        const older = acquisitions.filter((a) => a.at >= takeover.at && compareVersions(a.version, version(takeover.round)) < 0);
        expect(older).toEqual([]);
      }
      // Every occurrence from the first run to the end ran once and succeeded with all its items.
      const scheduled = (await c.runsOf(JOB.name)).filter((r) => r.occurrence !== null && Date.parse(r.occurrence) <= endedBy);
      const times = scheduled.map((r) => Date.parse(r.occurrence!));
      expect(new Set(times).size).toBe(times.length);
      for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(PERIOD_MS);
      for (const run of scheduled)
        expect(run).toMatchObject({ state: 'succeeded', counters: { planned: 3, succeeded: 3, failed: 0 } });
      expect(scheduled.length).toBeGreaterThanOrEqual(3);
    },
  );
});
