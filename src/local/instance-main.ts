import * as z from '../zod';
import type { InvocationContext } from '@azure/functions';
import { unlinkSync } from 'node:fs';
import { asTickMessage } from '../app/registrations';
import { type HttpRegistration, type QueueRegistration, type Registration } from '../app/registration-types';
import { type BatonRuntime } from '../app/runtime';
import { setLocalHostBridge } from '../app/local-host-bridge';
import { AzureQueue } from '../queue/azure-queue';
import { createQueueServiceClient } from '../storage/client-factory';
import { describeThrown, InvalidSettingError, isBatonError } from '../errors';
import { parseSetting, readSetting } from '../storage/setting';
import { parseLogLevel } from '../app/settings';
import { parseStorageSettings } from '../storage/connection';
import { redactSecrets } from '../redact';
import { readHostQueueConfig, type HostQueueConfig } from '../app/host-config';
import { APP_SETTING, HOST_JSON_SETTING, appEntries, appHostJson, loadFunctionsApp, referenceApp } from './app-functions';
import { LocalHost } from './local-host';
import { serveHttpRegistrations, type LocalHttpServer } from './http-server';
import { emit } from './instance-events';
import { createInterface } from 'node:readline';
import { DRAIN_RULE, parseHostCommand } from './stop-rules';

/**
 * One instance of the local cluster: the app's registration list on a `LocalHost`, as one
 * Functions instance would run it. It reports what happens as JSON lines on stdout for the
 * cluster's live view, and stops as the Functions host stops a worker (`stop-rules.ts`): a
 * `terminate` line on stdin is the host's WorkerTerminate (the app's appTerminate hooks run, then
 * the process exits; the cluster kills it 5 s after it asked); a SIGTERM is a bare signal, which
 * this host leaves to the app (Baton's own handler, or Node's default exit); a `drain` line is
 * drain mode. SIGINT (Ctrl-C of the whole cluster) and a parent that went away run the hooks too,
 * a leader then releasing at once, since every instance is stopping.
 */
/**
 * How long the local host hides a message it is running, renewed at half-time (the Functions host
 * uses 10 minutes). A killed instance's messages come back after it; the chaos soak shortens it
 * so that runs a kill hit end sooner.
 */
const visibilitySchema = z.pipe(
  z.pipe(z.string().check(z.regex(/^\d+$/, { error: 'must be a whole number of seconds from 5 to 600' })), z.transform(Number)),
  z.int().check(z.gte(5, { error: 'must be at least 5' }), z.lte(600, { error: 'must be at most 600' })),
);

const freezeSchema = z.pipe(
  z.enum(['0', '1'], { error: 'must be 1 (timers off) or 0' }),
  z.transform((v) => v === '1'),
);

