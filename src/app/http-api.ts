import { authLevelFor } from './http-auth';
import { httpApiHandlers, type ApiHandler, type ApiRoute, type HttpApiDeps } from './http-handlers';
import type { HttpRegistration } from './registration-types';

/** Routes live under the host's prefix (`/api` by default): `/api/baton/status`, … */
export const API_ROUTE_PREFIX = 'baton';

/**
 * The HTTP API of the Functions app: the same read model as `baton … --json`, and the same
 * requests as `baton trigger` and `baton cancel`. With keys (the default), reads need a function
 * key and trigger and cancel the host's admin (master) key, as they steer the hub; with Entra
 * sign-in, a signed-in caller, and for trigger and cancel the app role `Baton.Steer`.
 *
 * The routes are registered at start; their handlers are built on the first request to any of
 * them, so an app that is never called never loads their code.
 */
export function httpApiRegistrations(deps: HttpApiDeps): HttpRegistration[] {
  let handlers: Record<ApiRoute, ApiHandler> | undefined;
  const handler =
    (route: ApiRoute): ApiHandler =>
    (request, context) =>
      (handlers ??= httpApiHandlers(deps))[route](request, context);
  const route = (path: string) => `${API_ROUTE_PREFIX}/${path}`;
  const auth = deps.auth ?? 'keys';
  const read = authLevelFor(auth, 'read');
  const steer = authLevelFor(auth, 'steer');
  const http = (name: string, path: string, method: 'GET' | 'POST', authLevel: HttpRegistration['authLevel'], api: ApiRoute) =>
    ({ kind: 'http', name, route: route(path), methods: [method], authLevel, handler: handler(api) }) satisfies HttpRegistration;
  return [
    http('baton-api-status', 'status', 'GET', read, 'status'),
    http('baton-api-runs', 'runs', 'GET', read, 'runs'),
    http('baton-api-run', 'runs/{job}/{run}', 'GET', read, 'run'),
    http('baton-api-failures', 'runs/{job}/{run}/failures', 'GET', read, 'failures'),
    http('baton-api-trigger', 'jobs/{job}/trigger', 'POST', steer, 'trigger'),
    http('baton-api-cancel', 'runs/{job}/{run}/cancel', 'POST', steer, 'cancel'),
    // The page holds no data itself, but it runs the reads: what opens them opens it (?code= with keys).
    http('baton-page', 'page', 'GET', read, 'page'),
  ];
}
