import type { DocumentStore } from '../fencing/document-store';
import { BlobDocumentStore } from '../fencing/blob-document-store';
import type { LeaseReader } from '../lease/lease-store';
import { BlobLeaseStore } from '../lease/blob-lease-store';
import { hubResources } from '../hub/resources';
import { checkRunId } from '../hub/run-id';
import { requestCancel, requestRun, type IfActive } from '../hub/requests';
import { readHubStatus, readRunDetails, type HubStatus, type RunDetails } from '../hub/status';
import { listRuns, type RunsPage } from '../hub/run-index';
import { readFailures } from '../hub/failures-manifest';
import type { FailureEntry } from '../hub/fold';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../storage/client-factory';
import { AzureQueue } from '../queue/azure-queue';
import { wakeHub } from '../hub/wake';
import { StorageTimeClock } from '../clock/storage-time-clock';
import { systemClock } from '../clock/clock';
import { parseStorageSettings } from '../storage/connection';
import { readSetting } from '../storage/setting';
import { parseBatonSettings, parseHubName } from './settings';

export interface BatonClientOptions {
  /**
   * Where the storage connection comes from: `AzureWebJobsStorage`, or its identity-based form
   * (`AzureWebJobsStorage__accountName` and friends), as the app itself reads it. Default
   * `process.env`, so code inside the Functions app needs no options.
   */
  env?: Record<string, string | undefined>;
  /** The hub to read and steer. Default `BATON_HUB` from `env`, then `baton`; its lease is in `BATON_LEASE_CONTAINER`'s container. */
  hub?: string;
}

/** The options every call takes. */
export interface ClientCallOptions {
  abortSignal?: AbortSignal;
}

/**
 * Reads and steers one hub from the app's own code (an HTTP function of its own, a script): what
 * `baton status`, `runs`, `show`, `trigger` and `cancel` do, as calls. It talks to storage only;
 * a trigger or a cancel is a request the leader applies at its next tick (a trigger also wakes
 * a leader that rests between occurrences, with a message on the hub's work queue).
 *
 *     const baton = new BatonClient();
 *     const runId = await baton.trigger('nightly-totals');
 *     const run = await baton.run(runId);
 *
 * Settings are checked when the client is made: a bad one throws `InvalidSettingError` naming it.
 */
export class BatonClient {
  readonly hub: string;
  private readonly docs: DocumentStore;
  /** Storage's time, from its answers: what requests are named by. */
  private readonly clock = new StorageTimeClock(systemClock);
  private readonly lease: LeaseReader;
  /** Where a trigger wakes a resting leader (`wakeHub`). */
  private readonly wakeQueue: AzureQueue;

  constructor(options: BatonClientOptions = {}) {
    const env = options.env ?? process.env;
    // Only the settings that name the hub's blobs, as the CLI reads them: an unrelated bad setting
    // of the app's cannot stop a client.
    const { hub, leaseContainer } = parseBatonSettings({
      BATON_HUB: options.hub !== undefined ? parseHubName(options.hub, 'hub') : readSetting(env, 'BATON_HUB'),
      BATON_LEASE_CONTAINER: readSetting(env, 'BATON_LEASE_CONTAINER'),
    });
    this.hub = hub;
    const storage = parseStorageSettings(env);
    const blobs = createBlobServiceClient(storage, { storageTime: this.clock });
    this.docs = new BlobDocumentStore(blobs.getContainerClient(hubResources(hub).container));
    this.wakeQueue = new AzureQueue(createQueueServiceClient(storage), hubResources(hub).workQueue);
    const leaseBlobs = createBlobServiceClient(storage, { retryOptions: LEASE_RETRY_OPTIONS });
    this.lease = new BlobLeaseStore(leaseBlobs, hub, { containerName: leaseContainer });
  }

  /** Who leads, each job's next and last occurrences, and the runs open now. */
  status(options: ClientCallOptions = {}): Promise<HubStatus> {
    return readHubStatus(this.docs, this.lease, options);
  }

  /**
   * A page of runs, newest first: of one job with `job`, at most `limit` (default 20, at most
   * 1000), older than the page whose `next` is `after`. It costs one listing and one read per
   * run, however many runs the hub holds.
   */
  runs(options: ClientCallOptions & { job?: string; limit?: number; after?: string } = {}): Promise<RunsPage> {
    return listRuns(this.docs, options);
  }

  /** One run's record, output and failures manifest; undefined for a run the hub does not have. */
  async run(runId: string, options: ClientCallOptions = {}): Promise<RunDetails | undefined> {
    return readRunDetails(this.docs, checkRunId(runId), options);
  }

  /** Every failed item of a run with its reason, in bounded memory; none while it has no manifest. */
  async *failures(runId: string, options: ClientCallOptions = {}): AsyncGenerator<FailureEntry> {
    const details = await this.run(runId, options);
    if (details?.manifest) yield* readFailures(this.docs, details.manifest, options);
  }

  /**
   * Asks the leader for a run of `job` now; resolves with the id the run will have. With `key`,
   * every trigger of the job with the same key names the same run, and the leader starts it once.
   * `ifActive` says what happens while a run of the job is open: `start` another (the default),
   * `skip` (resolve with the open run's id and ask for nothing), or `wait` until it has ended.
   */
  trigger(job: string, options: ClientCallOptions & { key?: string; ifActive?: IfActive } = {}): Promise<string> {
    const wake = (call: { abortSignal?: AbortSignal }) =>
      // The request stands either way: a lost wake only starts the run when the rest ends (10 minutes at most).
      wakeHub(this.wakeQueue, call).catch(() => undefined);
    return requestRun(this.docs, job, { ...options, clock: this.clock, wake });
  }

  /** Asks the leader to cancel a run; its workers then drop its messages. */
  cancel(runId: string, options: ClientCallOptions & { reason?: string } = {}): Promise<void> {
    return requestCancel(this.docs, runId, options.reason ?? 'cancelled on request', { ...options, clock: this.clock });
  }
}
