/**
 * The storage port for one queue, as Baton uses Azure Storage queues: at-least-once delivery,
 * a visibility timeout per receive, and delete by pop receipt.
 *
 * Contract (checked on every implementation by `test/contract/queue.contract.ts`):
 * - `send` makes the text receivable (after `visibilityTimeoutSeconds`, default 0).
 * - `receive` returns up to `max` (1–32) visible messages, hides each for
 *   `visibilityTimeoutSeconds`, and increments its `dequeueCount` (1 on first delivery).
 *   A message not deleted becomes visible again when its timeout ends.
 * - `delete` with the latest pop receipt removes the message and returns true. A message that
 *   is gone, or whose receipt is stale because it was received again, returns false and
 *   changes nothing: for at-least-once consumers that is not an error.
 * - Text round-trips unchanged (no base64 or XML surprises) up to `MAX_QUEUE_MESSAGE_BYTES`.
 *   The service's XML transport drops line feeds and mangles other control characters, so
 *   `send` refuses them rather than deliver something else; `JSON.stringify` output never has
 *   them.
 */
export interface QueuePort {
  readonly name: string;
  /** Creates the queue if it does not exist. */
  ensure(options?: QueueCallOptions): Promise<void>;
  /** Returns the message's receipt, with which the sender may delete it or change its visibility. */
  send(text: string, options?: QueueCallOptions & { visibilityTimeoutSeconds?: number }): Promise<MessageReceipt>;
  receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]>;
  delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean>;
  /**
   * Hides a received message for `visibilityTimeoutSeconds` from now (0 makes it visible at
   * once) and returns its new receipt; the old one goes stale. Undefined when the message is gone
   * or the receipt is already stale.
   */
  setVisibility(
    message: MessageReceipt,
    visibilityTimeoutSeconds: number,
    options?: QueueCallOptions,
  ): Promise<MessageReceipt | undefined>;
  /** Approximate number of messages, visible or not. */
  approximateCount(options?: QueueCallOptions): Promise<number>;
}

/**
 * The queues of one storage account, by name: how a leader finds queues its own settings do not
 * name (shards a larger `BATON_QUEUE_SHARDS` left behind, or a newer deployment's).
 *
 * Contract (`test/contract/queue-directory.contract.ts`): `list` returns, in name order, the
 * names that start with `prefix` of the queues that exist, and a queue exists once `ensure()` or
 * a `send` has run on it; merely asking for it with `queue(name)` creates nothing.
 */
export interface QueueDirectory {
  queue(name: string): QueuePort;
  list(prefix: string, options?: QueueCallOptions): Promise<string[]>;
}

export interface MessageReceipt {
  id: string;
  popReceipt: string;
}

export interface ReceivedMessage extends MessageReceipt {
  text: string;
  dequeueCount: number;
}

export interface QueueCallOptions {
  abortSignal?: AbortSignal;
}

/**
 * What Baton puts in one message body. Azure allows 64 KiB; the margin leaves room for XML
 * escaping of the text on the wire. Larger payloads go to a blob (claim check).
 */
export const MAX_QUEUE_MESSAGE_BYTES = 48 * 1024;
