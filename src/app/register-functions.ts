import type { app as functionsApp } from '@azure/functions';
import type { OrchestrationHandler } from 'durable-functions';
import { durableFunctions } from '../durable/durable-functions';
import type { JobDefinition } from '../jobs/job-definition';
import type { LeaderLogger } from '../lease/elector-options';
import { redactSecrets } from '../redact';
import { findHostJson, readHostQueueConfig } from './host-config';
import { localHostBridge } from './local-host-bridge';
import { batonRegistrations } from './registrations';
import type { Registration } from './registration-types';
import { createBatonRuntime, type BatonRuntime } from './runtime';
import { checkTelemetrySettings, setupTelemetry, type TelemetrySetup } from './telemetry-setup';
import { messageOf } from '../errors';

/** The `app` namespace of `@azure/functions`: the user's own copy, so their host sees the functions. */
export type FunctionsApp = typeof functionsApp;

export interface RegisterBatonOptions {
  /** The app's jobs (`defineJob`). Names must be unique. */
  jobs: readonly JobDefinition[];
  /** Where the settings come from. Default `process.env`, the app settings under the host. */
  env?: Record<string, string | undefined>;
  /**
   * The app's host.json, whose queue settings the worker must agree with. Default: the first
   * host.json found from the working directory up, which is the app's root under the host.
   */
  hostJson?: string;
  /**
   * Where Baton's lines go. Default: the console, which the Functions worker forwards to the
   * host's logs; warnings start with "warning:", since the host logs a stderr line as a Warning
   * only when it says so.
   */
  logger?: LeaderLogger;
  /**
   * How long the shutdown hook waits for a running term to end and release the lease, and then
   * for telemetry to flush, each. Default 10,000 ms: the host's grace for hooks is short. A
   * leader leads on for up to half of it until a successor asks for the lease (make-before-break),
   * and its work then has the other half to reach a safe point before the lease is handed over.
   */
  shutdownGraceMs?: number;
}

export interface RegisteredBaton {
  /**
   * What the `appTerminate` hook runs: hands the term over (a leader wakes the other instances,
   * leads on until one asks for the lease, then reserves it for that one and releases, so the
   * successor starts at once instead of at its next tick or after the lease), waits for the
   * invocations in flight, then flushes telemetry. Resolves within twice `shutdownGraceMs`.
   */
  shutdown(): Promise<void>;
}

const consoleLogger: LeaderLogger = {
  info: (message) => console.info(message),
  warn: (message) => console.warn(`warning: ${message}`),
  debug: (message) => console.debug(message),
};

/**
 * Registers everything Baton runs on the user's Functions app: the coordinator timer, a worker
 * queue trigger per shard, the HTTP API and status page, the Durable Functions registrations when
 * BATON_ENGINE=durable, telemetry (Application Insights when its connection string is set), and a
 * shutdown hook. Settings and jobs are checked here, as the app starts: a bad one throws with one
 * line naming it, and the host reports the app as failed to start.
 *
 * Call it once, from the app's entry module:
 *
 *     import { app } from '@azure/functions';
 *     import { registerBaton } from 'baton-functions/functions';
 *     registerBaton(app, { jobs: [nightlyAudit] });
 */
export function registerBaton(app: FunctionsApp, options: RegisterBatonOptions): RegisteredBaton {
  const { shutdown } = registerWithRuntime(app, options);
  return { shutdown };
}

