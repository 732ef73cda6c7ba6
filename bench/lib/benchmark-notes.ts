/**
 * The hand-written part of BENCHMARKS.md: per benchmark, what it measures and what limits the
 * figure. The figures themselves come from bench/results/<name>.json; keep run figures out of
 * these notes (they would go stale) and write here what stays true from run to run.
 *
 * The order of this record is the order of the table and of the sections in BENCHMARKS.md.
 * `draft` marks prose that still needs the lead's figures or confirmation: it is shown in the
 * generated file, so remove it once the text is checked.
 *
 * Regenerate after editing: node --import tsx bench/lib/benchmarks-md.ts
 */
export interface BenchmarkNote {
  /** What the benchmark does, and what its floor is. Markdown. */
  measures: string;
  /** What bounds the figure: the protocol, the machine, Azurite. Markdown. */
  limits: string;
  /** Still to check or fill in; shown as a draft warning until removed. */
  draft?: string;
}

export type BenchmarkNotes = Record<string, BenchmarkNote>;

export const BENCHMARK_NOTES: BenchmarkNotes = {
  'crash-failover': {
    measures:
      'How long the cluster is without a leader when the leader dies. A local cluster of three real instance processes ' +
      'on one in-process Azurite; the leading process is killed with `kill -9`, and each trial times the kill until ' +
      "another instance's leader task runs (its `acquired` event). Ten trials, the kills spread over the leader's " +
      'renewal cycle; ours is the p95. The floor is the lease duration (15 s): after a crash storage gives the lease ' +
      'to nobody until it expires, so no lease-based election can do better. The goal, p95 ≤ lease + 1 s, is that ratio.',
    limits:
      '**Lease expiry.** A killed leader cannot release its lease, so nobody can take over until it expires: 15 s ' +
      'after the last renewal (`BATON_LEASE_SECONDS`). The leader renews every third of the lease, so at the kill ' +
      'between 10 and 15 s of it are left, and single trials can come in under the floor. After the expiry a follower ' +
      'tries only on its next coordinator tick (every 2 s locally; the Azure default, every 10 s, can add up to 10 s), ' +
      'then reads the lease, acquires it and bumps the epoch. Work messages the dead instance held come back after ' +
      'their visibility timeout, which delays those items but not the takeover.',
    draft: "Needs the lead's check against the final benchmark (trials, tick, goal).",
  },
  'graceful-handover': {
    measures:
      'How long the cluster is without a leader when the leader leaves cleanly. A local cluster of three real ' +
      'instance processes; the leading process gets SIGTERM, stops its leader task and releases its lease, and each ' +
      "trial times the signal until the next leader's task runs. Ten trials, spread over the tick cycle; ours is the " +
      'p95. The floor is the same storage event with the plain SDK on the same Azurite: one client releases a blob ' +
      'lease while a second, polling `acquireLease` every 50 ms, takes it (p95). The goal is absolute, p95 ≤ 1 s, ' +
      'written as a ratio to the floor, which is why its ratio is not a round number.',
    limits:
      '**How often followers check the lease.** A released lease is free at once, but the followers only try to take ' +
      'it on their coordinator tick: every 2 s in the local cluster, every 10 s by default in Azure ' +
      '(`BATON_COORDINATOR_SCHEDULE`). The handover is therefore up to one tick after the release (half a tick on ' +
      'average) plus a read, the acquire and the epoch bump; a shorter schedule shortens it at the cost of more ' +
      'storage requests from idle instances. The results include a diagnostic arm ticking every second.',
    draft: "Needs the lead's check against the final benchmark (the goal against a 2 s tick, trials).",
  },
  throughput: {
    measures:
      'Items per second through a whole run on a local cluster of real instance processes: plan, dispatch, workers ' +
      'processing, results folded and checkpointed by the leader, output written. The floor moves the same number of ' +
      'messages with the raw SDK on the same Azurite: send the work, receive and delete it, send a result, receive ' +
      'and delete that. The chart below plots both over time.',
    limits:
      "**Azurite.** The local cluster's Azurite runs in one Node thread and is the bottleneck for both arms: it " +
      'receives and deletes about 220–250 messages/s, and every item at one item per message costs a work message and ' +
      'a result message, each sent, received and deleted. On a two-core machine the instance processes also share the ' +
      'cores with Azurite. `itemsPerMessage` divides the message traffic, so a job that packs items goes faster than ' +
      'this figure. Against real Azure Storage the limits are the queue scale targets and the function host instead.',
    draft: "Needs the lead's figures: N, instances, itemsPerMessage, trials, and what the floor does exactly.",
  },
  transactions: {
    measures:
      'Storage requests per item: what a run costs, since Azure Storage bills per operation. Every storage request ' +
      'from every instance is counted by operation with a pipeline policy that the client factory adds to every ' +
      'client (`src/storage/request-counter.ts`); the benchmark sums the counts over the processes and divides by ' +
      'the items. The floor is the fewest requests a bare SDK fan-out/fan-in of the same items needs.',
    limits:
      '**Fixed per-message costs** (send, receive and delete for a work and a result message), which `itemsPerMessage` ' +
      'divides, plus **per-run costs** amortised over the items: plan chunks, run-record checkpoints, lease renewals, ' +
      'and the coordinator ticks and empty queue polls of idle instances, which grow with wall time rather than items. ' +
      'An operation the SDK retries counts once (the count is taken before the retry policy).',
    draft: "Needs the lead's figures: N, itemsPerMessage, and the floor's request count per item.",
  },
  'leader-memory': {
    measures:
      "Whether the leader's memory grows with the size of a run: the leader's peak heap during a run of many items " +
      '(ours) against the same during a run of ten times fewer (the floor), each on a fresh cluster and a fresh ' +
      'Azurite so no peak carries over, both packing 100 items per message so the queue traffic per message is the ' +
      'same and only the aggregation state scales. Peak RSS, the rise over the idle baseline and the checkpoint size ' +
      'are in the results too.',
    limits:
      '**What the leader holds per run:** the accumulator (its size is the job’s choice) and a bitset of counted ' +
      'item indexes, N/8 bytes (125 kB for a million items), written base64 into every checkpoint, so about 4/3 of that ' +
      'again while a checkpoint is serialised. The plan is streamed to storage in chunks and the results are folded ' +
      'as they arrive, so neither is held. The rest of the peak is the process itself and its worker, the same for ' +
      'both sizes; heap peaks move with garbage-collection timing, and RSS with what the allocator keeps reserved.',
    draft: "Needs the lead's check against the final benchmark (sizes, instances, heap as the headline).",
  },
  dispatch: {
    measures:
      "The leader's enqueue rate: `dispatchSlice` taking a planned run to `running` (read the plan chunks, encode the " +
      'work messages, send them, checkpoint the cursor), against a plain parallel `QueueClient.sendMessage` of the ' +
      'same message texts at the same concurrency, on the same in-process Azurite, each arm on a fresh queue, ' +
      'alternating floor and ours.',
    limits:
      "**Azurite's send rate**, about 0.9–1.1k messages/s at concurrency 16, bounds both arms. On top of the sends the " +
      'dispatcher reads the plan in chunks of 1,000 items, checkpoints the cursor about once a second, and sends in ' +
      'windows of concurrency × 4 with a barrier between windows, so a slow send holds up the next window; the ' +
      "diagnostic `windowed` arm in the results measures that pattern without the dispatcher's reads and encoding.",
  },
};
