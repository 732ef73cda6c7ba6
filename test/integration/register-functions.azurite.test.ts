/**
 * `registerBaton(app, …)` from `baton-functions/functions`, on a recording stand-in for the `app`
 * namespace of `@azure/functions` (the one part of the host that cannot run here) and real
 * Azurite: it registers what the host needs, and its `appTerminate` hook ends a running term,
 * releases the lease and flushes telemetry. Telemetry sets process-wide providers, so this file
 * runs in a process of its own (OWN_PROCESS in vitest.config.mts).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { InvocationContext, type Timer } from '@azure/functions';
import { registerBaton, type FunctionsApp } from '../../src/functions';
import { registerWithRuntime } from '../../src/app/register-functions';
import { BlobHandoverRequestStore } from '../../src/lease/blob-handover-request-store';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import { useAzurite } from '../support/azurite';
import { sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const fixture = useAzurite();
const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: true },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};

interface Recorded {
  calls: { method: string; name: string; options: Record<string, unknown> }[];
  terminate: (() => Promise<void>)[];
}

/** What `registerBaton` asks of `app`, recorded: a registration per call, and the hooks. */
function recordingApp(): { app: FunctionsApp; recorded: Recorded } {
  const recorded: Recorded = { calls: [], terminate: [] };
  const hook = { appTerminate: (handler: () => Promise<void>) => recorded.terminate.push(handler) };
  const app = new Proxy(
    {},
    {
      get: (_, method) =>
        method === 'hook'
          ? hook
          : (name: string, options: Record<string, unknown>) =>
              void recorded.calls.push({ method: String(method), name, options }),
    },
  ) as unknown as FunctionsApp;
  return { app, recorded };
}

/** Runs the registered coordinator timer once, as the host's invocation would. */
function timerInvocation(recorded: Recorded): () => Promise<unknown> {
  const handler = recorded.calls.find((c) => c.method === 'timer')!.options.handler as (
    timer: Timer,
    context: InvocationContext,
  ) => Promise<unknown>;
  return () => handler(timer, new InvocationContext({ functionName: 'baton-coordinator' }));
}

/** An OTLP/HTTP receiver: the paths posted to, in order, and what was posted. */
let otlp: Server;
const posted: string[] = [];
const bodies: Buffer[] = [];

