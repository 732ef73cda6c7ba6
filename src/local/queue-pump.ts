import { sleep, systemClock, type Clock } from '../clock/clock';
import type { QueuePort, ReceivedMessage } from '../queue/queue-port';

export interface QueuePumpOptions {
  /** Messages fetched per receive (the host's batchSize). Default 16. */
  batchSize?: number;
  /** Fetch more when fewer than this are running (the host's newBatchThreshold). Default batchSize / 2. */
  newBatchThreshold?: number;
  /** How long a received message stays hidden. Default 30 s. */
  visibilityTimeoutSeconds?: number;
  /** After this many deliveries a message moves to the poison queue. Default 5. */
  maxDequeueCount?: number;
  /** Wait when the queue was empty. Default 250 ms. */
  idlePollMs?: number;
  clock?: Clock;
  onError?: (error: unknown, message: ReceivedMessage) => void;
}

/**
 * A queue trigger outside the Functions host, with the host's semantics: batches, a handler
 * per message, delete on success, redelivery after the visibility timeout on failure, and
 * `<queue>-poison` after `maxDequeueCount` deliveries. Runs until `signal` aborts; messages in
 * flight finish first.
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
  const maxDequeueCount = options.maxDequeueCount ?? 5;
  const idlePollMs = options.idlePollMs ?? 250;
  const clock = options.clock ?? systemClock;
  const inFlight = new Set<Promise<void>>();
  const run = async (message: ReceivedMessage): Promise<void> => {
    if (message.dequeueCount > maxDequeueCount) {
      await poison.send(message.text);
      await queue.delete(message);
      return;
    }
    try {
      await handler(message);
    } catch (error) {
      options.onError?.(error, message);
      return; // left for redelivery
    }
    await queue.delete(message);
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
      options.onError?.(error, { id: '', popReceipt: '', text: '', dequeueCount: 0 });
      await sleep(clock, idlePollMs, signal).catch(() => undefined);
      continue;
    }
    for (const message of batch) {
      const task = run(message).catch((error: unknown) => options.onError?.(error, message));
      const tracked = task.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    }
    if (batch.length === 0) await sleep(clock, idlePollMs, signal).catch(() => undefined);
  }
  await Promise.allSettled(inFlight);
}
