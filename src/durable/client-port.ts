// Types only: the durable engine loads durable-functions when it runs (./durable-functions.ts).
import type * as df from 'durable-functions';

/** An orchestration instance as the starter needs to see it. */
export interface InstanceView {
  instanceId: string;
  name: string;
  runtimeStatus: df.OrchestrationRuntimeStatus;
  input?: unknown;
  /** A failed instance's error, a terminated one's reason, a completed one's result. */
  output?: unknown;
  customStatus?: unknown;
  createdTime?: Date;
}

/**
 * The slice of Durable's client the starter uses, so it can be tested without a host.
 * `startNew` answers `exists` when Durable refused the start because the instance id is taken
 * (another starter won the race): for the starter that is success, not an error.
 */
export interface DurableClientPort {
  getStatus(instanceId: string): Promise<InstanceView | undefined>;
  startNew(name: string, options: { instanceId: string; input: unknown }): Promise<'started' | 'exists'>;
  /** Instances not yet ended (pending, running, continued as new, suspended) whose id starts with `prefix`. */
  listRunning(prefix: string): Promise<InstanceView[]>;
  terminate(instanceId: string, reason: string): Promise<void>;
}

/**
 * Whether an instance in each status may still do work. Keyed by the values of durable-functions'
 * own enum, so a status a later version adds fails the type check here instead of being silently
 * misread.
 */
const OPEN: Record<`${df.OrchestrationRuntimeStatus}`, boolean> = {
  Pending: true,
  Running: true,
  ContinuedAsNew: true,
  Suspended: true,
  Completed: false,
  Failed: false,
  Terminated: false,
  Canceled: false,
};

/** Statuses of an instance that has not ended. */
export const OPEN_STATUSES: readonly df.OrchestrationRuntimeStatus[] = (
  Object.keys(OPEN) as df.OrchestrationRuntimeStatus[]
).filter((status) => OPEN[status]);

/**
 * Whether the instance may still do work. A status this code does not know (a newer extension's)
 * counts as open: the starter then leaves the run to its deadline rather than end it early.
 */
export function isOpenStatus(status: string): boolean {
  return OPEN[status as `${df.OrchestrationRuntimeStatus}`] ?? true;
}

type ClientLike = Pick<df.DurableClient, 'getStatus' | 'getStatusBy' | 'startNew' | 'terminate'>;

/**
 * The port over durable-functions 3.x's `DurableClient`:
 * - `getStatus` of an unknown instance: the client throws on the host's 404; that is `undefined` here.
 * - `startNew` on an existing instance id: by default the host replaces the instance (the
 *   client's documented behaviour); with host.json `overridableExistingInstanceStates:
 *   "NonRunningStates"` it refuses one that is still open, and the client rejects with a generic
 *   HTTP error. Rather than parse that message, a rejected start is `exists` when the instance
 *   is there now, and the error otherwise. (The starter checks `getStatus` first, so it never
 *   asks to replace an instance it can see.)
 * - `listRunning`: the 3.x client has no instance-id prefix filter, so it lists open instances
 *   (the host pages with continuation tokens) and filters here. Unlike `getStatus`, it hands
 *   back the host's JSON as it came, times as strings.
 * - `terminate`: the client puts the reason into the query string as it is, so a `&` or `#` in
 *   it would cut it short; it is encoded here.
 */
export function durableClientPort(client: ClientLike): DurableClientPort {
  const view = (s: df.DurableOrchestrationStatus): InstanceView => {
    const created = s.createdTime === undefined || s.createdTime === null ? undefined : new Date(s.createdTime);
    return {
      instanceId: s.instanceId,
      name: s.name,
      runtimeStatus: String(s.runtimeStatus) as df.OrchestrationRuntimeStatus,
      input: s.input,
      output: s.output,
      customStatus: s.customStatus,
      ...(created && !Number.isNaN(created.getTime()) ? { createdTime: created } : {}),
    };
  };
  const getStatus = async (instanceId: string): Promise<InstanceView | undefined> => {
    try {
      return view(await client.getStatus(instanceId, { showInput: true }));
    } catch (err) {
      if (err instanceof Error && /\b404\b/.test(err.message)) return undefined;
      throw err;
    }
  };
  return {
    getStatus,
    async startNew(name, options) {
      try {
        await client.startNew(name, { instanceId: options.instanceId, input: options.input });
        return 'started';
      } catch (err) {
        if ((await getStatus(options.instanceId).catch(() => undefined)) !== undefined) return 'exists';
        throw err;
      }
    },
    async listRunning(prefix) {
      // `showInput` is not in the 3.x filter's type, but the client forwards it: the inputs hold the run ids.
      const filter = { runtimeStatus: [...OPEN_STATUSES], showInput: true };
      const statuses = await client.getStatusBy(filter as df.OrchestrationFilter);
      return statuses.filter((s) => s.instanceId.startsWith(prefix)).map(view);
    },
    async terminate(instanceId, reason) {
      await client.terminate(instanceId, encodeURIComponent(reason));
    },
  };
}
