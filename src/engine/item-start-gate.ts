import type { Clock } from '../clock/clock';

/**
 * What a worker asks before it starts an item, and tells after: the instance's item start gate.
 * A worker without one starts every item at once.
 */
export interface ItemStartGatePort {
  /**
   * Resolves when the item may start; never rejects (an aborted `signal` lets it start at once).
   * The worker then tells the gate what became of it: started, with how long its `process` held
   * the event loop before it first awaited, or not started after all.
   */
  beforeItem(job: string, signal: AbortSignal): Promise<ItemStart>;
}

export interface ItemStart {
  started(holdMs: number): void;
  dropped(): void;
}

export interface ItemStartGateOptions {
  /** Holds shorter than this never wait: they cannot delay a run by much. Default 20 ms. */
  minHoldMs?: number;
  /**
   * How far past a due instant the leader lets its own items delay that instant's runs. Default
   * 100 ms, so that with the pass's own writes a run it delays still starts within a quarter of
   * a second, unless an item waited out `maxWaitMs`.
   */
  slackMs?: number;
  /** The longest one item waits, whatever the leader does: a stalled pass must not stall the work. Default 5 s. */
  maxWaitMs?: number;
}

/** Holds kept per job; the gate judges a job by the longest of them. */
const HOLDS_KEPT = 8;

/**
 * Workers run on the leader's instance too, and a job's `process` may hold the event loop for a
 * second or more (a synchronous parse, a busy loop). While it does, the leader's timers and
 * storage answers wait: a run due in that second is created late. This gate keeps the leader's
 * own worker from starting such an item when it would still hold the loop `slackMs` after the
 * next due instant; the item starts once the leader has created that instant's runs and it fits,
 * or after `maxWaitMs` whatever the leader does. Items let through together are reckoned one
 * after another, as the loop runs them.
 *
 * Guaranteed: on an instance that is not leading, and for a job whose items have not been seen
 * to hold the loop for `minHoldMs`, nothing waits; no item waits longer than `maxWaitMs`. The
 * leader learns a job's holds from its own worker and from every instance's results. The leader
 * learns of a new due instant only at the start of a turn, and a turn may spend up to its slice
 * (2 s) folding results: until then, items wait.
 *
 * Not guaranteed: a job's first items, before any hold of theirs is known, start at once; a
 * `process` that holds the loop after its first `await` is not seen; an item that holds the loop
 * for longer than the gap between two due instants only ever starts after its `maxWaitMs`. Other
 * instances' items never delay this leader, and are never held back.
 */
export class ItemStartGate implements ItemStartGatePort {
  private readonly minHoldMs: number;
  private readonly slackMs: number;
  private readonly maxWaitMs: number;
  private readonly holds = new Map<string, number[]>();
  /** The next due instant (storage time, ms) while this instance leads; undefined otherwise. */
  private nextDueAt: number | undefined;
  /** The holds of items let through that have not started yet: the loop runs them before the next. */
  private reservedMs = 0;
  private waiters: (() => void)[] = [];
  /** Items that waited, since the process started. */
  waited = 0;

  constructor(
    private readonly clock: Clock,
    options: ItemStartGateOptions = {},
  ) {
    this.minHoldMs = options.minHoldMs ?? 20;
    this.slackMs = options.slackMs ?? 100;
    this.maxWaitMs = options.maxWaitMs ?? 5000;
  }

  /**
   * The leader's pass has created the runs due before `nextDueAt` (storage time, ms; infinite
   * when nothing is scheduled). When the instant moved on, waiting items look again, in turn.
   */
  lead(nextDueAt: number): void {
    const moved = this.nextDueAt === undefined || nextDueAt > this.nextDueAt;
    this.nextDueAt = nextDueAt;
    if (moved) this.wakeAll();
  }

  /** The term is over: nothing this instance runs can delay a run any more. */
  leave(): void {
    this.nextDueAt = undefined;
    this.wakeAll();
  }

  held(job: string, ms: number): void {
    const holds = this.holds.get(job) ?? [];
    holds.push(ms);
    if (holds.length > HOLDS_KEPT) holds.shift();
    this.holds.set(job, holds);
  }

  async beforeItem(job: string, signal: AbortSignal): Promise<ItemStart> {
    const hold = Math.max(0, ...(this.holds.get(job) ?? []));
    if (hold < this.minHoldMs) return this.start(job, 0);
    const giveUpAt = this.clock.now() + this.maxWaitMs;
    let counted = false;
    for (;;) {
      const start = this.clock.date().getTime() + this.reservedMs;
      const leftMs = giveUpAt - this.clock.now();
      if (this.nextDueAt === undefined || start + hold <= this.nextDueAt + this.slackMs || signal.aborted || leftMs <= 0) {
        return this.start(job, hold);
      }
      if (!counted) {
        this.waited++;
        counted = true;
      }
      await this.nextPass(leftMs, signal);
    }
  }

  /** An item let through, its hold reserved until it starts or is dropped. */
  private start(job: string, reserved: number): ItemStart {
    if (reserved === 0) return { started: (holdMs) => this.held(job, holdMs), dropped: () => undefined };
    this.reservedMs += reserved;
    let open = true;
    const release = (): void => {
      if (open) this.reservedMs -= reserved;
      open = false;
    };
    return {
      started: (holdMs) => {
        release();
        this.held(job, holdMs);
      },
      dropped: release,
    };
  }

  private wakeAll(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves at the leader's next pass that moves the due instant on, or sooner. */
  private nextPass(leftMs: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, leftMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.push(done);
    });
  }
}
