import type { RunTelemetry } from '../../src/telemetry/run-telemetry';
import type { RetentionPolicy } from '../../src/hub/retention';
import { HubQueues, type QueueShard } from '../../src/engine/queue-shards';
import { LeaseLostError } from '../../src/errors';
import { systemClock, type Clock } from '../../src/clock/clock';
import type { DocumentStore } from '../../src/fencing/document-store';
import type { JobDefinition } from '../../src/jobs/job-definition';
import { Coordinator, type LeadSummary } from '../../src/engine/coordinator';
import type { EngineTuning } from '../../src/engine/engine-context';
import { RunStateCache } from '../../src/engine/run-state-cache';
import { handleWorkMessage, type WorkerDeps } from '../../src/engine/worker';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { LeaderElector } from '../../src/lease/leader-elector';
import type { LeaseStore } from '../../src/lease/lease-store';
import { pumpQueue } from '../../src/local/queue-pump';
import type { QueueDirectory, QueuePort } from '../../src/queue/queue-port';
import { runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import { describePatience, patience } from './slowdown';
import type { ItemStartGate } from '../../src/engine/item-start-gate';

export interface EnginePorts {
  docs: DocumentStore;
  work: QueuePort;
  results: QueuePort;
  poison: QueuePort;
  leases: () => LeaseStore;
}

/** Shards of a hub in a queue directory, in place of the ports' single work/results/poison. */
export interface ShardedQueues {
  hub: string;
  shards: number;
  directory: QueueDirectory;
}

export const quietLog = { info: () => undefined, warn: () => undefined };

/**
 * An engine on whatever ports it is given (in-memory or Azurite): coordinators that elect a
 * leader, and worker pumps that behave like the Functions queue trigger.
 */
export function buildEngine(
  ports: EnginePorts,
  jobs: JobDefinition[],
  options: {
    tuning?: Partial<EngineTuning>;
    clock?: Clock;
    workerVisibilitySeconds?: number;
    sharded?: ShardedQueues;
    retention?: RetentionPolicy;
    telemetry?: RunTelemetry;
    itemGate?: ItemStartGate;
  } = {},
) {
  const clock = options.clock ?? systemClock;
  const jobMap = new Map(jobs.map((j) => [j.name, j]));
  const tuning: Partial<EngineTuning> = { idlePollMs: 20, maxAttempts: 3, ...options.tuning };
  const sharded = options.sharded;
  const queues = sharded
    ? HubQueues.forHub(sharded.hub, sharded.shards, sharded.directory, clock)
    : HubQueues.of({ work: ports.work, results: ports.results, poison: ports.poison });
  const coordinator = new Coordinator({
    jobs: jobMap,
    docs: ports.docs,
    queues,
    clock,
    log: quietLog,
    tuning,
    ...(options.retention ? { retention: options.retention } : {}),
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
    ...(options.itemGate ? { itemGate: options.itemGate } : {}),
  });
  const records = new FencedDocuments<RunRecord>(ports.docs, { parse: (v) => runRecordSchema.parse(v) });
  const workerDeps = (shard: QueueShard): WorkerDeps => ({
    jobs: jobMap,
    docs: ports.docs,
    work: shard.work,
    results: shard.results,
    poison: shard.poison,
    runs: new RunStateCache(ports.docs, { clock, ttlMs: 200 }),
    maxAttempts: tuning.maxAttempts ?? 3,
  });

  return {
    coordinator,
    records,
    async readRun(runId: string): Promise<RunRecord | undefined> {
      return (await records.read(runKeys.record(runId)))?.value;
    },
    async readJson<T>(key: string): Promise<T | undefined> {
      const stored = await ports.docs.read(key);
      return stored ? (JSON.parse(stored.body) as T) : undefined;
    },
    queues,
    /**
     * Starts `count` worker instances, each with a queue trigger per shard (or on the shards
     * listed in `only`); returns a function that stops them and waits.
     */
    startWorkers(count: number, wrap?: (text: string) => string | undefined, only?: readonly number[]): () => Promise<void> {
      const controller = new AbortController();
      const shards = queues.active.filter((_, k) => !only || only.includes(k));
      const pumps = Array.from({ length: count }).flatMap(() =>
        shards.map((shard) => pump(shard, workerDeps(shard), controller.signal)),
      );
      return async () => {
        controller.abort();
        await Promise.all(pumps);
      };

      function pump(shard: QueueShard, deps: WorkerDeps, signal: AbortSignal): Promise<void> {
        return pumpQueue(
          shard.work,
          shard.poison,
          async (message) => {
            const text = wrap ? wrap(message.text) : message.text;
            if (text === undefined) return;
            const outcome = await handleWorkMessage(text, { dequeueCount: message.dequeueCount }, deps);
            if (outcome.kind === 'retry') throw new Error(outcome.firstError);
          },
          signal,
          {
            visibilityTimeoutSeconds: options.workerVisibilitySeconds ?? 30,
            retryDelaySeconds: 0,
            maxDequeueCount: tuning.maxAttempts ?? 3,
            maxPollingIntervalMs: 20,
          },
        );
      }
    },
    /** A candidate that leads through a real elector on the given lease store. */
    elector(identity: string): LeaderElector {
      return new LeaderElector({ store: ports.leases(), identity, acquireRetryMs: 200 });
    },
    /**
     * Leads (as `identity`) until the run is terminal or `timeoutMs` passes. The default is a
     * hang guard, not a speed check: in memory a run ends in about a second even on a busy machine.
     */
    async leadUntil(identity: string, done: () => Promise<boolean>, timeoutMs = 60_000): Promise<LeadSummary[]> {
      const elector = this.elector(identity);
      const summaries: LeadSummary[] = [];
      const started = Date.now();
      const capMs = patience(timeoutMs);
      const lost: string[] = [];
      // The check reads storage too: a connection a starved Azurite dropped is asked again.
      const isDone = () => done().catch((err: unknown) => (transportFailure(err) ? false : Promise.reject(err)));
      while (!(await isDone())) {
        if (Date.now() - started > capMs) {
          throw new Error(
            `not done after ${describePatience(timeoutMs)}${lost.length ? ` (terms lost: ${lost.join(', ')})` : ''}`,
          );
        }
        try {
          const result = await elector.runIfLeader((l) => coordinator.lead(l, { termMs: 5000, returnWhenIdle: true }));
          if (result.led) summaries.push(result.value);
        } catch (err) {
          lost.push(lostTick(err));
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      return summaries;
    },
  };
}

export type Engine = ReturnType<typeof buildEngine>;

/**
 * Why a tick ended without its term, for a loop that ticks again as a real instance's timer
 * would; any other error is rethrown. A starved machine can stall a term past its renew deadline
 * (the watchdog's job) or leave the acquire unanswered within its deadline; in production that
 * timer invocation fails, the next one leads with a new epoch, and the run must still end exact.
 */
export function lostTick(err: unknown): string {
  if (err instanceof LeaseLostError) return err.reason;
  if ((err as Error | undefined)?.name === 'TimeoutError') return 'acquire timed out';
  if (transportFailure(err)) return 'connection dropped';
  throw err;
}

/**
 * A storage call that got no HTTP answer at all (socket hang up, ECONNRESET): an in-process
 * Azurite starved for seconds drops idle keep-alive connections under its clients. Any answer
 * with a status, a refusal included, is not one of these.
 */
export function transportFailure(err: unknown): boolean {
  // By name: the blob and queue SDKs may each carry their own copy of the class.
  const rest = err as { name?: string; statusCode?: number } | undefined;
  return rest?.name === 'RestError' && rest.statusCode === undefined;
}
