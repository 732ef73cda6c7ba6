/**
 * Time, injected. Lease arithmetic uses `now()`, a monotonic clock, so a wall-clock jump never
 * extends or shortens a term. `date()` is the time instances must agree on (schedules, run
 * deadlines, record timestamps); the runtime gives the engine a `StorageTimeClock`, whose
 * `date()` is storage's time rather than this machine's.
 */
export interface Clock {
  /** Monotonic milliseconds from an arbitrary origin. */
  now(): number;
  /** Wall-clock time. */
  date(): Date;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export interface TimerHandle {
  readonly id: number;
}

class SystemClock implements Clock {
  private readonly timers = new Map<number, NodeJS.Timeout>();
  private nextId = 1;

  now(): number {
    return performance.now();
  }

  date(): Date {
    return new Date();
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    const timer = setTimeout(
      () => {
        this.timers.delete(id);
        callback();
      },
      Math.max(0, ms),
    );
    this.timers.set(id, timer);
    return { id };
  }

  clearTimeout(handle: TimerHandle): void {
    const timer = this.timers.get(handle.id);
    if (timer) {
      clearTimeout(timer);
      this.timers.delete(handle.id);
    }
  }
}

export const systemClock: Clock = new SystemClock();

/**
 * Resolves after `ms` on `clock`, or rejects with the signal's reason when it aborts first.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      reject(signal?.reason);
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A signal that aborts after `ms` on `clock`, or when `parent` aborts. `dispose()` clears the
 * timer and the parent listener so per-call signals don't pile up listeners on a long-lived
 * parent.
 */
export function timeoutSignal(
  clock: Clock,
  ms: number,
  parent?: AbortSignal,
  reason: () => unknown = () => new DOMException(`timed out after ${Math.round(ms)} ms`, 'TimeoutError'),
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onParentAbort = (): void => controller.abort(parent?.reason);
  if (parent?.aborted) {
    controller.abort(parent.reason);
    return { signal: controller.signal, dispose: () => undefined };
  }
  parent?.addEventListener('abort', onParentAbort, { once: true });
  const handle = clock.setTimeout(() => controller.abort(reason()), ms);
  return {
    signal: controller.signal,
    dispose: () => {
      clock.clearTimeout(handle);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}
