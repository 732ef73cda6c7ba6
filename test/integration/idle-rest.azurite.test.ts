/**
 * An idle hub on Azurite, through the registrations the Functions host runs: the leader returns
 * as soon as nothing is open or due, leaving the lease resting until it is next needed; the other
 * instance reads that once and its ticks lead nothing; the status says "resting"; and a trigger
 * wakes a leader at once with a message on the work queue.
 */
import { describe, expect, it } from 'vitest';
import { InvocationContext, type Timer } from '@azure/functions';
import type { TickOutcome } from '../../src/app/coordinator-tick';
import { MAX_REST_MS } from '../../src/engine/coordinator';
import { batonRegistrations } from '../../src/app/registrations';
import type { QueueRegistration, TimerRegistration } from '../../src/app/registration-types';
import { createBatonRuntime, type BatonRuntime } from '../../src/app/runtime';
import { triggerRun } from '../../src/hub/requests';
import { readHubStatus } from '../../src/hub/status';
import { statusView } from '../../src/hub/read-model';
import { renderStatus } from '../../src/cli/format';
import { useAzurite } from '../support/azurite';
import { sumJob } from '../support/sample-jobs';

const fixture = useAzurite();

const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: true },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};
const context = (name: string) => new InvocationContext({ functionName: name, invocationId: name });

function instance(env: Record<string, string>, identity: string) {
  // A job due once a year: the rest is the longest one, and nothing is due meanwhile.
  const runtime = createBatonRuntime(env, { identity, jobs: [sumJob({ items: 0, schedule: '0 0 0 1 1 *' })] });
  const registrations = batonRegistrations(runtime);
  const tick = registrations.find((r): r is TimerRegistration => r.kind === 'timer')!;
  const queue = registrations.find((r): r is QueueRegistration => r.kind === 'queue' && r.name === 'baton-worker')!;
  return {
    runtime,
    tick: () => tick.handler(timer, context(`${identity}-tick`)) as Promise<TickOutcome>,
    onMessage: (text: string) => queue.handler(text, context(`${identity}-message`)) as Promise<TickOutcome | undefined>,
  };
}

async function statusOf(runtime: BatonRuntime) {
  const now = () => runtime.clock.date();
  return statusView('hub', 'endpoint', await readHubStatus(runtime.reads.docs, runtime.reads.lease, { now }));
}

describe('an idle hub rests between occurrences', () => {
  it('the leader returns and rests the lease; others lead nothing until a trigger wakes one', async () => {
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('rest'),
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
    };
    const a = instance(env, 'instance-a');
    const b = instance(env, 'instance-b');
    const before = Date.now();
    // The term ends after one idle turn rather than after BATON_TERM_SECONDS (60 s).
    expect(await a.tick()).toEqual({ led: true, epoch: 1 });
    await a.runtime.ticks.settled();
    const lease = await a.runtime.reads.lease.read();
    expect(lease.leased).toBe(false);
    const restMs = lease.restingUntil!.getTime() - before;
    expect(restMs).toBeGreaterThan(MAX_REST_MS - 60_000);
    expect(restMs).toBeLessThanOrEqual(MAX_REST_MS + 5_000);

    const status = await statusOf(b.runtime);
    expect(status.leader).toBeNull();
    expect(status.restingUntil).toBe(lease.restingUntil!.toISOString());
    expect(renderStatus(status, new Date())).toMatch(
      /^leader +resting until .* \(nothing open or due before then; a trigger wakes it\)/m,
    );

    // b's ticks find the lease resting: no term; one read tells b until when, and later ticks need none.
    const requests = b.runtime.storageRequests.total;
    for (let i = 0; i < 3; i++)
      expect(await b.tick()).toEqual({ led: false, holder: undefined, restingUntil: lease.restingUntil });
    expect(b.runtime.storageRequests.total - requests).toBe(1);

    // A trigger writes its request and wakes a leader with a message on shard 0's work queue.
    const { runId } = await triggerRun(a.runtime.reads.docs, 'sum', { wake: a.runtime.ticks.wake });
    const queue = fixture.queueService.getQueueClient(a.runtime.resources.workQueue);
    const received = (await queue.receiveMessages({ numberOfMessages: 32 })).receivedMessageItems;
    const wakes = received.filter((m) => JSON.parse(m.messageText).wake === true);
    expect(wakes).toHaveLength(1);
    // Whoever receives it leads at once, through the rest, and applies the request.
    expect(await b.onMessage(wakes[0]!.messageText)).toEqual({ led: true, epoch: 2 });
    const record = JSON.parse((await a.runtime.reads.docs.read(`runs/${runId}/run.json`))!.body) as { value: { state: string } };
    expect(record.value.state).toBe('succeeded');
    // And rests again once that run has ended.
    expect((await a.runtime.reads.lease.read()).restingUntil).toBeDefined();
  });

  it('an idle leader holds its term when BATON_REST_WHEN_IDLE is false', async () => {
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('norest'),
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
      BATON_REST_WHEN_IDLE: 'false',
      BATON_TERM_SECONDS: '5',
    };
    const a = instance(env, 'instance-a');
    const started = Date.now();
    expect(await a.tick()).toEqual({ led: true, epoch: 1 });
    // The whole term: the idle leader held the lease until it was over.
    expect(Date.now() - started).toBeGreaterThanOrEqual(4900);
    expect((await a.runtime.reads.lease.read()).restingUntil).toBeUndefined();
  });
});
