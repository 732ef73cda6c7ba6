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
    // A trigger per shard; shard 0 keeps the name it had before shards existed.
    ...runtime.workers.map((worker, shard): Registration => ({
      kind: 'queue',
      name: shard === 0 ? 'baton-worker' : `baton-worker-s${shard}`,
      queueName: runtime.resources.shards[shard]!.work,
      connection: 'AzureWebJobsStorage',
      handler: createWorkerHandler(worker),
    })),
  ];
}
