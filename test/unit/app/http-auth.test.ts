import { describe, expect, it } from 'vitest';
import { authLevelFor, refusal, signedInCaller, STEER_ROLE, type HttpAuth, type RouteAccess } from '../../../src/app/http-auth';

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
  const nobody = request();
  const reader = request(encode({ claims: [] }));
  const steerer = request(encode({ claims: [{ typ: 'roles', val: STEER_ROLE }] }));
  it.each<[HttpAuth, RouteAccess, string, ReturnType<typeof request>, number | undefined]>([
    // With keys, the host has checked the key before the handler runs.
    ['keys', 'read', 'nobody', nobody, undefined],
    ['keys', 'steer', 'nobody', nobody, undefined],
    ['entra', 'read', 'nobody', nobody, 401],
    ['entra', 'steer', 'nobody', nobody, 401],
    ['entra', 'read', 'a reader', reader, undefined],
    ['entra', 'steer', 'a reader', reader, 403],
    ['entra', 'read', 'a steerer', steerer, undefined],
    ['entra', 'steer', 'a steerer', steerer, undefined],
  ])('%s, %s route, %s: %s', (auth, access, _, req, status) => {
    expect(refusal(auth, access, req)?.status).toBe(status);
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
