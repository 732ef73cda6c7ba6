import { z } from 'zod';
import { defineJob } from '../jobs/define-job';

/**
 * A small job to see the engine work: every five minutes, square 1..1000 and sum the squares.
 * The answer is known (n(n+1)(2n+1)/6), so a wrong output is obvious.
 */
export const demoSquares = defineJob({
  name: 'demo-squares',
  schedule: '0 */5 * * * *',
  itemsPerMessage: 10,
  itemSchema: z.number().int(),
  resultSchema: z.number(),
  *split() {
    for (let n = 1; n <= 1000; n++) yield n;
  },
  process: (n: number) => n * n,
  aggregate: {
    initial: () => ({ items: 0, sumOfSquares: 0 }),
    add: (acc: { items: number; sumOfSquares: number }, square: number) => ({
      items: acc.items + 1,
      sumOfSquares: acc.sumOfSquares + square,
    }),
  },
});
