import type { Clock } from '../clock/clock';

/**
 * When a raw work message on the poison queue may fail its items.
 *
 * The host moves a work message to the poison queue after its last delivery, and that includes
 * a delivery whose worker sent its result and then died (or whose send reply was lost): the
 * result is on the results queue, sent before the poison copy existed. Outcomes count first
 * come, first counted, so folding the poison copy first would count a failure and drop the
 * real result. The rule: a poison copy is provisional until a results pass that began after
 * the leader first saw the copy found the results queue empty, so every result sent before the
 * copy was on the queue and has been counted first. Results that some drain held hidden (an
 * earlier term's, or a pass of this term that could not count them) are visible again one
 * drain visibility later, so the leader also waits that long from the start of its term and
 * from the last pass that left results of the run behind.
 *
 * Not guaranteed: a leader paused past its lease whose receive lands after the new term began
 * can hide a result for one more drain visibility; a poison copy folded in that window counts
 * a failure. Everything here is per term and in memory: a new leader waits again, which delays
 * failures and never loses them.
 */
export class PoisonGate {
  private readonly since: number;
  /** Start of the latest results pass that emptied the queue, by the monotonic clock. */
  private emptiedAt: number | undefined;
  /** Runs whose results a pass left on the queue, and when. */
  private readonly leftAt = new Map<string, number>();
  /** When this term first met each poison copy, by message id. */
  private readonly firstSeen = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly visibilityMs: number,
  ) {
    this.since = clock.now();
  }

  /** Records one results pass: when it began, whether it emptied the queue, and the runs it left behind. */
  resultsPass(startedAt: number, emptied: boolean, leftBehind: Iterable<string>): void {
    for (const run of leftBehind) this.leftAt.set(run, startedAt);
    if (emptied) this.emptiedAt = startedAt;
  }

  /** Whether the poison copy `messageId` of `run` may fail its items now. */
  mayFail(messageId: string, run: string): boolean {
    const now = this.clock.now();
    const seen = this.firstSeen.get(messageId);
    if (seen === undefined) {
      // Bounded by what one term can meet; a copy another leader took is forgotten with the term.
      this.firstSeen.set(messageId, now);
      return false;
    }
    const emptied = this.emptiedAt;
    if (emptied === undefined || emptied < seen) return false;
    if (emptied < this.since + this.visibilityMs) return false;
    const left = this.leftAt.get(run);
    return left === undefined || emptied >= left + this.visibilityMs;
  }

  /** The copy's items are counted: no need to remember it. */
  settled(messageId: string): void {
    this.firstSeen.delete(messageId);
  }
}
