import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BatonClient, defineJob, isBatonError } from '../../src/index';
import { runJobOnce, startAzurite } from '../../src/testing';
import type { RunningAzurite } from '../../src/local/azurite';
import { patience } from '../support/slowdown';

/**
 * The root entry's client, as an app's own code uses it, on a hub that `runJobOnce` ran jobs on
 * (hub `test` on one Azurite).
 */
let azurite: RunningAzurite;
beforeAll(async () => {
  azurite = await startAzurite();
});
afterAll(() => azurite?.close());

/** Storage's own time: the Date header of an answer (any answer; this one is a 400), whole seconds. */
async function storageTime(): Promise<number> {
  const answer = await fetch(azurite.blobEndpoint);
  await answer.body?.cancel();
  return Date.parse(answer.headers.get('date') ?? '');
}

const squares = defineJob({
  name: 'squares',
  schedule: '0 0 0 1 1 *',
  failureTolerance: { count: 1 },
  async *split() {
    for (let n = 1; n <= 4; n++) yield n;
  },
  async process(n: number) {
    if (n === 3) throw new Error('three is out');
    return n * n;
  },
  aggregate: { initial: () => 0, add: (sum: number, square: number) => sum + square },
});

describe('BatonClient', () => {
  it('reads status, runs, a run and its failures, and asks for a run', { timeout: patience(180_000) }, async () => {
    const first = await runJobOnce(squares, { azurite, env: { BATON_MAX_ATTEMPTS: '1' } });
    const client = new BatonClient({ env: { AzureWebJobsStorage: azurite.connectionString }, hub: 'test' });
    expect(client.hub).toBe('test');

    const runs = await client.runs({ job: 'squares' });
    expect(runs.runs.map((r) => [r.runId, r.state])).toEqual([[first.runId, 'succeeded']]);
    expect(runs.next).toBeUndefined();
    const details = await client.run(first.runId);
    expect(details?.output?.output).toBe(1 + 4 + 16);
    const failures = [];
    for await (const failure of client.failures(first.runId)) failures.push(failure);
    expect(failures.map(({ item, reason }) => ({ item, reason }))).toEqual([{ item: 2, reason: 'Error: three is out' }]);
    expect(await client.run('squares/manual-nope')).toBeUndefined();
    // A run id is checked before it names a blob: storage resolves `..`, so another hub's client
    // (an app's endpoint built on it) read this hub's run, and its cancel request had that hub's
    // leader write it.
    const other = new BatonClient({ env: { AzureWebJobsStorage: azurite.connectionString }, hub: 'other' });
    const across = `squares/../../../test-runs/runs/${first.runId}`;
    await expect(other.run(across)).rejects.toMatchObject({ code: 'InvalidRunId' });
    await expect(other.cancel(across)).rejects.toMatchObject({ code: 'InvalidRunId' });
    const status = await client.status();
    expect(status.activeRuns).toEqual([]);
    expect(status.jobs.map((j) => j.job)).toEqual(['squares']);

    // A trigger is a request: the next leader on the hub starts the run it names.
    const asked = await client.trigger('squares');
    expect(asked).toMatch(/^squares\/manual-/);
    // Runs list newest first by their creation time, which each leader reads off storage's clock:
    // late by up to a second (the Date header drops the milliseconds; docs/architecture.md, "Time
    // comes from storage"), so a new leader's first runs in the storage second of the last
    // leader's run may list either side of it. The next leader starts once storage's own time is
    // past the first run's creation: every time it reads is later.
    await vi.waitFor(async () => expect(await storageTime()).toBeGreaterThan(Date.parse(first.record.createdAt)), {
      timeout: patience(30_000),
      interval: 50,
    });
    const second = await runJobOnce(squares, { azurite, env: { BATON_MAX_ATTEMPTS: '1' } });
    const ran = await client.runs({ job: 'squares', limit: 10 });
    expect(ran.runs.map((r) => r.runId).sort()).toEqual([first.runId, asked, second.runId].sort());
    const created = ran.runs.map((r) => Date.parse(r.createdAt));
    expect(created).toEqual([...created].sort((a, b) => b - a));
    // A page at a time, one run each, gives the same runs newest first, the first run last.
    const paged: string[] = [];
    let after: string | undefined;
    do {
      const page = await client.runs({ job: 'squares', limit: 1, ...(after ? { after } : {}) });
      expect(page.runs.length).toBeLessThanOrEqual(1);
      paged.push(...page.runs.map((r) => r.runId));
      after = page.next;
    } while (after !== undefined && paged.length < 10);
    expect(paged).toEqual(ran.runs.map((r) => r.runId));
    expect(paged.at(-1)).toBe(first.runId);
  });

  it("reads the leader from the hub's own lease container (BATON_LEASE_CONTAINER)", { timeout: patience(120_000) }, async () => {
    const env = { BATON_LEASE_CONTAINER: 'other-leases', BATON_MAX_ATTEMPTS: '1' };
    await runJobOnce(squares, { azurite, env });
    const client = new BatonClient({ env: { ...env, AzureWebJobsStorage: azurite.connectionString }, hub: 'test' });
    const status = await client.status();
    // runJobOnce leads as run-job-once and releases the lease as it stops.
    expect(status.leader?.identity ?? status.lastLeader?.identity).toBe('run-job-once');
  });

  it('refuses a bad hub or connection when it is made, naming it', () => {
    const make = (options: ConstructorParameters<typeof BatonClient>[0]) => () => new BatonClient(options);
    expect(make({ env: { AzureWebJobsStorage: azurite.connectionString }, hub: 'No_Hub' })).toThrow(
      /^hub must be 1-51 characters/,
    );
    expect(make({ env: { AzureWebJobsStorage: azurite.connectionString, BATON_HUB: 'x--y' } })).toThrow(/^BATON_HUB must be/);
    let error: unknown;
    try {
      new BatonClient({ env: {} });
    } catch (err) {
      error = err;
    }
    expect(isBatonError(error, 'InvalidSetting')).toBe(true);
    expect((error as Error).message).toMatch(/AzureWebJobsStorage/);
  });
});
