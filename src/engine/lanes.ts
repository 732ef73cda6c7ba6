/**
 * Runs `work` for every item with at most `concurrency` in flight. Storage calls go out this way
 * rather than all at once: a burst of hundreds opens as many sockets and buffers for no gain
 * in throughput, which the leader's memory benchmark showed.
 */
export async function inLanes<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failed = false;
  const lanes = Array.from({ length: Math.min(Math.max(1, concurrency), items.length) }, async () => {
    // After a failure no lane takes a new item: the caller's retry starts from its checkpoint.
    while (!failed && next < items.length) {
      try {
        await work(items[next++] as T);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  });
  await Promise.all(lanes);
}
