import type { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { storageErrorOf } from '../storage/rest-error';
import {
  MAX_QUEUE_MESSAGE_BYTES,
  type MessageReceipt,
  type QueueCallOptions,
  type QueueDirectory,
  type QueuePort,
  type ReceivedMessage,
} from './queue-port';

/** The service's cap on both a receive's and a send's visibility timeout: 7 days. */
const MAX_VISIBILITY_SECONDS = 7 * 24 * 60 * 60;

/**
 * Characters that do not survive the SDK's XML round trip, so a message holding one would arrive
 * changed or not at all: the SDK strips every LF from the request body (core-xml's serializer
 * removes `\n` after building), CR comes back as the literal text `&#xD;`, other C0 controls,
 * U+FFFE/U+FFFF are not XML characters, and a lone surrogate is sent as U+FFFD. Tab is fine.
 * JSON.stringify never emits any of them raw, so JSON bodies always pass.
 */
// With the `u` flag a surrogate range matches only unpaired halves; a paired one is one code point.
const UNSENDABLE = /[\u0000-\u0008\u000a-\u001f\ufffe\uffff\ud800-\udfff]/u;

/**
 * The checks both queue implementations make before a send, so the in-memory queue refuses what
 * Azure (or the SDK on the way there) would refuse or mangle, instead of passing tests that
 * production would fail.
 */
export function assertSendable(text: string, visibilityTimeoutSeconds: number | undefined): void {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_QUEUE_MESSAGE_BYTES) {
    throw new RangeError(
      `queue message is ${bytes} bytes, over the limit of ${MAX_QUEUE_MESSAGE_BYTES} bytes (MAX_QUEUE_MESSAGE_BYTES): store the payload in a blob and send its name`,
    );
  }
  const bad = UNSENDABLE.exec(text);
  if (bad) {
    const codeUnit = bad[0].charCodeAt(0).toString(16).padStart(4, '0');
    throw new RangeError(
      `queue message holds U+${codeUnit} at index ${bad.index}, which does not survive the XML wire format unchanged; send JSON (JSON.stringify escapes it)`,
    );
  }
  if (visibilityTimeoutSeconds !== undefined) {
    assertSeconds('visibilityTimeoutSeconds', visibilityTimeoutSeconds, 0);
  }
}

/** Limits of Get Messages, checked before the call so both implementations fail the same way. */
/** Visibility for an update: whole seconds from 0 (visible now) to 7 days. */
export function assertVisibility(seconds: number): void {
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > 7 * 24 * 3600) {
    throw new RangeError(`visibilityTimeoutSeconds must be whole seconds from 0 to 604800, got ${seconds}`);
  }
}

export function assertReceivable(max: number, visibilityTimeoutSeconds: number): void {
  if (!Number.isInteger(max) || max < 1 || max > 32) {
    throw new RangeError(`max must be an integer from 1 to 32, got ${max}`);
  }
  // The service refuses 0 (OutOfRangeQueryParameterValue): a receive always hides what it returns.
  assertSeconds('visibilityTimeoutSeconds', visibilityTimeoutSeconds, 1);
}

function assertSeconds(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min || value > MAX_VISIBILITY_SECONDS) {
    throw new RangeError(`${name} must be whole seconds from ${min} to ${MAX_VISIBILITY_SECONDS}, got ${value}`);
  }
}

/**
 * A `QueuePort` on one Azure Storage queue. Text goes on the wire as is, not base64, to match
 * `messageEncoding: none` in host.json, so queue-triggered functions read what was sent.
 */
export class AzureQueue implements QueuePort {
  readonly name: string;
  private queueClient: QueueClient | undefined;

  constructor(
    private readonly queueService: QueueServiceClient,
    name: string,
  ) {
    this.name = name;
  }

  // Built on first use: each of a hub's queues has a client (its own generated SDK client, a few
  // ms apiece), and an instance's start builds them all but calls only one (its start-up tick).
  private get client(): QueueClient {
    return (this.queueClient ??= this.queueService.getQueueClient(this.name));
  }

