import type { HttpRequest } from '@azure/functions';

/**
 * Who may call the HTTP API (`BATON_HTTP_AUTH`):
 * - `keys` (default): the Functions host checks keys. Reads take a function key, trigger and
 *   cancel the admin (master) key.
 * - `entra`: App Service authentication signs callers in with Entra ID before a request reaches
 *   the app; the host checks no key, and Baton reads the caller App Service vouches for. Reads
 *   need the app role {@link READ_ROLE} or {@link STEER_ROLE}; trigger and cancel need
 *   {@link STEER_ROLE} and, since a browser sends its session cookie with any site's form, a
 *   bearer token or the app's own origin (see {@link crossSiteRefusal}).
 */
export type HttpAuth = 'keys' | 'entra';

/** The app role, on the app registration, that lets a signed-in caller trigger and cancel runs. */
export const STEER_ROLE = 'Baton.Steer';

/**
 * The app role that lets a signed-in caller read. Signing in alone proves only membership of the
 * tenant (any guest, any colleague), so reading takes a role an administrator assigned.
 */
export const READ_ROLE = 'Baton.Read';

/**
 * The header App Service authentication sets on a request it let through: the caller's claims,
 * base64 JSON. App Service drops any copy a client sends, which is why Baton only reads it when
 * authentication is on in front of the app (see the start-up check of `BATON_HTTP_AUTH`).
 */
export const PRINCIPAL_HEADER = 'x-ms-client-principal';

export interface SignedInCaller {
  /** The app roles the caller holds. */
  roles: string[];
}

interface PrincipalClaims {
  role_typ?: unknown;
  claims?: unknown;
}

/** The role claim's type when the principal does not name one (the token's `roles` claim). */
const ROLES_CLAIM = 'roles';

/** The caller App Service signed in, or undefined when the request carries none (or an unreadable one). */
export function signedInCaller(request: Pick<HttpRequest, 'headers'>): SignedInCaller | undefined {
  const header = request.headers.get(PRINCIPAL_HEADER);
  if (!header) return undefined;
  let principal: PrincipalClaims;
  try {
    principal = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as PrincipalClaims;
  } catch {
    return undefined;
  }
  if (typeof principal !== 'object' || principal === null || !Array.isArray(principal.claims)) return undefined;
  const roleTypes = new Set([ROLES_CLAIM, ...(typeof principal.role_typ === 'string' ? [principal.role_typ] : [])]);
  const roles = principal.claims.flatMap((claim: unknown) => {
    if (typeof claim !== 'object' || claim === null) return [];
    const { typ, val } = claim as { typ?: unknown; val?: unknown };
    return typeof typ === 'string' && roleTypes.has(typ) && typeof val === 'string' ? [val] : [];
  });
  return { roles };
}

/** What a route asks of its caller. */
export type RouteAccess = 'read' | 'steer';

/** The host's key check for a route: none under `entra`, where App Service authentication stands in front. */
export function authLevelFor(auth: HttpAuth, access: RouteAccess): 'anonymous' | 'function' | 'admin' {
  if (auth === 'entra') return 'anonymous';
  return access === 'steer' ? 'admin' : 'function';
}

/**
 * Why a steering request that App Service signed in may still not be the caller's own doing, or
 * undefined when it is. A browser attaches the App Service session cookie to a form any site
 * posts here, so a cookie proves nothing about intent; what a page cannot forge is its origin
 * (browsers set `Origin` on every POST, and `Sec-Fetch-Site` beside it) or a header a
 * cross-site page cannot add without a CORS preflight, which no CORS rule of the template grants.
 * So: a bearer token (API clients, `az account get-access-token`), or `Origin` equal to the
 * origin the request was sent to. A request naming no origin is refused too: a browser always
 * names one on a POST, and every other client has a token. Under `keys` nothing is ambient (the
 * key travels in the request), so this applies to `entra` only.
 */
export function crossSiteRefusal(request: Pick<HttpRequest, 'headers' | 'url'>): string | undefined {
  if (/^bearer\s+\S/i.test(request.headers.get('authorization') ?? '')) return undefined;
  const origin = request.headers.get('origin');
  const site = request.headers.get('sec-fetch-site');
  let own: string | undefined;
  try {
    own = new URL(request.url).origin;
  } catch {
    own = undefined;
  }
  if (origin !== null && origin.toLowerCase() === own?.toLowerCase() && (site === null || site === 'same-origin')) {
    return undefined;
  }
  const from = origin === null ? 'this request names no origin' : `this request came from ${origin.slice(0, 100)}`;
  return `trigger and cancel take a bearer token, or a browser on this app’s own origin: ${from}`;
}

/**
 * Under `entra`, why a request may not go on (401: no signed-in caller; 403: no role for the
 * route, or a steering request a cross-site page could have sent), or undefined when it may.
 * Under `keys` the host has checked the key.
 */
export function refusal(
  auth: HttpAuth,
  access: RouteAccess,
  request: Pick<HttpRequest, 'headers' | 'url'>,
): { status: 401 | 403; error: string } | undefined {
  if (auth === 'keys') return undefined;
  const caller = signedInCaller(request);
  if (!caller) return { status: 401, error: 'sign in with Entra ID: this API takes no keys (BATON_HTTP_AUTH=entra)' };
  if (access === 'steer') {
    if (!caller.roles.includes(STEER_ROLE)) return { status: 403, error: `trigger and cancel need the app role ${STEER_ROLE}` };
    const crossSite = crossSiteRefusal(request);
    return crossSite === undefined ? undefined : { status: 403, error: crossSite };
  }
  if (!caller.roles.includes(READ_ROLE) && !caller.roles.includes(STEER_ROLE)) {
    return { status: 403, error: `reading needs the app role ${READ_ROLE} (or ${STEER_ROLE})` };
  }
  return undefined;
}
