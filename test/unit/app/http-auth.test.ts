import { describe, expect, it } from 'vitest';
import {
  authLevelFor,
  READ_ROLE,
  refusal,
  signedInCaller,
  STEER_ROLE,
  type HttpAuth,
  type RouteAccess,
} from '../../../src/app/http-auth';

const ROLE_URI = 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role';
const encode = (principal: unknown) => Buffer.from(JSON.stringify(principal)).toString('base64');
const request = (header?: string) => ({ headers: new Headers(header === undefined ? {} : { 'x-ms-client-principal': header }) });

describe('the caller App Service authentication signed in', () => {
  it.each<[string, string | undefined, string[] | undefined]>([
    ['no header', undefined, undefined],
    ['an empty header', '', undefined],
    ['not base64 JSON', 'not-a-principal', undefined],
    ['JSON without claims', encode({ auth_typ: 'aad' }), undefined],
    ['claims that are not a list', encode({ claims: 'roles' }), undefined],
    ['no roles', encode({ claims: [{ typ: 'name', val: 'ada@example.org' }] }), []],
    [
      'roles from the token',
      encode({
        claims: [
          { typ: 'roles', val: STEER_ROLE },
          { typ: 'name', val: 'x' },
        ],
      }),
      [STEER_ROLE],
    ],
    [
      'roles of the type the principal names',
      encode({ role_typ: ROLE_URI, claims: [{ typ: ROLE_URI, val: 'Baton.Steer' }] }),
      ['Baton.Steer'],
    ],
    ['a malformed claim is skipped', encode({ claims: [null, { typ: 'roles' }, { typ: 'roles', val: 'A' }] }), ['A']],
  ])('%s', (_, header, roles) => {
    expect(signedInCaller(request(header))?.roles).toEqual(roles);
  });
});

describe('who may call a route', () => {
  const APP = 'https://func-baton.azurewebsites.net';
  const as = (roles: string[] | undefined, headers: Record<string, string> = {}) => ({
    url: `${APP}/api/baton/jobs/nightly/trigger`,
    headers: new Headers({
      ...(roles === undefined
        ? {}
        : { 'x-ms-client-principal': encode({ claims: roles.map((val) => ({ typ: 'roles', val })) }) }),
      ...headers,
    }),
  });
  const fromPage = { origin: APP };
  const bearer = { authorization: 'Bearer eyJ0eXAi.eyJhdWQi.c2ln' };
  it.each<[HttpAuth, RouteAccess, string, number | undefined, ReturnType<typeof as>]>([
    // With keys, the host has checked the key before the handler runs; a key is never ambient.
    ['keys', 'read', 'nobody', undefined, as(undefined)],
    ['keys', 'steer', 'nobody', undefined, as(undefined)],
    ['entra', 'read', 'nobody', 401, as(undefined)],
    ['entra', 'steer', 'nobody', 401, as(undefined)],
    // Anyone in the tenant can sign in; reading takes an app role.
    ['entra', 'read', 'a tenant member with no role', 403, as([])],
    ['entra', 'read', 'a tenant member with another role', 403, as(['Baton.Reader'])],
    ['entra', 'read', 'a reader', undefined, as([READ_ROLE])],
    ['entra', 'read', 'a steerer (steering includes reading)', undefined, as([STEER_ROLE])],
    ['entra', 'steer', 'a reader, from the page', 403, as([READ_ROLE], fromPage)],
    ['entra', 'steer', 'a steerer with a bearer token', undefined, as([STEER_ROLE], bearer)],
    ['entra', 'steer', 'a steerer from the app’s own page', undefined, as([STEER_ROLE], fromPage)],
    // A session cookie rides along on a cross-site form POST: the browser names the page it came from.
    ['entra', 'steer', 'a steerer’s cookie from another site', 403, as([STEER_ROLE], { origin: 'https://evil.example' })],
    ['entra', 'steer', 'a steerer’s cookie from a look-alike host', 403, as([STEER_ROLE], { origin: `${APP}.evil.example` })],
    ['entra', 'steer', 'a steerer’s cookie over plain http', 403, as([STEER_ROLE], { origin: APP.replace('https', 'http') })],
    ['entra', 'steer', 'a steerer’s cookie from a sandboxed frame', 403, as([STEER_ROLE], { origin: 'null' })],
    ['entra', 'steer', 'a steerer’s cookie with no Origin', 403, as([STEER_ROLE])],
    ['entra', 'steer', 'a steerer with another scheme of Authorization', 403, as([STEER_ROLE], { authorization: 'Basic YTpi' })],
    [
      'entra',
      'steer',
      'a steerer from the own origin that the browser marks cross-site',
      403,
      as([STEER_ROLE], { ...fromPage, 'sec-fetch-site': 'cross-site' }),
    ],
    [
      'entra',
      'read',
      'a reader’s cookie from another site (reads change nothing)',
      undefined,
      as([READ_ROLE], { origin: 'https://evil.example' }),
    ],
  ])('%s, %s route, %s: %s', (auth, access, _, status, req) => {
    expect(refusal(auth, access, req)?.status).toBe(status);
  });

  it('says why a steering request was refused, in one line', () => {
    expect(refusal('entra', 'read', as(['Baton.Reader']))?.error).toBe(
      `reading needs the app role ${READ_ROLE} (or ${STEER_ROLE})`,
    );
    expect(refusal('entra', 'steer', as([STEER_ROLE], { origin: 'https://evil.example' }))?.error).toBe(
      'trigger and cancel take a bearer token, or a browser on this app’s own origin: this request came from https://evil.example',
    );
    expect(refusal('entra', 'steer', as([STEER_ROLE]))?.error).toBe(
      'trigger and cancel take a bearer token, or a browser on this app’s own origin: this request names no origin',
    );
  });

  it.each<[HttpAuth, RouteAccess, string]>([
    ['keys', 'read', 'function'],
    ['keys', 'steer', 'admin'],
    ['entra', 'read', 'anonymous'],
    ['entra', 'steer', 'anonymous'],
  ])('the host checks %s for a %s route: %s', (auth, access, level) => {
    expect(authLevelFor(auth, access)).toBe(level);
  });
});
