import { describe, expect, it } from 'vitest';
import type { QueueDirectory } from '../../src/queue/queue-port';

/**
 * What every `QueueDirectory` must do; the same cases run in memory and on Azurite. `prefix` is
 * unique to each call, so queues of other tests in the same account never show up.
 */
export function queueDirectoryContract(name: string, make: () => Promise<{ directory: QueueDirectory; prefix: string }>): void {
  describe(`QueueDirectory contract: ${name}`, () => {
    it('lists, in name order, the queues that ensure() or a send created, and nothing else', async () => {
      const { directory, prefix } = await make();
      expect(await directory.list(prefix)).toEqual([]);
      await directory.queue(`${prefix}-b`).ensure();
      await directory.queue(`${prefix}-a`).send('{"made":"by a send"}');
      directory.queue(`${prefix}-c`); // asked for, never created
      expect(await directory.list(prefix)).toEqual([`${prefix}-a`, `${prefix}-b`]);
    });

    it('lists only names that start with the prefix', async () => {
      const { directory, prefix } = await make();
      await directory.queue(`${prefix}-work`).ensure();
      await directory.queue(`${prefix}x-work`).ensure();
      await directory.queue(`z${prefix}-work`).ensure();
      expect(await directory.list(`${prefix}-`)).toEqual([`${prefix}-work`]);
    });

    it('gives a queue that is the one listed: what one handle sends, another receives', async () => {
      const { directory, prefix } = await make();
      await directory.queue(`${prefix}-q`).send('hello');
      const [listed] = await directory.list(prefix);
      const received = await directory.queue(listed as string).receive(1, 30);
      expect(received.map((m) => m.text)).toEqual(['hello']);
    });
  });
}
