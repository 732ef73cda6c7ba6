/**
 * Issue 4, acceptance 5, and the local host's Functions-host behaviour, in process on Azurite:
 * a work message whose handler always throws moves to `<hub>-work-poison` after maxDequeueCount
 * attempts, the handler having seen dequeueCount 1..N; a per-second timer fires with a real
 * InvocationContext and stops on stop(); base64 message encoding is decoded; and a handler that
 * runs past the visibility timeout keeps its message hidden (renewal), so it is not redelivered.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvocationContext, type Timer } from '@azure/functions';
import { hubResources } from '../../src/hub/resources';
import type { QueueRegistration, Registration, TimerRegistration } from '../../src/app/registration-types';
import type { HostQueueConfig } from '../../src/app/host-config';
import { LocalHost } from '../../src/local/local-host';
import { pumpQueue } from '../../src/local/queue-pump';
import { AzureQueue } from '../../src/queue/azure-queue';
import { useAzurite } from '../support/azurite';
import { describePatience, patience } from '../support/slowdown';
import { timeBound } from '../support/time-bound';

const fx = useAzurite();

const HOST_CONFIG: HostQueueConfig = {
  batchSize: 16,
  newBatchThreshold: 8,
  maxDequeueCount: 3,
  retryDelaySeconds: 0,
  messageEncoding: 'none',
  maxPollingIntervalMs: 250,
};

const hosts: LocalHost[] = [];
const logs: string[] = [];

function startHost(
  registrations: Registration[],
  options: { hostConfig?: HostQueueConfig; visibilityTimeoutSeconds?: number } = {},
) {
  const host = new LocalHost({
    registrations,
    queues: (name) => new AzureQueue(fx.queueService, name),
    hostConfig: options.hostConfig ?? HOST_CONFIG,
    log: (level, message) => void logs.push(`${level}: ${message}`),
    ...(options.visibilityTimeoutSeconds !== undefined ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds } : {}),
  });
  hosts.push(host);
  host.start();
  return host;
}

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.stop()));
  logs.length = 0;
});

/** Texts currently visible in a queue (peek; a queue that does not exist yet has none). */
async function peekTexts(queueName: string): Promise<string[]> {
  try {
    const peeked = await fx.queueService.getQueueClient(queueName).peekMessages({ numberOfMessages: 32 });
    return peeked.peekedMessageItems.map((m) => m.messageText);
  } catch {
    return [];
  }
}

