import type { Clock, TimerHandle } from './clock';

/**
 * How much faster than real time the local monotonic clock may run. Quartz is within about
 * 100 ppm and Linux disciplines CLOCK_MONOTONIC's rate by NTP; 500 ppm leaves room, and costs
 * only half a millisecond of lateness per second since the last storage answer.
 */
export const MONOTONIC_DRIFT_ALLOWANCE = 5e-4;

/** Skew changes smaller than this are not worth a log line. */
export const SKEW_REPORT_THRESHOLD_MS = 5000;

export interface StorageTimeClockOptions {
  /**
   * Called with the local wall clock's offset from storage time (positive: local is ahead) on
   * the first answer whose offset is at least `SKEW_REPORT_THRESHOLD_MS`, and again whenever it
   * has moved that much since the last call.
   */
  onSkewChange?: (skewMs: number) => void;
}

/**
 * A clock whose `date()` is storage's time, so that every instance decides when an occurrence is
 * due and when a run's deadline has passed by one clock, whatever its own wall clock says.
 *
 * Each storage answer's `Date` header is a lower bound on storage's time when the answer
 * arrived: the server stamped it while the request was in flight, and the header drops the
 * milliseconds. The estimate is the greatest such bound carried forward on the local
 * *monotonic* clock, slowed by `MONOTONIC_DRIFT_ALLOWANCE`, so:
 * - `date()` is never ahead of storage time (given storage's own clock, a header truncated to
 *   the second, and a monotonic clock within the allowance);
 * - it is behind by at most 1 s plus the round trip of the answer that set the bound (plus the
 *   drift allowance since), and usually far less, as answers at different sub-second phases
 *   tighten it;
 * - after the first answer the local wall clock plays no part, so a stepped or skewed wall
 *   clock changes nothing, and `date()` never goes backwards. A paused process (whose
 *   monotonic clock stood still) reads late, never early, until its next answer.
 *
 * Before any answer it falls back to the local wall clock. Every leader has heard from storage
 * before it decides anything: its term starts with a read or acquire of the lease blob.
 *
 * `now()` and timers stay local and monotonic: durations need no agreement between instances.
 */
export class StorageTimeClock implements Clock {
  private anchor: Anchor | undefined;
  private reportedSkewMs = 0;

  constructor(
    readonly local: Clock,
    private readonly options: StorageTimeClockOptions = {},
  ) {}

  now(): number {
    return this.local.now();
  }

  date(): Date {
    return this.anchor ? new Date(earliestAt(this.anchor, this.local.now())) : this.local.date();
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    return this.local.setTimeout(callback, ms);
  }

  clearTimeout(handle: TimerHandle): void {
    this.local.clearTimeout(handle);
  }

  /** Whether any storage answer has been seen; until then `date()` is the local wall clock. */
  get synced(): boolean {
    return this.anchor !== undefined;
  }

  /**
   * One storage answer: its `Date` header, and when it arrived on `now()`. Only the arrival
   * matters: the server stamped the header before then, so storage's time at arrival is at
   * least the header. An answer without a readable header is ignored.
   */
  observe(dateHeader: string | undefined, receivedAt: number): void {
    const storageMs = dateHeader === undefined ? Number.NaN : Date.parse(dateHeader);
    if (!Number.isFinite(storageMs) || !Number.isFinite(receivedAt)) return;
    // Both lines have the same slope, so the one higher now is higher forever: keep it alone.
    const candidate = { storageMs, monotonicMs: receivedAt };
    if (!this.anchor || offsetOf(candidate) > offsetOf(this.anchor)) this.anchor = candidate;
    this.reportSkew(this.anchor);
  }

  private reportSkew(anchor: Anchor): void {
    if (!this.options.onSkewChange) return;
    const skewMs = this.local.date().getTime() - earliestAt(anchor, this.local.now());
    if (Math.abs(skewMs - this.reportedSkewMs) < SKEW_REPORT_THRESHOLD_MS) return;
    this.reportedSkewMs = skewMs;
    this.options.onSkewChange(skewMs);
  }
}

/** Storage time was at least `storageMs` when the monotonic clock read `monotonicMs`. */
interface Anchor {
  storageMs: number;
  monotonicMs: number;
}

function earliestAt(anchor: Anchor, monotonicMs: number): number {
  return anchor.storageMs + Math.max(0, monotonicMs - anchor.monotonicMs) * (1 - MONOTONIC_DRIFT_ALLOWANCE);
}

/** Where the anchor's line crosses monotonic zero: of two anchors, the higher gives the later estimate at every instant. */
function offsetOf(anchor: Anchor): number {
  return anchor.storageMs - anchor.monotonicMs * (1 - MONOTONIC_DRIFT_ALLOWANCE);
}
