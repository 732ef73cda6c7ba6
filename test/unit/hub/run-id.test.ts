/**
 * Run ids name blobs (`runs/<run>/…`), and storage resolves `.` and `..` in a blob's name: an id
 * from outside could reach another hub's runs in the same account. Every entry checks it: the
 * library client, the request a cancel writes, the requests a leader reads (a forged one is set
 * aside), the HTTP API and the CLI.
 */
import { describe, expect, it } from 'vitest';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { checkRunId, isRunId } from '../../../src/hub/run-id';
import { pendingRequests, requestCancel, requestRun } from '../../../src/hub/requests';
import { isBatonError } from '../../../src/errors';
import { manualRunId, scheduledRunId } from '../../../src/hub/run-record';

const INVALID = [
  ['a path past the hub', 'sum/../../../other-runs/runs/sum/2026-01-01T00:00:00.000Z'],
  ['a dot segment', 'sum/..'],
  ['a third segment', 'sum/2026-01-01T00:00:00.000Z/run.json'],
  ['no run segment', 'sum/'],
  ['no job', '/manual-x'],
  ['no slash', 'sum'],
  ['a job name no job can have', 'Sum/manual-x'],
  ['a backslash', 'sum/manual-x\\..'],
  ['a query', 'sum/manual-x?comp=lease'],
  ['a percent escape', 'sum/%2e%2e'],
  ['too long', `sum/manual-${'x'.repeat(200)}`],
] as const;

describe('run ids', () => {
  it.each([
    scheduledRunId('nightly-totals', new Date('2026-03-29T01:00:00.000Z')),
    manualRunId('sum', '0f8fad5b-d9cb-469f-a165-70867728950e'),
    manualRunId('sum', 'k-rOd7fVmZ3Q2cJv8wq1bT1fN4uYtJ3kQm'),
  ])('what the library makes is one: %s', (id) => {
    expect(isRunId(id)).toBe(true);
    expect(checkRunId(id)).toBe(id);
  });

  it.each(INVALID)('%s is not: %s', (_why, id) => {
    expect(isRunId(id)).toBe(false);
    expect(() => checkRunId(id)).toThrow(/is not a run id: <job>\/<occurrence or manual-id>/);
    try {
      checkRunId(id);
    } catch (err) {
      expect(isBatonError(err, 'InvalidRunId')).toBe(true);
    }
  });

  it('a cancel with a bad id is refused before anything is written', async () => {
    const docs = new InMemoryDocumentStore();
    for (const [, id] of INVALID) await expect(requestCancel(docs, id)).rejects.toMatchObject({ code: 'InvalidRunId' });
    await expect(requestRun(docs, '../other')).rejects.toMatchObject({ code: 'InvalidConfig', option: 'job' });
    const written = [];
    for await (const key of docs.list('')) written.push(key);
    expect(written).toEqual([]);
  });

  it('a leader sets aside a forged request that names a path, as malformed', async () => {
    const docs = new InMemoryDocumentStore();
    const forged = [
      { kind: 'cancel', runId: INVALID[0][1], reason: 'forged' },
      { kind: 'run', job: 'sum', id: '../../other-runs/runs/sum/x' },
      { kind: 'run', job: '../other', id: 'x' },
    ];
    for (const [i, request] of forged.entries()) {
      await docs.write(`requests/2026-01-01T00:00:0${i}.000Z-forged.json`, JSON.stringify(request), { ifNoneMatch: '*' });
    }
    await requestCancel(docs, 'sum/manual-0f8fad5b-d9cb-469f-a165-70867728950e', 'real');
    const read = [];
    for await (const pending of pendingRequests(docs)) read.push(pending.request);
    expect(read).toEqual([
      undefined,
      undefined,
      undefined,
      { kind: 'cancel', runId: 'sum/manual-0f8fad5b-d9cb-469f-a165-70867728950e', reason: 'real' },
    ]);
  });
});