/** `registerBaton`, also handing back the runtime it built: for Baton's own tests, not an app. */
export function registerWithRuntime(
  app: FunctionsApp,
  options: RegisterBatonOptions,
): RegisteredBaton & { runtime: BatonRuntime } {
  const env = options.env ?? process.env;
  // Under `baton start`, the local host names this instance and takes its lines and events.
  const host = localHostBridge();
  const logger = host?.logger ?? options.logger ?? consoleLogger;
  const graceMs = options.shutdownGraceMs ?? 10_000;
  // Before the runtime, which takes its meter and logger from what this sets up.
  // A host that only inspects the app exports nothing, but hears of a setting that would fail.
  if (host?.inspectOnly) checkTelemetrySettings(env);
  const telemetry: Pick<TelemetrySetup, 'shutdown' | 'providers'> = host?.inspectOnly
    ? { shutdown: () => Promise.resolve() }
    : setupTelemetry(env, host?.telemetry ?? { log: (message) => logger.info(message) });
  const runtime = createBatonRuntime(env, {
    jobs: options.jobs,
    ...(telemetry.providers ? { telemetry: telemetry.providers } : {}),
    logger,
    hostQueueConfig: readHostQueueConfig(host?.hostJson ?? options.hostJson ?? findHostJson(process.cwd()), env),
    ...(host?.identity ? { identity: host.identity } : {}),
    ...(host?.onLeaderEvent ? { onLeaderEvent: host.onLeaderEvent } : {}),
  });
  host?.attach({ runtime, jobs: options.jobs });

  // Invocations still running: a term ends inside its timer or tick invocation, so shutting down
  // waits for them rather than for a fixed time.
  const inFlight = new Set<Promise<unknown>>();
  const tracked: Track =
    (handler) =>
    async (...args) => {
      const running = handler(...args);
      inFlight.add(running);
      try {
        return await running;
      } finally {
        inFlight.delete(running);
      }
    };

  for (const registration of batonRegistrations(runtime)) register(app, registration, tracked);

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> =>
    (stopping ??= (async () => {
      const alone = !host?.stoppingWithCluster?.();
      const handingOver = runtime.shutdown({ handoverWaitMs: alone ? graceMs / 2 : 0 });
      await settleWithin([handingOver, ...inFlight], graceMs);
      // The tick that ended released the lease; its wake for the successor goes out before we do.
      await settleWithin([runtime.ticks.settled()], graceMs);
      await telemetry.shutdown({ signal: AbortSignal.timeout(graceMs) }).catch((err: unknown) => {
        logger.warn(`telemetry not flushed at shutdown: ${redactSecrets(messageOf(err))}`);
      });
    })());
  app.hook.appTerminate(shutdown);

  // One tick any instance may take: leadership starts even if the timer never fires on this host.
  // Sent once the app's module has loaded, so its registrations reach the host first; a shutdown
  // that began by then sends none.
  if (!host?.inspectOnly) {
    setImmediate(() => {
      if (!stopping) void runtime.ticks.wakeOnStart();
    });
  }
  return { runtime, shutdown };
}

/** Wraps a handler so that its invocations are counted in flight until they settle. */
type Track = <A extends unknown[]>(handler: (...args: A) => Promise<unknown>) => (...args: A) => Promise<unknown>;

function register(app: FunctionsApp, registration: Registration, tracked: Track): void {
  switch (registration.kind) {
    case 'timer':
      // useMonitor off and no runOnStartup: catch-up is decided by the job schedules, not the host.
      app.timer(registration.name, {
        schedule: registration.schedule,
        handler: tracked(registration.handler),
        useMonitor: false,
        runOnStartup: false,
        ...(registration.durableClient ? { extraInputs: [durableFunctions().input.durableClient()] } : {}),
      });
      return;
    case 'queue':
      app.storageQueue(registration.name, {
        queueName: registration.queueName,
        connection: registration.connection,
        handler: tracked(registration.handler),
      });
      return;
    case 'orchestration':
      durableFunctions().app.orchestration(registration.name, registration.handler as OrchestrationHandler);
      return;
    case 'activity':
      durableFunctions().app.activity(registration.name, { handler: registration.handler });
      return;
    case 'http':
      app.http(registration.name, {
        route: registration.route,
        methods: registration.methods,
        authLevel: registration.authLevel,
        handler: registration.handler,
      });
      return;
  }
}

async function settleWithin(running: readonly Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(running), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(
    () => clearTimeout(timer),
  );
}
