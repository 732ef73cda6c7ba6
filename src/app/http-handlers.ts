import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import * as z from '../zod';
import type { FailureEntry } from '../hub/fold';
import { FAILURES_LISTED, runView, showView, statusView, type RunsView } from '../hub/read-model';
import { IF_ACTIVE, keyedRunSegment, requestCancel, triggerRun, type RequestClock } from '../hub/requests';
import { isTerminal } from '../hub/run-record';
import { isRunId } from '../hub/run-id';
import { firstRunFailures, listJobNames, readHubStatus, readRunDetails, readRunFailures } from '../hub/status';
import { listRuns, type RunsPage } from '../hub/run-index';
import { InvalidConfigError, messageOf } from '../errors';
import { JOB_NAME_PATTERN } from '../jobs/define-job';
import { refusal, type HttpAuth, type RouteAccess } from './http-auth';
import type { DocumentStore } from '../fencing/document-store';
import type { LeaseReader } from '../lease/lease-store';
import { statusPageResponse } from './status-page';

/** What the API reads and writes: the hub's documents and its lease, as any instance sees them. */
export interface HttpApiDeps {
  hub: string;
  /** The blob endpoint without its query string (never a SAS). */
  endpoint: string;
  container: string;
  docs: DocumentStore;
  lease: LeaseReader;
  /** Storage's time, as this instance learned it: what status and requests are dated by. */
  clock: RequestClock;
  log: { warn(message: string): void };
  /** The engine applies trigger and cancel requests (the durable engine does not yet). */
  appliesRequests: boolean;
  /** Wakes a leader that rests between occurrences after a trigger (never rejects). */
  wake?: (options: { abortSignal?: AbortSignal }) => Promise<void>;
  /** Who may call (`BATON_HTTP_AUTH`): host keys (default), or Entra sign-in through App Service authentication. */
  auth?: HttpAuth;
}

const DEFAULT_RUNS = 20;
const MAX_PAGE = 1000;

class BadRequest extends Error {}
class NotFound extends Error {}
class Conflict extends Error {}

const pageSize = (fallback: number) =>
  z.pipe(
    z.optional(
      z
        .pipe(z.string().check(z.regex(/^\d+$/, `must be a whole number from 1 to ${MAX_PAGE}`)), z.transform(Number))
        .check(z.refine((n) => n >= 1 && n <= MAX_PAGE, `must be a whole number from 1 to ${MAX_PAGE}`)),
    ),
    z.transform((n) => n ?? fallback),
  );

const runsQuery = z.lazy(() =>
  z.object({
    job: z.optional(
      z.string().check(z.regex(JOB_NAME_PATTERN, 'must be a job name (1-48 lowercase letters, digits or inner hyphens)')),
    ),
    limit: pageSize(DEFAULT_RUNS),
    /** The `next` of the previous page, from the same `job`: only runs created before that page's. */
    after: z.optional(z.string().check(z.minLength(1, 'must not be empty'))),
  }),
);

const triggerQuery = z.lazy(() =>
  z.object({
    /** While a run of the job is open: start another (default), skip (answer with it), or wait. */
    ifActive: z.optional(z.enum(IF_ACTIVE, { error: `must be one of ${IF_ACTIVE.join(', ')}` })),
  }),
);

const failuresQuery = z.lazy(() =>
  z.object({
    /** Failures already read: the `next` of the previous page. */
    offset: z.pipe(
      z.optional(z.pipe(z.string().check(z.regex(/^\d+$/, 'must be a whole number')), z.transform(Number))),
      z.transform((n) => n ?? 0),
    ),
    limit: pageSize(FAILURES_LISTED),
  }),
);

const cancelBody = z.lazy(() => z.strictObject({ reason: z.optional(z.string().check(z.minLength(1), z.maxLength(500))) }));

function parse<T extends z.ZodMiniType>(schema: T, value: unknown, where: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.join('.');
  throw new BadRequest(
    issue.code === 'unrecognized_keys'
      ? `${where}: unknown field ${issue.keys.join(', ')}`
      : `${where}${field ? ` ${field}` : ''}: ${issue.message}`,
  );
}

