import { batonRegistrations } from '../app/registrations';
import { createBatonRuntime } from '../app/runtime';
import type { HostQueueConfig } from '../app/host-config';
import type { JobDefinition } from '../jobs/job-definition';
import { AzureQueue } from '../queue/azure-queue';
import { createQueueServiceClient } from '../storage/client-factory';
import { requestRun } from '../hub/requests';
import { readRunDetails } from '../hub/status';
import { readFailures } from '../hub/failures-manifest';
import type { FailureEntry } from '../hub/fold';
import { isTerminal, type RunRecord, type RunState } from '../hub/run-record';
import type { Env } from '../storage/setting';
import { startAzurite, type RunningAzurite } from './azurite';
import { LocalHost } from './local-host';

export interface RunJobOnceOptions {
  /**
   * Baton settings for the run (`BATON_*`, as app settings; `BATON_MAX_ATTEMPTS`, default 5, is
   * also how often the local host delivers a message). Storage and the hub are the runner's
   * own: an embedded Azurite in memory, hub `test`.
   */
  env?: Record<string, string | undefined>;
  /** Run on this Azurite (from `startAzurite`) instead of starting one; it is left running. */
  azurite?: RunningAzurite;
  /** Rejects when the run has not ended this long after the start. Default 120,000 ms. */
  timeoutMs?: number;
  /** Stops waiting and shuts the runner down. */
  abortSignal?: AbortSignal;
}

export interface JobRunResult<O = unknown> {
  runId: string;
  /** `succeeded`, `failed` (more failures than the job tolerates, or its split or finalize failed), `timed-out`, `cancelled`. */
  state: RunState;
  /** The whole run record: counters, timestamps, the reason it failed. */
  record: RunRecord;
  /** The job's output (`aggregate.output` of the fold), as written; undefined when the run wrote none. */
  output: O | undefined;
  /** Every failed item with its reason and attempts, in item order. */
  failures: FailureEntry[];
}

/** How long the runner waits, once the run ended or was given up on, for invocations still running. */
const STOP_GRACE_MS = 5_000;

/** As a Functions app's host.json would have it for Baton (plain JSON messages, five attempts). */
const HOST: HostQueueConfig = {
  batchSize: 16,
  newBatchThreshold: 8,
  maxDequeueCount: 5,
  retryDelaySeconds: 0,
  messageEncoding: 'none',
  maxPollingIntervalMs: 500,
};

/**
 * Runs one occurrence of `job` end to end, in this process, as a one-instance Functions app
 * would: the coordinator timer and the queue workers on a local host, on an embedded Azurite.
 * The split, every item, the fold and `finalize` run for real through storage and queues, so
 * a unit test of a job sees what Azure would produce, failures and duplicates counted alike.
 *
 *     import { runJobOnce } from 'baton-functions/testing';
 *     const run = await runJobOnce(nightlyTotals);
 *     assert.deepEqual(run.output, { accounts: 3, total: 42 });
 *
 * Needs the `azurite` package (a peer dependency of this entry) unless `azurite` is given.
 */
export async function runJobOnce<Output>(
  // Any job, whatever its item, result and accumulator types: only its output's type is returned.
  job: JobDefinition<any, any, any, Output>,
  options: RunJobOnceOptions = {},
): Promise<JobRunResult<Output>> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const azurite = options.azurite ?? (await startAzurite());
  const env: Env = {
    BATON_MAX_ATTEMPTS: String(HOST.maxDequeueCount),
    ...options.env,
    AzureWebJobsStorage: azurite.connectionString,
    BATON_HUB: 'test',
    // Every second, as the local cluster: a run starts within a second of being asked for.
    BATON_COORDINATOR_SCHEDULE: '* * * * * *',
  };
  // The host delivers a message as often as the worker tries it (BATON_MAX_ATTEMPTS checks it).
  const host = { ...HOST, maxDequeueCount: Number(env.BATON_MAX_ATTEMPTS) };
  const quiet = { info: () => {}, warn: () => {}, debug: () => {} };
  const runtime = createBatonRuntime(env, {
    jobs: [job as JobDefinition],
    hostQueueConfig: host,
    identity: 'run-job-once',
    logger: quiet,
  });
  const queues = createQueueServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
  const local = new LocalHost({
    registrations: batonRegistrations(runtime).filter((r) => r.kind !== 'http'),
    queues: (name) => new AzureQueue(queues, name),
    hostConfig: host,
    visibilityTimeoutSeconds: 30,
    log: () => {},
  });
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.abortSignal ? AbortSignal.any([deadline, options.abortSignal]) : deadline;
  local.start();
  try {
    void runtime.ticks.wakeOnStart();
    const runId = await requestRun(runtime.reads.docs, job.name, { abortSignal: signal, wake: runtime.ticks.wake });
    for (;;) {
      const details = await readRunDetails(runtime.reads.docs, runId, { abortSignal: signal });
      if (details && isTerminal(details.record.state)) {
        const failures: FailureEntry[] = [];
        if (details.manifest) {
          for await (const entry of readFailures(runtime.reads.docs, details.manifest, { abortSignal: signal }))
            failures.push(entry);
        }
        return {
          runId,
          state: details.record.state,
          record: details.record,
          output: details.output?.output as Output | undefined,
          failures: failures.sort((a, b) => a.item - b.item),
        };
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      signal.throwIfAborted();
    }
  } catch (err) {
    if (!deadline.aborted) throw err;
    throw new Error(`runJobOnce: job ${job.name} did not end within ${timeoutMs} ms`, { cause: err });
  } finally {
    void runtime.shutdown();
    // An item still running (a test that gave up on a hung one) is left behind after a grace.
    let grace: NodeJS.Timeout | undefined;
    // Then the wake the released lease sends (storage retries for seconds if Azurite closes under it).
    const stopped = local.stop().then(() => runtime.ticks.settled());
    await Promise.race([stopped, new Promise((resolve) => (grace = setTimeout(resolve, STOP_GRACE_MS)))]);
    clearTimeout(grace);
    if (!options.azurite) await azurite.close();
  }
}
