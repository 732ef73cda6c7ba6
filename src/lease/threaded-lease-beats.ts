import type { Worker } from 'node:worker_threads';
import { LeaseLostError } from '../errors';
import type { StorageRequestCounter } from '../storage/request-counter';
import type { StorageSettings } from '../storage/connection';
import { asLeaseLoss } from './blob-lease-store';
import type { BeatOptions, BeatRun, LeaseBeats } from './lease-beats';

/** Slots of a run's shared lock. */
const WRITING = 0;
const BEATING = 1;
const HALTED = 2;

/**
 * The thread's code. It is a string, not a module, so that it runs the same from the bundle, the
 * compiled sources and the tests' TypeScript; the SDKs are required by the paths the host
 * resolved, so the thread loads the app's own copies. It holds no state but its runs' timers.
 *
 * A beat and a holder write exclude each other through the run's shared lock: each side sets its
 * own slot first and then reads the other's (sequentially consistent atomics), so at most one of
 * them goes ahead.
 */
const THREAD_CODE = String.raw`
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { BlobServiceClient } = require(workerData.modules.blob);
const [WRITING, BEATING, HALTED] = [${WRITING}, ${BEATING}, ${HALTED}];
const clients = new Map();
function blobOf(target) {
  const { storage, containerName, blobName } = target;
  const key = JSON.stringify(storage);
  let service = clients.get(key);
  if (!service) {
    // One try: a beat that fails is simply missed, and the next one is due soon.
    const retryOptions = { maxTries: 1 };
    if (storage.kind === 'connectionString') {
      service = BlobServiceClient.fromConnectionString(storage.connectionString, { retryOptions });
    } else {
      const identity = require(workerData.modules.identity);
      const { clientId } = storage;
      const credential = storage.credential === 'managedidentity'
        ? new identity.ManagedIdentityCredential(clientId ? { clientId } : undefined)
        : new identity.DefaultAzureCredential(clientId ? { managedIdentityClientId: clientId } : undefined);
      service = new BlobServiceClient(storage.blobServiceUri, credential, { retryOptions });
    }
    clients.set(key, service);
  }
  return service.getContainerClient(containerName).getBlobClient(blobName);
}
const runs = new Map();
parentPort.on('message', (message) => {
  if (message.type === 'start') {
    const run = { ...message, lock: new Int32Array(message.lock), blob: blobOf(message.target), busy: false };
    runs.set(run.id, run);
    next(run);
  } else if (message.type === 'stop') {
    const run = runs.get(message.id);
    if (run) clearTimeout(run.timer);
    runs.delete(message.id);
  }
});
function next(run) {
  run.timer = setTimeout(() => {
    if (!runs.has(run.id)) return;
    void beat(run);
    next(run);
  }, run.everyMs);
}
async function beat(run) {
  const lock = run.lock;
  if (run.busy || Atomics.load(lock, WRITING) === 1 || Atomics.load(lock, HALTED) === 1) return;
  Atomics.store(lock, BEATING, 1);
  if (Atomics.load(lock, WRITING) === 1 || Atomics.load(lock, HALTED) === 1) return settle(lock);
  run.busy = true;
  try {
    // Set Blob Properties with none: it changes the ETag and nothing else.
    await run.blob.setHTTPHeaders({}, { conditions: { leaseId: run.leaseId }, abortSignal: AbortSignal.timeout(run.timeoutMs) });
    parentPort.postMessage({ type: 'beat', id: run.id, ok: true });
  } catch (err) {
    const status = typeof err?.statusCode === 'number' ? err.statusCode : undefined;
    const code = err?.details?.errorCode ?? err?.response?.headers?.get?.('x-ms-error-code') ?? (typeof err?.code === 'string' ? err.code : undefined);
    parentPort.postMessage({ type: 'beat', id: run.id, ok: false, status, code });
  } finally {
    run.busy = false;
    settle(lock);
  }
}
function settle(lock) {
  Atomics.store(lock, BEATING, 0);
  Atomics.notify(lock, BEATING);
}
`;

type BeatReport =
  { type: 'beat'; id: number; ok: true } | { type: 'beat'; id: number; ok: false; status?: number; code?: string };

/** Where the lease is, as the thread must reach it on its own. */
export interface ThreadedLeaseBeatsOptions {
  /** How the thread reaches storage: the same settings the lease store's client was made from. */
  storage: StorageSettings;
  /** The lease blob's container, as the `BlobLeaseStore` has it (its default is `leases`). */
  containerName: string;
  /** The lease blob's name: the `BlobLeaseStore`'s `leaseName`. */
  blobName: string;
  /** Counts each beat as the holder's own requests are counted. */
  requestCounter?: StorageRequestCounter;
  /** Told when the thread fails; its beats stop, and the holder is left to the takeover and the lease. */
  onThreadError?: (error: unknown) => void;
}

