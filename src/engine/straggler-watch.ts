import type { Clock } from '../clock/clock';
import { RecentSamples } from './recent-samples';

/** The percentile of the run's message durations a straggler's wait is measured against. */
export const HEDGE_PERCENTILE = 0.9;
/** A message is a straggler once it has waited this many times that percentile (and the floor). */
export const HEDGE_MULTIPLE = 4;
/** Durations needed before the percentile is trusted; until then the wait is `fallbackMs`. */
export const HEDGE_MIN_SAMPLES = 5;

export interface HedgePolicy {
  /** No copy of a message before it has waited this long (the job's `hedge.minWaitSeconds`). */
  floorMs: number;
  /**
   * The wait while fewer than `HEDGE_MIN_SAMPLES` messages have reported how long they took:
   * with nothing to compare against, about the longest one message may take (`messageBoundSeconds`:
   * its items one after another, each within `processSeconds` plus `graceSeconds`).
   */
  fallbackMs: number;
}

/**
 * The most copies a run may send in all: `maxPercent` of its messages, rounded up, and never fewer
 * than `minCopies` (so one stopped instance's whole batch can be copied in a small run), at most
 * one per message. Every leader of the run counts against the same bound.
 */
export function hedgeBound(maxPercent: number, messages: number, minCopies = 0): number {
  if (!(maxPercent > 0) || messages <= 0) return 0;
  return Math.min(messages, Math.max(minCopies, Math.ceil((maxPercent * messages) / 100 - 1e-9)));
}

/** How many of `wanted` copies may go now, when `sent` of a run's `bound` have been sent. */
export function hedgeGrant(bound: number, sent: number, wanted: number): number {
  return Math.max(0, Math.min(wanted, bound - sent));
}

interface Outstanding {
  /** Send order in this watch: a copy or a retry gets a new one. */
  seq: number;
  /** When its last copy (or the original) was sent, when this watch adopted it, or when its retry is due. */
  sentAt: number;
  /** When a message sent after it was first counted. */
  overtakenAt: number | undefined;
  /** Copies of it this watch has sent: each one doubles the wait for the next. */
  copies: number;
  /** When it first went out as far as this watch knows: a copy keeps it (what readers see as its age). */
  firstSentAt: number;
}

/**
 * The hedge decision for one run, kept by its leader across that leader's terms: which of its
 * sent, uncounted work messages have waited much longer than its messages usually take. Pure: it only hears what the leader did and
 * saw (`sent`, `counted`, `observe`) and reads the injected clock.
 *
 * "Waited" does not start at the send. A message waits on the queue behind the ones sent before
 * it, and under a backlog that wait says nothing about a straggler. It starts when a message
 * sent after it is counted (the queue has moved past it: someone took it and has not finished),
 * or, when none has been, at the run's last progress (the run has gone quiet with it out). A
 * message is due once that wait reaches `HEDGE_MULTIPLE` times the `HEDGE_PERCENTILE` of the
 * durations workers reported, and never before the floor. A copy is a send like any other: the
 * wait of a message starts again when its copy goes out, and is twice as long for each copy
 * already sent. A copy held too (a second paused instance) is copied again, later. A message
 * whose items failed and went back to the queue to be tried again (`retrying`) waits from when
 * that try is due. One whose worker died before it said so is silent until the queue shows it
 * again, and costs a few copies rather than one per wait.
 *
 * How many copies may go is not decided here but by the bound the caller keeps durable
 * (`hedgeBound`, `hedgeGrant`); `due` returns at most the number it is asked for.
 */
export class StragglerWatch {
  private readonly out = new Map<number, Outstanding>();
  /** Messages not yet overtaken, in send order; entries whose message was counted or resent are skipped. */
  private waiting: { message: number; seq: number }[] = [];
  private waitingHead = 0;
  private seq = 0;
  private lastProgressAt = Number.NEGATIVE_INFINITY;
  private readonly durations = new RecentSamples();

  constructor(
    private readonly clock: Clock,
    private readonly policy: HedgePolicy,
  ) {}

  /** Messages sent and not counted yet. */
  get outstanding(): number {
    return this.out.size;
  }

