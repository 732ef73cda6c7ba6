import type { InvocationContext } from '@azure/functions';
import { batonRegistrations, type QueueRegistration, type Registration } from '../app/registrations';
import { createBatonRuntime, type BatonRuntime } from '../app/runtime';
import { AzureQueue } from '../queue/azure-queue';
import { createQueueServiceClient } from '../storage/client-factory';
import { parseStorageSettings } from '../storage/settings';
import { createJobs } from '../../functions/jobs';
import { findHostJson, readHostQueueConfig } from './host-config';
import { LocalHost } from './local-host';
import { emit } from './instance-events';

/**
 * One instance of the local cluster: the app's registration list on a `LocalHost`, as one
 * Functions instance would run it. It reports what happens as JSON lines on stdout for the
 * cluster's live view, and stops cleanly on SIGTERM/SIGINT or when its parent goes away.
 */
async function main(): Promise<void> {
  const env = process.env;
  const instance = env.BATON_INSTANCE ?? `instance-${process.pid}`;
  const hostConfig = readHostQueueConfig(env.BATON_HOST_JSON ?? findHostJson(__dirname));
  const runtime: BatonRuntime = createBatonRuntime(env, {
    jobs: createJobs(env),
    hostQueueConfig: hostConfig,
    identity: instance,
    logger: {
      info: (message) => emit({ kind: 'log', level: 'info', message }),
      warn: (message) => emit({ kind: 'log', level: 'warn', message }),
    },
    onLeaderEvent: (event) => {
      if (event.type === 'renewed' || event.type === 'renew-failed') return;
      emit({
        kind: 'leader',
        type: event.type,
        epoch: 'epoch' in event ? event.epoch : undefined,
        ...(event.type === 'lost' ? { reason: event.reason } : {}),
      });
    },
  });
  const queueService = createQueueServiceClient(parseStorageSettings(env));
  const host = new LocalHost({
    registrations: batonRegistrations(runtime).map(countWork),
    queues: (name) => new AzureQueue(queueService, name),
    hostConfig,
    log: (level, message) => {
      if (level === 'error' || level === 'warning' || level === 'critical') emit({ kind: 'log', level: 'warn', message });
    },
  });
  let stopping: Promise<void> | undefined;
  const stop = (why: string): Promise<void> =>
    (stopping ??= (async () => {
      emit({ kind: 'stopping', why });
      runtime.shutdown();
      await host.stop();
      emit({ kind: 'stopped' });
      process.exit(0);
    })());
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // The cluster holds our stdin open; when it is gone, so are we.
  process.stdin.on('end', () => void stop('parent exited'));
  process.stdin.resume();
  host.start();
  emit({ kind: 'started', pid: process.pid });
}

/** Reports items processed per message, so the live view can show work per instance. */
function countWork(registration: Registration): Registration {
  if (registration.kind !== 'queue') return registration;
  const counted: QueueRegistration = {
    ...registration,
    handler: async (entry: unknown, context: InvocationContext) => {
      const outcome = await registration.handler(entry, context);
      const o = outcome as { kind?: string; succeeded?: number; failed?: number } | undefined;
      if (o?.kind === 'processed') emit({ kind: 'worked', items: (o.succeeded ?? 0) + (o.failed ?? 0) });
      return outcome;
    },
  };
  return counted;
}

main().catch((err: unknown) => {
  // One line: settings errors already say which setting and how to fix it.
  process.stderr.write(`${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}\n`);
  process.exit(1);
});
