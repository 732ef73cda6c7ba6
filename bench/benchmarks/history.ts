import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { indexRun } from '../../src/hub/run-index';
import { hubResources } from '../../src/hub/resources';
import { manualRunId, newRunRecord, runKeys, transition, type RunRecord } from '../../src/hub/run-record';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import { parseStorageSettings } from '../../src/storage/connection';
import { StorageRequestCounter } from '../../src/storage/request-counter';
import { FaultProxy } from '../../chaos/fault-proxy';
import { runsRoute } from '../../test/support/runs-route';
import { median, report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * history: what one page of runs costs as a hub grows old. Two hubs, of SMALL runs (the floor)
 * and of LARGE runs (ours), each made directly in storage as the leader makes them (index
 * entries, then the record), one a minute over two jobs. On each, the page the status page polls
 * (`GET /api/baton/runs?limit=20`, the route's handler in this process) and the next page after
 * it are read TRIALS times: storage requests counted by the client factory's counter, latency as
 * the median. Then `baton runs --limit 20 --json` runs as a process against a proxy that counts
 * what reaches storage. Goal: the page at LARGE within 1.2x of the page at SMALL, in latency
 * (the headline) and in requests (in the summary).
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

async function measure(azurite: RunningAzurite, runs: number, trials: number): Promise<Arm> {
  const hub = `history${runs}`;
  const counter = new StorageRequestCounter();
  const storage = parseStorageSettings({ AzureWebJobsStorage: azurite.connectionString });
  const container = createBlobServiceClient(storage, { requestCounter: counter }).getContainerClient(hubResources(hub).container);
  const docs = new BlobDocumentStore(container);
  const seeded = performance.now();
  await seed(docs, runs);
  const seedMs = performance.now() - seeded;

  const route = runsRoute(docs, hub);
  const get = async (query: Record<string, string>, expected = PAGE) => {
    const response = await route(query);
    const body = response.body as { runs: unknown[]; next: string | null };
    if (response.status !== 200 || body.runs.length !== expected)
      throw new Error(`history: GET runs answered ${response.status} with ${body.runs?.length} runs`);
    return body;
  };

  await get({ limit: String(PAGE) }); // warm the connection and the JIT
  const ms: number[] = [];
  const before = counter.total;
  let next = '';
  for (let t = 0; t < trials; t++) {
    const t0 = performance.now();
    next = (await get({ limit: String(PAGE) })).next ?? '';
    ms.push(performance.now() - t0);
  }
  const apiRequestsPerPage = (counter.total - before) / trials;
  const beforeNext = counter.total;
  await get({ limit: String(PAGE), after: next }, Math.min(PAGE, runs - PAGE));
  const nextPageRequests = counter.total - beforeNext;

  // The CLI as a user runs it, through a proxy that counts what reaches storage.
  const blobPort = Number(new URL(azurite.blobEndpoint).port);
  const proxy = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: blobPort, seed: 1 });
  const key = /AccountKey=([^;]+)/.exec(azurite.connectionString)?.[1] ?? '';
  const endpoint = `http://127.0.0.1:${proxy.port}/devstoreaccount1`;
  const connection = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${key};BlobEndpoint=${endpoint};QueueEndpoint=${endpoint};`;
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
  return { runs, apiMs: median(ms), apiRequestsPerPage, nextPageRequests, cliMs: median(cliMs), cliRequests, seedMs };
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const small = options.smoke ? 30 : Number(process.env.BENCH_HISTORY_SMALL ?? 100);
  const large = options.smoke ? 300 : Number(process.env.BENCH_HISTORY_LARGE ?? 10_000);
  const trials = options.smoke ? 3 : Number(process.env.BENCH_HISTORY_TRIALS ?? 15);
  const azurite = await startAzurite();
  try {
    const floor = await measure(azurite, small, trials);
    const ours = await measure(azurite, large, trials);
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
      `history (requests)  ${ours.apiRequestsPerPage} per page at ${large} runs, ${floor.apiRequestsPerPage} at ${small}; baton runs: ${ours.cliRequests} and ${floor.cliRequests} requests, ${Math.round(ours.cliMs)} and ${Math.round(floor.cliMs)} ms`,
    );
    return result;
  } finally {
    await azurite.close();
  }
}