async function main(): Promise<void> {
  const env = process.env;
  const instance = env.BATON_INSTANCE?.trim() || `instance-${process.pid}`;
  if (instance.length > 256) {
    throw new InvalidSettingError('BATON_INSTANCE', 'BATON_INSTANCE must be at most 256 characters: it names the lease holder');
  }
  // The app is whatever its folder's package.json `main` registers, as under the Functions host.
  const appDir = readSetting(env, APP_SETTING) ?? referenceApp();
  const appNamedBy = readSetting(env, APP_SETTING) ? APP_SETTING : undefined;
  // The app first: a folder with no app is the problem to name, not its missing host.json.
  namedBy(appNamedBy, () => appEntries(appDir));
  const hostJson = appHostJson(appDir, env);
  const hostConfig = readHostConfig(hostJson);
  const visibilityTimeoutSeconds = parseSetting(
    visibilitySchema,
    'BATON_LOCAL_VISIBILITY_SECONDS',
    readSetting(env, 'BATON_LOCAL_VISIBILITY_SECONDS') ?? '30',
  );
  const logLevel = parseLogLevel(env);
  // Invocation logs: the handlers' own lines and what they threw, so masked here before they leave the process.
  const log = (level: string, message: string): void => {
    if (level === 'error' || level === 'warning' || level === 'critical') {
      emit({ kind: 'log', level: 'warn', message: redactSecrets(message) });
    } else if (logLevel === 'debug') emit({ kind: 'log', level: 'info', message: redactSecrets(message) });
  };
  let runtime: BatonRuntime | undefined;
  // SIGINT is the whole cluster stopping (Ctrl-C); SIGTERM this instance alone (a deploy, a scale-in).
  let withCluster = false;
  setLocalHostBridge({
    identity: instance,
    stoppingWithCluster: () => withCluster,
    hostJson: hostJson.path,
    logger: {
      info: (message) => emit({ kind: 'log', level: 'info', message }),
      warn: (message) => emit({ kind: 'log', level: 'warn', message }),
      // The runtime passes debug lines on only at BATON_LOG_LEVEL=debug; the cluster's events know info and warn.
      debug: (message) => emit({ kind: 'log', level: 'info', message }),
    },
    // Stdout carries this instance's JSON events, so the console exporter's lines travel as log
    // events: kept in --log-dir, shown at debug.
    telemetry: {
      instance,
      writeLine: (line) => emit({ kind: 'log', level: 'info', message: line }),
      log: (message) => emit({ kind: 'log', level: 'info', message }),
    },
    onLeaderEvent: (event) => {
      if (event.type === 'renew-failed') return;
      emit({
        kind: 'leader',
        type: event.type,
        epoch: 'epoch' in event ? event.epoch : undefined,
        ...(event.type === 'lost' ? { reason: event.reason } : {}),
        // When the renewal started, so a watcher knows when this lease would expire.
        ...(event.type === 'renewed' ? { latencyMs: event.latencyMs } : {}),
        ...(event.type === 'released' && event.to ? { to: event.to } : {}),
      });
    },
    onStopped: ({ path, lease, durationMs }) =>
      emit({ kind: 'stop', path, lease, ...(durationMs !== undefined ? { durationMs } : {}) }),
    attach: (made) => {
      runtime = made.runtime;
    },
  });
  const app = namedBy(appNamedBy, () => loadFunctionsApp(appDir, log));
  if (!runtime) {
    throw new InvalidSettingError(
      APP_SETTING,
      `the app in ${appDir} does not call registerBaton(app, ...): baton start runs Baton apps`,
    );
  }
  // The host's queue polling is counted with the app's own requests: both are this instance's cost.
  const queueService = createQueueServiceClient(parseStorageSettings(env), { requestCounter: runtime.storageRequests });
  const trigger = env.BATON_CHAOS_DIE_AFTER_SENDING?.trim();
  const dieAfterSending = trigger ? { trigger } : undefined;
  const reportWork = env.BATON_CHAOS_REPORT_WORK?.trim() === '1';
  // For the frozen-timer test only: every timer of this instance stays silent, as a host whose
  // singleton timer listener stopped; the tick messages must keep leadership going.
  const freezeTimers = parseSetting(
    freezeSchema,
    'BATON_LOCAL_FREEZE_TIMERS',
    readSetting(env, 'BATON_LOCAL_FREEZE_TIMERS') ?? '0',
  );
  const host = new LocalHost({
    registrations: app.registrations
      .filter((r) => !(freezeTimers && r.kind === 'timer'))
      .map((r) => countWork(r, dieAfterSending, reportWork)),
    queues: (name) => new AzureQueue(queueService, name),
    hostConfig,
    visibilityTimeoutSeconds,
    log,
  });
  const metrics = reportMetrics(runtime, host);
  let http: LocalHttpServer | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (why: string): Promise<void> =>
    (stopping ??= (async () => {
      emit({ kind: 'stopping', why });
      // As the Node worker does on WorkerTerminate: no new invocations, the app's appTerminate
      // hooks (Baton's hands the lease over, records the stop and flushes telemetry), then exit.
      // Invocations still running die with the process; their messages come back.
      host.stopListening();
      await http?.close();
      await app.terminate().catch((err: unknown) => log('warning', `appTerminate hook failed: ${String(err)}`));
      metrics.stop();
      emit({ kind: 'stopped' });
      process.exit(0);
    })());
  let draining: Promise<void> | undefined;
  const drain = (): Promise<void> =>
    (draining ??= (async () => {
      emit({ kind: 'stopping', why: 'drain' });
      await http?.close();
      await host.drain(DRAIN_RULE);
      emit({ kind: 'drained' });
    })());
  // A container's SIGTERM reaches the host's process too, which stops its listeners; what this
  // worker does with the signal is the app's (Baton's handler), or Node's default exit.
  const onContainerSigterm = (): void => {
    process.off('SIGTERM', onContainerSigterm);
    host.stopListening();
    if (process.listenerCount('SIGTERM') === 0) process.kill(process.pid, 'SIGTERM');
  };
  process.on('SIGTERM', onContainerSigterm);
  process.on('SIGINT', () => {
    withCluster = true;
    void stop('SIGINT');
  });
  // The cluster holds our stdin open and speaks for the host on it; when it is gone, so are we.
  createInterface({ input: process.stdin }).on('line', (line) => {
    const command = parseHostCommand(line);
    if (command === 'terminate') void stop('WorkerTerminate');
    else if (command === 'drain') void drain();
  });
  process.stdin.on('end', () => {
    withCluster = true;
    void stop('parent exited');
  });
  await app.start();
  // registerBaton has sent its wake tick: a leader starts even before the first timer.
  host.start();
  // The app's http functions (Baton's API and page among them) on a loopback port of its own.
  const routes = app.registrations.filter((r): r is HttpRegistration => r.kind === 'http');
  if (routes.length > 0) {
    http = await serveHttpRegistrations(routes, {
      port: 0,
      log: (level, message) => log(level, message),
    });
    emit({ kind: 'http', port: Number(new URL(http.origin).port) });
  }
  emit({ kind: 'started', pid: process.pid });
}

/** Runs `load`; a refusal of the app names the setting that chose it, when one did. */
function namedBy<T>(setting: string | undefined, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (!setting || !isBatonError(err, 'InvalidSetting')) throw err;
    throw new InvalidSettingError(setting, `${setting}: ${err.message}`);
  }
}

