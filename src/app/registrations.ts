import type { InvocationContext } from '@azure/functions';
import { createCoordinatorTick, createTickMessageHandler } from './coordinator-tick';
import { parseBody, tickMessageSchema, type TickMessage } from '../engine/messages';
import { httpApiRegistrations } from './http-api';
import type { Registration } from './registration-types';
import { durableRegistrations } from './durable-registrations';
import type { BatonRuntime } from './runtime';
import { createWorkerHandler } from './worker-handler';

/**
 * The one list of functions Baton registers. `functions/` hands it to the Functions host; the
 * local host runs the same list.
 */
export function batonRegistrations(runtime: BatonRuntime): Registration[] {
  // Both engines keep the same run records, so one API reads either.
  const api = httpApiRegistrations({
    hub: runtime.settings.hub,
    endpoint: runtime.reads.endpoint,
    container: runtime.resources.container,
    docs: runtime.reads.docs,
    lease: runtime.reads.lease,
    clock: runtime.clock,
    log: runtime.log,
    appliesRequests: runtime.settings.engine !== 'durable',
    wake: (options) => runtime.ticks.wake(options),
    auth: runtime.settings.httpAuth,
  });
  if (runtime.settings.engine === 'durable') return [...durableRegistrations(runtime), ...api];
  const termMs = runtime.settings.termSeconds * 1000;
  const rest = runtime.rest;
  const tick = createCoordinatorTick(runtime, (leadership) =>
    runtime.coordinator.lead(leadership, { termMs, ...(rest ? { restWhenIdle: rest } : {}) }).then(() => undefined),
  );
  const onTick = createTickMessageHandler(tick, runtime.ticks);
  return [
    { kind: 'timer', name: 'baton-coordinator', schedule: runtime.settings.coordinatorSchedule, handler: tick },
    // A trigger per shard; shard 0 keeps the name it had before shards existed, and also
    // carries the tick messages (every instance polls it).
    ...runtime.workers.map((worker, shard): Registration => {
      const work = createWorkerHandler(worker);
      return {
        kind: 'queue',
        name: shard === 0 ? 'baton-worker' : `baton-worker-s${shard}`,
        queueName: runtime.resources.shards[shard]!.work,
        connection: 'AzureWebJobsStorage',
        handler:
          shard === 0
            ? (entry: unknown, context: InvocationContext) => {
                const tickMessage = asTickMessage(entry);
                return tickMessage ? onTick(tickMessage, context) : work(entry, context);
              }
            : work,
      };
    }),
    ...api,
  ];
}

/** A tick message, or undefined for anything else (the worker judges that). */
export function asTickMessage(entry: unknown): TickMessage | undefined {
  const body = parseBody(entry);
  if (!body.ok) return undefined;
  const tick = tickMessageSchema.safeParse(body.value);
  return tick.success ? tick.data : undefined;
}
