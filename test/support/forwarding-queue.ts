import type { MessageReceipt, QueueCallOptions, QueuePort, ReceivedMessage } from '../../src/queue/queue-port';

export type SendOptions = QueueCallOptions & { visibilityTimeoutSeconds?: number };

/** Passes every call to another queue; tests extend it to add faults or records to one method. */
export class ForwardingQueue implements QueuePort {
  constructor(protected readonly inner: QueuePort) {}
  get name(): string {
    return this.inner.name;
  }
  ensure(options?: QueueCallOptions): Promise<void> {
    return this.inner.ensure(options);
  }
  send(text: string, options?: SendOptions): Promise<MessageReceipt> {
    return this.inner.send(text, options);
  }
  receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    return this.inner.receive(max, visibilityTimeoutSeconds, options);
  }
  delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean> {
    return this.inner.delete(message, options);
  }
  setVisibility(message: MessageReceipt, seconds: number, options?: QueueCallOptions): Promise<MessageReceipt | undefined> {
    return this.inner.setVisibility(message, seconds, options);
  }
  approximateCount(options?: QueueCallOptions): Promise<number> {
    return this.inner.approximateCount(options);
  }
}
