import type { InvocationContext, Timer } from '@azure/functions';
import { createCoordinatorTick } from './coordinator-tick';
import type { BatonRuntime } from './runtime';
import { createWorkerHandler } from './worker-handler';

export interface TimerRegistration {
  kind: 'timer';
  name: string;
  schedule: string;
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

export type Registration = TimerRegistration | QueueRegistration;

/**
 * The one list of functions Baton registers. `functions/` hands it to the Functions host; the
 * local host runs the same list.
 */
export function batonRegistrations(runtime: BatonRuntime): Registration[] {
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