/** The host's queue settings; a bad file names where it came from. */
function readHostConfig(hostJson: { path: string; fromSetting: boolean }): HostQueueConfig {
  try {
    return readHostQueueConfig(hostJson.path);
  } catch (err) {
    if (!hostJson.fromSetting) throw err;
    throw new InvalidSettingError(HOST_JSON_SETTING, `${HOST_JSON_SETTING}: ${(err as Error).message}`);
  }
}

/**
 * Every second: the storage requests so far and the request body bytes they sent (when they
 * changed), the host's invocations and their time so far and memory with its peaks, for the benchmarks and anyone watching the cluster's events.
 */
function reportMetrics(runtime: BatonRuntime, host: LocalHost): { stop(): void } {
  let peakHeapUsed = 0;
  let reported = -1;
  let ticks = 0;
  const report = (): void => {
    const requests = runtime.storageRequests;
    if (requests.total !== reported) {
      reported = requests.total;
      emit({
        kind: 'requests',
        total: requests.total,
        byOperation: requests.snapshot(),
        bytes: requests.totalBytes,
        bytesByOperation: requests.bytesSnapshot(),
      });
    }
    emit({ kind: 'invocations', ...host.invocationTime() });
    const { rss, heapUsed } = process.memoryUsage();
    emit({ kind: 'memory', rss, heapUsed, peakRss: process.resourceUsage().maxRSS * 1024, peakHeapUsed });
  };
  const timer = setInterval(() => {
    peakHeapUsed = Math.max(peakHeapUsed, process.memoryUsage().heapUsed);
    if (++ticks % 5 === 0) report();
  }, 200);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      report();
    },
  };
}

/** Tick messages held by this process's queue handlers, over every queue. */
let ticksHeld = 0;

/**
 * Reports items processed per message, so the live view can show work per instance, and how
 * many tick messages its handlers hold (a term a tick woke holds its tick until the term ends).
 * With `reportWork` (`BATON_CHAOS_REPORT_WORK=1`, set only by the chaos soak), also each work
 * message as its handler takes it up and lets it go: a line per message is too many to send by
 * default, and only the soak needs to know what a worker holds.
 *
 * `dieAfterSending` is the chaos soak's `BATON_CHAOS_DIE_AFTER_SENDING`: the path of a trigger
 * file. While it exists, the first instance whose worker has sent the final failure of an item
 * (its last try) removes it (so only one instance dies per trigger) and SIGKILLs itself, before
 * the host deletes the message. The result is then on the results queue and the message comes
 * back, so its items are tried and reported again: the leader must count the first result once
 * and the rest as duplicates. Nothing else can make a real process die at exactly that point,
 * between two storage calls of the host.
 */
function countWork(
  registration: Registration,
  dieAfterSending: { trigger: string } | undefined,
  reportWork = false,
): Registration {
  if (registration.kind !== 'queue') return registration;
  const counted: QueueRegistration = {
    ...registration,
    handler: async (entry: unknown, context: InvocationContext) => {
      const tick = asTickMessage(entry) !== undefined;
      if (tick) emit({ kind: 'ticks', held: ++ticksHeld });
      const work = entry as { run?: unknown; first?: unknown; count?: unknown } | null;
      const held =
        reportWork && typeof work?.run === 'string' && typeof work.first === 'number' && typeof work.count === 'number'
          ? { run: work.run, first: work.first, count: work.count }
          : undefined;
      if (held) emit({ kind: 'work', ...held, held: true });
      const outcome = await registration.handler(entry, context).finally(() => {
        if (tick) emit({ kind: 'ticks', held: --ticksHeld });
        if (held) emit({ kind: 'work', ...held, held: false });
      });
      const o = outcome as { kind?: string; succeeded?: number; failed?: number; retrying?: number } | undefined;
      if (o?.kind === 'processed') emit({ kind: 'worked', items: (o.succeeded ?? 0) + (o.failed ?? 0) + (o.retrying ?? 0) });
      const dequeueCount = Number(context.triggerMetadata?.dequeueCount);
      // A final failure: every outcome of the message was in the result it sent.
      if (
        dieAfterSending !== undefined &&
        o?.kind === 'processed' &&
        (o.failed ?? 0) > 0 &&
        o.retrying === 0 &&
        typeof work?.run === 'string' &&
        typeof work.first === 'number' &&
        typeof work.count === 'number' &&
        claim(dieAfterSending.trigger)
      ) {
        emit({ kind: 'chaos', fault: 'died-after-sending', run: work.run, first: work.first, count: work.count, dequeueCount });
        process.kill(process.pid, 'SIGKILL');
      }
      return outcome;
    },
  };
  return counted;
}

/** Removes the trigger file: true for exactly one of the instances that try while it exists. */
function claim(trigger: string): boolean {
  try {
    unlinkSync(trigger);
    return true;
  } catch {
    return false;
  }
}

main().catch((err: unknown) => {
  // One line: settings errors already say which setting and how to fix it. Anything else is
  // flattened and masked too, since a library's message can span lines or quote a key.
  const text = describeThrown(err);
  process.stderr.write(
    `${redactSecrets(text)
      .replace(/\s*\n\s*/g, ' ')
      .trim()}\n`,
  );
  process.exit(1);
});
