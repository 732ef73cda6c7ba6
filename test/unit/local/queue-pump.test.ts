/**
 * The local host's queue polling, on the in-memory queue and a fake clock: an idle queue is
 * polled with the host's doubling backoff up to maxPollingInterval, and a batch with messages
 * brings polling back to its minimum.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '../../../src/clock/fake-clock';
import { readHostQueueConfig } from '../../../src/app/host-config';
import { pumpQueue } from '../../../src/local/queue-pump';
import { InMemoryQueue } from '../../../src/queue/in-memory-queue';

class CountingQueue extends InMemoryQueue {
  receives: number[] = [];
  /** Receive times and how many messages each brought. */
  log: { at: number; got: number }[] = [];
  constructor(private readonly fake: FakeClock) {
    super('work', { clock: fake });
  }
  override async receive(...args: Parameters<InMemoryQueue['receive']>) {
    const at = this.fake.now();
    this.receives.push(at);
    const got = await super.receive(...args);
    this.log.push({ at, got: got.length });
    return got;
  }
}

function start(maxPollingIntervalMs: number) {
  const clock = new FakeClock();
  const queue = new CountingQueue(clock);
  const poison = new InMemoryQueue('poison', { clock });
  const handled: string[] = [];
  const stop = new AbortController();
  const pump = pumpQueue(queue, poison, async (m) => void handled.push(m.text), stop.signal, {
    clock,
    maxPollingIntervalMs,
    random: () => 0,
  });
  return { clock, queue, handled, stop: async () => (stop.abort(), await pump) };
}

/** The folders `write` made, removed when the file is done. */
const written: string[] = [];
afterAll(() => {
  for (const dir of written) rmSync(dir, { recursive: true, force: true });
});

/** A host.json with these queue settings, in a folder of its own. */
const write = (queues: object): string => {
  const dir = mkdtempSync(join(tmpdir(), 'host-json-'));
  written.push(dir);
  const path = join(dir, 'host.json');
  writeFileSync(path, JSON.stringify({ version: '2.0', extensions: { queues } }));
  return path;
};

describe('queue pump polling', () => {
  it.each([
    // receives at 0, 100, 300, 700, 1500, 3100, then every 2 s: …, 19100
    [2000, 20_000, 14],
    // 0, 100, 300, …, 51100 (doubling), then 60 s later 102300; the next would be 162300
    [60_000, 120_000, 11],
    // the minimum is the maximum: every 100 ms
    [100, 1000, 11],
  ])('with maxPollingInterval %i ms, %i ms idle costs %i receives', async (max, idleMs, expected) => {
    const pump = start(max);
    await pump.clock.advance(idleMs);
    expect(pump.queue.receives).toHaveLength(expected);
    const gaps = pump.queue.receives.slice(1).map((t, i) => t - pump.queue.receives[i]!);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(max);
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThanOrEqual(gaps[i - 1]!);
    await pump.stop();
  });

  it('a batch with messages resets the backoff to the minimum', async () => {
    const pump = start(2000);
    await pump.clock.advance(10_000);
    await pump.queue.send('hello');
    await pump.clock.advance(4000);
    expect(pump.handled).toEqual(['hello']);
    const hit = pump.queue.log.findIndex((r) => r.got === 1);
    const after = pump.queue.log.slice(hit, hit + 5).map((r) => r.at - pump.queue.log[hit]!.at);
    // Straight on after the hit, then doubling again from 100 ms.
    expect(after).toEqual([0, 0, 100, 300, 700]);
    await pump.stop();
  });
});

describe('host.json maxPollingInterval', () => {
  it.each([
    [{}, 60_000],
    [{ maxPollingInterval: '00:00:02' }, 2000],
    [{ maxPollingInterval: 1500 }, 1500],
  ])('%j reads as %i ms', (queues, ms) => {
    expect(readHostQueueConfig(write(queues)).maxPollingIntervalMs).toBe(ms);
  });

  it.each(['two seconds', '00:00:00', 50])('rejects %j, naming maxPollingInterval', (value) => {
    expect(() => readHostQueueConfig(write({ maxPollingInterval: value }))).toThrow(/maxPollingInterval/);
  });

  it("the app's host.json polls an idle queue at most every 2 s", () => {
    expect(readHostQueueConfig(join(__dirname, '..', '..', '..', 'functions', 'host.json')).maxPollingIntervalMs).toBe(2000);
  });
});

describe('app settings over host.json, as the Functions host lays them', () => {
  const file = () => write({ maxDequeueCount: 5, batchSize: 16 });
  it.each([
    [{ AzureFunctionsJobHost__extensions__queues__maxDequeueCount: '7' }, { maxDequeueCount: 7, batchSize: 16 }],
    // The host's configuration keys ignore case.
    [{ AZUREFUNCTIONSJOBHOST__EXTENSIONS__QUEUES__BATCHSIZE: '8' }, { maxDequeueCount: 5, batchSize: 8 }],
    [{ AzureFunctionsJobHost__extensions__queues__visibilityTimeout: '00:00:10' }, { retryDelaySeconds: 10 }],
    [{ AzureFunctionsJobHost__extensions__queues__messageEncoding: 'none' }, { messageEncoding: 'none' }],
    // Not a queue setting, or not the queues section: host.json's value stands.
    [
      { AzureFunctionsJobHost__extensions__queues__nonsense: '1', AzureFunctionsJobHost__maxDequeueCount: '9' },
      { maxDequeueCount: 5 },
    ],
  ])('%j gives %j', (env, expected) => {
    expect(readHostQueueConfig(file(), env)).toMatchObject(expected);
  });

  it('names the app setting, not host.json, when its value is bad', () => {
    expect(() => readHostQueueConfig(file(), { AzureFunctionsJobHost__extensions__queues__maxDequeueCount: 'five' })).toThrow(
      /^AzureFunctionsJobHost__extensions__queues__maxDequeueCount: /,
    );
  });
});
