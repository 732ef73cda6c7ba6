import { createCoordinatorTick } from './coordinator-tick';
import type { Registration } from './registration-types';
import { durableRegistrations } from './durable-registrations';
import type { BatonRuntime } from './runtime';
import { createWorkerHandler } from './worker-handler';

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
