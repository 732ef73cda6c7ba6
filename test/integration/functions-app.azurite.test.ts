import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { InvocationContext, type Timer } from '@azure/functions';
import { batonRegistrations } from '../../src/app/registrations';
import { type QueueRegistration, type TimerRegistration } from '../../src/app/registration-types';
import { createBatonRuntime } from '../../src/app/runtime';
import { DEFAULT_TUNING } from '../../src/engine/engine-context';
import type { RunOutput } from '../../src/hub/run-output';
import { requestRun } from '../../src/hub/requests';
import { AzureQueue } from '../../src/queue/azure-queue';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { newRunRecord, runKeys, transition } from '../../src/hub/run-record';
import { parseBatonSettings } from '../../src/app/settings';
import { useAzurite } from '../support/azurite';
import { expectedSum, sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';
import { waitFor } from '../support/edge-support';
import type { ReceivedMessage } from '../../src/queue/queue-port';

const fixture = useAzurite();
const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: true },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};

describe('the Functions app handlers', () => {
  it('timer and queue handlers, called as the host calls them, run a job to its exact output', async () => {
    const hub = fixture.uniqueName('app');
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: hub,
      BATON_TERM_SECONDS: '5',
      BATON_MAX_ATTEMPTS: '3',
    };
    const runtime = createBatonRuntime(env, { jobs: [sumJob({ items: 60, itemsPerMessage: 4 })] });
    const [coordinator, worker] = batonRegistrations(runtime) as [TimerRegistration, QueueRegistration];
    const runId = await requestRun(runtime.coordinator.ctx.docs, 'sum');
    const workQueue = new AzureQueue(fixture.queueService, worker.queueName);
    await workQueue.ensure();
    const state = async () =>
      JSON.parse((await runtime.coordinator.ctx.docs.read(runKeys.record(runId)))?.body ?? '{}').value?.state as
        string | undefined;

    const deadline = Date.now() + patience(60_000);
    while ((await state()) !== 'succeeded' && Date.now() < deadline) {
      const tick = coordinator.handler(
        timer,
        new InvocationContext({ functionName: coordinator.name, invocationId: `tick-${Date.now()}` }),
      );
      // The host's side of the queue trigger: receive, call the handler, delete on success.
      for (const message of await workQueue.receive(16, 30)) {
        const context = new InvocationContext({
          functionName: worker.name,
          invocationId: message.id,
          triggerMetadata: { dequeueCount: message.dequeueCount },
        });
        await worker.handler(JSON.parse(message.text), context);
        await workQueue.delete(message);
      }
      await tick;
    }
    const output = JSON.parse(
      (await runtime.coordinator.ctx.docs.read(runKeys.output(runId)))?.body ?? 'null',
    ) as RunOutput | null;
    expect(output).toMatchObject({ state: 'succeeded', output: expectedSum(60) });
  });

  it("the worker handler sends a failed item back to its shard's queue for its next try, and reports the failure on the last", async () => {
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('retry'),
      BATON_MAX_ATTEMPTS: '2',
    };
    const runtime = createBatonRuntime(env, { jobs: [sumJob({ items: 1, failWhen: () => true })] });
    const [, worker] = batonRegistrations(runtime) as [TimerRegistration, QueueRegistration];
    const docs = runtime.coordinator.ctx.docs;
    const work = runtime.workers[0]!.work;
    const runId = 'sum/manual-handler-test';
    const now = new Date();
    const planned = newRunRecord({ runId, job: 'sum', trigger: 'manual', occurrence: undefined, now, timeoutSeconds: 3600 });
    const running = transition(transition(planned, 'dispatching', now), 'running', now);
    await new FencedDocuments(docs).create(runKeys.record(runId), 1, {
      ...running,
      counters: { ...running.counters, planned: 1 },
    });
    const message = { v: 1, t: 'work', run: runId, job: 'sum', first: 0, count: 1, items: [{ i: 0 }] };
    const context = (dequeueCount: number) =>
      new InvocationContext({ invocationId: `d${dequeueCount}`, triggerMetadata: { dequeueCount } });
    // The delivery succeeds (the host deletes it): the item waits on the queue for its next try.
    await expect(worker.handler(message, context(1))).resolves.toEqual({
      kind: 'processed',
      succeeded: 0,
      failed: 0,
      retrying: 1,
    });
    let retry: ReceivedMessage | undefined;
    await waitFor('the item back on the work queue', async () => {
      [retry] = await work.receive(1, 60);
      return retry !== undefined;
    });
    expect(JSON.parse(retry!.text)).toEqual({ ...message, tried: 1 });
    // Its second try is the last of BATON_MAX_ATTEMPTS: the failure is final, on its first delivery.
    await expect(worker.handler(JSON.parse(retry!.text), context(1))).resolves.toEqual({
      kind: 'processed',
      succeeded: 0,
      failed: 1,
      retrying: 0,
    });
  });

  it("host.json's queue settings match what the engine sends and expects", () => {
    const host = JSON.parse(readFileSync('functions/host.json', 'utf8'));
    expect(host.extensionBundle).toEqual({ id: 'Microsoft.Azure.Functions.ExtensionBundle', version: '[4.*, 5.0.0)' });
    // Messages are JSON text, not base64.
    expect(host.extensions.queues.messageEncoding).toBe('none');
    // A message's failures are final on the host's last delivery, whatever the job's retries say.
    expect(host.extensions.queues.maxDequeueCount).toBe(parseBatonSettings({}).maxAttempts);
    expect(host.extensions.queues.maxDequeueCount).toBe(DEFAULT_TUNING.maxAttempts);
    expect(host.extensions.queues.batchSize).toBe(16);
    expect(host.extensions.queues.newBatchThreshold).toBe(8);
  });
});
