import type { Clock } from '../clock/clock';
import type { LeaderEvent } from '../lease/leader-events';
import type { MessageReceipt, QueuePort } from '../queue/queue-port';
import type { TickMessage } from './messages';
import { messageOf } from '../errors';

export interface TickBeaconOptions {
  /** Shard 0's work queue: every instance polls it. */
  queue: QueuePort;
  /** Storage's time, for a rest's end (`released` with `restingUntil`). */
  clock: Clock;
  /** The lease's duration: the beacon surfaces only after the lease could have expired. */
  leaseMs: number;
  /** How long after that. Default 2,000 ms. */
  marginMs?: number;
  /**
   * With crash takeover (the elector's `breakAfterMs`) and the leader's renew interval: the
   * beacon surfaces a second after a dead leader's silence could be broken, counted from its
   * last renewal, instead of after its lease. A live leader's next renewal moves it first.
   */
  takeover?: { breakAfterMs: number; renewIntervalMs: number };
  /** Where failures go; a lost beacon costs a slower takeover, never correctness. */
  log?: (message: string) => void;
}

/**
 * The leader's second tick source, beside the timer: one delayed tick message per term, so
 * leadership moves on even when no instance's timer fires (a frozen singleton timer listener,
 * a host that stopped scheduling).
 * - When a term begins, the beacon is sent, hidden until just after the lease would expire.
 * - Each renewal postpones it again: while the leader lives it never surfaces.
 * - When the leader says it is leaving (a shutdown's make-before-break handover), it surfaces at
 *   once: whichever instance receives it runs the coordinator tick, sees the leader leaving and
 *   asks for the lease, so a successor is waiting before the leader stops.
 * - When the term ends with a release (term over, shutdown, handover) it surfaces at once, and
 *   whichever instance receives it runs the coordinator tick: the wake for a successor.
 * - When the release leaves the lease resting (an idle leader, `Leadership.restUntil`), it
 *   surfaces when the rest ends instead: the wake for the next occurrence, timers or not.
 * - When the leader dies it surfaces once its lease has expired, and wakes a successor then; with
 *   crash takeover, once its silence can be broken (`takeover`), and the receiver breaks it.
 * A tick from the timer and one from the beacon can only ever start a run once: runs are keyed
 * by occurrence. Its cost per term: a send, one update per renewal, and one more to surface it.
 */
export class TickBeacon {
  /** How long a beacon stays hidden: past the lease's expiry. */
  readonly hiddenSeconds: number;
  private sent: { epoch: number; receipt: MessageReceipt } | undefined;
  /** The term whose leader said it is leaving: its renewals must not hide the wake again. */
  private leavingEpoch: number | undefined;
  /** The beacon's calls, one at a time and in the order of the events. */
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly options: TickBeaconOptions) {
    const { takeover } = options;
    const hiddenMs = takeover
      ? Math.min(options.leaseMs, takeover.renewIntervalMs + takeover.breakAfterMs) + 1000
      : options.leaseMs + (options.marginMs ?? 2000);
    this.hiddenSeconds = Math.ceil(hiddenMs / 1000);
  }

  /** Feeds it the elector's events (`onEvent`); returns at once. */
  onLeaderEvent(event: LeaderEvent): void {
    switch (event.type) {
      case 'acquired':
        return this.then(() => this.send(event.epoch, this.hiddenSeconds));
      case 'renewed':
        if (event.epoch === this.leavingEpoch) return;
        return this.then(() => this.move(event.epoch, this.hiddenSeconds));
      case 'leaving':
        this.leavingEpoch = event.epoch;
        return this.then(() => this.move(event.epoch, 0));
      case 'released': {
        const seconds = event.restingUntil ? secondsUntil(this.options.clock, event.restingUntil) : 0;
        return this.then(() => this.move(event.epoch, seconds).then(() => (this.sent = undefined)));
      }
      case 'lost':
        // Someone else holds the lease now, or it expired: the beacon surfaces at its time, and
        // its receiver sees whether anyone leads.
        return this.then(async () => {
          this.sent = undefined;
        });
      default:
        return;
    }
  }

  /** Settles once every call started so far has. */
  idle(): Promise<void> {
    return this.chain;
  }

  private then(step: () => Promise<unknown>): void {
    this.chain = this.chain.then(step).then(
      () => undefined,
      (error: unknown) => this.options.log?.(`tick beacon: ${messageOf(error)}`),
    );
  }

  private async send(epoch: number, seconds: number): Promise<void> {
    const message: TickMessage = { v: 1, t: 'tick', epoch };
    const receipt = await this.options.queue.send(JSON.stringify(message), { visibilityTimeoutSeconds: seconds });
    this.sent = { epoch, receipt };
  }

  /**
   * Re-hides (or surfaces, with 0) this term's beacon; one that went missing is sent again. It
   * keeps the epoch it was sent with even when the term raises its own: a receiver reads that as
   * a newer term's, which is only ever a beacon dropped while its leader lives.
   */
  private async move(epoch: number, seconds: number): Promise<void> {
    const sent = this.sent;
    if (!sent) return this.send(epoch, seconds);
    const moved = await this.options.queue.setVisibility(sent.receipt, seconds);
    if (moved) this.sent = { epoch: sent.epoch, receipt: moved };
    // Received by someone already (it surfaced early): a new one keeps the chain.
    else await this.send(sent.epoch, seconds);
  }
}

/** Whole seconds from `clock`'s date until `at`, rounded up (a delayed message surfaces no earlier); at least 0. */
export function secondsUntil(clock: Pick<Clock, 'date'>, at: Date): number {
  return Math.max(0, Math.ceil((at.getTime() - clock.date().getTime()) / 1000));
}
