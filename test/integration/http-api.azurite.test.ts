import { beforeAll, describe, expect, it } from 'vitest';
import { HttpRequest, InvocationContext, type HttpResponseInit } from '@azure/functions';
import { createBatonRuntime } from '../../src/app/runtime';
import { batonRegistrations } from '../../src/app/registrations';
import type { HttpRegistration } from '../../src/app/registration-types';
import { pendingRequests, type EngineRequest } from '../../src/hub/requests';
import type { RunsView, ShowView, StatusView } from '../../src/hub/read-model';
import { useAzurite } from '../support/azurite';
import { runCli, seedHub, tempCwd, type SeededHub } from '../support/cli-harness';

const azurite = useAzurite();
let seed: SeededHub;
let api: Map<string, HttpRegistration>;

beforeAll(async () => {
  // No hyphen: the durable engine's case below names its task hub after the hub.
  seed = await seedHub(azurite.blobService, azurite.leaseBlobService, azurite.uniqueName('api').replace(/-/g, ''));
  const runtime = createBatonRuntime({ AzureWebJobsStorage: azurite.azurite.connectionString, BATON_HUB: seed.hub });
  api = new Map(
    batonRegistrations(runtime).flatMap((r) => (r.kind === 'http' ? [[r.name.replace(/^baton-api-/, ''), r] as const] : [])),
  );
});

interface Call {
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: string;
}

/** Calls a route's handler as the Functions host would, with a real HttpRequest. */
async function call(
  name: string,
  { params = {}, query = {}, headers = {}, body }: Call = {},
): Promise<HttpResponseInit & { json: any }> {
  const registration = api.get(name);
  if (!registration) throw new Error(`no route ${name}`);
  const search = new URLSearchParams(query).toString();
  const request = new HttpRequest({
    method: registration.methods[0]!,
    url: `http://localhost/api/${registration.route}${search ? `?${search}` : ''}`,
    params,
    query,
    headers,
    ...(body !== undefined ? { body: { string: body } } : {}),
  });
  const response = await registration.handler(request, new InvocationContext({ functionName: registration.name }));
  return { ...response, json: response.jsonBody };
}

async function cliJson<T>(...argv: string[]): Promise<T> {
  const cwd = tempCwd();
  try {
    const result = await runCli(
      ['--connection', azurite.azurite.connectionString, '--hub', seed.hub, '--timeout', '60', ...argv, '--json'],
      { env: {}, cwd: cwd.path },
    );
    expect(result.err).toBe('');
    return JSON.parse(result.out) as T;
  } finally {
    cwd.dispose();
  }
}

const runParams = (runId: string) => {
  const [job, ...rest] = runId.split('/');
  return { job: job!, run: rest.join('/') };
};

async function requests(): Promise<EngineRequest[]> {
  const out: EngineRequest[] = [];
  for await (const { request } of pendingRequests(seed.docs)) if (request) out.push(request);
  return out;
}

/** One error line, and the status the route promises. */
function expectError(response: { status?: number; json: any }, status: number, pattern: RegExp): void {
  expect(response.status).toBe(status);
  expect(Object.keys(response.json)).toContain('error');
  expect(response.json.error).toMatch(pattern);
  expect(response.json.error).not.toContain('\n');
}

