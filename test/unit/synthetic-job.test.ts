import { describe, expect, it } from 'vitest';
import { InvalidSettingError } from '../../src/errors';
import { createSyntheticJob, expectedSynthetic, parseSyntheticJobs } from '../../src/sample/synthetic-job';

describe('the synthetic job', () => {
  it('splits n items, fails every nth by design and folds to the expected output', async () => {
    const spec = { name: 'sum', items: 10, failEvery: 4 };
    const job = createSyntheticJob(spec);
    const items: unknown[] = [];
    for await (const item of job.split({ runId: 'r', scheduledAt: new Date(0), signal: new AbortController().signal } as never))
      items.push(item);
    expect(items).toEqual(Array.from({ length: 10 }, (_, i) => ({ i })));
    let acc = job.aggregate.initial();
    const failed: number[] = [];
    for (const item of items as { i: number }[]) {
      try {
        const result = await job.process(item, {
          runId: 'r',
          itemIndex: item.i,
          attempt: 1,
          signal: new AbortController().signal,
        });
        acc = job.aggregate.add(acc, result, { itemIndex: item.i });
      } catch {
        failed.push(item.i);
      }
    }
    expect(failed).toEqual([3, 7]);
    expect(expectedSynthetic(spec)).toEqual({ output: acc, failed: [3, 7] });
    expect(acc).toEqual({
      count: 8,
      sum: 2 * (45 - 3 - 7),
      squares: [0, 1, 2, 4, 5, 6, 8, 9].reduce((s, i) => s + 4 * i * i, 0),
    });
  });

  it('a slow item stops waiting when its signal aborts', async () => {
    const job = createSyntheticJob({ name: 'slow', items: 1, slowEvery: 1, slowMs: 60_000 });
    const abort = new AbortController();
    const started = Date.now();
    const processing = job.process({ i: 0 }, { runId: 'r', itemIndex: 0, attempt: 1, signal: abort.signal });
    abort.abort(new Error('run cancelled'));
    await expect(processing).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it.each([
    ['not JSON', '{', /BATON_SYNTHETIC_JOBS must be a JSON array/],
    ['not an array', '{"name":"a","items":1}', /BATON_SYNTHETIC_JOBS is invalid/],
    ['a negative count', '[{"name":"a","items":-1}]', /BATON_SYNTHETIC_JOBS is invalid at 0\.items/],
    ['an unknown field', '[{"name":"a","items":1,"itmes":2}]', /BATON_SYNTHETIC_JOBS is invalid/],
    ['a bad schedule', '[{"name":"a","items":1,"schedule":"every minute"}]', /BATON_SYNTHETIC_JOBS\.0\.schedule/],
  ])('BATON_SYNTHETIC_JOBS with %s fails with one line naming it', (_, value, message) => {
    let error: unknown;
    try {
      parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidSettingError);
    expect((error as InvalidSettingError).setting).toBe('BATON_SYNTHETIC_JOBS');
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('unset or empty means no synthetic jobs; a valid list parses with defaults', () => {
    expect(parseSyntheticJobs({})).toEqual([]);
    expect(parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: ' ' })).toEqual([]);
    expect(parseSyntheticJobs({ BATON_SYNTHETIC_JOBS: '[{"name":"a","items":5}]' })).toEqual([
      { name: 'a', items: 5, schedule: '0 0 0 1 1 *', itemsPerMessage: 1, slowMs: 0 },
    ]);
  });
});
