/**
 * Types for the parts of durable-functions 3.5.0 the tests drive directly: its replay engine
 * (`lib/src/util/testingUtils`, which ships without types) and its history event classes.
 * Only what the tests use; shapes as in the package's JavaScript.
 */
declare module 'durable-functions/lib/src/util/testingUtils' {
  import type { DummyOrchestrationContext, OrchestrationHandler } from 'durable-functions';

  /** What an orchestrator episode returns: its actions, and its output once done. */
  export interface OrchestratorState {
    isDone: boolean;
    /** One array per yield (schema V1), or nested compound actions (V2 and later). */
    actions: unknown[][];
    output?: unknown;
    error?: string;
    customStatus?: unknown;
    schemaVersion: number;
  }

  export class DurableOrchestrationInput {
    constructor(
      instanceId?: string,
      history?: unknown[],
      input?: unknown,
      longRunningTimerIntervalDuration?: string,
      maximumShortTimerDuration?: string,
      defaultHttpAsyncRequestSleepTimeMillseconds?: number,
      schemaVersion?: number,
      isReplaying?: boolean,
      parentInstanceId?: string,
    );
  }

  export { DummyOrchestrationContext };

  /** Wraps a generator as the host would: each call replays the history and runs one episode. */
  export function createOrchestrator(
    fn: OrchestrationHandler,
  ): (trigger: DurableOrchestrationInput, context: DummyOrchestrationContext) => Promise<OrchestratorState>;
}

declare module 'durable-functions/lib/src/orchestrations/ReplaySchema' {
  export enum ReplaySchema {
    V1 = 0,
    V2 = 1,
    V3 = 2,
    V4 = 3,
  }
}

declare module 'durable-functions/lib/src/history/HistoryEvent' {
  export class HistoryEvent {
    EventType: number;
    EventId: number;
    IsPlayed: boolean;
    Timestamp: Date;
  }
}

declare module 'durable-functions/lib/src/history/OrchestratorStartedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class OrchestratorStartedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean });
  }
}

declare module 'durable-functions/lib/src/history/OrchestratorCompletedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class OrchestratorCompletedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean });
  }
}

declare module 'durable-functions/lib/src/history/ExecutionStartedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class ExecutionStartedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; name: string; input?: string; version?: string });
  }
}

declare module 'durable-functions/lib/src/history/TaskScheduledEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TaskScheduledEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; name: string; input?: string });
  }
}

declare module 'durable-functions/lib/src/history/TaskCompletedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TaskCompletedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; taskScheduledId: number; result: string });
  }
}

/** Failure details as the extension sends them (`FailureDetails` on failed events). */
declare module 'durable-functions/lib/src/history/FailureDetailsPayload' {
  export interface FailureDetailsPayload {
    ErrorType?: string;
    ErrorMessage?: string;
    StackTrace?: string;
    IsNonRetriable?: boolean;
  }
}

declare module 'durable-functions/lib/src/history/TaskFailedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  import type { FailureDetailsPayload } from 'durable-functions/lib/src/history/FailureDetailsPayload';
  export class TaskFailedEvent extends HistoryEvent {
    constructor(options: {
      eventId: number;
      timestamp: Date;
      isPlayed: boolean;
      taskScheduledId: number;
      reason?: string;
      details?: string;
      failureDetails?: FailureDetailsPayload;
    });
  }
}

declare module 'durable-functions/lib/src/history/SubOrchestrationInstanceCreatedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class SubOrchestrationInstanceCreatedEvent extends HistoryEvent {
    constructor(options: {
      eventId: number;
      timestamp: Date;
      isPlayed: boolean;
      name: string;
      input?: string;
      instanceId: string;
    });
  }
}

declare module 'durable-functions/lib/src/history/SubOrchestrationInstanceCompletedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class SubOrchestrationInstanceCompletedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; taskScheduledId: number; result: string });
  }
}

declare module 'durable-functions/lib/src/history/SubOrchestrationInstanceFailedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  import type { FailureDetailsPayload } from 'durable-functions/lib/src/history/FailureDetailsPayload';
  export class SubOrchestrationInstanceFailedEvent extends HistoryEvent {
    constructor(options: {
      eventId: number;
      timestamp: Date;
      isPlayed: boolean;
      taskScheduledId: number;
      reason?: string;
      details?: string;
      failureDetails?: FailureDetailsPayload;
    });
  }
}

declare module 'durable-functions/lib/src/history/TimerCreatedEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TimerCreatedEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; fireAt: Date });
  }
}

declare module 'durable-functions/lib/src/history/TimerFiredEvent' {
  import { HistoryEvent } from 'durable-functions/lib/src/history/HistoryEvent';
  export class TimerFiredEvent extends HistoryEvent {
    constructor(options: { eventId: number; timestamp: Date; isPlayed: boolean; timerId: number; fireAt: Date });
  }
}
