/** Names of the storage resources one hub uses. */
export function hubResources(hub: string) {
  return {
    workQueue: `${hub}-work`,
    resultsQueue: `${hub}-results`,
    /** The Functions host moves work messages here after maxDequeueCount; workers put malformed ones here. */
    poisonQueue: `${hub}-work-poison`,
    container: `${hub}-runs`,
    /** In `container`: the highest epoch the hub's lease has handed out (see `BlobEpochMark`). */
    epochMark: 'leadership/epoch-mark',
  };
}
