import { app } from '@azure/functions';
import * as df from 'durable-functions';
import { findHostJson, readHostQueueConfig } from '../src/app/host-config';
import { batonRegistrations } from '../src/app/registrations';
import { createBatonRuntime } from '../src/app/runtime';
import { setupTelemetry } from '../src/app/telemetry-setup';
import { createJobs } from './jobs';

// Before the runtime, which takes its meter and logger from what this sets up (Application Insights
// when APPLICATIONINSIGHTS_CONNECTION_STRING is set, else BATON_METRICS_EXPORTER).
setupTelemetry(process.env, { log: (message) => console.info(message) });

// Settings and jobs are checked here, at start-up: a bad one stops the app with one line naming it.
// Lease and engine events go to the console, which the Functions worker forwards to the host's logs.
const runtime = createBatonRuntime(process.env, {
  jobs: createJobs(process.env),
  // The host logs a stderr line as a Warning only if it says "warn"; Baton's warnings all do.
  logger: { info: console.info, warn: (message: string) => console.warn(`warning: ${message}`), debug: console.debug },
  hostQueueConfig: readHostQueueConfig(findHostJson(__dirname)),
});

for (const registration of batonRegistrations(runtime)) {
  switch (registration.kind) {
    case 'timer':
      // useMonitor off and no runOnStartup: catch-up is decided by the job schedules, not the host.
      app.timer(registration.name, {
        schedule: registration.schedule,
        handler: registration.handler,
        useMonitor: false,
        runOnStartup: false,
        ...(registration.durableClient ? { extraInputs: [df.input.durableClient()] } : {}),
      });
      break;
    case 'queue':
      app.storageQueue(registration.name, {
        queueName: registration.queueName,
        connection: registration.connection,
        handler: registration.handler,
      });
      break;
    case 'orchestration':
      df.app.orchestration(registration.name, registration.handler);
      break;
    case 'activity':
      df.app.activity(registration.name, { handler: registration.handler });
      break;
    case 'http':
      app.http(registration.name, {
        route: registration.route,
        methods: registration.methods,
        authLevel: registration.authLevel,
        handler: registration.handler,
      });
      break;
  }
}

// One tick any instance may take: leadership starts even if the timer never fires on this host.
void runtime.ticks.wakeOnStart();
