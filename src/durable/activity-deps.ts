import { systemClock, type Clock } from '../clock/clock';
import type { DocumentStore } from '../fencing/document-store';
import type { JobDefinition } from '../jobs/job-definition';
import type { RunEndTelemetry } from '../telemetry/run-telemetry';

/** What the durable activities work with, injected so tests run them on Azurite or in memory. */
export interface DurableActivityDeps {
  jobs: ReadonlyMap<string, JobDefinition>;
  /** The hub's `<hub>-runs` container: the same documents the queue engine and the CLI use. */
  docs: DocumentStore;
  /**
   * For record timestamps, and for the hooks' time bounds when it is a whole `Clock`; default the
   * system clock.
   */
  clock?: Pick<Clock, 'date'> | Clock;
  /** Aborts storage calls and `split`/`process`/`finalize` (for example on host shutdown). */
  signal?: AbortSignal;
  log?: (level: 'info' | 'warn', message: string) => void;
  /** Told of each run the finalize activity ends, as the queue engine's leader tells it. */
  telemetry?: RunEndTelemetry;
}

export function nowOf(deps: DurableActivityDeps): Date {
  return deps.clock ? deps.clock.date() : new Date();
}

export function signalOf(deps: DurableActivityDeps): AbortSignal {
  return deps.signal ?? new AbortController().signal;
}

/** The clock that times the hooks' bounds: the injected one when it can set timers, else the system's. */
export function timersOf(deps: DurableActivityDeps): Clock {
  const clock = deps.clock;
  return clock && 'setTimeout' in clock ? clock : systemClock;
}
