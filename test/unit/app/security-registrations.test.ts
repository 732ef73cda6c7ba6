/**
 * Baton's only HTTP endpoints are its API, and none is anonymous. These tests read what is
 * registered (the registration list, and what `functions/index.ts` hands the Functions host) and
 * fail if an HTTP trigger appears without `authLevel: 'function'` (or `admin`): one left at the
 * v4 default is anonymous, callable by anyone who finds the URL. Steering (trigger, cancel)
 * takes the admin key.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { batonRegistrations } from '../../../src/app/registrations';
import { createBatonRuntime } from '../../../src/app/runtime';

interface AppCall {
  method: string;
  name: string;
  options: Record<string, unknown>;
}

// Whatever `functions/index.ts` calls on `app` (timer, storageQueue, http, get, generic, …) is recorded.
const appCalls = vi.hoisted(() => [] as AppCall[]);
vi.mock('@azure/functions', async (importOriginal) => {
  const actual = await importOriginal<typeof import('@azure/functions')>();
  const app = new Proxy(
    {},
    {
      // The shutdown hook is a hook, not a function of the app: recorded apart.
      get: (_, method) =>
        method === 'hook'
          ? { appTerminate: () => undefined }
          : (name: string, options: Record<string, unknown>) =>
              void appCalls.push({ method: String(method), name, options: options ?? {} }),
    },
  );
  return { ...actual, app };
});

const HTTP_METHODS = new Set(['http', 'get', 'put', 'post', 'patch', 'deleteRequest']);
const SAFE_AUTH_LEVELS = ['function', 'admin'];

function isHttpTrigger(call: AppCall): boolean {
  const trigger = call.options.trigger as { type?: unknown } | undefined;
  return HTTP_METHODS.has(call.method) || trigger?.type === 'httpTrigger';
}

function authLevelOf(call: AppCall): unknown {
  return call.options.authLevel ?? (call.options.trigger as { authLevel?: unknown } | undefined)?.authLevel;
}

/** An HTTP trigger whose key is not required: anonymous, or left at the default (anonymous too). */
const unsafe = (call: AppCall) =>
  authLevelOf(call) === 'anonymous' || (isHttpTrigger(call) && !SAFE_AUTH_LEVELS.includes(authLevelOf(call) as string));

const env = { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'security' };

describe('no anonymous HTTP endpoint', () => {
  const API = [
    'baton-api-status',
    'baton-api-runs',
    'baton-api-run',
    'baton-api-failures',
    'baton-api-trigger',
    'baton-api-cancel',
    'baton-page',
  ];

  it('the registration list holds the timer, the queue trigger and the API; every HTTP route says function or admin', () => {
    const registrations = batonRegistrations(createBatonRuntime(env));
    expect(registrations.map((r) => `${r.kind}:${r.name}`)).toEqual([
      'timer:baton-coordinator',
      'queue:baton-worker',
      ...API.map((name) => `http:${name}`),
    ]);
    for (const registration of registrations as Array<{ kind: string; authLevel?: unknown }>) {
      if (registration.kind === 'timer' || registration.kind === 'queue') continue;
      expect(SAFE_AUTH_LEVELS, `${registration.kind} registration without authLevel function`).toContain(registration.authLevel);
    }
  });

  describe('functions/index.ts, as the Functions host loads it', () => {
    beforeAll(async () => {
      for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
      // The host runs the app in its own folder, where registerBaton finds the app's host.json.
      vi.spyOn(process, 'cwd').mockReturnValue(join(__dirname, '..', '..', '..', 'functions'));
      await import('../../../functions/index');
    });
    afterAll(() => {
      vi.unstubAllEnvs();
      vi.restoreAllMocks();
    });

    it('registers one timer, one storage queue trigger and the API routes, and nothing else', () => {
      expect(appCalls.map((c) => `${c.method}:${c.name}`)).toEqual([
        'timer:baton-coordinator',
        'storageQueue:baton-worker',
        ...API.map((name) => `http:${name}`),
      ]);
      expect(appCalls.find((c) => c.method === 'storageQueue')?.options).toMatchObject({
        queueName: 'security-work',
        connection: 'AzureWebJobsStorage',
      });
    });

    it('registers no HTTP trigger without authLevel function or admin, and nothing anonymous', () => {
      expect(appCalls.length).toBeGreaterThan(0);
      expect(appCalls.filter(unsafe).map((c) => `${c.method}:${c.name}`)).toEqual([]);
    });

    it('trigger and cancel, which steer the hub, take the admin key; reads take a function key', () => {
      const levels = Object.fromEntries(appCalls.filter(isHttpTrigger).map((c) => [c.name, authLevelOf(c)]));
      expect(levels).toEqual({
        'baton-api-status': 'function',
        'baton-api-runs': 'function',
        'baton-api-run': 'function',
        'baton-api-failures': 'function',
        'baton-api-trigger': 'admin',
        'baton-api-cancel': 'admin',
        'baton-page': 'function',
      });
    });
  });

  it('the guard itself: an HTTP trigger left at the default, or anonymous, is caught; one with authLevel function is not', () => {
    expect(unsafe({ method: 'http', name: 'h', options: { handler: () => undefined } })).toBe(true);
    expect(unsafe({ method: 'get', name: 'h', options: { authLevel: 'anonymous' } })).toBe(true);
    expect(unsafe({ method: 'generic', name: 'h', options: { trigger: { type: 'httpTrigger', authLevel: 'anonymous' } } })).toBe(
      true,
    );
    expect(unsafe({ method: 'http', name: 'h', options: { authLevel: 'function' } })).toBe(false);
    expect(unsafe({ method: 'timer', name: 't', options: { schedule: '* * * * * *' } })).toBe(false);
  });
});
