import { sleep, systemClock, type Clock, type TimerHandle } from '../clock/clock';
import type { MessageReceipt, QueuePort, ReceivedMessage } from '../queue/queue-port';

export interface QueuePumpOptions {
  /** Messages fetched per receive (the host's batchSize). Default 16. */
  batchSize?: number;
  /** Fetch more when fewer than this are running (the host's newBatchThreshold). Default batchSize / 2. */
  newBatchThreshold?: number;
  /** How long a received message stays hidden; renewed at half-time while its handler runs. Default 30 s. */
  visibilityTimeoutSeconds?: number;
  /** After a failure, the message is visible again after this delay (host.json `visibilityTimeout`). Default 0. */
  retryDelaySeconds?: number;
  /** A message whose handler failed this many times moves to the poison queue. Default 5. */
  maxDequeueCount?: number;
  /**
   * After an empty receive the pump waits, doubling from `minPollingIntervalMs` (default 100 ms)
   * up to this (host.json `maxPollingInterval`, the host's default 1 minute), and starts again
   * from the minimum once a receive brings messages, as the host's queue listener does. Idle
   * queues then cost one receive per interval, not one per 100 ms.
   */
  maxPollingIntervalMs?: number;
  minPollingIntervalMs?: number;
  random?: () => number;
  clock?: Clock;
  onError?: (error: unknown, message: ReceivedMessage | undefined) => void;
}

/**
 * A queue trigger outside the Functions host, with the host's semantics: batches, a handler
 * per message, its visibility renewed while the handler runs, delete on success, redelivery
 * after `retryDelaySeconds` on failure, and the poison queue once a message has failed
 * `maxDequeueCount` times. Runs until `signal` aborts; messages in flight finish first.
 */
export async function pumpQueue(
  queue: QueuePort,
  poison: QueuePort,
  handler: (message: ReceivedMessage) => Promise<void>,
  signal: AbortSignal,
  options: QueuePumpOptions = {},
): Promise<void> {
  const batchSize = options.batchSize ?? 16;
  const threshold = options.newBatchThreshold ?? Math.floor(batchSize / 2);
  const visibility = options.visibilityTimeoutSeconds ?? 30;
  const retryDelay = options.retryDelaySeconds ?? 0;
  const maxDequeueCount = options.maxDequeueCount ?? 5;
  const maxPoll = options.maxPollingIntervalMs ?? 60_000;
  const minPoll = Math.min(options.minPollingIntervalMs ?? 100, maxPoll);
  const random = options.random ?? Math.random;
  let idleDelay = 0;
  // Doubling with a little jitter so idle instances drift apart, never past the maximum: an
  // idle queue costs exactly one receive per maxPollingInterval.
  const backOff = (): number => {
    idleDelay = Math.min(maxPoll, Math.max(minPoll, idleDelay * 2));
    return Math.min(maxPoll, idleDelay * (1 + 0.1 * random()));
  };
  const clock = options.clock ?? systemClock;
  const inFlight = new Set<Promise<void>>();
  // A receive the server has already run has hidden its messages for `visibility` seconds.
  // Aborted on the stop, its answer would be dropped and those messages stranded, handed to no
  // one until they reappear: a run's items held up for the whole visibility timeout by one
  // instance's graceful stop. So a receive under way when the stop comes may finish (up to
  // RECEIVE_GRACE_MS, for a storage that does not answer), and what it brought is put back.
  const late = new AbortController();
  let grace: TimerHandle | undefined;
  const onStop = (): void => {
    grace = clock.setTimeout(() => late.abort(signal.reason), RECEIVE_GRACE_MS);
  };
  signal.addEventListener('abort', onStop, { once: true });

  const run = async (message: ReceivedMessage): Promise<void> => {
    // Delivered more often than allowed (its handler's process died mid-run, again and again):
    // the host moves it to poison without running it once more.
    if (message.dequeueCount > maxDequeueCount) {
      await poison.ensure();
      await poison.send(message.text);
      await queue.delete(message);
      return;
    }
    let receipt: MessageReceipt = message;
    const done = new AbortController();
    // Keep the message hidden while the handler works, as the host does for long functions.
    const renewal = (async () => {
      for (;;) {
        try {
          await sleep(clock, (visibility * 1000) / 2, done.signal);
        } catch {
          return;
        }
        const next = await queue.setVisibility(receipt, visibility).catch(() => undefined);
        if (next) receipt = next;
      }
    })();
    let failed: unknown;
    try {
      await handler(message);
    } catch (error) {
      failed = error ?? new Error('handler failed');
    } finally {
      done.abort();
      await renewal;
    }
    if (failed === undefined) {
      await queue.delete(receipt);
      return;
    }
    options.onError?.(failed, message);
    if (message.dequeueCount >= maxDequeueCount) {
      await poison.ensure();
      await poison.send(message.text);
      await queue.delete(receipt);
    } else {
      await queue.setVisibility(receipt, retryDelay);
    }
  };

  while (!signal.aborted) {
    if (inFlight.size > threshold) {
      await Promise.race(inFlight);
      continue;
    }
    let batch: ReceivedMessage[];
    try {
      batch = await queue.receive(batchSize, visibility, { abortSignal: late.signal });
    } catch (error) {
      if (signal.aborted) break;
      options.onError?.(error, undefined);
      await sleep(clock, backOff(), signal).catch(() => undefined);
      continue;
    }
    if (signal.aborted) {
      await Promise.allSettled(
        batch.map((message) => queue.setVisibility(message, 0).catch((error: unknown) => options.onError?.(error, message))),
      );
      break;
    }
    for (const message of batch) {
      const tracked: Promise<void> = run(message)
        .catch((error: unknown) => options.onError?.(error, message))
        .finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    }
    if (batch.length === 0) await sleep(clock, backOff(), signal).catch(() => undefined);
    else idleDelay = 0;
  }
  signal.removeEventListener('abort', onStop);
  if (grace !== undefined) clock.clearTimeout(grace);
  await Promise.allSettled(inFlight);
}

/** How long a receive under way when the pump stops may take to answer before it is aborted. */
const RECEIVE_GRACE_MS = 10_000;
