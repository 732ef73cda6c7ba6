import type { InvocationContext, Timer } from '@azure/functions';
import { createCoordinatorTick, type LeaderWork } from './coordinator-tick';
import type { BatonRuntime } from './runtime';

/** Every ten seconds, in the 6-field NCRONTAB the Functions timer trigger uses. */
export const COORDINATOR_SCHEDULE = '*/10 * * * * *';

export interface TimerRegistration {
  kind: 'timer';
  name: string;
  schedule: string;
  handler: (timer: Timer, context: InvocationContext) => Promise<unknown>;
}

export type Registration = TimerRegistration;

/**
 * The one list of functions Baton registers. `functions/` hands it to the Functions host; a
 * local host can run the same list.
 */
export function batonRegistrations(runtime: BatonRuntime, work: LeaderWork): Registration[] {
  return [
    {
      kind: 'timer',
      name: 'baton-coordinator',
      schedule: COORDINATOR_SCHEDULE,
      handler: createCoordinatorTick(runtime, work),
    },
  ];
}
