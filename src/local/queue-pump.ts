import { sleep, systemClock, type Clock } from '../clock/clock';
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
  /** Wait when the queue was empty. Default 250 ms. */
  idlePollMs?: number;
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
  const idlePollMs = options.idlePollMs ?? 250;
  const clock = options.clock ?? systemClock;
  const inFlight = new Set<Promise<void>>();

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
      batch = await queue.receive(batchSize, visibility, { abortSignal: signal });
    } catch (error) {
      if (signal.aborted) break;
      options.onError?.(error, undefined);
      await sleep(clock, idlePollMs, signal).catch(() => undefined);
      continue;
    }
    for (const message of batch) {
      const tracked: Promise<void> = run(message)
        .catch((error: unknown) => options.onError?.(error, message))
        .finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    }
    if (batch.length === 0) await sleep(clock, idlePollMs, signal).catch(() => undefined);
  }
  await Promise.allSettled(inFlight);
}
