import type { MessageReceipt, QueueCallOptions, QueuePort, ReceivedMessage } from '../../src/queue/queue-port';

/** Sends every message twice: at-least-once delivery at its worst. */
export class DuplicatingQueue implements QueuePort {
  sent = 0;
  constructor(private readonly inner: QueuePort) {}
  get name(): string {
    return this.inner.name;
  }
  ensure(options?: QueueCallOptions): Promise<void> {
    return this.inner.ensure(options);
  }
  async send(text: string, options?: QueueCallOptions & { visibilityTimeoutSeconds?: number }): Promise<void> {
    await this.inner.send(text, options);
    await this.inner.send(text, options);
    this.sent += 2;
  }
  receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    return this.inner.receive(max, visibilityTimeoutSeconds, options);
  }
  delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean> {
    return this.inner.delete(message, options);
  }
  approximateCount(options?: QueueCallOptions): Promise<number> {
    return this.inner.approximateCount(options);
  }
}
