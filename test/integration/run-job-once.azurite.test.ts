import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { defineJob } from '../../src/index';
import { runJobOnce, startAzurite } from '../../src/testing';
import { patience } from '../support/slowdown';

/**
 * `runJobOnce` (the testing entry) runs a job end to end in this process on an embedded Azurite:
 * what a user's unit test of a job gets. Here through the same entry a user imports.
 */
const letters = defineJob({
  name: 'letters',
  schedule: '0 0 0 1 1 *',
  failureTolerance: { count: 2 },
  itemsPerMessage: 3,
  async *split() {
    for (const word of ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta']) yield { word };
  },
  async process(item: { word: string }) {
    if (item.word.startsWith('e')) throw new Error(`no words with e: ${item.word}`);
    return { letters: item.word.length };
  },
  aggregate: {
    initial: () => ({ words: 0, letters: 0 }),
    add: (acc: { words: number; letters: number }, r: { letters: number }) => ({
      words: acc.words + 1,
      letters: acc.letters + r.letters,
    }),
  },
});

describe('runJobOnce: one occurrence of a job, end to end, in process', () => {
  it('returns the exact output, every failure with its reason, and the record', { timeout: patience(120_000) }, async () => {
    const run = await runJobOnce(letters, { env: { BATON_MAX_ATTEMPTS: '1' } });
    expect(run.state).toBe('succeeded');
    expect(run.output).toEqual({ words: 5, letters: 5 + 4 + 5 + 5 + 4 });
    expect(run.failures.map(({ item, reason }) => ({ item, reason }))).toEqual([
      { item: 4, reason: 'Error: no words with e: epsilon' },
      { item: 6, reason: 'Error: no words with e: eta' },
    ]);
    expect(run.runId).toMatch(/^letters\/manual-/);
    expect(run.record.counters).toMatchObject({ planned: 7, succeeded: 5, failed: 2, duplicates: 0 });
  });

  it('reports a run that fails, with why', { timeout: patience(120_000) }, async () => {
    const broken = defineJob({
      name: 'broken',
      schedule: '0 0 0 1 1 *',
      async *split() {
        yield 1;
        throw new Error('the source went away');
      },
      process: async (n: number) => n,
      aggregate: { initial: () => 0, add: (a: number, b: number) => a + b },
    });
    const run = await runJobOnce(broken);
    expect(run.state).toBe('failed');
    expect(run.record.endReason).toMatch(/the source went away/);
    expect(run.output).toBeUndefined();
  });

  it('gives up after its timeout, naming the job', { timeout: patience(60_000) }, async () => {
    const stuck = defineJob({
      name: 'stuck',
      schedule: '0 0 0 1 1 *',
      async *split() {
        yield 1;
      },
      process: (_n: number, { signal }) =>
        new Promise<number>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
      aggregate: { initial: () => 0, add: (a: number, b: number) => a + b },
    });
    await expect(runJobOnce(stuck, { timeoutMs: 3_000 })).rejects.toThrow(/^runJobOnce: job stuck did not end within 3000 ms$/);
  });

  it(
    'returns only once the released lease has sent its wake: nothing of the run is left in flight',
    { timeout: patience(120_000) },
    async () => {
      const azurite = await startAzurite();
      // The queue endpoint behind a proxy that holds each move of the beacon's message for a
      // second, the last of them the release's: made visible at once, or when the lease's rest
      // ends. A runner that does not wait for it returns with it still in flight, and closing its
      // Azurite then leaves the SDK retrying for seconds, holding the process open.
      const isWake = (req: IncomingMessage) =>
        req.method === 'PUT' && /\/messages\/[^?]+\?.*visibilitytimeout=\d+(&|$)/.test(req.url ?? '');
      let pending = 0;
      let wakes = 0;
      const proxy = createServer((req, res) => {
        pending++;
        const forward = () => {
          const upstream = request(
            { host: '127.0.0.1', port: azurite.queuePort, method: req.method, path: req.url, headers: req.headers },
            (answer) => {
              res.writeHead(answer.statusCode ?? 502, answer.headers);
              answer.pipe(res);
              answer.on('end', () => pending--);
            },
          );
          upstream.on('error', () => {
            pending--;
            res.destroy();
          });
          req.pipe(upstream);
        };
        if (isWake(req)) {
          wakes++;
          setTimeout(forward, 1000);
        } else forward();
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const port = (proxy.address() as AddressInfo).port;
      try {
        const run = await runJobOnce(letters, {
          env: { BATON_MAX_ATTEMPTS: '1' },
          azurite: {
            ...azurite,
            connectionString: azurite.connectionString.replace(
              /QueueEndpoint=[^;]+/,
              `QueueEndpoint=http://127.0.0.1:${port}/devstoreaccount1`,
            ),
          },
        });
        expect(run.state).toBe('succeeded');
        expect(wakes).toBeGreaterThanOrEqual(1);
        expect(pending).toBe(0);
      } finally {
        proxy.closeAllConnections();
        await new Promise((resolve) => proxy.close(resolve));
        await azurite.close();
      }
    },
  );
});