const queryOf = (request: HttpRequest): Record<string, string> => Object.fromEntries(request.query.entries());

/**
 * A route's job, as a job's name must be. The host decodes route segments, so `..%2F` arrives as
 * `../`: a name that is not a job's could make a request or a read name another blob.
 */
function jobOf(request: HttpRequest, route: string): string {
  const { job } = request.params;
  if (!job) throw new BadRequest(`the route needs a job: ${route}`);
  if (!JOB_NAME_PATTERN.test(job))
    throw new BadRequest(`${JSON.stringify(job)} is not a job name (1-48 lowercase letters, digits or inner hyphens)`);
  return job;
}

/** The header a client may send its trigger's idempotency key in (as payment APIs take it). */
const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** A run id is `<job>/<occurrence or manual-id>`; the route carries it as two segments, checked as such. */
function runIdOf(request: HttpRequest): string {
  const { job, run } = request.params;
  if (!job || !run) throw new BadRequest('the route needs a job and a run: /baton/runs/<job>/<run>');
  if (!isRunId(`${job}/${run}`)) {
    throw new BadRequest(`${JSON.stringify(`${job}/${run}`)} is not a run id (<job>/<occurrence or manual-id>)`);
  }
  return `${job}/${run}`;
}

/** The idempotency key of a trigger: `?key=` or the `Idempotency-Key` header; both must agree. */
function keyOf(request: HttpRequest): string | undefined {
  const query = request.query.get('key') ?? undefined;
  const header = request.headers.get(IDEMPOTENCY_HEADER) ?? undefined;
  if (query !== undefined && header !== undefined && query !== header) {
    throw new BadRequest(`the key in the query and the ${IDEMPOTENCY_HEADER} header differ: give one`);
  }
  const key = query ?? header;
  if (key === undefined) return undefined;
  try {
    keyedRunSegment(key);
  } catch (err) {
    if (err instanceof InvalidConfigError) throw new BadRequest(err.message);
    throw err;
  }
  return key;
}

async function readJsonBody(request: HttpRequest): Promise<unknown> {
  const text = await request.text();
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BadRequest('the body is not JSON');
  }
}

const json = (status: number, body: unknown): HttpResponseInit => ({
  status,
  jsonBody: body,
  headers: { 'cache-control': 'no-store' },
});

/** The routes of the HTTP API, each one function. */
export type ApiRoute = 'status' | 'runs' | 'run' | 'failures' | 'trigger' | 'cancel' | 'page';

