import { describe, expect, it } from 'vitest';
import { inLanes } from '../../../src/engine/lanes';

describe('inLanes', () => {
  it.each([
    [100, 16],
    [5, 16],
    [40, 1],
    [0, 8],
  ])('runs %i items with at most %i in flight, each once', async (count, concurrency) => {
    let inFlight = 0;
    let peak = 0;
    const done: number[] = [];
    await inLanes(
      Array.from({ length: count }, (_, i) => i),
      concurrency,
      async (i) => {
        peak = Math.max(peak, ++inFlight);
        await new Promise((r) => setTimeout(r, i % 3));
        inFlight--;
        done.push(i);
      },
    );
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: count }, (_, i) => i));
    expect(peak).toBe(Math.min(count, concurrency));
  });

  it('takes no new item after a failure', async () => {
    const started: number[] = [];
    await expect(
      inLanes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 2, async (i) => {
        started.push(i);
        await new Promise((r) => setTimeout(r, 5));
        if (i === 1) throw new Error('one');
      }),
    ).rejects.toThrow('one');
    await new Promise((r) => setTimeout(r, 50));
    expect(started).toEqual([0, 1, 2]);
  });

  it('rejects with the first failure', async () => {
    await expect(inLanes([1, 2, 3], 2, async (i) => (i === 2 ? Promise.reject(new Error('two')) : undefined))).rejects.toThrow(
      'two',
    );
  });
});