  /**
   * The message, or a copy of it, went out now. A leader that takes over calls it for each
   * uncounted message it adopts. Sent again while uncounted, it is a copy.
   */
  sent(message: number, firstSentAt?: number): void {
    const earlier = this.out.get(message);
    const copies = (earlier?.copies ?? -1) + 1;
    const now = this.clock.now();
    const first = earlier?.firstSentAt ?? Math.min(now, firstSentAt ?? now);
    const entry: Outstanding = { seq: ++this.seq, sentAt: now, overtakenAt: undefined, copies, firstSentAt: first };
    this.out.set(message, entry);
    this.waiting.push({ message, seq: entry.seq });
  }

  /** Every item of the message is counted (by whichever copy came first); later copies change nothing. */
  counted(message: number): void {
    const entry = this.out.get(message);
    if (!entry) return;
    this.out.delete(message);
    const now = this.clock.now();
    this.lastProgressAt = now;
    // Every message still waiting that went out before this one has been overtaken now.
    while (this.waitingHead < this.waiting.length) {
      const head = this.waiting[this.waitingHead] as { message: number; seq: number };
      if (head.seq >= entry.seq) break;
      this.waitingHead++;
      const earlier = this.out.get(head.message);
      if (earlier && earlier.seq === head.seq) earlier.overtakenAt = now;
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
  }

  /**
   * The message's worker failed some of its items and sent them back to the queue, to be tried
   * again `inMs` from now: until then nobody holds them, so its wait starts again after that, from
   * a new place in the send order (as a copy's does, without doubling the next wait).
   */
  retrying(message: number, inMs: number): void {
    const entry = this.out.get(message);
    if (!entry) return;
    entry.seq = ++this.seq;
    entry.sentAt = this.clock.now() + Math.max(0, inMs);
    entry.overtakenAt = undefined;
    this.waiting.push({ message, seq: entry.seq });
  }

  /** Whether the message is sent and not counted, as far as this watch knows. */
  tracks(message: number): boolean {
    return this.out.has(message);
  }

  /** The messages sent and not counted, as far as this watch knows. */
  tracked(): number[] {
    return [...this.out.keys()];
  }

  /**
   * Drops a message another leader counted while this one did not lead: not progress this watch
   * saw, so no other message's wait changes.
   */
  forget(message: number): void {
    this.out.delete(message);
  }

  /**
   * Up to `limit` messages sent and not counted, the longest out first, with when each first went
   * out (`clock.now()` time); `counted` skips those a checkpoint being written counts already.
   * What the run record shows as its oldest outstanding messages.
   */
  oldest(limit: number, counted: (message: number) => boolean = () => false): { message: number; since: number }[] {
    if (limit <= 0) return [];
    const found: { message: number; since: number }[] = [];
    for (const [message, entry] of this.out) if (!counted(message)) found.push({ message, since: entry.firstSentAt });
    found.sort((a, b) => a.since - b.since || a.message - b.message);
    return found.slice(0, limit);
  }

  /** How long a worker took over one message, as it reported. */
  observe(durationMs: number): void {
    this.durations.add(durationMs);
  }

  /** The wait after which an uncounted message is a straggler, now. */
  thresholdMs(): number {
    const { floorMs, fallbackMs } = this.policy;
    if (this.durations.count < HEDGE_MIN_SAMPLES) return Math.max(floorMs, fallbackMs);
    return Math.max(floorMs, HEDGE_MULTIPLE * (this.durations.percentile(HEDGE_PERCENTILE) ?? 0));
  }

  /** Up to `limit` messages that are due for a copy now, the longest waiting first. */
  due(limit: number): number[] {
    if (limit <= 0 || this.out.size === 0) return [];
    const now = this.clock.now();
    const threshold = this.thresholdMs();
    const due: { message: number; since: number }[] = [];
    for (const [message, entry] of this.out) {
      // Never before it went out: a retry's send lies ahead, and a message sent after the retry
      // note may be counted before then.
      const since = Math.max(entry.sentAt, entry.overtakenAt ?? this.lastProgressAt);
      if (now - since >= threshold * 2 ** entry.copies) due.push({ message, since });
    }
    due.sort((a, b) => a.since - b.since || a.message - b.message);
    return due.slice(0, limit).map((d) => d.message);
  }
}
