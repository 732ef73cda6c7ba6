import { defineJob } from '../../src/jobs/define-job';
import type { JobDefinition } from '../../src/jobs/job-definition';
import { RunStateCache } from '../../src/engine/run-state-cache';
import type { WorkerDeps } from '../../src/engine/worker';
import type { MessageReceipt, QueuePort, ReceivedMessage } from '../../src/queue/queue-port';
import { ForwardingQueue, type SendOptions } from './forwarding-queue';
import type { EnginePorts } from './engine-harness';
import type { SumAcc } from './sample-jobs';
import { describePatience, patience } from './slowdown';

/** A queue that remembers every text sent through it, and can look around after each send. */
export class RecordingQueue extends ForwardingQueue {
  readonly sent: string[] = [];
  constructor(
    inner: QueuePort,
    private readonly afterSend?: (text: string) => Promise<void>,
  ) {
    super(inner);
  }
  override async send(text: string, options?: SendOptions): Promise<MessageReceipt> {
    const receipt = await this.inner.send(text, options);
    this.sent.push(text);
    await this.afterSend?.(text);
    return receipt;
  }
}

/** Polls `condition` until it holds; throws after `timeoutMs` on the reference machine (scaled by `patience`). */
export async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 20_000, everyMs = 50): Promise<void> {
  const started = Date.now();
  const capMs = patience(timeoutMs);
  while (!(await condition())) {
    if (Date.now() - started > capMs) throw new Error(`timed out after ${describePatience(timeoutMs)} waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Receives until `count` messages are in hand (each hidden for `visibilitySeconds`). */
export async function receiveExactly(
  queue: QueuePort,
  count: number,
  visibilitySeconds = 60,
  timeoutMs = 10_000,
): Promise<ReceivedMessage[]> {
  const got: ReceivedMessage[] = [];
  await waitFor(
    `${count} message(s) on ${queue.name}`,
    async () => {
      if (got.length < count) got.push(...(await queue.receive(Math.min(32, count - got.length), visibilitySeconds)));
      return got.length >= count;
    },
    timeoutMs,
  );
  return got;
}

/** What a worker instance is given, with a cold run cache so it reads the run's current state. */
export function edgeWorkerDeps(
  ports: Pick<EnginePorts, 'docs' | 'work' | 'results' | 'poison'>,
  jobs: JobDefinition[],
  maxAttempts = 3,
): WorkerDeps {
  return {
    jobs: new Map(jobs.map((j) => [j.name, j])),
    docs: ports.docs,
    work: ports.work,
    results: ports.results,
    poison: ports.poison,
    runs: new RunStateCache(ports.docs, { ttlMs: 0 }),
    maxAttempts,
  };
}

/** A promise the test resolves when it chooses. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

const sumAggregate = {
  initial: (): SumAcc => ({ count: 0, sum: 0, squares: 0 }),
  add: (acc: SumAcc, result: { v: number }): SumAcc => ({
    count: acc.count + 1,
    sum: acc.sum + result.v,
    squares: acc.squares + result.v * result.v,
  }),
};

/**
 * Like sumJob, but items from `fastBelow` on are slow: they wait for `slow` (a gate the test
 * opens), as items stuck on a worker that never finishes in time would.
 */
export function gatedSumJob(options: {
  name: string;
  items: number;
  fastBelow: number;
  slow: Promise<void>;
  timeoutSeconds?: number;
}) {
  return defineJob<{ i: number }, { v: number }, SumAcc>({
    name: options.name,
    schedule: '0 0 0 1 1 *',
    ...(options.timeoutSeconds ? { timeoutSeconds: options.timeoutSeconds } : {}),
    *split() {
      for (let i = 0; i < options.items; i++) yield { i };
    },
    async process(item) {
      if (item.i >= options.fastBelow) await options.slow;
      return { v: 2 * item.i };
    },
    aggregate: sumAggregate,
  });
}

/** Item i's padding: `bytes` copies of a letter that depends on i, so a mixed-up claim shows. */
export function padFor(i: number, bytes: number): string {
  return String.fromCharCode(97 + (i % 26)).repeat(bytes);
}

/** Items each larger than a queue message; the worker fails any item whose padding did not arrive intact. */
export function paddedSumJob(options: { name: string; items: number; padBytes: number }) {
  return defineJob<{ i: number; pad: string }, { v: number }, SumAcc>({
    name: options.name,
    schedule: '0 0 0 1 1 *',
    *split() {
      for (let i = 0; i < options.items; i++) yield { i, pad: padFor(i, options.padBytes) };
    },
    process(item) {
      if (item.pad !== padFor(item.i, options.padBytes)) throw new Error(`item ${item.i} arrived with a damaged pad`);
      return { v: 2 * item.i };
    },
    aggregate: sumAggregate,
  });
}

export interface BigResultAcc {
  count: number;
  chars: number;
  /** Results whose text is exactly what the worker produced for that item. */
  intact: number;
  indexSum: number;
}

/** Results each larger than a queue message. */
export function bigResultJob(options: { name: string; items: number; resultBytes: number }) {
  return defineJob<{ i: number }, { i: number; text: string }, BigResultAcc>({
    name: options.name,
    schedule: '0 0 0 1 1 *',
    *split() {
      for (let i = 0; i < options.items; i++) yield { i };
    },
    process(item) {
      return { i: item.i, text: padFor(item.i, options.resultBytes) };
    },
    aggregate: {
      initial: () => ({ count: 0, chars: 0, intact: 0, indexSum: 0 }),
      add: (acc, result, ref) => ({
        count: acc.count + 1,
        chars: acc.chars + result.text.length,
        intact: acc.intact + (result.i === ref.itemIndex && result.text === padFor(ref.itemIndex, options.resultBytes) ? 1 : 0),
        indexSum: acc.indexSum + ref.itemIndex,
      }),
    },
  });
}
