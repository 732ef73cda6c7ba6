/**
 * Runs the tasks at once and waits for every one of them to settle before it answers: their
 * results in order (each with its own type), or the first failure. A task that fails does not
 * leave the others' clusters running behind the caller, as `Promise.all` would.
 */
export async function sideBySide<T extends readonly unknown[]>(tasks: {
  readonly [K in keyof T]: () => Promise<T[K]>;
}): Promise<T> {
  const settled = await Promise.allSettled((tasks as readonly (() => Promise<unknown>)[]).map((task) => task()));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