beforeAll(async () => {
  otlp = createServer((req, res) => {
    posted.push(req.url ?? '');
    const chunks: Buffer[] = [];
    req
      .on('data', (chunk: Buffer) => chunks.push(chunk))
      .on('end', () => {
        bodies.push(Buffer.concat(chunks));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
  });
  await new Promise<void>((resolve) => otlp.listen(0, '127.0.0.1', resolve));
  // The exporters read the standard settings from the process; an hour's interval means only a
  // flush at shutdown sends anything.
  vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', `http://127.0.0.1:${(otlp.address() as AddressInfo).port}`);
  vi.stubEnv('OTEL_METRIC_EXPORT_INTERVAL', '3600000');
});

afterAll(async () => {
  vi.unstubAllEnvs();
  await new Promise((resolve) => otlp.close(resolve));
});

describe('registerBaton on a Functions app', () => {
  it('registers the timer, the worker and the API, and one appTerminate hook', async () => {
    const { app, recorded } = recordingApp();
    const hub = fixture.uniqueName('register');
    const { runtime } = registerWithRuntime(app, {
      jobs: [sumJob({ items: 10 })],
      env: { AzureWebJobsStorage: fixture.azurite.connectionString, BATON_HUB: hub },
      hostJson: join(__dirname, '..', '..', 'functions', 'host.json'),
      logger: { info: () => undefined, warn: () => undefined },
    });
    await runtime.shutdown();
    expect(recorded.calls.map((c) => `${c.method}:${c.name}`)).toEqual([
      'timer:baton-coordinator',
      'storageQueue:baton-worker',
      ...['status', 'runs', 'run', 'failures', 'trigger', 'cancel'].map((route) => `http:baton-api-${route}`),
      'http:baton-page',
    ]);
    expect(recorded.calls[0]!.options).toMatchObject({ useMonitor: false, runOnStartup: false });
    expect(recorded.calls[1]!.options).toMatchObject({ queueName: `${hub}-work`, connection: 'AzureWebJobsStorage' });
    expect(recorded.terminate).toHaveLength(1);
  });

  it('refuses a host.json the worker cannot agree with, naming the setting', () => {
    const { app } = recordingApp();
    expect(() =>
      registerBaton(app, {
        jobs: [],
        env: { AzureWebJobsStorage: fixture.azurite.connectionString, BATON_MAX_ATTEMPTS: '3' },
        hostJson: join(__dirname, '..', '..', 'functions', 'host.json'),
        logger: { info: () => undefined, warn: () => undefined },
      }),
    ).toThrow(/^BATON_MAX_ATTEMPTS \(3\) must equal host\.json extensions\.queues\.maxDequeueCount/);
  });

  it('refuses a shutdownGraceMs the host would cut short, naming the option', () => {
    for (const shutdownGraceMs of [4500, 100, 1500.5]) {
      const { app } = recordingApp();
      expect(() =>
        registerBaton(app, {
          jobs: [],
          env: { AzureWebJobsStorage: fixture.azurite.connectionString },
          hostJson: join(__dirname, '..', '..', 'functions', 'host.json'),
          logger: { info: () => undefined, warn: () => undefined },
          shutdownGraceMs,
        }),
      ).toThrow(
        /^shutdownGraceMs must be a whole number of milliseconds from 500 to 4000: the Functions host kills the worker 5 s after/,
      );
    }
  });

  it(
    'the appTerminate hook ends a leading term, releases the lease and flushes telemetry',
    { timeout: patience(90_000) },
    async () => {
      const { app, recorded } = recordingApp();
      const hub = fixture.uniqueName('terminate');
      const warnings: string[] = [];
      const infos: string[] = [];
      const { runtime } = registerWithRuntime(app, {
        jobs: [sumJob({ items: 10 })],
        // A term of almost ten minutes (host.json's functionTimeout), held idle rather than rested:
        // only the hook can end it within the test.
        env: {
          AzureWebJobsStorage: fixture.azurite.connectionString,
          BATON_HUB: hub,
          BATON_TERM_SECONDS: '590',
          BATON_REST_WHEN_IDLE: 'false',
          BATON_METRICS_EXPORTER: 'otlp',
        },
        hostJson: join(__dirname, '..', '..', 'functions', 'host.json'),
        logger: { info: (message) => infos.push(message), warn: (message) => warnings.push(message) },
      });
      // The host's timer invocation, which holds the term.
      let invocationEnded = false;
      const invocation = timerInvocation(recorded)().finally(() => (invocationEnded = true));
      const lease = runtime.reads.lease;
      // Leading: the lease taken and the term's epoch recorded with it (the blob is leased a
      // moment before the epoch is written, and a term stopped in between is not yet one).
      const leading = async () => {
        const record = await lease.read();
        return record.leased && record.epoch > 0;
      };
      await expect.poll(leading, { timeout: patience(30_000), interval: 100 }).toBe(true);
      const { epoch } = await lease.read();
      expect(invocationEnded).toBe(false);
      expect(posted.filter((path) => path === '/v1/metrics')).toEqual([]);

      const started = Date.now();
      await recorded.terminate[0]!();
      const tookMs = Date.now() - started;

      // The term ended inside its invocation, and let go of the lease rather than leave it to expire.
      expect(invocationEnded).toBe(true);
      await invocation;
      const after = await lease.read();
      expect(after).toMatchObject({ leased: false, epoch, freedAs: 'released' });
      // And woke a successor before the hook returned: the term's beacon, a tick message on the
      // first work queue, is visible at once rather than a lease's length from now.
      const work = fixture.queueService.getQueueClient(runtime.resources.workQueue);
      const visible = (await work.peekMessages({ numberOfMessages: 32 })).peekedMessageItems;
      const ticks = visible.map((m) => JSON.parse(m.messageText) as { t?: string; epoch?: number });
      // (The start-up wake is a tick too, of epoch 0; the beacon carries the term's.)
      expect(ticks).toContainEqual(expect.objectContaining({ t: 'tick', epoch }));
      expect(posted).toContain('/v1/metrics');
      expect(warnings).toEqual([]);
      // Nobody asked for the lease, so it led on for the handover's wait (a third of the 3 s
      // grace), released, and said so: in its log and in the stops metric that was flushed last.
      expect(tookMs).toBeGreaterThanOrEqual(950);
      const stopped = infos.map((line) => /^stopped \(hook\): lease released after (\d+) ms$/.exec(line)).find(Boolean);
      expect(stopped, infos.join('\n')).toBeDefined();
      expect(Number(stopped![1])).toBeGreaterThanOrEqual(950);
      expect(Number(stopped![1])).toBeLessThanOrEqual(patience(3000));
      expect(Buffer.concat(bodies).includes('baton.instance.stops')).toBe(true);
      // The whole hook, telemetry's flush included, inside the host's 5 s (4.5 s, the last one
      // the process's to exit).
      expect(tookMs).toBeLessThan(patience(4500));
      // A second call (the host may call hooks again) does the same work once.
      await recorded.terminate[0]!();
    },
  );

  it(
    'the appTerminate hook hands the lease to a successor that asks, make-before-break',
    { timeout: patience(90_000) },
    async () => {
      const { app, recorded } = recordingApp();
      const hub = fixture.uniqueName('handover');
      const { runtime } = registerWithRuntime(app, {
        jobs: [sumJob({ items: 10 })],
        env: {
          AzureWebJobsStorage: fixture.azurite.connectionString,
          BATON_HUB: hub,
          BATON_TERM_SECONDS: '590',
          BATON_REST_WHEN_IDLE: 'false',
        },
        hostJson: join(__dirname, '..', '..', 'functions', 'host.json'),
        logger: { info: () => undefined, warn: () => undefined },
      });
      const invocation = timerInvocation(recorded)();
      const lease = runtime.reads.lease;
      await expect
        .poll(async () => (await lease.read()).epoch > 0 && (await lease.read()).leased, {
          timeout: patience(30_000),
          interval: 100,
        })
        .toBe(true);
      const { epoch, holder } = await lease.read();

      // Another instance of the same version: it never asks a leader of its own rank, only a leaving one.
      const successor = new LeaderElector({
        store: new BlobLeaseStore(fixture.leaseBlobService, hub),
        requests: new BlobHandoverRequestStore(fixture.leaseBlobService, hub),
        identity: 'successor',
        rank: { version: '0.0.1', priority: 0 },
        handover: { checkMs: 1000, pollMs: 100 },
      });
      expect(await successor.runIfLeader(() => 'too early')).toMatchObject({ led: false });

      const started = Date.now();
      const terminating = recorded.terminate[0]!();
      await expect.poll(async () => (await lease.read()).leaving, { timeout: patience(10_000), interval: 20 }).toBe(true);
      // Its next look at the lease: it asks, and leads once the holder has reached a safe point.
      let succeededAt = 0;
      const next = await successor.runIfLeader((leadership) => {
        succeededAt = Date.now();
        return leadership.epoch;
      });
      expect(next).toMatchObject({ led: true, value: epoch + 1 });
      await terminating;
      await invocation;
      // Handed over, not left to expire or to the bound: inside the 3 s grace.
      expect(succeededAt - started).toBeLessThan(patience(3000));
      const after = await lease.read();
      expect(after.changes?.at(-1)).toMatchObject({
        holder: 'successor',
        previous: holder,
        reason: 'released',
        epoch: epoch + 1,
      });
    },
  );
});
