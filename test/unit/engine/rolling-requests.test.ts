/**
 * In a rolling deploy the old version may lead while a user triggers (or cancels a run of) a job
 * only the new version runs. The old leader leaves such a request for a leader that runs the job,
 * as its drains leave such results queued, instead of deleting it; a request no version has run
 * for an hour is dropped.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { REQUEST_WAIT_MS } from '../../../src/engine/coordinator';
import { requestCancel, requestRun } from '../../../src/hub/requests';
import { buildEngine, type Engine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { sumJob } from '../../support/sample-jobs';

/** One term of `engine` as `identity`: it applies what it can, then returns (idle) and releases. */
async function oneTerm(engine: Engine, identity: string): Promise<void> {
  const result = await engine
    .elector(identity)
    .runIfLeader((l) => engine.coordinator.lead(l, { termMs: 5000, returnWhenIdle: true }));
  expect(result.led).toBe(true);
}

async function pending(ports: ReturnType<typeof memoryPorts>): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of ports.docs.list('requests/')) keys.push(key);
  return keys;
}

describe('requests in a rolling deploy', () => {
  it('a run request for a job the leader does not run waits for one that does; one an hour old is dropped', async () => {
    const ports = memoryPorts();
    const old = buildEngine(ports, [sumJob({ items: 3 })]);
    const next = buildEngine(ports, [sumJob({ items: 3 }), sumJob({ name: 'fresh', items: 4 })]);
    const runId = await requestRun(ports.docs, 'fresh');
    const [waiting] = await pending(ports);
    // Made an hour and a minute ago, for a job no version runs.
    const stale = `requests/${new Date(Date.now() - REQUEST_WAIT_MS - 60_000).toISOString()}-${randomUUID()}.json`;
    await ports.docs.write(stale, JSON.stringify({ kind: 'run', job: 'gone', id: randomUUID() }), { ifNoneMatch: '*' });

    await oneTerm(old, 'old');
    expect(await pending(ports)).toEqual([waiting]);
    expect(await old.readRun(runId)).toBeUndefined();

    const stop = next.startWorkers(1);
    try {
      await next.leadUntil('new', async () => (await next.readRun(runId))?.state === 'succeeded');
    } finally {
      await stop();
    }
    expect(await pending(ports)).toEqual([]);
  });

  it('a cancel of a run whose job the leader does not run waits for one that does', async () => {
    const ports = memoryPorts();
    const old = buildEngine(ports, [sumJob({ items: 3 })]);
    const next = buildEngine(ports, [sumJob({ items: 3 }), sumJob({ name: 'fresh', items: 4 })]);
    const runId = await requestRun(ports.docs, 'fresh');
    // No workers: the run stays open once dispatched.
    await next.leadUntil('new', async () => (await next.readRun(runId))?.state === 'running');
    await requestCancel(ports.docs, runId, 'wrong input');

    await oneTerm(old, 'old');
    expect(await pending(ports)).toHaveLength(1);
    expect((await old.readRun(runId))?.state).toBe('running');

    await next.leadUntil('new', async () => (await next.readRun(runId))?.state === 'cancelled');
    expect((await next.readRun(runId))?.endReason).toBe('wrong input');
    expect(await pending(ports)).toEqual([]);
  });

  // A request blob can outlive its application: a lease on it, a legal hold, a role that may
  // write but not delete. Requests are applied in name order, so one that sorts first must not
  // keep every later trigger and cancel from ever being applied.
  it('a request that cannot be deleted is applied once and passed; later requests are still applied', async () => {
    const ports = memoryPorts();
    const engine = buildEngine(ports, [sumJob({ items: 3 })]);
    const stuck = `requests/2000-01-01T00:00:00.000Z-${randomUUID()}.json`;
    await ports.docs.write(stuck, JSON.stringify({ kind: 'cancel', runId: 'sum/manual-gone', reason: 'r' }), {
      ifNoneMatch: '*',
    });
    const deleteOf = ports.docs.delete.bind(ports.docs);
    let stuckDeletes = 0;
    ports.docs.delete = async (key, options) => {
      if (key !== stuck) return deleteOf(key, options);
      stuckDeletes++;
      throw Object.assign(new Error('There is currently a lease on the blob and no lease ID was specified'), {
        statusCode: 412,
        code: 'LeaseIdMissing',
      });
    };
    const runId = await requestRun(ports.docs, 'sum');
    const stop = engine.startWorkers(1);
    try {
      await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded');
      // More turns of the same leader: it does not try the stuck one again and again.
      await oneTerm(engine, 'leader');
    } finally {
      await stop();
    }
    expect(await pending(ports)).toEqual([stuck]);
    expect(stuckDeletes).toBe(1);
  });
});
