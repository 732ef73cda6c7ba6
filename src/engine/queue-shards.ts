import type { Clock } from '../clock/clock';
import { parseShardQueueName, shardQueueNames } from '../hub/resources';
import type { QueueCallOptions, QueueDirectory, QueuePort } from '../queue/queue-port';

/** One shard's queues: work goes out on `work`, its results come back on `results`. */
export interface QueueShard {
  work: QueuePort;
  results: QueuePort;
  /** Where the host moves the shard's spent work messages and its workers put malformed ones. */
  poison: QueuePort;
}

/** How often a leader lists the account's queues for shards its settings do not name. */
export const DISCOVER_EVERY_MS = 60_000;

/**
 * The queues a hub's leader sends to and drains: `BATON_QUEUE_SHARDS` shards, each with a work,
 * a results and a poison queue, and any other shard of the hub that exists in storage.
 *
 * Why the others: changing the shard count on a live hub leaves messages where the new count
 * does not look. After a decrease, work, results and poison copies wait on shards past the new
 * count; during a rolling change, instances on the old count keep sending to them. So the leader
 * lists the hub's queues at the start of its term and every `DISCOVER_EVERY_MS`, drains the
 * results and poison queues of every shard it finds, and moves work past its own count onto its
 * own shards, until each is empty. Nothing is deleted: a queue dropped while an old instance
 * still sends to it would lose what arrives next. An empty extra shard costs one receive per
 * queue after each listing.
 */
export class HubQueues {
  /** Queues of shards past the active ones that were found and not yet seen empty since, by name. */
  private extra = emptyExtra();
  private discoveredAt = Number.NEGATIVE_INFINITY;

  private constructor(
    readonly active: readonly QueueShard[],
    private readonly finder?: { hub: string; directory: QueueDirectory; clock: Clock },
  ) {
    if (active.length === 0) throw new RangeError('a hub needs at least one queue shard');
  }

  /** The hub's `shards` shards in `directory`, finding the others by listing its queues. */
  static forHub(hub: string, shards: number, directory: QueueDirectory, clock: Clock): HubQueues {
    const active = Array.from({ length: shards }, (_, shard) => {
      const names = shardQueueNames(hub, shard);
      return {
        work: directory.queue(names.work),
        results: directory.queue(names.results),
        poison: directory.queue(names.poison),
      };
    });
    return new HubQueues(active, { hub, directory, clock });
  }

  /** Fixed queues and no discovery: one shard, as tests and benchmarks build an engine by hand. */
  static of(...shards: QueueShard[]): HubQueues {
    return new HubQueues(shards);
  }

  /** The work queue of message `index` of a run: round robin, so a run's messages spread evenly. */
  workFor(index: number): QueuePort {
    return (this.active[index % this.active.length] as QueueShard).work;
  }

  /** Results queues to drain: the active shards', then any other shard's not yet seen empty. */
  resultsToDrain(): QueuePort[] {
    return [...this.active.map((s) => s.results), ...this.extra.results.values()];
  }

  poisonToDrain(): QueuePort[] {
    return [...this.active.map((s) => s.poison), ...this.extra.poison.values()];
  }

  /** Work queues of shards past the active ones, not yet seen empty: their messages move. */
  strandedWork(): QueuePort[] {
    return [...this.extra.work.values()];
  }

  /** A queue past the active shards came back empty: left alone until the next listing finds it. */
  seenEmpty(queue: QueuePort): void {
    for (const found of Object.values(this.extra)) found.delete(queue.name);
  }

  async ensure(options?: QueueCallOptions): Promise<void> {
    await Promise.all(this.active.flatMap((s) => [s.work, s.results, s.poison]).map((q) => q.ensure(options)));
  }

  /** Lists the hub's queues if the last listing is `DISCOVER_EVERY_MS` old (or `force`). */
  async discover(options: QueueCallOptions & { force?: boolean } = {}): Promise<void> {
    const finder = this.finder;
    if (!finder) return;
    const now = finder.clock.now();
    if (!options.force && now - this.discoveredAt < DISCOVER_EVERY_MS) return;
    const names = await finder.directory.list(`${finder.hub}-`, options);
    this.discoveredAt = now;
    const active = new Set(this.active.flatMap((s) => [s.work.name, s.results.name, s.poison.name]));
    const extra = emptyExtra();
    for (const name of names) {
      const parsed = parseShardQueueName(finder.hub, name);
      if (parsed && !active.has(name)) extra[parsed.role].set(name, finder.directory.queue(name));
    }
    this.extra = extra;
  }
}

function emptyExtra(): Record<'work' | 'results' | 'poison', Map<string, QueuePort>> {
  return { work: new Map(), results: new Map(), poison: new Map() };
}