/** Polls `probe` until it gives a value; throws after `timeoutMs` (scaled by `patience`). */
async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + patience(timeoutMs);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${describePatience(timeoutMs)} waiting for ${what}`);
    await sleep(100);
  }
}

interface Seen {
  entry: unknown;
  context: InvocationContext;
  dequeueCount: unknown;
  at: number;
}

function queueRegistration(
  queueName: string,
  handler: (entry: unknown, context: InvocationContext) => Promise<unknown>,
): QueueRegistration {
  return { kind: 'queue', name: 'test-worker', queueName, connection: 'AzureWebJobsStorage', handler };
}

describe('LocalHost on Azurite', () => {
  it('moves a message that always throws to <hub>-work-poison after maxDequeueCount attempts, dequeueCount 1..N', async () => {
    const resources = hubResources(fx.uniqueName('hub'));
    const seen: Seen[] = [];
    startHost([
      queueRegistration(resources.workQueue, async (entry, context) => {
        seen.push({ entry, context, dequeueCount: context.triggerMetadata?.dequeueCount, at: Date.now() });
        throw new Error('always fails');
      }),
    ]);
    const body = JSON.stringify({ runId: 'job/run-1', item: 7 });
    await new AzureQueue(fx.queueService, resources.workQueue).send(body);

    const poisoned = await until(
      `a message in ${resources.poisonQueue}`,
      async () => {
        const texts = await peekTexts(resources.poisonQueue);
        return texts.length > 0 ? texts : undefined;
      },
      20_000,
    );
    expect(poisoned).toEqual([body]);
    expect(seen.map((s) => s.dequeueCount)).toEqual([1, 2, 3]);
    // The handler got the parsed body and a real InvocationContext each time.
    for (const s of seen) {
      expect(s.entry).toEqual({ runId: 'job/run-1', item: 7 });
      expect(s.context).toBeInstanceOf(InvocationContext);
      expect(s.context.functionName).toBe('test-worker');
    }
    expect(new Set(seen.map((s) => s.context.invocationId)).size).toBe(3);
    expect(logs.filter((l) => l.includes('always fails'))).toHaveLength(3);

    // Nothing left on the work queue (hidden messages count too), so no fourth attempt can come.
    const work = new AzureQueue(fx.queueService, resources.workQueue);
    await until('the work queue to be empty', async () => ((await work.approximateCount()) === 0 ? true : undefined), 30_000);
    expect(seen).toHaveLength(3);
    expect(await peekTexts(resources.workQueue)).toEqual([]);
  });

  it('fires a * * * * * * timer about once a second with a real InvocationContext, and stop() stops it', async () => {
    const ticks: Array<{ at: number; timer: Timer; context: InvocationContext }> = [];
    const registration: TimerRegistration = {
      kind: 'timer',
      name: 'every-second',
      schedule: '* * * * * *',
      handler: async (timer, context) => {
        ticks.push({ at: Date.now(), timer, context });
      },
    };
    // A gap between ticks is the schedule's 1 s, a timer the same on any machine, and whatever
    // blocked the loop, which a slower machine lengthens: only that slack scales.
    const slack = await timeBound(9_000);
    const gapMs = 1_000 + slack.ms;
    const host = startHost([registration]);
    // Wait for the ticks, not for the clock: a busy machine fires them late, never early.
    await until('four ticks', () => (ticks.length >= 4 ? true : undefined), 30_000);
    await host.stop();
    const count = ticks.length;
    // Each tick is for its own whole second, the one its `next` follows: consecutive ticks are
    // one second apart on the schedule (a multiple of it where a busy machine blocked a whole
    // second), never two for the same second. Wall-clock gaps say nothing here: a tick fired
    // late by a blocked event loop is followed by one on time a moment later.
    const nexts = ticks.map((t) => Date.parse(t.timer.scheduleStatus!.next));
    for (const [i, tick] of ticks.entries()) {
      expect(tick.context).toBeInstanceOf(InvocationContext);
      expect(tick.context.functionName).toBe('every-second');
      expect(tick.timer.isPastDue).toBe(false);
      const firedAt = Date.parse(tick.timer.scheduleStatus!.lastUpdated);
      expect(nexts[i]! % 1_000).toBe(0);
      expect(nexts[i]!).toBeGreaterThan(firedAt);
      expect(nexts[i]!).toBeLessThanOrEqual(firedAt + 1_000);
    }
    const steps = nexts.slice(1).map((next, i) => next - nexts[i]!);
    for (const step of steps) {
      expect(step).toBeGreaterThanOrEqual(1_000);
      expect(step % 1_000).toBe(0);
    }
    // A second apart when nothing blocked the loop: a two-second schedule would never show one.
    expect(steps).toContain(1_000);
    // Only a hang stops a * * * * * * timer for 10 s (on the reference machine).
    const why = `bound ${gapMs} ms = 1000 ms schedule + slack (${slack.why})`;
    for (const [i, tick] of ticks.slice(1).entries()) expect(tick.at - ticks[i]!.at, `tick ${i + 1}: ${why}`).toBeLessThan(gapMs);
    expect(new Set(ticks.map((t) => t.context.invocationId)).size).toBe(count);

    await sleep(2_500);
    expect(ticks).toHaveLength(count);
  });

  it('decodes message bodies when host.json says messageEncoding base64', async () => {
    const queueName = fx.uniqueName('b64');
    const seen: unknown[] = [];
    startHost(
      [
        queueRegistration(queueName, async (entry) => {
          seen.push(entry);
        }),
      ],
      { hostConfig: { ...HOST_CONFIG, messageEncoding: 'base64' } },
    );
    const queue = new AzureQueue(fx.queueService, queueName);
    await queue.ensure();
    await queue.send(Buffer.from(JSON.stringify({ greeting: 'grüße', n: 1 }), 'utf8').toString('base64'));
    await queue.send(Buffer.from('plain text, not JSON', 'utf8').toString('base64'));

    await until('both messages handled', () => (seen.length >= 2 ? true : undefined), 10_000);
    expect(seen).toHaveLength(2);
    expect(seen).toContainEqual({ greeting: 'grüße', n: 1 });
    expect(seen).toContainEqual('plain text, not JSON');
    await until('the queue to be empty', async () => ((await peekTexts(queueName)).length === 0 ? true : undefined), 30_000);
  });

  it('renews visibility while a handler runs past the visibility timeout: no redelivery, dequeueCount stays 1', async () => {
    const queueName = fx.uniqueName('long');
    const calls: Array<{ dequeueCount: unknown; startedAt: number; endedAt?: number }> = [];
    startHost(
      [
        queueRegistration(queueName, async (_entry, context) => {
          const call: { dequeueCount: unknown; startedAt: number; endedAt?: number } = {
            dequeueCount: context.triggerMetadata?.dequeueCount,
            startedAt: Date.now(),
          };
          calls.push(call);
          await sleep(14_000);
          call.endedAt = Date.now();
        }),
      ],
      // Renewed every 3 s: a margin a slow storage call on a busy machine fits in, and the
      // handler still runs past two whole timeouts.
      { visibilityTimeoutSeconds: 6 },
    );
    const queue = new AzureQueue(fx.queueService, queueName);
    await queue.ensure();
    await queue.send(JSON.stringify({ slow: true }));

    const first = await until('the first call to finish', () => (calls[0]?.endedAt ? calls[0] : undefined), 30_000);
    expect(first.endedAt! - first.startedAt).toBeGreaterThanOrEqual(13_900);
    // Deleted once handled (hidden messages count too); from then on nothing can come back.
    await until('the message to be deleted', async () => ((await queue.approximateCount()) === 0 ? true : undefined), 30_000);
    expect(calls.map((c) => c.dequeueCount)).toEqual([1]);
    expect(await peekTexts(queueName)).toEqual([]);
    expect(logs.filter((l) => l.startsWith('error'))).toEqual([]);
  });
});

describe('a stop that comes while a receive is under way', () => {
  it('puts back what that receive hid, instead of leaving it hidden for the visibility timeout', async () => {
    const queueName = fx.uniqueName('stopping');
    const stop = new AbortController();
    let onReceived = (): void => undefined;
    const received = new Promise<void>((resolve) => (onReceived = resolve));
    const stopped = new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve()));
    /** Storage runs the receive (the messages are hidden), and its answer arrives after the stop. */
    class AnswersAfterTheStop extends AzureQueue {
      override async receive(...args: Parameters<AzureQueue['receive']>) {
        const [max, visibility, options] = args;
        const got = await super.receive(max, visibility);
        if (got.length === 0) return got;
        onReceived();
        await stopped;
        // As the SDK does: a call whose signal has aborted fails, its answer dropped.
        if (options?.abortSignal?.aborted) throw Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
        return got;
      }
    }
    const queue = new AnswersAfterTheStop(fx.queueService, queueName);
    await queue.ensure();
    await queue.send('an item of a run');
    const handled: string[] = [];
    const poison = new AzureQueue(fx.queueService, `${queueName}-poison`);
    const pumped = pumpQueue(queue, poison, async (m) => void handled.push(m.text), stop.signal, {
      visibilityTimeoutSeconds: 60,
      maxPollingIntervalMs: 250,
    });
    await received;
    stop.abort();
    await pumped;
    // Visible again at once, not in 60 s: the next instance's receive gets it.
    expect(await peekTexts(queueName)).toEqual(['an item of a run']);
    expect(handled).toEqual([]);
  });
});

describe('local host batching', () => {
  it('runs a batch of 16 at once, and fetches the next batch only when 8 or fewer are left running', async () => {
    const queueName = fx.uniqueName('batch');
    const queue = new AzureQueue(fx.queueService, queueName);
    await queue.ensure();
    for (let i = 0; i < 40; i++) await queue.send(JSON.stringify({ i }));
    let running = 0;
    let peak = 0;
    let holding = true;
    const gates: Array<() => void> = [];
    const registration: QueueRegistration = {
      kind: 'queue',
      name: 'held',
      queueName,
      connection: 'AzureWebJobsStorage',
      handler: async () => {
        if (!holding) return;
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((release) => gates.push(release));
        running--;
      },
    };
    startHost([registration]);
    const settle = async (want: number) => {
      const deadline = Date.now() + patience(100 * 50);
      while (running !== want && Date.now() < deadline) await sleep(50);
      await sleep(500); // and nothing more arrives
    };
    await settle(16);
    expect(running).toBe(16);
    // Releasing 7 leaves 9 running: still above the threshold, so no new batch.
    for (const release of gates.splice(0, 7)) release();
    await settle(9);
    expect(running).toBe(9);
    // One more leaves 8: the threshold, so the next batch of 16 arrives.
    gates.shift()?.();
    await settle(24);
    expect(running).toBe(24);
    expect(peak).toBe(24);
    // Let everything go, including messages still to come, so stop() has nothing to wait for.
    holding = false;
    for (const release of gates.splice(0)) release();
  });
});

describe('LocalHost drain mode, as the Functions host drains an instance before a scale-in', () => {
  it('takes nothing new, aborts what started near the drain 1–3 s in (its message comes back), and lets the rest finish', async () => {
    const resources = hubResources(fx.uniqueName('drain'));
    const started = new Map<string, number>();
    const finished: string[] = [];
    const release = new Map<string, () => void>();
    const host = startHost([
      queueRegistration(resources.workQueue, async (entry) => {
        const name = (entry as { name: string }).name;
        started.set(name, performance.now());
        // Each handler runs until the test lets it go, as a long item would.
        await new Promise<void>((resolve) => release.set(name, resolve));
        finished.push(name);
      }),
    ]);
    const work = new AzureQueue(fx.queueService, resources.workQueue);
    await work.send(JSON.stringify({ name: 'early' }));
    const earlyAt = await until('the early message to start', () => started.get('early'), 20_000);
    // Long enough before the drain not to count as near it (the rule below says 400 ms).
    await until('the early invocation to be old', () => (performance.now() - earlyAt > 500 ? true : undefined), 20_000);
    await work.send(JSON.stringify({ name: 'near' }));
    const nearAt = await until('the near message to start', () => started.get('near'), 20_000);

    let drained = false;
    const draining = host.drain({ nearMs: 400, abortAfterMs: () => 1500 }).then(() => (drained = true));
    await work.send(JSON.stringify({ name: 'late' }));
    // The near one is aborted 1.5 s after it started: the host counts it failed, and its message
    // is visible again, for another instance, though its code still runs here.
    await until(
      'the near message to be visible again',
      async () => ((await peekTexts(resources.workQueue)).some((t) => t.includes('near')) ? true : undefined),
      20_000,
    );
    expect(performance.now() - nearAt).toBeGreaterThanOrEqual(1500);
    expect(logs.some((l) => /aborted by the host: worker channel is shutting down/.test(l))).toBe(true);
    expect(finished).toEqual([]);
    // The early one is not aborted: the drain waits for it.
    expect(drained).toBe(false);
    release.get('early')!();
    await draining;
    expect(finished).toEqual(['early']);
    // Nothing new was taken after the drain: the late message is still there, never started.
    expect(started.has('late')).toBe(false);
    expect((await peekTexts(resources.workQueue)).filter((t) => t.includes('late'))).toHaveLength(1);
    // The early message was deleted as done; the aborted one's code ends whenever it ends.
    expect((await peekTexts(resources.workQueue)).some((t) => t.includes('early'))).toBe(false);
    release.get('near')!();
  });
});
