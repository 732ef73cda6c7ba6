import { ForwardingQueue, type SendOptions } from './forwarding-queue';
import type { MessageReceipt } from '../../src/queue/queue-port';

/** Sends every message twice: at-least-once delivery at its worst. */
export class DuplicatingQueue extends ForwardingQueue {
  sent = 0;
  override async send(text: string, options?: SendOptions): Promise<MessageReceipt> {
    await this.inner.send(text, options);
    const second = await this.inner.send(text, options);
    this.sent += 2;
    return second;
  }
}
