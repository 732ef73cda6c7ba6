import { describe, expect, it } from 'vitest';
import { rateSeries } from './throughput-run';

describe('rateSeries (the throughput chart)', () => {
  it('is items/s over the trailing second, starting at the origin', () => {
    const samples = [0, 250, 500, 750, 1000, 1250, 1500, 1750, 2000].map((atMs) => ({ atMs, done: atMs / 10 }));
    const series = rateSeries(samples);
    expect(series[0]).toEqual([0, 0]);
    expect(series).toHaveLength(samples.length);
    for (const [, rate] of series.slice(1)) expect(rate).toBeCloseTo(100, 6);
  });

  it('smooths checkpoint bursts over the window', () => {
    // 100 items land every 500 ms in one burst: per 250 ms that is 0 or 400 items/s.
    const samples = Array.from({ length: 9 }, (_, i) => ({ atMs: i * 250, done: Math.floor(i / 2) * 100 }));
    const rates = rateSeries(samples)
      .slice(5)
      .map(([, r]) => r);
    for (const rate of rates) expect(rate).toBeGreaterThanOrEqual(100);
    for (const rate of rates) expect(rate).toBeLessThanOrEqual(300);
  });
});
