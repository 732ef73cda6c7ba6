import type { HttpMethod, HttpRequest, HttpResponseInit, InvocationContext, Timer } from '@azure/functions';

/** What the Functions entry point and the local host register: one list, whichever engine runs. */
export interface TimerRegistration {
  kind: 'timer';
  name: string;
  schedule: string;
  /** The timer also gets a Durable Functions client (the durable engine's starter). */
  durableClient?: boolean;
  handler: (timer: Timer, context: InvocationContext) => Promise<unknown>;
}

export interface QueueRegistration {
  kind: 'queue';
  name: string;
  queueName: string;
  /** The app setting (prefix) of the storage connection, as the Functions host names it. */
  connection: string;
  handler: (queueEntry: unknown, context: InvocationContext) => Promise<unknown>;
}

export interface OrchestrationRegistration {
  kind: 'orchestration';
  name: string;
  /**
   * A durable-functions `OrchestrationHandler`, typed loosely: that package is an optional peer,
   * so no type a consumer may see can name it.
   */
  handler: (context: never) => unknown;
}

export interface ActivityRegistration {
  kind: 'activity';
  name: string;
  handler: (input: unknown, context: InvocationContext) => Promise<unknown>;
}

export interface HttpRegistration {
  kind: 'http';
  name: string;
  /** Under the host's route prefix (`/api` by default). */
  route: string;
  methods: HttpMethod[];
  /**
   * The host's key check. Baton's routes take a function key (reads) or the admin key (steering);
   * only under `BATON_HTTP_AUTH=entra`, where App Service authentication signs callers in first,
   * are they `anonymous` to the host, and Baton checks the signed-in caller itself.
   */
  authLevel: 'anonymous' | 'function' | 'admin';
  handler: (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>;
}

export type Registration =
  TimerRegistration | QueueRegistration | OrchestrationRegistration | ActivityRegistration | HttpRegistration;