  async ensure(options?: QueueCallOptions): Promise<void> {
    await this.client.createIfNotExists({ abortSignal: options?.abortSignal });
  }

  async send(text: string, options?: QueueCallOptions & { visibilityTimeoutSeconds?: number }): Promise<MessageReceipt> {
    assertSendable(text, options?.visibilityTimeoutSeconds);
    const send = async (): Promise<MessageReceipt> => {
      const sent = await this.client.sendMessage(text, {
        abortSignal: options?.abortSignal,
        visibilityTimeout: options?.visibilityTimeoutSeconds,
      });
      return { id: sent.messageId, popReceipt: sent.popReceipt };
    };
    try {
      return await send();
    } catch (err) {
      // A sender can run before anything created the queue (a worker answering before the
      // leader's first term on a new hub, or after someone deleted it): create it, send again.
      if (storageErrorOf(err)?.code !== 'QueueNotFound') throw err;
      await this.ensure(options);
      return await send();
    }
  }

  async receive(max: number, visibilityTimeoutSeconds: number, options?: QueueCallOptions): Promise<ReceivedMessage[]> {
    assertReceivable(max, visibilityTimeoutSeconds);
    const response = await this.client.receiveMessages({
      numberOfMessages: max,
      visibilityTimeout: visibilityTimeoutSeconds,
      abortSignal: options?.abortSignal,
    });
    return response.receivedMessageItems.map((item) => ({
      id: item.messageId,
      popReceipt: item.popReceipt,
      text: item.messageText,
      dequeueCount: item.dequeueCount,
    }));
  }

  async delete(message: MessageReceipt, options?: QueueCallOptions): Promise<boolean> {
    try {
      await this.client.deleteMessage(message.id, message.popReceipt, { abortSignal: options?.abortSignal });
      return true;
    } catch (err) {
      if (isGoneOrStale(err)) return false;
      throw err;
    }
  }

  async setVisibility(
    message: MessageReceipt,
    visibilityTimeoutSeconds: number,
    options?: QueueCallOptions,
  ): Promise<MessageReceipt | undefined> {
    assertVisibility(visibilityTimeoutSeconds);
    try {
      const response = await this.client.updateMessage(message.id, message.popReceipt, undefined, visibilityTimeoutSeconds, {
        abortSignal: options?.abortSignal,
      });
      if (!response.popReceipt) throw new Error(`storage returned no pop receipt for message ${message.id}`);
      return { id: message.id, popReceipt: response.popReceipt };
    } catch (err) {
      if (isGoneOrStale(err)) return undefined;
      throw err;
    }
  }

  async approximateCount(options?: QueueCallOptions): Promise<number> {
    const props = await this.client.getProperties({ abortSignal: options?.abortSignal });
    return props.approximateMessagesCount ?? 0;
  }
}

/** A `QueueDirectory` on one account's queue service. */
export class AzureQueueDirectory implements QueueDirectory {
  constructor(private readonly queueService: QueueServiceClient) {}

  queue(name: string): AzureQueue {
    return new AzureQueue(this.queueService, name);
  }

  async list(prefix: string, options?: QueueCallOptions): Promise<string[]> {
    const names: string[] = [];
    for await (const item of this.queueService.listQueues({ prefix, abortSignal: options?.abortSignal })) names.push(item.name);
    return names.sort();
  }
}

/**
 * Azure answers a delete whose message is gone, or whose receipt is stale, with 404
 * MessageNotFound; Azurite answers the stale case with 400 PopReceiptMismatch. Anything else,
 * QueueNotFound included, is a real failure.
 */
export function isGoneOrStale(err: unknown): boolean {
  const info = storageErrorOf(err);
  if (info?.status === 404) return info.code === undefined || info.code === 'MessageNotFound';
  if (info?.status === 400) return info.code === 'PopReceiptMismatch';
  return false;
}
