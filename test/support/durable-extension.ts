import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { afterEach } from 'vitest';
import { parseBatonSettings } from '../../src/app/settings';
import { durableClientPort, type DurableClientPort } from '../../src/durable';

const Status = df.OrchestrationRuntimeStatus;
type Status = df.OrchestrationRuntimeStatus;

/**
 * An instance as the extension's HTTP API returns it: the real client's `DurableOrchestrationStatus`
 * with its times as the JSON strings they travel as. Typed from the client's own class and enum,
 * so this cannot drift from what the client reads.
 */
export type StoredStatus = Omit<df.DurableOrchestrationStatus, 'createdTime' | 'lastUpdatedTime' | 'history'> & {
  createdTime: string;
  lastUpdatedTime: string;
};

/**
 * The statuses the extension counts as running. `startNew` on an existing instance id follows
 * host.json `overridableExistingInstanceStates` (DurableTask's dedupe statuses): with
 * `NonRunningStates` it is refused while the instance is in one of these and replaces it once it
 * has ended; with `AnyState` (the default) it always replaces. `terminate` ends one of these and
 * answers 410 Gone for the others. Keyed by the client's enum, so a status added there fails the
 * type check until it is placed here.
 */
const RUNNING: Record<Status, boolean> = {
  [Status.Pending]: true,
  [Status.Running]: true,
  [Status.ContinuedAsNew]: true,
  [Status.Suspended]: true,
  [Status.Completed]: false,
  [Status.Failed]: false,
  [Status.Terminated]: false,
  [Status.Canceled]: false,
};

/** What the host's client binding hands an out-of-process function: the extension's RPC endpoint. */
function clientData(rpcBaseUrl: string, taskHubName: string) {
  return {
    taskHubName,
    creationUrls: {},
    managementUrls: {},
    baseUrl: 'http://localhost:7071/runtime/webhooks/durabletask',
    requiredQueryStringParameters: '',
    rpcBaseUrl,
  };
}

/**
 * The host resolves `%NAME%` in host.json from the app settings (host.json names the task hub
 * `%BATON_HUB%`); here the app settings are the process's, and BATON_HUB falls back to Baton's
 * default hub as the deployment's settings would.
 */
function resolveAppSettings(value: string): string {
  return value.replace(/%([^%]+)%/g, (_, name: string) => {
    const setting = process.env[name]?.trim();
    if (setting) return setting;
    if (name === 'BATON_HUB') return parseBatonSettings({}).hub;
    throw new Error(`host.json refers to app setting ${name}, which is not set`);
  });
}

function hostDurableTask(): { hubName: string; overridable: 'AnyState' | 'NonRunningStates' } {
  const host = JSON.parse(
    readFileSync(resolve(dirname(fileURLToPath(import.meta.url)), '../../functions/host.json'), 'utf8'),
  ) as {
    extensions?: { durableTask?: { hubName?: string; overridableExistingInstanceStates?: string } };
  };
  const durableTask = host.extensions?.durableTask ?? {};
  return {
    hubName: resolveAppSettings(durableTask.hubName ?? 'TestHubName'),
    overridable: durableTask.overridableExistingInstanceStates === 'NonRunningStates' ? 'NonRunningStates' : 'AnyState',
  };
}

export interface FakeExtensionOptions {
  /** Instances per page of a status query; the client follows `x-ms-continuation-token`. Default 100. */
  pageSize?: number;
  /** The time new instances are created at. Default the system clock. */
  now?: () => Date;
}

type Operation = 'getStatus' | 'list' | 'start' | 'terminate';

/**
 * The Durable extension's instance store behind its HTTP API, as durable-functions 3.x's
 * `DurableClient` calls it (`rpcBaseUrl`): `GET instances/<id>`, `GET instances/?runtimeStatus=…`
 * with continuation tokens, `POST orchestrators/<name>/<id>`, `POST instances/<id>/terminate`.
 * The client the tests use is the real one, obtained through `df.getClient` from an
 * `InvocationContext` as the app obtains it, so its URLs, its 404 handling, its status objects
 * and the port over it are all exercised. Start dedupe follows the repository's host.json.
 */
