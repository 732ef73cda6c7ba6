import { LeaseLostError, StaleEpochError } from '../errors';
import type { Leadership } from './term';

/**
 * Answers a write refused by a newer stored epoch by raising the term's epoch above it, under
 * the term's lease (see `Leadership.raiseEpoch`), and resolves with the new epoch. A lease
 * record that was deleted restarts its count, so its next holder meets the older terms' epochs
 * in its documents; only a term that still holds the lease can climb above them. When the lease
 * is not this term's any more, the refusal stands: it is rethrown, and the term ends as a stale
 * one must. Any other failure of the raise (a timeout, a 5xx) is thrown as is.
 */
export async function raiseAbove(leadership: Leadership, refusal: StaleEpochError): Promise<number> {
  try {
    return await leadership.raiseEpoch(refusal.storedEpoch);
  } catch (err) {
    if (err instanceof LeaseLostError || leadership.signal.aborted) throw refusal;
    throw err;
  }
}

/**
 * Runs `work` under the term's epoch and, each time a write of it is refused by a newer stored
 * epoch, raises the epoch above that one (`raiseAbove`) and runs `work` again from the start,
 * so that nothing it wrote stays under the older epoch. `work` must therefore be safe to repeat,
 * and must write under the epoch it is given: a refusal of any other epoch is rethrown.
 */
export async function withEpochRaises<T>(leadership: Leadership, work: (epoch: number) => Promise<T>): Promise<T> {
  for (;;) {
    const epoch = leadership.epoch;
    try {
      return await work(epoch);
    } catch (err) {
      if (!(err instanceof StaleEpochError) || err.writerEpoch !== epoch) throw err;
      await raiseAbove(leadership, err);
    }
  }
}
