/** Most queue shards a hub may have (`BATON_QUEUE_SHARDS`); 10 already reach one account's message target. */
export const MAX_QUEUE_SHARDS = 16;

/** The three queues of one shard: work goes out on `work`, results come back on `results`. */
export interface ShardQueueNames {
  work: string;
  results: string;
  /** The Functions host moves work messages here after maxDequeueCount; workers put malformed ones here. */
  poison: string;
}

/**
 * The queues of shard `shard`. Shard 0 keeps the names a hub had before shards existed, so a hub
 * that goes from one shard to several keeps its queues; shard k > 0 adds `-s<k>`. The poison
 * name is the work queue's name plus `-poison`, because that is where the Functions host moves
 * a message it gave up on.
 */
export function shardQueueNames(hub: string, shard: number): ShardQueueNames {
  const suffix = shard === 0 ? '' : `-s${shard}`;
  return { work: `${hub}-work${suffix}`, results: `${hub}-results${suffix}`, poison: `${hub}-work${suffix}-poison` };
}

/**
 * Which shard queue of `hub` the queue `name` is, if any. Exact, so a hub whose name starts
 * with another hub's name (`baton` and `baton-work-s2`) never claims the other's queues.
 */
export function parseShardQueueName(hub: string, name: string): { shard: number; role: keyof ShardQueueNames } | undefined {
  if (!name.startsWith(`${hub}-`)) return undefined;
  const match = /^(work|results)(?:-s([1-9]\d?))?(-poison)?$/.exec(name.slice(hub.length + 1));
  if (!match || (match[1] === 'results' && match[3])) return undefined;
  const shard = match[2] ? Number(match[2]) : 0;
  if (shard >= MAX_QUEUE_SHARDS) return undefined;
  return { shard, role: match[3] ? 'poison' : (match[1] as 'work' | 'results') };
}

/** Names of the storage resources one hub uses. */
export function hubResources(hub: string, queueShards = 1) {
  const first = shardQueueNames(hub, 0);
  return {
    workQueue: first.work,
    resultsQueue: first.results,
    poisonQueue: first.poison,
    /** Every shard's queues, shard 0 first (`BATON_QUEUE_SHARDS`). */
    shards: Array.from({ length: queueShards }, (_, shard) => shardQueueNames(hub, shard)),
    container: `${hub}-runs`,
    /** In `container`: the highest epoch the hub's lease has handed out (see `BlobEpochMark`). */
    epochMark: 'leadership/epoch-mark',
  };
}
