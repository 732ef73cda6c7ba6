import { ForwardingQueue, type SendOptions } from './forwarding-queue';

/** Sends every message twice: at-least-once delivery at its worst. */
export class DuplicatingQueue extends ForwardingQueue {
  sent = 0;
  override async send(text: string, options?: SendOptions): Promise<void> {
    await this.inner.send(text, options);
    await this.inner.send(text, options);
    this.sent += 2;
  }
}
