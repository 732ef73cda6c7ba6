import type { InvocationContext, Timer } from '@azure/functions';
import type { OrchestrationHandler } from 'durable-functions';
import { createCoordinatorTick } from './coordinator-tick';
import { durableRegistrations } from './durable-registrations';
import type { BatonRuntime } from './runtime';
import { createWorkerHandler } from './worker-handler';

export interface TimerRegistration {
  kind: 'timer';
  name: string;
  schedule: string;
  /** The timer also gets a Durable Functions client (the durable engine's starter). */
  durableClient?: boolean;
  handler: (timer: Timer, context: InvocationContext) => Promise<unknown>;
}

export interface QueueRegistration {
  kind: 'queue';
  name: string;
  queueName: string;
  /** The app setting (prefix) of the storage connection, as the Functions host names it. */
  connection: string;
  handler: (queueEntry: unknown, context: InvocationContext) => Promise<unknown>;
}

export interface OrchestrationRegistration {
  kind: 'orchestration';
  name: string;
  handler: OrchestrationHandler;
}

export interface ActivityRegistration {
  kind: 'activity';
  name: string;
  handler: (input: unknown, context: InvocationContext) => Promise<unknown>;
}

export type Registration = TimerRegistration | QueueRegistration | OrchestrationRegistration | ActivityRegistration;

/**
 * The one list of functions Baton registers. `functions/` hands it to the Functions host; the
 * local host runs the same list.
 */
export function batonRegistrations(runtime: BatonRuntime): Registration[] {
  if (runtime.settings.engine === 'durable') return durableRegistrations(runtime);
  const termMs = runtime.settings.termSeconds * 1000;
  return [
    {
      kind: 'timer',
      name: 'baton-coordinator',
      schedule: runtime.settings.coordinatorSchedule,
      handler: createCoordinatorTick(runtime, (leadership) =>
        runtime.coordinator.lead(leadership, { termMs }).then(() => undefined),
      ),
    },
    {
      kind: 'queue',
      name: 'baton-worker',
      queueName: runtime.resources.workQueue,
      connection: 'AzureWebJobsStorage',
      handler: createWorkerHandler(runtime.worker),
    },
  ];
}
