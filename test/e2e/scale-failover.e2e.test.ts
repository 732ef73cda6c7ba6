/**
 * Issue 15, acceptance: a leader killed with SIGKILL while it folds the results of a large run
 * still leaves an exact output, no item counted twice. Three real instance processes (the
 * compiled `instance-main`, as `baton start` runs them) on an Azurite in this process, with the
 * scale benchmark's synthetic job (100 items per message, bench/lib/synthetic-runs.ts), so the
 * benchmark and this test make the same claim about the same run. Once the run record shows the
 * leader has counted part of the items, the process holding the lease is killed; the next
 * leader resumes from its checkpoint. A kill that lands between a checkpoint and the deletes of
 * the messages it counted sends those results back to the next leader, which must not count
 * them again (they show as `duplicates`); whether it lands there is up to timing, and the
 * output holds the run to every item once either way.
 *
 * 100,000 items by default, sized for `npm test` on a busy 2-core machine;
 * BATON_E2E_SCALE_ITEMS=1000000 runs it at the 1M.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { BenchCluster } from '../../bench/lib/bench-cluster';
import { checkpointInexactness, inexactness, scaleJobSpec } from '../../bench/lib/synthetic-runs';
import { FencedDocuments, type FencedDocument } from '../../src/fencing/fenced-documents';
import { runKeys, type RunRecord } from '../../src/hub/run-record';
import { markDistInUse } from '../support/cluster-process';
import { positiveIntegerFromEnv } from '../support/env-knob';
import { waitFor } from '../support/edge-support';
import { patience } from '../support/slowdown';

const ITEMS = positiveIntegerFromEnv('BATON_E2E_SCALE_ITEMS', 100_000);
const SPEC = scaleJobSpec(ITEMS);
const LEASE_MS = 15_000;
/**
 * The kill waits for a fifth of the items to be counted: well inside the fold (a checkpoint
 * counts at most 128 messages, 12,800 items), with most of the run left for the next leader.
 */
const KILL_AT = Math.max(1, Math.floor(ITEMS / 5));
/** Bounds only a hang exceeds: the 1M run takes about a minute on two idle cores. */
const RUN_BOUND_MS = 120_000 + ITEMS * 0.5;

const release = markDistInUse();
let cluster: BenchCluster | undefined;

afterAll(async () => {
  await cluster?.stop();
  release();
});

async function readRecord(c: BenchCluster, runId: string): Promise<FencedDocument<RunRecord> | undefined> {
  return new FencedDocuments<RunRecord>(c.docs).read(runKeys.record(runId));
}

describe(`a ${ITEMS.toLocaleString('en-US')}-item run whose leader is killed mid-fold`, () => {
  it(
    'ends succeeded with the exact output, every item counted once, finished by a newer epoch',
    { timeout: patience(RUN_BOUND_MS + 2 * LEASE_MS + 90_000) },
    async () => {
      const started = Date.now();
      const c = await BenchCluster.start({ instances: 3, jobs: [SPEC] });
      cluster = c;
      onTestFailed(() => void process.stderr.write(`\n${c.dump()}\n`));
      await c.waitFor(() => c.leader(), 60_000, 'a first leader');

      const runId = await c.trigger(SPEC.name);
      const triggered = Date.now();
      let folding: FencedDocument<RunRecord> | undefined;
      // Polled often, so the kill lands soon after the checkpoint that crosses KILL_AT, when the
      // leader may still be deleting the messages it counted.
      await waitFor(
        `the leader to count ${KILL_AT} of ${ITEMS} items of ${runId}`,
        async () => {
          folding = await readRecord(c, runId).catch(() => undefined);
          return (folding?.value.counters.succeeded ?? 0) >= KILL_AT;
        },
        RUN_BOUND_MS,
        20,
      );
      const victim = c.leader();
      if (!victim) throw new Error(`no instance leads while run ${runId} counts its items`);
      const killedAt = Date.now();
      victim.proc.kill('SIGKILL');
      await victim.exited;
      const epoch = c.lastEpoch(victim);
      const atKill = folding!.value;

      // A dead process cannot take a lease: held by the victim with its epoch right after the
      // kill, it was held by the victim at the kill.
      expect(await c.readLease()).toMatchObject({ leased: true, holder: victim.name, epoch });
      expect(victim.proc.signalCode).toBe('SIGKILL');
      // Mid-fold: part of the items counted, the run not finalizing yet (with a window of
      // messages in flight, dispatch goes on while the first results are folded).
      expect(['dispatching', 'running']).toContain(atKill.state);
      expect(atKill.counters.succeeded).toBeGreaterThan(0);
      expect(atKill.counters.succeeded).toBeLessThan(ITEMS);
      // The checkpoint the next leader resumes from folds each item it marks exactly once.
      expect(checkpointInexactness(SPEC, atKill)).toEqual([]);

      const next = await c.waitFor(
        () => c.acquiredSince(killedAt, victim),
        2 * LEASE_MS + 30_000,
        `a leader after killing ${victim.name}`,
      );
      expect(next.epoch).toBeGreaterThan(epoch!);

      const details = await c.waitForRun(runId, RUN_BOUND_MS);
      const final = await readRecord(c, runId);
      const counters = details.record.counters;
      console.log(
        `scale failover, ${ITEMS} items: ${victim.name} (epoch ${epoch!}) killed ${killedAt - triggered} ms after ` +
          `the trigger with ${atKill.counters.succeeded} counted; ${next.instance.name} led with epoch ${next.epoch} ` +
          `${next.at - killedAt} ms later; the record was last written by epoch ${final?.epoch}; run ${details.record.state} ` +
          `in ${Date.parse(details.record.endedAt ?? '') - Date.parse(details.record.createdAt)} ms, counters ` +
          `${JSON.stringify(counters)}; test ${Date.now() - started} ms`,
      );

      // The output is the proof against double counting: count, sum and sum of squares of 2i.
      expect(inexactness(SPEC, details)).toEqual([]);
      expect(counters).toMatchObject({ planned: ITEMS, succeeded: ITEMS, failed: 0, rejected: 0 });
      // The newer leader finished what the victim started: it wrote the end of the run.
      expect(final!.epoch).toBeGreaterThanOrEqual(next.epoch);
      expect(Date.parse(details.record.endedAt ?? '')).toBeGreaterThan(killedAt);
    },
  );
});
