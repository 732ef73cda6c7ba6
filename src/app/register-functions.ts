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
import { InvalidConfigError, messageOf } from '../errors';
import type { HandoverResult } from '../lease/handover';
import type { InstanceStop, StopLease } from '../telemetry/baton-telemetry';

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
   * By when, from the host's stop (its `WorkerTerminate`, or a bare SIGTERM), a leader has handed
   * the lease over or released it. Default 3,000 ms; from 500 to 4,000, because the Functions host
   * kills the worker 5 s after it asks it to stop, and telemetry's flush comes after. A leader
   * leads on for a third of it until a successor asks (make-before-break); its work then has until
   * the last calls' share of it to reach a safe point, or is abandoned (what it still writes is
   * refused by the epoch fence once the successor leads).
   */
  shutdownGraceMs?: number;
}

export interface RegisteredBaton {
  /**
   * What the `appTerminate` hook and a SIGTERM run: hands the term over (a leader wakes the other
   * instances, leads on until one asks for the lease, then reserves it for that one and releases,
   * so the successor starts at once instead of at its next tick or after the lease), waits for
   * the invocations in flight, records the stop (`baton.instance.stopped`), then flushes
   * telemetry. The lease is back within `shutdownGraceMs`; it resolves within 4.5 s.
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
  const graceMs = shutdownGrace(options.shutdownGraceMs);
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
  const stop = (path: 'hook' | 'signal'): Promise<void> =>
    (stopping ??= (async () => {
      const startedAt = performance.now();
      const alone = !host?.stoppingWithCluster?.();
      // Leads on for a third of the grace until a successor asks, and has the lease back by its end.
      let handed: HandoverResult | undefined;
      const handingOver = runtime
        .shutdown({ handoverWaitMs: alone ? graceMs / 3 : 0, deadlineMs: graceMs })
        .then((result) => (handed = result));
      await settleWithin([handingOver, ...inFlight], graceMs);
      const record: InstanceStop = {
        instance: runtime.elector.identity,
        path,
        lease: leaseAtStop(handed),
        durationMs: handed?.led ? handed.waitedMs : performance.now() - startedAt,
      };
      runtime.telemetry.instanceStopped(record);
      logger.info(`stopped (${path}): lease ${record.lease} after ${Math.round(record.durationMs ?? 0)} ms`);
      host?.onStopped?.(record);
      // The tick that ended released the lease; its wake for the successor goes out before we do.
      await settleWithin([runtime.ticks.settled()], Math.max(0, FLUSH_BY_MS - (performance.now() - startedAt)) / 2);
      // Last and best effort: the host kills the process at 5 s whatever is left unsent.
      const flushMs = Math.max(100, Math.round(FLUSH_BY_MS - (performance.now() - startedAt)));
      await telemetry.shutdown({ signal: AbortSignal.timeout(flushMs) }).catch((err: unknown) => {
        logger.warn(`telemetry not flushed at shutdown: ${redactSecrets(messageOf(err))}`);
      });
    })());
  const shutdown = (): Promise<void> => stop('hook');
  app.hook.appTerminate(shutdown);
  // A container deleted (Flex scale-in, a drain) sends the worker a bare SIGTERM, and no hook runs.
  if (!host?.inspectOnly) onSigterm(() => stop('signal'));

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

/** The Functions host kills a worker this long after it asks it to stop (`WorkerTerminateGracePeriodInSeconds`). */
const HOST_KILLS_AFTER_MS = 5000;
/** Telemetry's flush ends by then, leaving the process a margin to exit before the kill. */
const FLUSH_BY_MS = HOST_KILLS_AFTER_MS - 500;
const DEFAULT_GRACE_MS = 3000;
const GRACE_RANGE_MS = { min: 500, max: 4000 } as const;

function shutdownGrace(ms: number | undefined): number {
  if (ms === undefined) return DEFAULT_GRACE_MS;
  if (!Number.isInteger(ms) || ms < GRACE_RANGE_MS.min || ms > GRACE_RANGE_MS.max) {
    throw new InvalidConfigError(
      'shutdownGraceMs',
      `shutdownGraceMs must be a whole number of milliseconds from ${GRACE_RANGE_MS.min} to ${GRACE_RANGE_MS.max}: the Functions host kills the worker ${HOST_KILLS_AFTER_MS / 1000} s after it asks it to stop`,
    );
  }
  return ms;
}

function leaseAtStop(handed: HandoverResult | undefined): StopLease {
  // Still handing over when the grace ran out: the lease was not back in time.
  if (!handed) return 'not-released';
  if (!handed.led) return 'not-held';
  if (!handed.released) return 'not-released';
  return handed.to ? 'handed-over' : 'released';
}

/** What each registration's SIGTERM runs; one process listener for all of them. */
const onTerm = new Set<() => Promise<void>>();
let listening = false;

/**
 * Runs `stop` on a SIGTERM. Once every stop has settled, and unless the app listens for SIGTERM
 * too, the signal ends the process as it would have without us (exit by SIGTERM, code 143).
 */
function onSigterm(stop: () => Promise<void>): void {
  onTerm.add(stop);
  if (listening) return;
  listening = true;
  const listener = (): void => {
    void Promise.allSettled([...onTerm].map((run) => run())).then(() => {
      process.off('SIGTERM', listener);
      listening = false;
      if (process.listenerCount('SIGTERM') === 0) process.kill(process.pid, 'SIGTERM');
    });
  };
  process.on('SIGTERM', listener);
}

async function settleWithin(running: readonly Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(running), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(
    () => clearTimeout(timer),
  );
}
