import { timeoutSignal, type Clock } from '../clock/clock';
import { HookTimeoutError, type HookName } from '../errors';

export interface HookCallOptions {
  hook: HookName;
  /** The bound: past it the hook's signal aborts with a `HookTimeoutError`. */
  timeoutMs: number;
  /** How long a hook whose signal aborted is still waited for before it is abandoned. */
  graceMs: number;
  clock: Clock;
  /** The caller's own signal (the leader's term, the worker's invocation): aborts the hook too. */
  signal: AbortSignal;
  /**
   * Called every `heartbeatMs` while the hook runs within its bound: the hook's own time bound
   * replaces the leader's watchdog for as long as it runs.
   */
  heartbeat?: () => void;
  heartbeatMs?: number;
}

/**
 * Calls a job hook with a signal that aborts at its time bound or when the caller's signal
 * does. A hook that settles is answered as it settled, except that a hook that gave up because
 * of its timeout rejects with `HookTimeoutError`. A hook that ignores its aborted signal is
 * waited for `graceMs` more and then abandoned: this rejects (with `HookTimeoutError`, or the
 * caller's abort reason) while the hook may still run. Nothing it does after that is awaited,
 * and its writes, if any, are the job's concern: Baton's own writes are fenced.
 */
export function callHook<T>(run: (signal: AbortSignal) => Promise<T> | T, options: HookCallOptions): Promise<T> {
  const { clock, timeoutMs, graceMs, hook } = options;
  let timedOut = false;
  const bound = timeoutSignal(clock, timeoutMs, options.signal, () => {
    timedOut = true;
    return new HookTimeoutError(hook, timeoutMs, false);
  });
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let grace: ReturnType<Clock['setTimeout']> | undefined;
    let beat: ReturnType<Clock['setTimeout']> | undefined;
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      bound.dispose();
      if (grace) clock.clearTimeout(grace);
      if (beat) clock.clearTimeout(beat);
      bound.signal.removeEventListener('abort', onAbort);
      outcome();
    };
    const failure = (error: unknown): unknown => {
      if (timedOut) return new HookTimeoutError(hook, timeoutMs, false);
      return options.signal.aborted ? options.signal.reason : error;
    };
    const onAbort = (): void => {
      if (beat) clock.clearTimeout(beat);
      grace = clock.setTimeout(() => {
        finish(() => reject(timedOut ? new HookTimeoutError(hook, timeoutMs, true) : options.signal.reason));
      }, graceMs);
    };
    const keepBeating = (): void => {
      if (!options.heartbeat) return;
      beat = clock.setTimeout(() => {
        options.heartbeat?.();
        keepBeating();
      }, options.heartbeatMs ?? 1000);
    };
    if (bound.signal.aborted) onAbort();
    else {
      bound.signal.addEventListener('abort', onAbort, { once: true });
      keepBeating();
    }
    let pending: Promise<T>;
    try {
      pending = Promise.resolve(run(bound.signal));
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => finish(() => (timedOut ? reject(new HookTimeoutError(hook, timeoutMs, false)) : resolve(value))),
      (error: unknown) => finish(() => reject(failure(error))),
    );
  });
}
