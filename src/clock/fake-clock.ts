import type { Clock, TimerHandle } from './clock';

interface PendingTimer {
  id: number;
  due: number;
  seq: number;
  callback: () => void;
}

/**
 * A clock that moves only when told. `advance()` fires due timers in order and lets the
 * promise chains they start settle between timers, so code that awaits storage calls and then
 * schedules its next timer behaves as it would in real time.
 */
export class FakeClock implements Clock {
  private current: number;
  private readonly wallOrigin: number;
  private readonly timers = new Map<number, PendingTimer>();
  private nextId = 1;
  private seq = 0;

  constructor(options: { start?: number; wallOrigin?: Date } = {}) {
    this.current = options.start ?? 0;
    this.wallOrigin = (options.wallOrigin ?? new Date('2026-01-01T00:00:00Z')).getTime() - this.current;
  }

  now(): number {
    return this.current;
  }

  date(): Date {
    return new Date(this.wallOrigin + this.current);
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    this.timers.set(id, { id, due: this.current + Math.max(0, ms), seq: this.seq++, callback });
    return { id };
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle.id);
  }

  /** Number of timers waiting to fire. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await settle();
    for (;;) {
      const next = this.nextDue();
      if (!next || next.due > target) break;
      this.timers.delete(next.id);
      this.current = Math.max(this.current, next.due);
      next.callback();
      await settle();
    }
    this.current = target;
    await settle();
  }

  /**
   * Moves time forward without firing anything, as a paused process (SIGSTOP, GC, frozen VM)
   * experiences it: every overdue timer fires at the next `advance`.
   */
  jump(ms: number): void {
    this.current += ms;
  }

  /** Advances in steps until `predicate` holds or `maxMs` passes; returns whether it held. */
  async advanceUntil(predicate: () => boolean, options: { maxMs: number; stepMs?: number }): Promise<boolean> {
    const step = options.stepMs ?? 100;
    for (let spent = 0; spent <= options.maxMs; spent += step) {
      if (predicate()) return true;
      await this.advance(step);
    }
    return predicate();
  }

  private nextDue(): PendingTimer | undefined {
    let best: PendingTimer | undefined;
    for (const timer of this.timers.values()) {
      if (!best || timer.due < best.due || (timer.due === best.due && timer.seq < best.seq)) best = timer;
    }
    return best;
  }
}

/** Lets queued promise callbacks run: several macrotask turns so chains of awaits complete. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
