import type { EngineLogger } from '../engine/engine-context';
import type { JobDefinition } from '../jobs/job-definition';
import type { LeaderLogger } from '../lease/elector-options';
import type { LeaderEvent } from '../lease/leader-events';
import type { InstanceStop } from '../telemetry/baton-telemetry';
import type { BatonRuntime } from './runtime';
import type { TelemetrySetupOptions } from './telemetry-setup';

/**
 * What a local host (`baton start`) tells `registerBaton` when it loads an app, and how it learns
 * what was made. Under the Functions host there is none, and `registerBaton` uses its options and
 * defaults. The local host runs the app's own entry module, so the app calls `registerBaton` as it
 * would in Azure; this is the one place where the host's process gives it more: a lease identity
 * the cluster can name, lines and leader events on the instance's event stream, and the host's
 * choice of host.json.
 *
 * It lives on `globalThis` under a registered symbol, not in a module variable: an app may load
 * its own copy of this package (another version, or a link), and both must see the same host.
 */
export interface LocalHostBridge {
  /** The lease holder's name for this process. */
  readonly identity?: string;
  readonly logger?: LeaderLogger & EngineLogger;
  readonly onLeaderEvent?: (event: LeaderEvent) => void;
  /** The host.json the host runs with; it wins over the app's `hostJson` option. */
  readonly hostJson?: string;
  readonly telemetry?: TelemetrySetupOptions;
  /**
   * The host only inspects the app (to list its jobs and check its settings before anything
   * starts): no wake tick is sent.
   */
  readonly inspectOnly?: boolean;
  /**
   * Whether the whole local cluster is stopping (Ctrl-C), not this instance alone: there is then
   * no successor to hand the lease to, and the shutdown hook releases it at once.
   */
  readonly stoppingWithCluster?: () => boolean;
  /** Told of this instance's stop once its lease is back (or given up on), before telemetry flushes. */
  readonly onStopped?: (stop: InstanceStop) => void;
  /** Told what `registerBaton` made, once per call. */
  attach(made: { runtime: BatonRuntime; jobs: readonly JobDefinition[] }): void;
}

const KEY = Symbol.for('baton-functions.local-host');

type WithBridge = { [KEY]?: LocalHostBridge };

/** The local host's bridge, when this process runs under one. */
export function localHostBridge(): LocalHostBridge | undefined {
  return (globalThis as WithBridge)[KEY];
}

/** Installs (or with `undefined` removes) the bridge; for local hosts only. */
export function setLocalHostBridge(bridge: LocalHostBridge | undefined): void {
  if (bridge) (globalThis as WithBridge)[KEY] = bridge;
  else delete (globalThis as WithBridge)[KEY];
}
