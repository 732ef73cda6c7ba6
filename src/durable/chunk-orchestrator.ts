import type { OrchestrationContext, OrchestrationHandler, Task } from 'durable-functions';
import { foldOutcomes } from '../hub/fold';
import type { ItemOutcome } from '../jobs/item-outcome';
import { errorText } from '../jobs/error-text';
import type { JobDefinition } from '../jobs/job-definition';
import { Bitset } from '../hub/bitset';
import { chunkInputSchema, processOutputSchema, type ChunkInput, type ChunkResult, type ProcessInput } from './contracts';
import { requireJob } from './jobs';
import { DURABLE_NAMES } from './names';
import { retryOptions } from './settings';
import { failureReason, settleAll } from './settle';

interface Message {
  first: number;
  count: number;
}

/**
 * One chunk of a run: at most `chunkItems` items, so its history (two or three events per
 * message, plus retries) is bounded whatever the run's size, and so is its replay.
 *
 * Each message (a group of `itemsPerMessage` items) gets `maxAttempts` tries in two phases:
 * 1. all but the last try under Durable's retry policy (`callActivityWithRetry`): the process
 *    activity throws when any item fails, so the policy retries with backoff;
 * 2. a message still failing gets one last, reporting try, which returns each item's outcome:
 *    its items that succeed count, the others fail with their own reason, as the queue engine's
 *    last delivery does. (Its retry policy only covers the activity itself failing: the plan
 *    blob unreadable, the job not on this instance.) A message whose last try fails anyway
 *    fails all its items with that reason.
 * The outcomes are folded with the job's `aggregate.add` from `aggregate.initial()` through the
 * queue engine's own fold (result schema, size limit, `add` throwing), in item order.
 */
export function createChunkOrchestrator(jobs: ReadonlyMap<string, JobDefinition>): OrchestrationHandler {
  return function* chunkOrchestrator(context: OrchestrationContext): Generator<Task, ChunkResult, unknown> {
    const input = chunkInputSchema.parse(context.df.getInput());
    const job = requireJob(jobs, input.job);
    const { settings } = input;
    const messages = messagesOf(input);
    const outcomes: ItemOutcome[][] = messages.map(() => []);
    let firstDoneAt: string | undefined;
    const noteDone = (result: unknown): void => {
      const doneAt = processOutputSchema.safeParse(result).data?.doneAt;
      if (doneAt !== undefined && (firstDoneAt === undefined || doneAt < firstDoneAt)) firstDoneAt = doneAt;
    };

    let last = messages.map((_, index) => index);
    if (settings.maxAttempts > 1) {
      const policy = retryOptions(settings, settings.maxAttempts - 1);
      const tasks = messages.map((m) =>
        context.df.callActivityWithRetry(DURABLE_NAMES.process, policy, processInput(input, m, false, 1)),
      );
      const failing: number[] = [];
      yield* settleAll(context.df, tasks, (index, outcome) => {
        if (outcome.ok) {
          outcomes[index] = accepted(messages[index]!, outcome.result, settings.maxAttempts);
          noteDone(outcome.result);
        } else failing.push(index);
      });
      last = failing;
    }

    const policy = retryOptions(settings, settings.maxAttempts);
    const finals = last.map((index) =>
      context.df.callActivityWithRetry(
        DURABLE_NAMES.process,
        policy,
        processInput(input, messages[index]!, true, settings.maxAttempts),
      ),
    );
    yield* settleAll(context.df, finals, (at, outcome) => {
      const index = last[at]!;
      const message = messages[index]!;
      if (outcome.ok) noteDone(outcome.result);
      outcomes[index] = outcome.ok
        ? accepted(message, outcome.result, settings.maxAttempts)
        : failedAll(
            message,
            `the last try of ${describe(message)} failed: ${failureReason(outcome.error)}`,
            settings.maxAttempts,
          );
    });

    // The fold runs in the orchestrator, so on every replay: `add` must be pure, as the
    // aggregate's contract already says (order-independent, JSON accumulator).
    const counters = { planned: input.count, dispatched: input.count, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 };
    const folded = foldOutcomes(
      job,
      { acc: job.aggregate.initial(), seen: Bitset.empty(input.first + input.count), counters },
      outcomes.flat(),
    );
    return {
      acc: folded.acc,
      succeeded: folded.counters.succeeded,
      failed: folded.counters.failed,
      failures: folded.failures,
      ...(firstDoneAt === undefined ? {} : { firstDoneAt }),
    };
  };
}

/** The chunk's messages: runs of `itemsPerMessage` items, the last one possibly shorter. */
function messagesOf(input: ChunkInput): Message[] {
  const out: Message[] = [];
  const end = input.first + input.count;
  for (let first = input.first; first < end; first += input.itemsPerMessage) {
    out.push({ first, count: Math.min(input.itemsPerMessage, end - first) });
  }
  return out;
}

function describe(message: Message): string {
  return message.count === 1 ? `item ${message.first}` : `items ${message.first}..${message.first + message.count - 1}`;
}

function failedAll(message: Message, reason: string, attempts: number): ItemOutcome[] {
  const e = errorText(reason);
  return Array.from({ length: message.count }, (_, k) => ({ i: message.first + k, ok: false as const, e, a: attempts }));
}

/**
 * The activity's outcomes, if they are exactly one per item of the message in order; anything
 * else (another version's activity, a bug) fails the message's items rather than the chunk.
 */
function accepted(message: Message, result: unknown, attempts: number): ItemOutcome[] {
  const parsed = processOutputSchema.safeParse(result);
  const outcomes = parsed.success ? parsed.data.outcomes : [];
  const exact = outcomes.length === message.count && outcomes.every((o, k) => o.i === message.first + k);
  return exact
    ? outcomes
    : failedAll(message, `the process activity did not report one outcome per item of ${describe(message)}`, attempts);
}

function processInput(chunk: ChunkInput, message: Message, final: boolean, attempt: number): ProcessInput {
  return {
    runId: chunk.runId,
    job: chunk.job,
    planEpoch: chunk.planEpoch,
    chunkItems: chunk.chunkItems,
    first: message.first,
    count: message.count,
    final,
    attempt,
  };
}
