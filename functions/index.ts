import { app } from '@azure/functions';
import { announceLeadership } from '../src/app/coordinator-tick';
import { batonRegistrations } from '../src/app/registrations';
import { createBatonRuntime } from '../src/app/runtime';

// Settings are checked here, at start-up: a bad one stops the app with one line naming it.
// Lease events go to the console, which the Functions worker forwards to the host's logs.
const runtime = createBatonRuntime(process.env, { logger: console });

for (const registration of batonRegistrations(runtime, announceLeadership)) {
  // useMonitor off: past-due catch-up is decided by the run records, not the host's monitor.
  app.timer(registration.name, { schedule: registration.schedule, handler: registration.handler, useMonitor: false });
}