export type ApiHandler = (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>;

/**
 * One error shape for every route: `{ error }` with one line, 400 for bad input, 404 for no such
 * run; under Entra sign-in, 401 and 403 before anything is read.
 */
function guarded(
  deps: HttpApiDeps,
  name: string,
  handle: (request: HttpRequest) => Promise<HttpResponseInit>,
  access: RouteAccess = 'read',
): ApiHandler {
  return async (request) => {
    const refused = refusal(deps.auth ?? 'keys', access, request);
    if (refused) return json(refused.status, { error: refused.error });
    try {
      return await handle(request);
    } catch (err) {
      if (err instanceof BadRequest) return json(400, { error: err.message });
      if (err instanceof NotFound) return json(404, { error: err.message });
      if (err instanceof Conflict) return json(409, { error: err.message });
      deps.log.warn(`${name} failed: ${messageOf(err)}`);
      return json(500, { error: `${name} failed; the app's log has the reason` });
    }
  };
}

/**
 * The HTTP API's handlers, by route. `http-api.ts` registers the routes at start and builds these
 * on a route's first request, so an app loads their code (and the status page's) only once it
 * is called (build/bundle.mjs).
 */
export function httpApiHandlers(deps: HttpApiDeps): Record<ApiRoute, ApiHandler> {
  const { docs } = deps;
  const status = guarded(deps, 'status', async () => {
    let now = new Date(0);
    const at = () => (now = deps.clock.date());
    const view = statusView(deps.hub, deps.endpoint, await readHubStatus(docs, deps.lease, { now: at }), now);
    return json(200, view);
  });

  const runs = guarded(deps, 'runs', async (request) => {
    const query = parse(runsQuery, queryOf(request), 'query');
    let page: RunsPage;
    try {
      page = await listRuns(docs, query);
    } catch (err) {
      if (err instanceof InvalidConfigError) throw new BadRequest(`query ${err.message}`);
      throw err;
    }
    const view: RunsView & { next: string | null } = {
      hub: deps.hub,
      job: query.job ?? null,
      runs: page.runs.map((r) => runView(r, deps.clock.date())),
      next: page.next ?? null,
    };
    return json(200, view);
  });

  const run = guarded(deps, 'run', async (request) => {
    const runId = runIdOf(request);
    const details = await readRunDetails(docs, runId);
    if (!details) throw new NotFound(`no run ${runId} in hub ${deps.hub}`);
    const listed = await firstRunFailures(docs, details, FAILURES_LISTED);
    return json(200, showView(deps.hub, deps.container, details, listed, deps.clock.date()));
  });

  const failures = guarded(deps, 'failures', async (request) => {
    const runId = runIdOf(request);
    const query = parse(failuresQuery, queryOf(request), 'query');
    const details = await readRunDetails(docs, runId);
    if (!details) throw new NotFound(`no run ${runId} in hub ${deps.hub}`);
    const unreadableParts: string[] = [];
    const onMissing = (key: string) => unreadableParts.push(key);
    const page: FailureEntry[] = [];
    let seen = 0;
    let more = false;
    for await (const failure of readRunFailures(docs, details, { onMissing })) {
      if (seen++ < query.offset) continue;
      if (page.length === query.limit) {
        more = true;
        break;
      }
      page.push(failure);
    }
    return json(200, {
      hub: deps.hub,
      runId,
      state: details.record.state,
      offset: query.offset,
      failures: page,
      next: more ? query.offset + page.length : null,
      ...(unreadableParts.length ? { unreadableParts } : {}),
    });
  });

  // A request nothing would apply must not be taken as if it would be.
  const steering = (what: string) => {
    if (!deps.appliesRequests) {
      throw new Conflict(`hub ${deps.hub} runs the durable engine, which does not apply ${what} requests yet`);
    }
  };

  const trigger = guarded(
    deps,
    'trigger',
    async (request) => {
      steering('trigger');
      const job = jobOf(request, '/baton/jobs/<job>/trigger');
      const known = await listJobNames(docs);
      // A hub no leader has ticked on yet has no job records; then the request just waits.
      if (known.length > 0 && !known.includes(job)) {
        throw new NotFound(`hub ${deps.hub} has no job ${job} (known: ${known.join(', ')})`);
      }
      const key = keyOf(request);
      const { ifActive } = parse(triggerQuery, { ifActive: request.query.get('ifActive') ?? undefined }, 'query');
      const { runId, requested } = await triggerRun(docs, job, {
        clock: deps.clock,
        ...(deps.wake ? { wake: deps.wake } : {}),
        ...(ifActive === undefined ? {} : { ifActive }),
        ...(key === undefined ? {} : { key }),
      });
      if (!requested) return json(200, { hub: deps.hub, job, runId, requested: false, skipped: true });
      return json(202, { hub: deps.hub, job, runId, requested: true, jobChecked: known.length > 0 });
    },
    'steer',
  );

  const cancel = guarded(
    deps,
    'cancel',
    async (request) => {
      steering('cancel');
      const runId = runIdOf(request);
      const body = parse(cancelBody, await readJsonBody(request), 'body');
      const details = await readRunDetails(docs, runId);
      if (!details) throw new NotFound(`no run ${runId} in hub ${deps.hub}`);
      const { state } = details.record;
      if (isTerminal(state))
        return json(409, { hub: deps.hub, runId, requested: false, state, error: `run ${runId} already ended (${state})` });
      await requestCancel(docs, runId, body.reason ?? 'cancelled through the HTTP API', { clock: deps.clock });
      return json(202, { hub: deps.hub, runId, requested: true, state });
    },
    'steer',
  );

  const page = guarded(deps, 'page', () => Promise.resolve(statusPageResponse()));

  return { status, runs, run, failures, trigger, cancel, page };
}