/**
 * `LeaseBeats` from a worker thread, for a lease on an Azure blob (`BlobLeaseStore`). One thread
 * serves every lease of the process; it starts at the first term, not at start-up, and never
 * keeps the process alive.
 */
export class ThreadedLeaseBeats implements LeaseBeats {
  constructor(private readonly options: ThreadedLeaseBeatsOptions) {}

  /** Beats from the process's thread, made now if this is its first run. */
  start(leaseId: string, options: BeatOptions): BeatRun {
    const lock = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
    const id = beatThread.add({ options, counter: this.options.requestCounter, onThreadError: this.options.onThreadError });
    const { storage, containerName, blobName } = this.options;
    beatThread.post({
      type: 'start',
      id,
      leaseId,
      everyMs: options.everyMs,
      timeoutMs: options.timeoutMs,
      lock: lock.buffer,
      target: { storage, containerName, blobName },
    });
    const idle = (): Promise<void> => noBeatInFlight(lock, options.timeoutMs);
    let stopped: Promise<void> | undefined;
    return {
      exclusive: async <T>(write: () => Promise<T>): Promise<T> => {
        Atomics.store(lock, WRITING, 1);
        try {
          await idle();
          return await write();
        } finally {
          Atomics.store(lock, WRITING, 0);
        }
      },
      stop: () =>
        (stopped ??= (async () => {
          Atomics.store(lock, HALTED, 1);
          beatThread.stop(id);
          await idle();
          beatThread.remove(id);
        })()),
    };
  }
}

/**
 * Until the beat in flight, if any, has settled. Bounded by a beat's own bound: the thread gives
 * up on a beat by then, and a holder write must not wait on a thread that died mid-beat.
 */
async function noBeatInFlight(lock: Int32Array, boundMs: number): Promise<void> {
  const until = performance.now() + boundMs;
  while (Atomics.load(lock, BEATING) === 1) {
    const left = until - performance.now();
    if (left <= 0) return;
    const wait = Atomics.waitAsync(lock, BEATING, 1, left);
    if (!wait.async) continue;
    // A pending waitAsync holds nothing open, and the thread is unref'd: a process with nothing
    // else to do would exit here, with the caller's stop or write never settled. This timer
    // holds it, for at most the beat's bound.
    const hold = setTimeout(() => undefined, left);
    try {
      await wait.value;
    } finally {
      clearTimeout(hold);
    }
  }
}

interface RunEntry {
  options: BeatOptions;
  counter: StorageRequestCounter | undefined;
  onThreadError: ((error: unknown) => void) | undefined;
}

/** The process's one beat thread, made on first use and made again if it dies. */
const beatThread = new (class {
  private worker: Worker | undefined;
  private readonly runs = new Map<number, RunEntry>();
  private nextId = 1;

  add(entry: RunEntry): number {
    const id = this.nextId++;
    this.runs.set(id, entry);
    return id;
  }

  remove(id: number): void {
    this.runs.delete(id);
  }

  post(message: object): void {
    this.ensure().postMessage(message);
  }

  /** A run whose thread died has nothing to stop. */
  stop(id: number): void {
    if (this.runs.has(id)) this.worker?.postMessage({ type: 'stop', id });
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    // Loaded with the first term, not at start-up: a cold start that never leads never needs it.
    const { Worker: BeatWorker } = require('node:worker_threads') as typeof import('node:worker_threads');
    const worker = new BeatWorker(THREAD_CODE, {
      eval: true,
      // Not the process's flags: its code is plain CommonJS whatever they say (`--input-type`,
      // a loader), and needs none of them.
      execArgv: [],
      workerData: { modules: { blob: require.resolve('@azure/storage-blob'), identity: require.resolve('@azure/identity') } },
    });
    worker.on('message', (report: BeatReport) => this.report(report));
    worker.on('error', (error) => this.fail(worker, error));
    worker.on('exit', (code) => this.fail(worker, new Error(`the lease beat thread exited with code ${code}`)));
    // After the listeners: adding a 'message' listener refs the thread's port again.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private report(report: BeatReport): void {
    const run = this.runs.get(report.id);
    if (!run) return;
    run.counter?.record('blob.properties');
    if (report.ok) return;
    const loss = asLeaseLoss({ statusCode: report.status, code: report.code }, 'beat');
    if (loss instanceof LeaseLostError) run.options.onRefused(loss);
  }

  /** Its runs stop beating; the next start makes a new thread. */
  private fail(worker: Worker, error: unknown): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    const told = new Set<(error: unknown) => void>();
    for (const run of this.runs.values()) {
      if (run.onThreadError && !told.has(run.onThreadError)) {
        told.add(run.onThreadError);
        run.onThreadError(error);
      }
    }
    this.runs.clear();
  }
})();
