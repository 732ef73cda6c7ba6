/**
 * Runs the tasks at once and waits for every one of them to settle before it answers: their
 * results in order, or the first failure. A task that fails does not leave the others' clusters
 * running behind the caller, as `Promise.all` would.
 */
export async function sideBySide<T>(tasks: readonly (() => Promise<T>)[]): Promise<T[]> {
  const settled = await Promise.allSettled(tasks.map((task) => task()));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
