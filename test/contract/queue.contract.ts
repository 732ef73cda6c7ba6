import { describe, expect, it } from 'vitest';
import { MAX_QUEUE_MESSAGE_BYTES, type QueuePort, type ReceivedMessage } from '../../src/queue/queue-port';

export interface QueueHarness {
  /** A queue no other test uses; the contract calls `ensure()` itself. */
  queue: QueuePort;
  /** Lets `ms` pass for the queue's visibility clock. */
  elapse(ms: number): Promise<void>;
}

/**
 * What every `QueuePort` must do. The same cases run on the in-memory queue (fake clock) and on
 * a queue in Azurite (real time). Visibility timeouts are whole seconds on the wire, so the
 * timing cases hide for 1 s and wait 1.5 s: long enough for Azurite, short enough for the suite.
 */
export function queueContract(name: string, makeHarness: () => Promise<QueueHarness>): void {
  const fresh = async (): Promise<QueueHarness> => {
    const harness = await makeHarness();
    await harness.queue.ensure();
    return harness;
  };
  const only = (messages: ReceivedMessage[]): ReceivedMessage => {
    expect(messages).toHaveLength(1);
    return messages[0] as ReceivedMessage;
  };
  const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

  describe(`QueuePort contract: ${name}`, () => {
    it('ensures idempotently, starting empty', async () => {
      const { queue } = await fresh();
      await queue.ensure();
      expect(await queue.approximateCount()).toBe(0);
      expect(await queue.receive(32, 30)).toEqual([]);
    });

    it.each([
      ['plain ASCII', 'hello'],
      ['unicode, astral plane and a tab', 'Grüße, 東京, 😀\tend'],
      ['JSON with escaped line breaks', JSON.stringify({ job: 'j-1', items: [1, 2], note: 'line 1\nline 2\r\n', q: '"' })],
      ['XML-special characters', `<a href="x?y=1&z=2">'&amp;'</a> & < > ]]>`],
      ['leading and trailing spaces', '  padded  '],
      ['the empty string', ''],
    ])('round-trips %s unchanged', async (_label, text) => {
      const { queue } = await fresh();
      await queue.send(text);
      const message = only(await queue.receive(1, 30));
      expect(message.text).toBe(text);
      expect(typeof message.id).toBe('string');
      expect(typeof message.popReceipt).toBe('string');
    });

    it('round-trips a body of exactly MAX_QUEUE_MESSAGE_BYTES', async () => {
      const { queue } = await fresh();
      const head = '😀€é<&>';
      const text = head + 'x'.repeat(MAX_QUEUE_MESSAGE_BYTES - bytes(head));
      expect(bytes(text)).toBe(MAX_QUEUE_MESSAGE_BYTES);
      await queue.send(text);
      expect(only(await queue.receive(1, 30)).text).toBe(text);
    });

    it('rejects a body one byte over the limit with a RangeError naming size and limit, enqueuing nothing', async () => {
      const { queue } = await fresh();
      const text = 'x'.repeat(MAX_QUEUE_MESSAGE_BYTES - 1) + 'é';
      expect(bytes(text)).toBe(MAX_QUEUE_MESSAGE_BYTES + 1);
      const err = await queue.send(text).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RangeError);
      expect((err as Error).message).toContain(String(MAX_QUEUE_MESSAGE_BYTES + 1));
      expect((err as Error).message).toContain(String(MAX_QUEUE_MESSAGE_BYTES));
      expect(await queue.approximateCount()).toBe(0);
    });

    it.each([
      ['a raw line feed', 'line 1\nline 2'],
      ['a raw carriage return', 'a\rb'],
      ['a control character', 'a\u0001b'],
      ['a lone surrogate', 'a\ud83d'],
    ])('rejects %s, which the XML wire format would change, enqueuing nothing', async (_label, text) => {
      const { queue } = await fresh();
      await expect(queue.send(text)).rejects.toBeInstanceOf(RangeError);
      expect(await queue.approximateCount()).toBe(0);
    });

    it('returns at most max messages, and [] when nothing is visible', async () => {
      const { queue } = await fresh();
      for (let i = 0; i < 5; i++) await queue.send(`m${i}`);
      expect(await queue.receive(3, 30)).toHaveLength(3);
      expect(await queue.receive(32, 30)).toHaveLength(2);
      expect(await queue.receive(32, 30)).toEqual([]);
    });

    it('rejects max outside 1–32 and a zero visibility timeout with RangeError, before any call', async () => {
      const { queue } = await fresh();
      await queue.send('kept');
      for (const max of [0, 33, 1.5]) {
        await expect(queue.receive(max, 30)).rejects.toThrow(RangeError);
        await expect(queue.receive(max, 30)).rejects.toThrow(/max/);
      }
      await expect(queue.receive(1, 0)).rejects.toBeInstanceOf(RangeError);
      expect(only(await queue.receive(32, 30)).dequeueCount).toBe(1);
    });

    it('hides a received message from a second receive until its timeout', async () => {
      const { queue } = await fresh();
      await queue.send('once');
      only(await queue.receive(1, 30));
      expect(await queue.receive(32, 30)).toEqual([]);
      expect(await queue.approximateCount()).toBe(1);
    });

    it('redelivers after the visibility timeout, counting dequeues from 1', async () => {
      const { queue, elapse } = await fresh();
      await queue.send('again');
      const first = only(await queue.receive(1, 1));
      expect(first.dequeueCount).toBe(1);
      await elapse(1500);
      const second = only(await queue.receive(1, 30));
      expect(second).toMatchObject({ id: first.id, text: 'again', dequeueCount: 2 });
      expect(second.popReceipt).not.toBe(first.popReceipt);
    });

    it('deletes with the current receipt, and says false the second time', async () => {
      const { queue } = await fresh();
      await queue.send('done');
      const message = only(await queue.receive(1, 30));
      expect(await queue.delete(message)).toBe(true);
      expect(await queue.approximateCount()).toBe(0);
      expect(await queue.delete(message)).toBe(false);
    });

    it('refuses a stale receipt after redelivery, keeping the message for its new holder', async () => {
      const { queue, elapse } = await fresh();
      await queue.send('contended');
      const stale = only(await queue.receive(1, 1));
      await elapse(1500);
      const current = only(await queue.receive(1, 30));
      expect(await queue.delete(stale)).toBe(false);
      expect(await queue.approximateCount()).toBe(1);
      expect(await queue.delete(current)).toBe(true);
      expect(await queue.approximateCount()).toBe(0);
    });

    it("extends a received message's visibility, issuing a new receipt and staling the old one", async () => {
      const { queue, elapse } = await fresh();
      await queue.send('long job');
      const received = only(await queue.receive(1, 1));
      const renewed = await queue.setVisibility(received, 30);
      expect(renewed?.id).toBe(received.id);
      expect(renewed?.popReceipt).not.toBe(received.popReceipt);
      await elapse(1500);
      expect(await queue.receive(1, 30)).toEqual([]);
      expect(await queue.delete(received)).toBe(false);
      expect(await queue.delete(renewed as NonNullable<typeof renewed>)).toBe(true);
    });

    it('makes a message visible at once with visibility 0, and refuses a stale receipt', async () => {
      const { queue } = await fresh();
      await queue.send('retry me');
      const received = only(await queue.receive(1, 30));
      const released = await queue.setVisibility(received, 0);
      expect(released).toBeDefined();
      expect(await queue.setVisibility(received, 10)).toBeUndefined();
      const again = only(await queue.receive(1, 30));
      expect(again).toMatchObject({ id: received.id, dequeueCount: 2 });
      await expect(queue.setVisibility(again, -1)).rejects.toBeInstanceOf(RangeError);
    });

    it('gives each of 16 messages to exactly one of 16 concurrent receivers', async () => {
      const { queue } = await fresh();
      const texts = Array.from({ length: 16 }, (_, i) => `job-${String(i).padStart(2, '0')}`);
      await Promise.all(texts.map((text) => queue.send(text)));
      const receiver = async (): Promise<string[]> => {
        const got: string[] = [];
        for (;;) {
          const batch = await queue.receive(1, 30);
          if (batch.length === 0) return got;
          got.push(...batch.map((m) => m.text));
        }
      };
      const all = (await Promise.all(Array.from({ length: 16 }, receiver))).flat();
      expect(all.sort()).toEqual(texts);
    });

    it('counts messages whether visible or not', async () => {
      const { queue } = await fresh();
      await queue.send('a');
      await queue.send('b');
      await queue.send('c', { visibilityTimeoutSeconds: 60 });
      expect(await queue.approximateCount()).toBe(3);
      const message = only(await queue.receive(1, 30));
      expect(await queue.approximateCount()).toBe(3);
      await queue.delete(message);
      expect(await queue.approximateCount()).toBe(2);
    });

    it('delays delivery of a message sent with a visibility timeout', async () => {
      const { queue, elapse } = await fresh();
      await queue.send('later', { visibilityTimeoutSeconds: 1 });
      expect(await queue.receive(32, 30)).toEqual([]);
      await elapse(1500);
      expect(only(await queue.receive(32, 30))).toMatchObject({ text: 'later', dequeueCount: 1 });
    });

    it("lets the sender postpone, surface or delete a message it sent, with the send's receipt", async () => {
      const { queue, elapse } = await fresh();
      const sent = await queue.send('beacon', { visibilityTimeoutSeconds: 1 });
      // Postponed before it ever surfaced: still hidden after its first delay.
      const postponed = await queue.setVisibility(sent, 60);
      expect(postponed).toBeDefined();
      expect(await queue.setVisibility(sent, 0)).toBeUndefined();
      await elapse(1500);
      expect(await queue.receive(32, 30)).toEqual([]);
      // Surfaced at once, and delivered for the first time.
      const surfaced = await queue.setVisibility(postponed!, 0);
      expect(surfaced).toBeDefined();
      const received = only(await queue.receive(1, 30));
      expect(received).toMatchObject({ id: sent.id, text: 'beacon', dequeueCount: 1 });
      // A receive stales the sender's receipt: the receiver owns the message now.
      expect(await queue.delete(surfaced!)).toBe(false);
      expect(await queue.delete(received)).toBe(true);
      const unseen = await queue.send('never delivered', { visibilityTimeoutSeconds: 60 });
      expect(await queue.delete(unseen)).toBe(true);
      expect(await queue.approximateCount()).toBe(0);
    });

    it('stops a call whose signal has already aborted', async () => {
      const { queue } = await fresh();
      const aborted = AbortSignal.abort();
      await expect(queue.send('never', { abortSignal: aborted })).rejects.toThrow();
      expect(await queue.approximateCount()).toBe(0);
      await queue.send('kept');
      await expect(queue.receive(1, 30, { abortSignal: aborted })).rejects.toThrow();
      expect(only(await queue.receive(1, 30)).dequeueCount).toBe(1);
    });
  });
}
