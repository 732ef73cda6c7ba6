import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/clock/fake-clock';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { queueContract } from './queue.contract';

queueContract('InMemoryQueue', async () => {
  const clock = new FakeClock();
  return { queue: new InMemoryQueue('work', { clock }), elapse: (ms) => clock.advance(ms) };
});

// Beyond the contract: what tests built on the in-memory queue rely on.
describe('InMemoryQueue', () => {
  it('delivers visible messages in insertion order, passing over hidden ones', async () => {
    const clock = new FakeClock();
    const queue = new InMemoryQueue('work', { clock });
    await queue.send('a');
    await queue.send('b', { visibilityTimeoutSeconds: 5 });
    await queue.send('c');
    expect((await queue.receive(32, 1)).map((m) => m.text)).toEqual(['a', 'c']);
    await clock.advance(5000);
    expect((await queue.receive(32, 1)).map((m) => m.text)).toEqual(['a', 'b', 'c']);
  });

  it('peekAll lists every text, visible or not, without receiving', async () => {
    const queue = new InMemoryQueue('work', { clock: new FakeClock() });
    await queue.send('a');
    await queue.send('b');
    await queue.receive(1, 30);
    expect(queue.peekAll()).toEqual(['a', 'b']);
    expect((await queue.receive(32, 30)).map((m) => [m.text, m.dequeueCount])).toEqual([['b', 1]]);
  });
});
