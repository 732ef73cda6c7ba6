import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { indexRun, parseRunIndexEntry, runIndexKeys } from '../../src/hub/run-index';
import { hubResources } from '../../src/hub/resources';
import { manualRunId, newRunRecord, runKeys, transition, type RunRecord } from '../../src/hub/run-record';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import type { ContainerClient } from '@azure/storage-blob';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import { parseStorageSettings } from '../../src/storage/connection';
import { StorageRequestCounter } from '../../src/storage/request-counter';
import { FaultProxy } from '../../chaos/fault-proxy';
import { azuriteStyleConnection } from '../../test/support/cli-harness';
import { runsRoute } from '../../test/support/runs-route';
import { median, report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * history: what one page of runs costs as a hub grows old. Two hubs, of SMALL runs (the floor)
 * and of LARGE runs (ours), each made directly in storage as the leader makes them (index
 * entries, then the record), one a minute over two jobs. Then TRIALS rounds, alternating the
 * hubs so drift on the machine falls on both: the page the status page polls
 * (`GET /api/baton/runs?limit=20`, the route's handler in this process), timed, and the same
 * requests made with the SDK alone (Azurite's own cost at that size). Storage requests per page
 * and for the next page are counted by the client factory's counter; then `baton runs --limit 20
 * --json` runs as a process against a proxy that counts what reaches storage. Goal: the page at
 * LARGE within 1.2x of the page at SMALL, in latency (the headline) and in requests.
 */
export const name = 'history';

const GOAL = { ratio: 1.2, direction: 'atMost' as const };
const PAGE = 20;
const SEED_CONCURRENCY = 32;
const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli', 'main.js');
const execFileAsync = promisify(execFile);

interface Arm {
  runs: number;
  apiMs: number;
  apiRequestsPerPage: number;
  nextPageRequests: number;
  cliMs: number;
  cliRequests: number;
  /** The same 21 requests made with the SDK alone: what Azurite itself takes at this size. */
  rawMs: number;
  rawListMs: number;
  rawReadsMs: number;
  seedMs: number;
}

async function seed(docs: BlobDocumentStore, runs: number): Promise<void> {
  const records = new FencedDocuments<RunRecord>(docs);
  const start = Date.parse('2026-01-01T00:00:00Z');
  let next = 0;
  const one = async (): Promise<void> => {
    for (let i = next++; i < runs; i = next++) {
      const job = i % 2 === 0 ? 'nightly' : 'hourly';
      const at = new Date(start + i * 60_000);
      const created = newRunRecord({
        runId: manualRunId(job, `r${i}`),
        job,
        trigger: 'manual',
        occurrence: undefined,
        now: at,
        timeoutSeconds: 60,
      });
      const end = new Date(at.getTime() + 1000);
      const record = (['dispatching', 'running', 'finalizing', 'succeeded'] as const).reduce(
        (r, to) => transition(r, to, end),
        created,
      );
      await indexRun(docs, 1, record);
      await records.create(runKeys.record(record.runId), 1, record);
    }
  };
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, one));
}

interface Hub {
  hub: string;
  runs: number;
  counter: StorageRequestCounter;
  container: ContainerClient;
  get(query: Record<string, string>, expected?: number): Promise<{ runs: unknown[]; next: string | null }>;
  seedMs: number;
  apiMs: number[];
  rawMs: number[];
  /** The raw floor's two parts: the one listing request, and the 20 reads after it. */
  rawListMs: number[];
  rawReadsMs: number[];
}

async function prepare(azurite: RunningAzurite, runs: number): Promise<Hub> {
  const hub = `history${runs}`;
  const counter = new StorageRequestCounter();
  const storage = parseStorageSettings({ AzureWebJobsStorage: azurite.connectionString });
  const container = createBlobServiceClient(storage, { requestCounter: counter }).getContainerClient(hubResources(hub).container);
  const docs = new BlobDocumentStore(container);
  const seeded = performance.now();
  await seed(docs, runs);
  const route = runsRoute(docs, hub);
  const get = async (query: Record<string, string>, expected = PAGE) => {
    const response = await route(query);
    const body = response.body as { runs: unknown[]; next: string | null };
    if (response.status !== 200 || body.runs.length !== expected)
      throw new Error(`history: GET runs answered ${response.status} with ${body.runs?.length} runs`);
    return body;
  };
  return {
    hub,
    runs,
    counter,
    container,
    get,
    seedMs: performance.now() - seeded,
    apiMs: [],
    rawMs: [],
    rawListMs: [],
    rawReadsMs: [],
  };
}

/** One page through the API, then the raw-SDK floor: one listing page of the index and the 20 record downloads it names. */
async function round(h: Hub): Promise<void> {
  let t0 = performance.now();
  await h.get({ limit: String(PAGE) });
  h.apiMs.push(performance.now() - t0);
  t0 = performance.now();
  const { value } = await h.container.listBlobsFlat({ prefix: runIndexKeys.all }).byPage({ maxPageSize: PAGE }).next();
  const listed = performance.now();
  const names = (value?.segment.blobItems ?? []).map((b: { name: string }) => b.name);
  const ids = names.flatMap((n: string) => parseRunIndexEntry(runIndexKeys.all, n)?.runId ?? []);
  await Promise.all(
    ids.map((id: string) =>
      h.container
        .getBlockBlobClient(runKeys.record(id))
        .download(0)
        .then((r) => streamText(r.readableStreamBody)),
    ),
  );
  h.rawMs.push(performance.now() - t0);
  h.rawListMs.push(listed - t0);
  h.rawReadsMs.push(performance.now() - listed);
  if (ids.length !== PAGE) throw new Error(`history: the raw listing named ${ids.length} runs`);
}

async function measure(azurite: RunningAzurite, h: Hub, trials: number): Promise<Arm> {
  const { hub, runs, counter } = h;
  const before = counter.total;
  const first = await h.get({ limit: String(PAGE) });
  const apiRequestsPerPage = counter.total - before;
  const beforeNext = counter.total;
  await h.get({ limit: String(PAGE), after: first.next ?? '' }, Math.min(PAGE, runs - PAGE));
  const nextPageRequests = counter.total - beforeNext;

  // The CLI as a user runs it, through a proxy that counts what reaches storage.
  const blobPort = Number(new URL(azurite.blobEndpoint).port);
  const proxy = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: blobPort, seed: 1 });
  const key = /AccountKey=([^;]+)/.exec(azurite.connectionString)?.[1] ?? '';
  const connection = azuriteStyleConnection(proxy.port, key);
  const cliMs: number[] = [];
  let cliRequests = 0;
  try {
    for (let t = 0; t < Math.max(1, Math.ceil(trials / 3)); t++) {
      const forwarded = proxy.forwarded;
      const t0 = performance.now();
      const { stdout } = await execFileAsync(
        process.execPath,
        [CLI, '--connection', connection, '--hub', hub, 'runs', '--limit', String(PAGE), '--json'],
        {
          env: { ...process.env, AzureWebJobsStorage: '' },
        },
      );
      cliMs.push(performance.now() - t0);
      cliRequests = proxy.forwarded - forwarded;
      if ((JSON.parse(stdout) as { runs: unknown[] }).runs.length !== PAGE)
        throw new Error('history: baton runs printed a short page');
    }
  } finally {
    await proxy.close();
  }
  return {
    runs,
    apiMs: median(h.apiMs),
    apiRequestsPerPage,
    nextPageRequests,
    cliMs: median(cliMs),
    cliRequests,
    rawMs: median(h.rawMs),
    rawListMs: median(h.rawListMs),
    rawReadsMs: median(h.rawReadsMs),
    seedMs: h.seedMs,
  };
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const small = options.smoke ? 30 : Number(process.env.BENCH_HISTORY_SMALL ?? 100);
  // A smoke run's hubs are small: seeding them is most of its work (four writes a run).
  const large = options.smoke ? 90 : Number(process.env.BENCH_HISTORY_LARGE ?? 10_000);
  const trials = options.smoke ? 1 : Number(process.env.BENCH_HISTORY_TRIALS ?? 101);
  const azurite = await startAzurite();
  try {
    const hubs = [await prepare(azurite, small), await prepare(azurite, large)];
    // Warm the connections and the JIT, then alternate the two hubs so drift on the machine falls on both.
    for (const h of hubs) await round(h);
    for (const h of hubs) h.apiMs.length = h.rawMs.length = h.rawListMs.length = h.rawReadsMs.length = 0;
    for (let t = 0; t < trials; t++) for (const h of t % 2 === 0 ? hubs : [...hubs].reverse()) await round(h);
    const floor = await measure(azurite, hubs[0]!, trials);
    const ours = await measure(azurite, hubs[1]!, trials);
    const requestsRatio = ours.apiRequestsPerPage / floor.apiRequestsPerPage;
    const result = report(
      name,
      {
        samples: { floor, ours },
        summary: {
          page: PAGE,
          smallRuns: small,
          largeRuns: large,
          apiMs: { small: floor.apiMs, large: ours.apiMs },
          apiRequestsPerPage: { small: floor.apiRequestsPerPage, large: ours.apiRequestsPerPage, ratio: requestsRatio },
          nextPageRequests: { small: floor.nextPageRequests, large: ours.nextPageRequests },
          cliMs: { small: floor.cliMs, large: ours.cliMs },
          cliRequests: { small: floor.cliRequests, large: ours.cliRequests },
          // Azurite's own growth: the same requests with the SDK alone. On Azurite a listing and a
          // read scan the container, so latency grows with it whatever the client does.
          rawSdkMs: { small: floor.rawMs, large: ours.rawMs, ratio: ours.rawMs / floor.rawMs },
          // Where Azurite's growth is: both hubs live in one Azurite, so a read costs the same in
          // either; its listing sorts every blob under the prefix before it returns a page.
          rawSdkListMs: { small: floor.rawListMs, large: ours.rawListMs, ratio: ours.rawListMs / floor.rawListMs },
          rawSdkReadsMs: { small: floor.rawReadsMs, large: ours.rawReadsMs, ratio: ours.rawReadsMs / floor.rawReadsMs },
          oursOverRawSdk: { small: floor.apiMs / floor.rawMs, large: ours.apiMs / ours.rawMs },
          requestsGoalMet: requestsRatio <= GOAL.ratio,
        },
        ours: ours.apiMs,
        floor: floor.apiMs,
        unit: 'ms per page of 20',
        goal: GOAL,
      },
      options,
    );
    console.log(
      `history (raw SDK)  the same 21 requests take ${ours.rawMs.toFixed(1)} ms at ${large} runs, ${floor.rawMs.toFixed(1)} ms at ${small} (${(ours.rawMs / floor.rawMs).toFixed(2)}x: Azurite's own growth); the listing ${ours.rawListMs.toFixed(1)} and ${floor.rawListMs.toFixed(1)} ms, the 20 reads ${ours.rawReadsMs.toFixed(1)} and ${floor.rawReadsMs.toFixed(1)} ms`,
    );
    console.log(
      `history (requests)  ${ours.apiRequestsPerPage} per page at ${large} runs, ${floor.apiRequestsPerPage} at ${small}; baton runs: ${ours.cliRequests} and ${floor.cliRequests} requests, ${Math.round(ours.cliMs)} and ${Math.round(floor.cliMs)} ms`,
    );
    return result;
  } finally {
    await azurite.close();
  }
}

/** A download's body, read to the end as the store's read does. */
async function streamText(stream: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!stream) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
