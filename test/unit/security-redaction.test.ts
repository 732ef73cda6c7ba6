/**
 * Where key material could leave the process, it is masked: the runtime's logger (every engine
 * and elector line), the worker trigger's errors to the host, a failed plan's reason in the run
 * record, and the local cluster's output. Each case feeds in a SAS URL or a connection string,
 * as a storage error would carry one, and checks what comes out.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { InvocationContext } from '@azure/functions';
import { createBatonRuntime } from '../../src/app/runtime';
import { createWorkerHandler } from '../../src/app/worker-handler';
import { requestRun } from '../../src/hub/requests';
import { RunStateCache } from '../../src/engine/run-state-cache';
import type { WorkerDeps } from '../../src/engine/worker';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { defineJob } from '../../src/jobs/define-job';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { createView } from '../../src/local/live-view';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { newRunRecord, runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import { buildEngine } from '../support/engine-harness';
import { memoryPorts } from '../support/memory-ports';
import { sumJob } from '../support/sample-jobs';

const SIG = 'S3cr3tSignatureValue%2Babc%3D';
const KEY = 'c2VjcmV0LWtleS1tYXRlcmlhbC1mb3ItdGVzdHM=';
const sasUrl = `https://acct.blob.core.windows.net/baton-runs/runs/x.json?sv=2024-11-04&sp=rw&sig=${SIG}`;
const connection = `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};EndpointSuffix=core.windows.net`;

function expectMasked(text: string): void {
  expect(text).not.toContain(SIG);
  expect(text).not.toContain(KEY);
}

describe("the runtime's logger", () => {
  const env = { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'redact' };

  function capture(extra: Record<string, string> = {}) {
    const lines: string[] = [];
    const logger = {
      info: (m: string) => void lines.push(`info ${m}`),
      warn: (m: string) => void lines.push(`warn ${m}`),
      debug: (m: string) => void lines.push(`debug ${m}`),
    };
    const runtime = createBatonRuntime({ ...env, ...extra }, { logger });
    // The elector's events become log lines through the same logger.
    const emit = (event: LeaderEvent) => (runtime.elector as unknown as { emit(e: LeaderEvent): void }).emit(event);
    return { runtime, lines, emit };
  }

  it('masks what the engine and the worker log, whatever the sink', () => {
    const { runtime, lines } = capture();
    runtime.coordinator.ctx.log.warn(`run r failed while planning: split failed: GET ${sasUrl} 403`);
    runtime.coordinator.ctx.log.info(`connection was ${connection}`);
    runtime.workers[0]?.log?.('warn', `work message sent to poison: ${sasUrl}`);
    expect(lines).toHaveLength(3);
    expectMasked(lines.join('\n'));
    expect(lines[0]).toContain('sig=***');
    expect(lines[1]).toContain('AccountKey=***');
  });

  it('passes the elector debug lines only at BATON_LOG_LEVEL=debug', () => {
    const renewed: LeaderEvent = { type: 'renewed', identity: 'me', epoch: 3, latencyMs: 12 };
    const acquired: LeaderEvent = { type: 'acquired', identity: 'me', epoch: 3, leaseId: 'l' };
    const quiet = capture();
    quiet.emit(renewed);
    quiet.emit(acquired);
    expect(quiet.lines).toEqual(['info leadership acquired: holder=me epoch=3']);
    const loud = capture({ BATON_LOG_LEVEL: 'DEBUG' });
    loud.emit(renewed);
    expect(loud.lines).toEqual(['debug lease renewed: holder=me epoch=3 latencyMs=12']);
  });

  it('refuses an unknown BATON_LOG_LEVEL at start-up, naming the setting and not its value', () => {
    expect(() => createBatonRuntime({ ...env, BATON_LOG_LEVEL: 'verbose' })).toThrow(/^BATON_LOG_LEVEL must be info or debug$/);
  });
});

describe('the worker trigger', () => {
  it('throws a storage failure to the host as one masked line', async () => {
    const docs = new InMemoryDocumentStore();
    const job = sumJob({ items: 1 });
    const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
    const runId = 'sum/manual-redact';
    const record = newRunRecord({
      runId,
      job: 'sum',
      trigger: 'manual',
      occurrence: undefined,
      now: new Date(),
      timeoutSeconds: 60,
    });
    await records.create(runKeys.record(runId), 1, { ...record, state: 'running', counters: { ...record.counters, planned: 1 } });
    const results = new InMemoryQueue('results');
    results.send = async () => {
      throw Object.assign(new Error(`PUT ${sasUrl} failed\nrequest: { "authorization": "SharedKey acct:${KEY}" }`), {
        name: 'RestError',
      });
    };
    const deps: WorkerDeps = {
      jobs: new Map([[job.name, job]]),
      docs,
      work: new InMemoryQueue('work'),
      results,
      poison: new InMemoryQueue('work-poison'),
      runs: new RunStateCache(docs),
      maxAttempts: 1,
    };
    const handler = createWorkerHandler(deps);
    const message = { v: 1, t: 'work', run: runId, job: 'sum', first: 0, count: 1, items: [{ i: 0 }] };
    const thrown = await handler(message, new InvocationContext({ triggerMetadata: { dequeueCount: 1 } })).catch((e: Error) => e);
    expect(thrown).toBeInstanceOf(Error);
    const text = `${(thrown as Error).message}\n${(thrown as Error).stack}`;
    expectMasked(text);
    expect((thrown as Error).message).toMatch(/^RestError: PUT https:\/\/acct\.blob\.core\.windows\.net\/\S+sig=\*\*\* failed/);
  });
});

describe('a failed plan', () => {
  it('keeps its reason in the run record with the SAS masked', async () => {
    const ports = memoryPorts();
    const job = defineJob({
      ...sumJob({ items: 0 }),
      split: () => {
        throw new Error(`listing failed: GET ${sasUrl} (${connection})`);
      },
    });
    const engine = buildEngine(ports, [job]);
    const runId = await requestRun(ports.docs, 'sum');
    await engine.leadUntil('l', async () => (await engine.readRun(runId))?.state === 'failed');
    const record = await engine.readRun(runId);
    expect(record?.endReason).toMatch(/^split failed: listing failed: GET \S+sig=\*\*\* \(.*AccountKey=\*\*\*/);
    expectMasked(JSON.stringify(record));
  });
});

describe("the local cluster's output", () => {
  it.each([
    ['plain lines', false],
    ['the live view', true],
  ])('masks every note (%s)', (_, tty) => {
    const stream = new PassThrough();
    let written = '';
    stream.on('data', (chunk: Buffer) => (written += chunk.toString()));
    const view = createView(stream as unknown as NodeJS.WriteStream, tty);
    view.stop();
    view.note(`instance-1: baton-worker failed: RestError: GET ${sasUrl}`);
    view.note(`instance-2: ${connection}`);
    expectMasked(written);
    expect(written).toContain('sig=***');
    expect(written).toContain('AccountKey=***');
  });
});
