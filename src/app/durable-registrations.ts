import type { InvocationContext } from '@azure/functions';
import {
  createChunkOrchestrator,
  createFinalizeActivity,
  createProcessActivity,
  createRunOrchestrator,
  createSplitActivity,
  DURABLE_NAMES,
  durableClientPort,
  durableFunctions,
  startDueRuns,
} from '../durable';
import { RetentionPace, retentionSlice } from '../hub/retention';
import { redactSecrets } from '../redact';
import { withEpochRaises } from '../lease/epoch-refusal';
import { createCoordinatorTick } from './coordinator-tick';
import type { Registration } from './registration-types';
import type { BatonRuntime } from './runtime';
import { messageOf } from '../errors';

/**
 * The durable engine's functions: the coordinator timer still elects a leader through the lease,
 * and the leader starts due occurrences as orchestrations (instance id from the run id, so one
 * occurrence is one orchestration even without the lease); orchestrations and activities do the
 * rest. No queue trigger: the Durable extension moves the work.
 */
export function durableRegistrations(runtime: BatonRuntime): Registration[] {
  const { jobs } = runtime;
  const { docs } = runtime.reads;
  const retention = new RetentionPace(runtime.clock);
  const log = runtime.log;
  const activityDeps = {
    jobs,
    docs,
    clock: runtime.clock,
    signal: runtime.shutdownSignal,
    log: (level: 'info' | 'warn', m: string) => log[level](m),
    telemetry: runtime.telemetry,
  };
  return [
    {
      kind: 'timer',
      name: 'baton-coordinator',
      schedule: runtime.settings.coordinatorSchedule,
      durableClient: true,
      handler: createCoordinatorTick(runtime, async (leadership, context) => {
        // A deleted lease record restarts the epoch below the job states': raise it and start again.
        const summary = await withEpochRaises(leadership, (epoch) =>
          startDueRuns({
            jobs: [...jobs.values()],
            client: durableClientPort(durableFunctions().getClient(context as InvocationContext)),
            docs,
            epoch,
            // Storage's time: the lease calls that made this instance leader have set the clock.
            now: runtime.clock.date(),
            signal: leadership.signal,
            log: (level, message) => log[level](message),
            telemetry: runtime.telemetry,
          }),
        );
        if (summary.started.length) log.info(`started ${summary.started.length} orchestration(s): ${summary.started.join(', ')}`);
        // Retention, a slice a tick: orchestrations do the runs' work, so the leader is idle here.
        if (!retention.due) return;
        retention.started();
        try {
          const slice = await withEpochRaises(leadership, (epoch) =>
            retentionSlice(docs, {
              epoch,
              now: runtime.clock.date(),
              policy: runtime.settings.retention,
              abortSignal: leadership.signal,
            }),
          );
          retention.ran(slice);
          retention.report(slice, log, () => runtime.telemetry.retentionPassedBy());
        } catch (err) {
          if (leadership.signal.aborted) throw err;
          log.warn(`retention slice failed, will retry: ${redactSecrets(messageOf(err))}`);
        }
      }),
    },
    { kind: 'orchestration', name: DURABLE_NAMES.orchestrator, handler: createRunOrchestrator(jobs) },
    { kind: 'orchestration', name: DURABLE_NAMES.chunk, handler: createChunkOrchestrator(jobs) },
    { kind: 'activity', name: DURABLE_NAMES.split, handler: createSplitActivity(activityDeps) },
    { kind: 'activity', name: DURABLE_NAMES.process, handler: createProcessActivity(activityDeps) },
    { kind: 'activity', name: DURABLE_NAMES.finalize, handler: createFinalizeActivity(activityDeps) },
  ];
}
