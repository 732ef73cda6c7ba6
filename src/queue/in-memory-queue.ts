import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '../clock/clock';
import { assertReceivable, assertSendable, assertVisibility } from './azure-queue';
import type { MessageReceipt, QueueCallOptions, QueueDirectory, QueuePort, ReceivedMessage } from './queue-port';

interface StoredMessage {
  id: string;
  text: string;
  /** `clock.now()` at which the message can be received again. */
  visibleAt: number;
  dequeueCount: number;
  /** Only the receipt of the latest send, receive or visibility change may delete or change it. */
  popReceipt: string;
}

/**
 * A `QueuePort` in memory, with visibility on an injected clock: fast and deterministic for
 * tests on a `FakeClock`. It passes the same contract suite as `AzureQueue` and refuses the same
 * texts and arguments, so a test on it does not pass what Azure would reject. Unlike Azure it
 * does not require `ensure()` first and messages never expire.
 */
export class InMemoryQueue implements QueuePort {
  readonly name: string;
  private readonly clock: Clock;
  // Insertion order is delivery order among the visible messages.
  private readonly messages: StoredMessage[] = [];
  private made = false;

  constructor(name: string, options: { clock?: Clock } = {}) {
    this.name = name;
    this.clock = options.clock ?? systemClock;
  }

  /** Whether `ensure()` or a send has run, as either creates an Azure queue. */
  get created(): boolean {
    return this.made;
  }

  async ensure(options?: QueueCallOptions): Promise<void> {
    options?.abortSignal?.throwIfAborted();
    this.made = true;
  }

  async send(text: string, options?: QueueCallOptions & { visibilityTimeoutSeconds?: number }): Promise<MessageReceipt> {
    options?.abortSignal?.throwIfAborted();
    assertSendable(text, options?.visibilityTimeoutSeconds);
    this.made = true;
    const receipt = { id: randomUUID(), popReceipt: randomUUID() };
    this.messages.push({
      ...receipt,
      text,
      visibleAt: this.clock.now() + (options?.visibilityTimeoutSeconds ?? 0) * 1000,
      dequeueCount: 0,
    });
    return receipt;
  }

  async receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    options?.abortSignal?.throwIfAborted();
    assertReceivable(max, visibilityTimeoutSeconds);
    const now = this.clock.now();
    const received: ReceivedMessage[] = [];
    for (const message of this.messages) {
      if (received.length >= max) break;
      if (message.visibleAt > now) continue;
      message.visibleAt = now + visibilityTimeoutSeconds * 1000;
      message.dequeueCount += 1;
      message.popReceipt = randomUUID();
      received.push({ id: message.id, popReceipt: message.popReceipt, text: message.text, dequeueCount: message.dequeueCount });
    }
    return received;
  }

  async delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean> {
    options?.abortSignal?.throwIfAborted();
    const index = this.messages.findIndex((m) => m.id === message.id);
    const stored = this.messages[index];
    if (!stored || stored.popReceipt !== message.popReceipt) return false;
    this.messages.splice(index, 1);
    return true;
  }

  async setVisibility(
    message: MessageReceipt,
    visibilityTimeoutSeconds: number,
    options?: QueueCallOptions,
  ): Promise<MessageReceipt | undefined> {
    options?.abortSignal?.throwIfAborted();
    assertVisibility(visibilityTimeoutSeconds);
    const stored = this.messages.find((m) => m.id === message.id);
    if (!stored || stored.popReceipt !== message.popReceipt) return undefined;
    stored.visibleAt = this.clock.now() + visibilityTimeoutSeconds * 1000;
    stored.popReceipt = randomUUID();
    return { id: stored.id, popReceipt: stored.popReceipt };
  }

  async approximateCount(options?: QueueCallOptions): Promise<number> {
    options?.abortSignal?.throwIfAborted();
    return this.messages.length;
  }

  /** For tests: the text of every message, visible or not, in delivery order. */
  peekAll(): string[] {
    return this.messages.map((m) => m.text);
  }
}

/** A `QueueDirectory` of `InMemoryQueue`s on one clock: the same name is always the same queue. */
export class InMemoryQueueDirectory implements QueueDirectory {
  private readonly queues = new Map<string, InMemoryQueue>();

  constructor(private readonly options: { clock?: Clock } = {}) {}

  queue(name: string): InMemoryQueue {
    let queue = this.queues.get(name);
    if (!queue) this.queues.set(name, (queue = new InMemoryQueue(name, this.options)));
    return queue;
  }

  async list(prefix: string, options?: QueueCallOptions): Promise<string[]> {
    options?.abortSignal?.throwIfAborted();
    return [...this.queues.values()]
      .filter((q) => q.created && q.name.startsWith(prefix))
      .map((q) => q.name)
      .sort();
  }
}