describe('the HTTP API', () => {
  it('registers six routes and the page, none anonymous: reads at function level, trigger and cancel at admin level', () => {
    expect([...api.values()].map((r) => [r.route, r.methods.join(), r.authLevel])).toEqual([
      ['baton/status', 'GET', 'function'],
      ['baton/runs', 'GET', 'function'],
      ['baton/runs/{job}/{run}', 'GET', 'function'],
      ['baton/runs/{job}/{run}/failures', 'GET', 'function'],
      ['baton/jobs/{job}/trigger', 'POST', 'admin'],
      ['baton/runs/{job}/{run}/cancel', 'POST', 'admin'],
      ['baton/page', 'GET', 'function'],
    ]);
  });

  it('status: the same document as baton status --json', async () => {
    const response = await call('status');
    expect(response.status).toBe(200);
    const fromCli = await cliJson<StatusView>('status');
    const strip = (v: StatusView) => ({ ...v, leader: v.leader && { ...v.leader, ledForMs: null } });
    expect(strip(response.json)).toEqual(strip(fromCli));
    expect(response.json.leader).toMatchObject({ identity: seed.leader, epoch: seed.epoch });
    expect(response.json.activeRuns.map((r: { runId: string }) => r.runId)).toEqual([seed.activeRunId]);
  });

  it('runs: the same runs as baton runs --json, paged with next', async () => {
    const all = await call('runs');
    expect(all.status).toBe(200);
    const fromCli = await cliJson<RunsView>('runs');
    expect(all.json).toEqual({ ...fromCli, next: null });
    expect(all.json.runs.map((r: { runId: string }) => r.runId)).toEqual([seed.activeRunId, seed.finishedRunId]);

    const first = await call('runs', { query: { limit: '1' } });
    expect(first.json.runs.map((r: { runId: string }) => r.runId)).toEqual([seed.activeRunId]);
    // An opaque cursor: the place in the run index where the page ended.
    expect(first.json.next).toEqual(expect.any(String));
    const second = await call('runs', { query: { limit: '1', after: first.json.next } });
    expect(second.json.runs.map((r: { runId: string }) => r.runId)).toEqual([seed.finishedRunId]);
    expect(second.json.next).toBeNull();

    const ofJob = await call('runs', { query: { job: 'no-such-job' } });
    expect(ofJob.json).toMatchObject({ job: 'no-such-job', runs: [], next: null });
  });

  it.each([
    [{ limit: '0' }, /^query limit: must be a whole number from 1 to 1000$/],
    [{ limit: 'ten' }, /^query limit: must be a whole number from 1 to 1000$/],
    [{ limit: '1001' }, /^query limit: /],
    [{ after: 'audit/never' }, /^query after: not the next of a page of runs \(pass the next value a page returned\)$/],
    [
      { job: 'other', after: Buffer.from(JSON.stringify({ j: 'audit', c: 'x' })).toString('base64url') },
      /^query after: the next of a listing of job audit, not of job other$/,
    ],
  ])('runs: %j is a 400 with one line naming it', async (query, pattern) => {
    expectError(await call('runs', { query }), 400, pattern);
  });

  it('one run: the same document as baton show --json; an unknown run is a 404', async () => {
    const response = await call('run', { params: runParams(seed.finishedRunId) });
    expect(response.status).toBe(200);
    expect(response.json).toEqual(await cliJson<ShowView>('show', seed.finishedRunId));
    expect(response.json.failures).toMatchObject({ failedCount: 1 });
    expectError(await call('run', { params: { job: 'audit', run: 'never' } }), 404, /^no run audit\/never in hub /);
  });

  it('failures: a page of the failed items with their reasons, for ended and open runs', async () => {
    const ended = await call('failures', { params: runParams(seed.finishedRunId) });
    expect(ended.status).toBe(200);
    expect(ended.json).toMatchObject({ runId: seed.finishedRunId, state: 'succeeded', offset: 0, next: null });
    expect(ended.json.failures).toEqual([{ item: 2, reason: 'Content-MD5 mismatch', attempts: 5 }]);

    const past = await call('failures', { params: runParams(seed.finishedRunId), query: { offset: '1' } });
    expect(past.json).toMatchObject({ offset: 1, failures: [], next: null });

    const open = await call('failures', { params: runParams(seed.activeRunId), query: { limit: '1' } });
    expect(open.status).toBe(200);
    expect(open.json.state).not.toBe('succeeded');
    expectError(
      await call('failures', { params: runParams(seed.finishedRunId), query: { offset: '-1' } }),
      400,
      /^query offset: /,
    );
  });

  it('trigger: requests a run of a known job (202, with its run id); an unknown job is a 404 and requests nothing', async () => {
    const before = (await requests()).length;
    expectError(await call('trigger', { params: { job: 'no-such-job' } }), 404, /has no job no-such-job \(known: audit\)/);
    expect(await requests()).toHaveLength(before);

    const response = await call('trigger', { params: { job: seed.job } });
    expect(response.status).toBe(202);
    expect(response.json).toMatchObject({ hub: seed.hub, job: seed.job, requested: true, jobChecked: true });
    expect(response.json.runId).toMatch(/^audit\/manual-[0-9a-f-]{36}$/);
    expect((await requests()).some((r) => r.kind === 'run' && response.json.runId.endsWith(r.id))).toBe(true);
  });

  it('trigger while a run is open: skip answers with it and asks for nothing; wait asks the leader to wait; a bad value is a 400', async () => {
    const params = { job: seed.job };
    const before = (await requests()).length;
    const skipped = await call('trigger', { params, query: { ifActive: 'skip' } });
    expect(skipped.status).toBe(200);
    expect(skipped.json).toEqual({ hub: seed.hub, job: seed.job, runId: seed.activeRunId, requested: false, skipped: true });
    expect(await requests()).toHaveLength(before);
    expectError(
      await call('trigger', { params, query: { ifActive: 'later' } }),
      400,
      /^query ifActive: must be one of start, skip, wait$/,
    );

    const waiting = await call('trigger', { params, query: { ifActive: 'wait' } });
    expect(waiting.status).toBe(202);
    expect(await requests()).toContainEqual({
      kind: 'run',
      job: seed.job,
      id: waiting.json.runId.split('/manual-')[1],
      ifActive: 'wait',
    });
  });

  it('trigger with a key: ?key= and the Idempotency-Key header name the same run every time; a bad key is a 400', async () => {
    const params = { job: seed.job };
    const byQuery = await call('trigger', { params, query: { key: 'invoice-batch-42' } });
    const byHeader = await call('trigger', { params, headers: { 'Idempotency-Key': 'invoice-batch-42' } });
    const again = await call('trigger', {
      params,
      query: { key: 'invoice-batch-42' },
      headers: { 'Idempotency-Key': 'invoice-batch-42' },
    });
    expect([byQuery.status, byHeader.status, again.status]).toEqual([202, 202, 202]);
    expect(byQuery.json.runId).toMatch(/^audit\/manual-k-[A-Za-z0-9_-]{32}$/);
    expect(byHeader.json.runId).toBe(byQuery.json.runId);
    expect(again.json.runId).toBe(byQuery.json.runId);
    expect((await call('trigger', { params, query: { key: 'invoice-batch-43' } })).json.runId).not.toBe(byQuery.json.runId);

    const before = (await requests()).length;
    expectError(
      await call('trigger', { params, query: { key: 'a' }, headers: { 'Idempotency-Key': 'b' } }),
      400,
      /^the key in the query and the Idempotency-Key header differ: give one$/,
    );
    expectError(await call('trigger', { params, query: { key: 'x'.repeat(201) } }), 400, /^key: must be 1 to 200 characters/);
    expect(await requests()).toHaveLength(before);
  });

  it('cancel: requests the cancel of an open run with its reason; an ended run is a 409; a bad body a 400', async () => {
    expectError(await call('cancel', { params: runParams(seed.activeRunId), body: '{"reason": 5}' }), 400, /^body reason: /);
    expectError(await call('cancel', { params: runParams(seed.activeRunId), body: 'not json' }), 400, /^the body is not JSON$/);
    expectError(
      await call('cancel', { params: runParams(seed.activeRunId), body: '{"why": "x"}' }),
      400,
      /^body: unknown field why$/,
    );
    const ended = await call('cancel', { params: runParams(seed.finishedRunId) });
    expect(ended.status).toBe(409);
    expect(ended.json).toMatchObject({ requested: false, state: 'succeeded' });
    expect((await requests()).some((r) => r.kind === 'cancel' && r.runId === seed.finishedRunId)).toBe(false);

    const response = await call('cancel', { params: runParams(seed.activeRunId), body: '{"reason": "bad input"}' });
    expect(response.status).toBe(202);
    expect(response.json).toMatchObject({ runId: seed.activeRunId, requested: true });
    expect((await requests()).some((r) => r.kind === 'cancel' && r.runId === seed.activeRunId && r.reason === 'bad input')).toBe(
      true,
    );
  });

  it('refuses a job or run id that is not one (the host decodes ..%2F to ../): nothing is read or requested', async () => {
    const before = (await requests()).length;
    const notRuns = [
      { job: seed.job, run: '../leases' },
      { job: seed.job, run: 'manual-x/../../y' },
      { job: seed.job, run: '.hidden' },
      { job: '..', run: 'x' },
      { job: 'Audit', run: 'manual-1' },
    ];
    for (const route of ['run', 'failures', 'cancel'])
      for (const params of notRuns)
        expectError(await call(route, { params }), 400, /is not a run id \(<job>\/<occurrence or manual-id>\)$/);
    expectError(await call('trigger', { params: { job: '../x' } }), 400, /^"\.\.\/x" is not a job name/);
    expectError(await call('runs', { query: { job: '../x' } }), 400, /^query job: must be a job name/);
    expect(await requests()).toHaveLength(before);
  });

  it('under the durable engine, trigger and cancel answer 409 and request nothing', async () => {
    const durable = batonRegistrations(
      createBatonRuntime({ AzureWebJobsStorage: azurite.azurite.connectionString, BATON_HUB: seed.hub, BATON_ENGINE: 'durable' }),
    ).flatMap((r) => (r.kind === 'http' ? [r] : []));
    const before = (await requests()).length;
    for (const name of ['baton-api-trigger', 'baton-api-cancel']) {
      const route = durable.find((r) => r.name === name)!;
      const request = new HttpRequest({
        method: 'POST',
        url: `http://localhost/api/${route.route}`,
        params: runParams(seed.activeRunId),
      });
      const response = await route.handler(request, new InvocationContext({ functionName: name }));
      expectError({ status: response.status, json: response.jsonBody }, 409, /runs the durable engine, which does not apply/);
    }
    expect(await requests()).toHaveLength(before);
    const status = durable.find((r) => r.name === 'baton-api-status')!;
    const read = await status.handler(
      new HttpRequest({ method: 'GET', url: 'http://localhost/api/baton/status' }),
      new InvocationContext({}),
    );
    expect(read.status).toBe(200);
  });

  it('under Entra sign-in: no key check by the host, Baton.Read to read, Baton.Steer and no cross-site form to steer', async () => {
    const entra = new Map(
      batonRegistrations(
        createBatonRuntime({
          AzureWebJobsStorage: azurite.azurite.connectionString,
          BATON_HUB: seed.hub,
          BATON_HTTP_AUTH: 'entra',
          WEBSITE_SITE_NAME: 'func-baton',
          WEBSITE_AUTH_ENABLED: 'True',
        }),
      ).flatMap((r) => (r.kind === 'http' ? [[r.name, r] as const] : [])),
    );
    // App Service authentication stands in front, so the host checks no key on any route.
    expect([...entra.values()].map((r) => r.authLevel)).toEqual(Array(7).fill('anonymous'));
    const APP = 'https://func-baton.azurewebsites.net';
    const principal = (roles: string[]) =>
      Buffer.from(JSON.stringify({ auth_typ: 'aad', claims: roles.map((val) => ({ typ: 'roles', val })) })).toString('base64');
    const invoke = async (
      name: string,
      method: string,
      params: Record<string, string>,
      roles?: string[],
      headers: Record<string, string> = {},
    ) => {
      const route = entra.get(name)!;
      const request = new HttpRequest({
        method,
        url: `${APP}/api/${route.route}`,
        params,
        headers: { ...(roles ? { 'x-ms-client-principal': principal(roles) } : {}), ...headers },
      });
      const response = await route.handler(request, new InvocationContext({ functionName: name }));
      return { status: response.status, json: response.jsonBody };
    };
    const before = (await requests()).length;
    const routes = [
      ['baton-api-status', 'GET', {}],
      ['baton-api-runs', 'GET', {}],
      ['baton-api-run', 'GET', runParams(seed.finishedRunId)],
      ['baton-api-failures', 'GET', runParams(seed.finishedRunId)],
      ['baton-api-trigger', 'POST', { job: seed.job }],
      ['baton-api-cancel', 'POST', runParams(seed.activeRunId)],
      ['baton-page', 'GET', {}],
    ] as const;
    // Nobody signed in: every route, the page too, answers 401 and reads or requests nothing.
    for (const [name, method, params] of routes) {
      expectError(await invoke(name, method, params), 401, /^sign in with Entra ID/);
    }
    // Signed in, in the tenant, with no role: nothing, not even a read.
    for (const [name, method, params] of routes) {
      expectError(await invoke(name, method, params, []), 403, /app role Baton\.(Read|Steer)/);
    }
    // Baton.Read reads; steering is a 403.
    expect((await invoke('baton-api-status', 'GET', {}, ['Baton.Read'])).status).toBe(200);
    expect((await invoke('baton-page', 'GET', {}, ['Baton.Read'])).status).toBe(200);
    expectError(await invoke('baton-api-trigger', 'POST', { job: seed.job }, ['Baton.Read']), 403, /app role Baton\.Steer/);
    expectError(
      await invoke('baton-api-cancel', 'POST', runParams(seed.activeRunId), ['Baton.Read']),
      403,
      /app role Baton\.Steer/,
    );
    // A steerer's session cookie, sent by a form on another site (or by anything naming no
    // origin): refused before anything is read or requested.
    for (const headers of [{ origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }, {}] as Record<string, string>[]) {
      expectError(await invoke('baton-api-trigger', 'POST', { job: seed.job }, ['Baton.Steer'], headers), 403, /bearer token/);
      expectError(
        await invoke('baton-api-cancel', 'POST', runParams(seed.activeRunId), ['Baton.Steer'], headers),
        403,
        /bearer token/,
      );
    }
    expect(await requests()).toHaveLength(before);
    // With the role, an API client's bearer token or the app's own page is requested.
    const byToken = await invoke('baton-api-trigger', 'POST', { job: seed.job }, ['Baton.Steer'], {
      authorization: 'Bearer eyJ0eXAi.eyJhdWQi.c2ln',
    });
    expect(byToken.status).toBe(202);
    const byPage = await invoke('baton-api-trigger', 'POST', { job: seed.job }, ['Baton.Steer'], {
      origin: APP,
      'sec-fetch-site': 'same-origin',
    });
    expect(byPage.status).toBe(202);
    expect(await requests()).toHaveLength(before + 2);
  });

  it('shows the endpoint, never key material', async () => {
    const key = /AccountKey=([^;]+)/.exec(azurite.azurite.connectionString)![1]!;
    const status = await call('status');
    expect(status.json.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/devstoreaccount1$/);
    for (const name of ['status', 'runs']) expect(JSON.stringify((await call(name)).json)).not.toContain(key.slice(0, 16));
  });
});
