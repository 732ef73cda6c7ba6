import * as df from 'durable-functions';
import type { OrchestrationHandler } from 'durable-functions';
import { ExecutionStartedEvent } from 'durable-functions/lib/src/history/ExecutionStartedEvent';
import type { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
import { OrchestratorCompletedEvent } from 'durable-functions/lib/src/history/OrchestratorCompletedEvent';
import { OrchestratorStartedEvent } from 'durable-functions/lib/src/history/OrchestratorStartedEvent';
import { SubOrchestrationInstanceCompletedEvent } from 'durable-functions/lib/src/history/SubOrchestrationInstanceCompletedEvent';
import { SubOrchestrationInstanceCreatedEvent } from 'durable-functions/lib/src/history/SubOrchestrationInstanceCreatedEvent';
import { SubOrchestrationInstanceFailedEvent } from 'durable-functions/lib/src/history/SubOrchestrationInstanceFailedEvent';
import { TaskCompletedEvent } from 'durable-functions/lib/src/history/TaskCompletedEvent';
import { TaskFailedEvent } from 'durable-functions/lib/src/history/TaskFailedEvent';
import { TaskScheduledEvent } from 'durable-functions/lib/src/history/TaskScheduledEvent';
import { TimerCreatedEvent } from 'durable-functions/lib/src/history/TimerCreatedEvent';
import { TimerFiredEvent } from 'durable-functions/lib/src/history/TimerFiredEvent';
import { ReplaySchema } from 'durable-functions/lib/src/orchestrations/ReplaySchema';
import { createOrchestrator, DurableOrchestrationInput } from 'durable-functions/lib/src/util/testingUtils';
import { seededRandom } from './unit-engine';

/**
 * Orchestrations driven by durable-functions' own replay engine (`createOrchestrator`), on
 * histories made of the package's own event classes. Two tools:
 * - `HistoryBuilder` + `replay`: write a history by hand and see what one episode does;
 * - `DurableSimulator`: plays the extension's part (schedules what an episode asks for, runs
 *   the activities, appends their events, replays) until the orchestration ends.
 */

/** An action an episode asked for, flattened out of `Task.any`/`Task.all`. */
export interface ActionView {
  kind: 'activity' | 'activityWithRetry' | 'subOrchestration' | 'timer' | 'other';
  name?: string;
  input?: unknown;
  instanceId?: string;
  retry?: RetryView;
}

export interface RetryView {
  firstRetryIntervalInMilliseconds: number;
  maxNumberOfAttempts: number;
  backoffCoefficient?: number;
  maxRetryIntervalInMilliseconds?: number;
}

export interface EpisodeResult {
  done: boolean;
  output?: unknown;
  /** Set when the orchestrator threw: the orchestration fails with this message. */
  error?: string;
  customStatus?: unknown;
  /** Every action of the orchestration so far, in order (an episode re-emits the earlier ones). */
  actions: ActionView[];
}

interface RawAction {
  actionType: number;
  functionName?: string;
  input?: unknown;
  instanceId?: string;
  retryOptions?: RetryView;
  compoundActions?: RawAction[];
}

const ACTION_KINDS: Record<number, ActionView['kind']> = {
  0: 'activity',
  1: 'activityWithRetry',
  2: 'subOrchestration',
  5: 'timer',
};
const OUT_OF_PROC_DATA = '$OutOfProcData$:';

function flatten(actions: unknown[][]): ActionView[] {
  const out: ActionView[] = [];
  const visit = (action: RawAction): void => {
    if (action.compoundActions) return action.compoundActions.forEach(visit);
    out.push({
      kind: ACTION_KINDS[action.actionType] ?? 'other',
      ...(action.functionName !== undefined ? { name: action.functionName } : {}),
      ...(action.input !== undefined ? { input: action.input } : {}),
      ...(action.instanceId !== undefined ? { instanceId: action.instanceId } : {}),
      ...(action.retryOptions ? { retry: { ...action.retryOptions } } : {}),
    });
  };
  for (const group of actions) for (const action of group) visit(action as RawAction);
  return out;
}

const handlers = new WeakMap<OrchestrationHandler, ReturnType<typeof createOrchestrator>>();

/** Runs one episode of `fn` over `history`, as the Functions host would call the orchestrator. */
export async function replay(
  fn: OrchestrationHandler,
  options: { instanceId: string; history: readonly HistoryEvent[]; input: unknown; schemaVersion?: ReplaySchema },
): Promise<EpisodeResult> {
  let handler = handlers.get(fn);
  if (!handler) handlers.set(fn, (handler = createOrchestrator(fn)));
  const trigger = new DurableOrchestrationInput(
    options.instanceId,
    [...options.history],
    // The host hands the orchestrator its input as JSON; so does this.
    jsonCopy(options.input),
    undefined,
    undefined,
    undefined,
    options.schemaVersion ?? ReplaySchema.V4,
  );
  const context = new df.DummyOrchestrationContext('baton-test', 'invocation', () => undefined);
  try {
    const state = await handler(trigger, context);
    return { done: state.isDone, output: state.output, customStatus: state.customStatus, actions: flatten(state.actions) };
  } catch (err) {
    // The SDK reports an orchestrator's exception with its state after this label.
    const message = err instanceof Error ? err.message : String(err);
    const at = message.indexOf(OUT_OF_PROC_DATA);
    if (at < 0) throw err;
    const state = JSON.parse(message.slice(at + OUT_OF_PROC_DATA.length)) as {
      error?: string;
      customStatus?: unknown;
      actions: unknown[][];
    };
    return { done: false, error: state.error ?? 'failed', customStatus: state.customStatus, actions: flatten(state.actions) };
  }
}

export function jsonCopy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** A history written event by event; ids are the caller's (task ids, as the extension numbers them). */
export class HistoryBuilder {
  readonly events: HistoryEvent[] = [];
  private time: number;

  constructor(start = new Date('2026-03-01T00:00:00.000Z')) {
    this.time = start.getTime();
  }

  get now(): Date {
    return new Date(this.time);
  }

  /** Moves the clock on (timers fire at their time). */
  advanceTo(at: Date): this {
    this.time = Math.max(this.time, at.getTime());
    return this;
  }

  /** The first episode: orchestrator started, execution started with `input`. */
  start(name: string, input: unknown): this {
    this.events.push(new OrchestratorStartedEvent({ eventId: -1, timestamp: this.now, isPlayed: false }));
    this.events.push(
      new ExecutionStartedEvent({ eventId: -1, timestamp: this.now, isPlayed: false, name, input: JSON.stringify(input) }),
    );
    return this;
  }

  /** Ends the current episode and starts the next one a second later. */
  nextEpisode(): this {
    this.events.push(new OrchestratorCompletedEvent({ eventId: -1, timestamp: this.now, isPlayed: false }));
    this.time += 1000;
    this.events.push(new OrchestratorStartedEvent({ eventId: -1, timestamp: this.now, isPlayed: false }));
    return this;
  }

  scheduled(id: number, name: string, input?: unknown): this {
    this.events.push(
      new TaskScheduledEvent({ eventId: id, timestamp: this.now, isPlayed: false, name, input: JSON.stringify(input) }),
    );
    return this;
  }

  completed(id: number, result: unknown): this {
    const json = JSON.stringify(result) ?? 'null';
    this.events.push(
      new TaskCompletedEvent({ eventId: -1, timestamp: this.now, isPlayed: false, taskScheduledId: id, result: json }),
    );
    return this;
  }

  /** An activity that threw: failure details as the extension sends them. */
  failed(id: number, message: string, errorType = 'Error'): this {
    this.events.push(
      new TaskFailedEvent({
        eventId: -1,
        timestamp: this.now,
        isPlayed: false,
        taskScheduledId: id,
        reason: `Activity function failed: ${message}`,
        details: `${errorType}: ${message}\n    at activity`,
        failureDetails: { ErrorType: errorType, ErrorMessage: message, StackTrace: `${errorType}: ${message}\n    at activity` },
      }),
    );
    return this;
  }

  subCreated(id: number, name: string, instanceId: string, input?: unknown): this {
    this.events.push(
      new SubOrchestrationInstanceCreatedEvent({
        eventId: id,
        timestamp: this.now,
        isPlayed: false,
        name,
        instanceId,
        input: JSON.stringify(input),
      }),
    );
    return this;
  }

  subCompleted(id: number, result: unknown): this {
    const json = JSON.stringify(result) ?? 'null';
    this.events.push(
      new SubOrchestrationInstanceCompletedEvent({
        eventId: -1,
        timestamp: this.now,
        isPlayed: false,
        taskScheduledId: id,
        result: json,
      }),
    );
    return this;
  }

  subFailed(id: number, message: string, errorType = 'Error'): this {
    this.events.push(
      new SubOrchestrationInstanceFailedEvent({
        eventId: -1,
        timestamp: this.now,
        isPlayed: false,
        taskScheduledId: id,
        reason: `Orchestrator function failed: ${message}`,
        details: `${errorType}: ${message}`,
        failureDetails: { ErrorType: errorType, ErrorMessage: message },
      }),
    );
    return this;
  }

  timerCreated(id: number, fireAt: Date): this {
    this.events.push(new TimerCreatedEvent({ eventId: id, timestamp: this.now, isPlayed: false, fireAt }));
    return this;
  }

  timerFired(id: number, fireAt: Date): this {
    this.advanceTo(fireAt);
    this.events.push(new TimerFiredEvent({ eventId: -1, timestamp: this.now, isPlayed: false, timerId: id, fireAt }));
    return this;
  }
}

/** The wait before retry `attempt + 1` after `attempt` failed, as Durable's retry policy computes it. */
export function retryDelayMs(retry: RetryView, attempt: number): number {
  const delay = retry.firstRetryIntervalInMilliseconds * (retry.backoffCoefficient ?? 1) ** (attempt - 1);
  return retry.maxRetryIntervalInMilliseconds ? Math.min(delay, retry.maxRetryIntervalInMilliseconds) : delay;
}

export interface InstanceRun {
  instanceId: string;
  name: string;
  state: 'completed' | 'failed';
  output?: unknown;
  error?: string;
  /** Episodes (replays) it took, and its history's final length. */
  episodes: number;
  historyLength: number;
  /** `customStatus` after each episode. */
  customStatuses: unknown[];
  /** Every action it asked for, over its whole life. */
  actions: ActionView[];
  children: InstanceRun[];
}

export interface ActivityCall {
  name: string;
  input: unknown;
  ok: boolean;
  error?: string;
}

type Operation =
  | { kind: 'activity'; id: number; action: ActionView; attempt: number }
  | { kind: 'timer'; id: number; fireAt: Date; parent: { action: ActionView; attempt: number } }
  | { kind: 'sub'; id: number; action: ActionView };

export interface SimulatorOptions {
  orchestrators: Record<string, OrchestrationHandler>;
  activities: Record<string, (input: unknown) => Promise<unknown>>;
  /** Completions are delivered in an order drawn from this seed (the extension's order is not the code's). */
  seed?: number;
  /** Sub-orchestrations to fail as a whole instead of running: the reason, or undefined to run it. */
  failInstance?: (instanceId: string) => string | undefined;
  schemaVersion?: ReplaySchema;
}

/**
 * Plays the Durable extension for the orchestrations it is given: every episode's new actions get
 * the next task ids (in action order, as the extension numbers them), activities really run,
 * and one completion is delivered per episode, in a seeded random order. Retries follow
 * callActivityWithRetry's history: TaskFailed, TimerCreated (next id), TimerFired, then
 * TaskScheduled (next id) for the next try, until the policy's attempts are spent.
 */
export class DurableSimulator {
  readonly calls: ActivityCall[] = [];
  private readonly random: () => number;

  constructor(private readonly options: SimulatorOptions) {
    this.random = seededRandom(options.seed ?? 1);
  }

  async run(name: string, instanceId: string, input: unknown): Promise<InstanceRun> {
    const fn = this.options.orchestrators[name];
    if (!fn) throw new Error(`no orchestrator ${name}`);
    const history = new HistoryBuilder().start(name, input);
    const run: InstanceRun = {
      instanceId,
      name,
      state: 'completed',
      episodes: 0,
      historyLength: 0,
      customStatuses: [],
      actions: [],
      children: [],
    };
    const ready: Operation[] = [];
    let nextId = 0;
    for (;;) {
      const episode = await replay(fn, { instanceId, history: history.events, input, schemaVersion: this.options.schemaVersion });
      run.episodes++;
      run.customStatuses.push(episode.customStatus);
      const fresh = episode.actions.slice(run.actions.length);
      run.actions = episode.actions;
      if (episode.error !== undefined) {
        return { ...run, state: 'failed', error: episode.error, historyLength: history.events.length };
      }
      for (const action of fresh) {
        const id = nextId++;
        if (action.kind === 'subOrchestration') {
          history.subCreated(id, action.name!, action.instanceId!, action.input);
          ready.push({ kind: 'sub', id, action });
        } else if (action.kind === 'activity' || action.kind === 'activityWithRetry') {
          history.scheduled(id, action.name!, action.input);
          ready.push({ kind: 'activity', id, action, attempt: 1 });
        } else {
          throw new Error(`the simulator does not play ${action.kind} actions`);
        }
      }
      if (episode.done) return { ...run, output: episode.output, historyLength: history.events.length };
      if (ready.length === 0) throw new Error(`${instanceId} waits on nothing after ${run.episodes} episodes`);
      history.nextEpisode();
      const [op] = ready.splice(Math.floor(this.random() * ready.length), 1);
      nextId = await this.deliver(op!, history, ready, nextId, run);
    }
  }

  /** Appends `op`'s completion (and what the extension schedules because of it); returns the next free id. */
  private async deliver(
    op: Operation,
    history: HistoryBuilder,
    ready: Operation[],
    nextId: number,
    run: InstanceRun,
  ): Promise<number> {
    if (op.kind === 'timer') {
      history.timerFired(op.id, op.fireAt);
      const { action, attempt } = op.parent;
      if (attempt >= action.retry!.maxNumberOfAttempts) return nextId; // spent: the task fails now
      const id = nextId++;
      history.scheduled(id, action.name!, action.input);
      ready.push({ kind: 'activity', id, action, attempt: attempt + 1 });
      return nextId;
    }
    if (op.kind === 'sub') {
      const reason = this.options.failInstance?.(op.action.instanceId!);
      if (reason !== undefined) {
        history.subFailed(op.id, reason);
        return nextId;
      }
      const child = await this.run(op.action.name!, op.action.instanceId!, jsonCopy(op.action.input));
      run.children.push(child);
      if (child.state === 'completed') history.subCompleted(op.id, child.output);
      else history.subFailed(op.id, child.error ?? 'failed');
      return nextId;
    }
    const activity = this.options.activities[op.action.name!];
    if (!activity) throw new Error(`no activity ${op.action.name}`);
    const input = jsonCopy(op.action.input);
    try {
      const result = await activity(input);
      this.calls.push({ name: op.action.name!, input, ok: true });
      history.completed(op.id, jsonCopy(result));
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      this.calls.push({ name: op.action.name!, input, ok: false, error: error.message });
      history.failed(op.id, error.message, error.name);
      if (op.action.kind === 'activityWithRetry') {
        // The SDK answers a failed try with a retry timer: the next id, fired after the backoff.
        const id = nextId++;
        const fireAt = new Date(history.now.getTime() + retryDelayMs(op.action.retry!, op.attempt));
        history.timerCreated(id, fireAt);
        ready.push({ kind: 'timer', id, fireAt, parent: { action: op.action, attempt: op.attempt } });
      }
    }
    return nextId;
  }
}

/** Every instance of a run tree, parent first. */
export function instancesOf(run: InstanceRun): InstanceRun[] {
  return [run, ...run.children.flatMap(instancesOf)];
}
