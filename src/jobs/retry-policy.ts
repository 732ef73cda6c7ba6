/**
 * How often and how soon a failed item is tried again: the job's `retry` option, shared by both
 * engines. The queue engine's worker sends the failed items back to the queue hidden for the
 * delay; the durable engine turns it into Durable's retry policy. Either way an item's tries do
 * not wait on a queue's visibility timeout.
 */
export interface ItemRetryOptions {
  /**
   * Tries of each item, the first included; 1 means no retry. Default: the deployment's
   * (`BATON_MAX_ATTEMPTS`, 5, on the queue engine; `maxAttempts` of the durable settings, 5).
   */
  attempts?: number;
  /** Wait before the second try, in seconds. Default 1. */
  delaySeconds?: number;
  /** Each further wait is this many times the one before. Default 2. */
  backoff?: number;
  /** Longest wait between two tries, in seconds. Default 60. */
  maxDelaySeconds?: number;
}

/** Defaults of `ItemRetryOptions` that do not come from the deployment. */
export const DEFAULT_RETRY_BACKOFF: Readonly<Required<Omit<ItemRetryOptions, 'attempts'>>> = Object.freeze({
  delaySeconds: 1,
  backoff: 2,
  maxDelaySeconds: 60,
});

/** A job's retry schedule with every default filled in. */
export interface RetrySchedule {
  attempts: number;
  delaySeconds: number;
  backoff: number;
  maxDelaySeconds: number;
}

/** The job's options over the defaults, with `attempts` from the deployment when the job leaves it out. */
export function retryScheduleOf(options: Readonly<ItemRetryOptions>, deploymentAttempts: number): RetrySchedule {
  return {
    attempts: options.attempts ?? deploymentAttempts,
    delaySeconds: options.delaySeconds ?? DEFAULT_RETRY_BACKOFF.delaySeconds,
    backoff: options.backoff ?? DEFAULT_RETRY_BACKOFF.backoff,
    maxDelaySeconds: options.maxDelaySeconds ?? DEFAULT_RETRY_BACKOFF.maxDelaySeconds,
  };
}

/** Seconds to wait after try `failedTry` (1, 2, …) fails, before the next one. */
export function retryDelaySeconds(schedule: Omit<RetrySchedule, 'attempts'>, failedTry: number): number {
  return Math.min(schedule.maxDelaySeconds, schedule.delaySeconds * schedule.backoff ** Math.max(0, failedTry - 1));
}

/** Seconds an item that fails every try spends waiting between its tries, in all. */
export function totalRetryDelaySeconds(schedule: RetrySchedule): number {
  let total = 0;
  for (let failed = 1; failed < schedule.attempts; failed++) total += retryDelaySeconds(schedule, failed);
  return total;
}
