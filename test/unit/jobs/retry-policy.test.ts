import { describe, expect, it } from 'vitest';
import {
  retryDelaySeconds,
  retryScheduleOf,
  totalRetryDelaySeconds,
  type ItemRetryOptions,
} from '../../../src/jobs/retry-policy';

/** The waits between the tries of a job's `retry`, as the worker applies them. */
function delays(retry: ItemRetryOptions, deploymentAttempts: number): number[] {
  const schedule = retryScheduleOf(retry, deploymentAttempts);
  return Array.from({ length: Math.max(0, schedule.attempts - 1) }, (_, k) => retryDelaySeconds(schedule, k + 1));
}

describe('a job retry schedule', () => {
  it.each<[string, ItemRetryOptions, number, number[]]>([
    ['delaySeconds before the second try, backoff times longer before each next', { attempts: 3, delaySeconds: 1 }, 5, [1, 2]],
    ['a backoff of its own', { attempts: 4, delaySeconds: 2, backoff: 3 }, 5, [2, 6, 18]],
    ["the deployment's attempts, 1 s and a backoff of 2 by default", {}, 5, [1, 2, 4, 8]],
    ['one try: no wait', {}, 1, []],
    ['every wait capped at maxDelaySeconds', { attempts: 5, delaySeconds: 10, maxDelaySeconds: 25 }, 5, [10, 20, 25, 25]],
    ['capped at 60 s by default', { attempts: 4, delaySeconds: 40 }, 5, [40, 60, 60]],
    ['no wait at all', { delaySeconds: 0 }, 3, [0, 0]],
    ['a backoff of 1: the same wait each time', { attempts: 4, delaySeconds: 1.5, backoff: 1 }, 5, [1.5, 1.5, 1.5]],
  ])('%s', (_name, retry, deploymentAttempts, expected) => {
    expect(delays(retry, deploymentAttempts)).toEqual(expected);
    const schedule = retryScheduleOf(retry, deploymentAttempts);
    expect(totalRetryDelaySeconds(schedule)).toBeCloseTo(
      expected.reduce((a, b) => a + b, 0),
      9,
    );
  });

  it("takes the job's attempts over the deployment's, and fields left undefined from the defaults", () => {
    expect(retryScheduleOf({ attempts: 2, backoff: undefined }, 7)).toEqual({
      attempts: 2,
      delaySeconds: 1,
      backoff: 2,
      maxDelaySeconds: 60,
    });
    expect(retryScheduleOf({}, 7).attempts).toBe(7);
  });
});