export class FakeDurableExtension {
  readonly instances = new Map<string, StoredStatus>();
  readonly starts: Array<{ name: string; instanceId: string; input: unknown }> = [];
  readonly terminated: Array<{ instanceId: string; reason: string }> = [];
  /** Every request, as `METHOD path`, in order. */
  readonly requests: string[] = [];
  /**
   * When set, `GET instances/<id>` waits until this many are waiting, then lets them all go and
   * clears itself: two starters both look before either starts.
   */
  barrier?: { size: number; waiting: Array<() => void> };
  private readonly failures: Array<{ operation: Operation; instanceId?: string; message: string }> = [];
  private readonly host = hostDurableTask();
  private readonly pageSize: number;
  private readonly now: () => Date;

  private constructor(
    private readonly server: Server,
    options: FakeExtensionOptions,
  ) {
    this.pageSize = options.pageSize ?? 100;
    this.now = options.now ?? (() => new Date());
  }

  static async start(options: FakeExtensionOptions = {}): Promise<FakeDurableExtension> {
    let extension: FakeDurableExtension | undefined;
    const server = createServer((req, res) => {
      extension!.handle(req, res).catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(String(err)));
      });
    });
    extension = new FakeDurableExtension(server, options);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return extension;
  }

  get rpcBaseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/durabletask/`;
  }

  /** The real durable-functions client, as `df.getClient` builds it for the coordinator timer. */
  client(): df.DurableClient {
    const input = df.input.durableClient();
    const context = new InvocationContext({
      invocationId: 'test',
      functionName: 'baton-coordinator',
      options: { trigger: { type: 'timerTrigger', name: 'timer' }, extraInputs: [input], extraOutputs: [] },
    });
    context.extraInputs.set(input, clientData(this.rpcBaseUrl, this.host.hubName));
    return df.getClient(context);
  }

  /** The starter's port over the real client. */
  port(): DurableClientPort {
    return durableClientPort(this.client());
  }

  /** Puts an instance in the store, as if it had got there by itself. */
  add(
    instanceId: string,
    name: string,
    runtimeStatus: Status,
    input?: unknown,
    extra: { output?: unknown; customStatus?: unknown; createdTime?: Date } = {},
  ): StoredStatus {
    const at = (extra.createdTime ?? this.now()).toISOString();
    const status: StoredStatus = {
      name,
      instanceId,
      createdTime: at,
      lastUpdatedTime: at,
      input: input ?? null,
      output: extra.output ?? null,
      runtimeStatus,
      customStatus: extra.customStatus ?? null,
    };
    this.instances.set(instanceId, status);
    return status;
  }

  /** Moves an instance on, as the extension would when it runs, fails or completes. */
  set(instanceId: string, runtimeStatus: Status, fields: { output?: unknown; customStatus?: unknown } = {}): void {
    const status = this.instances.get(instanceId);
    if (!status) throw new Error(`no instance ${instanceId}`);
    this.instances.set(instanceId, { ...status, ...fields, runtimeStatus, lastUpdatedTime: this.now().toISOString() });
  }

  /** The next `operation` (on `instanceId`, if given) answers HTTP 500 with `message`. */
  failNext(operation: Operation, message: string, instanceId?: string): void {
    this.failures.push({ operation, instanceId, message });
  }

  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    return closed;
  }

  private injected(operation: Operation, instanceId?: string): string | undefined {
    const at = this.failures.findIndex(
      (f) => f.operation === operation && (f.instanceId === undefined || f.instanceId === instanceId),
    );
    if (at < 0) return undefined;
    return this.failures.splice(at, 1)[0]!.message;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/^\/durabletask\//, '');
    const body = await new Promise<string>((resolve) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (text += chunk));
      req.on('end', () => resolve(text));
    });
    this.requests.push(`${req.method} ${path}`);
    const reply = (status: number, data?: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(data === undefined ? '' : JSON.stringify(data));
    };
    const fail = (message: string | undefined) => {
      if (message === undefined) return false;
      reply(500, { Message: message });
      return true;
    };
    const showInput = url.searchParams.get('showInput') === 'true';
    const shown = (s: StoredStatus): StoredStatus => (showInput ? s : { ...s, input: null });

    let match: RegExpMatchArray | null;
    if (req.method === 'GET' && path === 'instances/') {
      if (fail(this.injected('list'))) return;
      const wanted = url.searchParams.get('runtimeStatus')?.split(',');
      const from = url.searchParams.get('createdTimeFrom');
      const to = url.searchParams.get('createdTimeTo');
      const all = [...this.instances.values()].filter(
        (s) =>
          (!wanted || wanted.includes(s.runtimeStatus)) &&
          (!from || s.createdTime >= new Date(from).toISOString()) &&
          (!to || s.createdTime <= new Date(to).toISOString()),
      );
      const start = Number(req.headers['x-ms-continuation-token'] ?? 0);
      const page = all.slice(start, start + this.pageSize).map(shown);
      const next: Record<string, string> =
        start + this.pageSize < all.length ? { 'x-ms-continuation-token': String(start + this.pageSize) } : {};
      reply(200, page, next);
      return;
    }
    if (req.method === 'GET' && (match = path.match(/^instances\/([^/]+)$/))) {
      const instanceId = decodeURIComponent(match[1]!);
      const barrier = this.barrier;
      if (barrier) {
        await new Promise<void>((resolve) => {
          barrier.waiting.push(resolve);
          if (barrier.waiting.length < barrier.size) return;
          if (this.barrier === barrier) this.barrier = undefined;
          barrier.waiting.splice(0).forEach((go) => go());
        });
      }
      if (fail(this.injected('getStatus', instanceId))) return;
      const status = this.instances.get(instanceId);
      if (!status) reply(404);
      else reply(200, shown(status));
      return;
    }
    if (req.method === 'POST' && (match = path.match(/^orchestrators\/([^/]+)\/([^/]+)$/))) {
      const name = decodeURIComponent(match[1]!);
      const instanceId = decodeURIComponent(match[2]!);
      if (fail(this.injected('start', instanceId))) return;
      const existing = this.instances.get(instanceId);
      if (existing && this.host.overridable === 'NonRunningStates' && RUNNING[existing.runtimeStatus]) {
        reply(500, { Message: `An Orchestration instance with the status ${existing.runtimeStatus} already exists.` });
        return;
      }
      const input: unknown = body === '' ? null : JSON.parse(body);
      this.add(instanceId, name, Status.Pending, input);
      this.starts.push({ name, instanceId, input });
      reply(202, { id: instanceId });
      return;
    }
    if (req.method === 'POST' && (match = path.match(/^instances\/([^/]+)\/terminate$/))) {
      const instanceId = decodeURIComponent(match[1]!);
      if (fail(this.injected('terminate', instanceId))) return;
      const status = this.instances.get(instanceId);
      if (!status) {
        reply(404);
        return;
      }
      const reason = url.searchParams.get('reason') ?? '';
      this.terminated.push({ instanceId, reason });
      if (!RUNNING[status.runtimeStatus]) {
        reply(410); // already ended: nothing to terminate
        return;
      }
      this.set(instanceId, Status.Terminated, { output: reason });
      reply(202);
      return;
    }
    reply(404, { Message: `the fake extension has no route for ${req.method} ${path}` });
  }
}

/** A fresh fake extension per call, closed after the test. */
export function useFakeDurable(): (options?: FakeExtensionOptions) => Promise<FakeDurableExtension> {
  const open: FakeDurableExtension[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((e) => e.close()));
  });
  return async (options) => {
    const extension = await FakeDurableExtension.start(options);
    open.push(extension);
    return extension;
  };
}
