import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { createServer } from 'node:net';
import type { HttpRegistration } from '../../../src/app/registration-types';
import { statusPageResponse } from '../../../src/app/status-page';
import { serveHttpProxy, serveHttpRegistrations, type LocalHttpServer } from '../../../src/local/http-server';

/** Echoes what the handler was given, so routing, params, query and body can be checked. */
const echo = (name: string, route: string, methods: ('GET' | 'POST')[]): HttpRegistration => ({
  kind: 'http',
  name,
  route,
  methods,
  authLevel: 'function',
  handler: async (request, context) => ({
    status: 200,
    jsonBody: {
      fn: context.functionName,
      params: request.params,
      query: Object.fromEntries(request.query.entries()),
      body: request.method === 'POST' ? await request.text() : null,
    },
  }),
});

const registrations: HttpRegistration[] = [
  echo('runs', 'baton/runs', ['GET']),
  echo('run', 'baton/runs/{job}/{run}', ['GET']),
  echo('cancel', 'baton/runs/{job}/{run}/cancel', ['POST']),
  {
    kind: 'http',
    name: 'page',
    route: 'baton/page',
    methods: ['GET'],
    authLevel: 'function',
    handler: async () => statusPageResponse(),
  },
  {
    kind: 'http',
    name: 'boom',
    route: 'baton/boom',
    methods: ['GET'],
    authLevel: 'function',
    handler: () => Promise.reject(new Error('bad things at https://a.blob.core.windows.net/x?sig=SECRETSIG')),
  },
];

let server: LocalHttpServer;
const logged: string[] = [];
beforeAll(async () => {
  server = await serveHttpRegistrations(registrations, { port: 0, log: (_level, message) => logged.push(message) });
});
afterAll(() => server.close());

describe('the local HTTP server (what npm start serves the API and page with)', () => {
  it.each([
    ['/api/baton/runs?job=a&limit=2', 200, { fn: 'runs', params: {}, query: { job: 'a', limit: '2' }, body: null }],
    ['/api/baton/runs/', 200, { fn: 'runs', params: {}, query: {}, body: null }],
    [
      '/api/baton/runs/blob-audit/manual-1',
      200,
      { fn: 'run', params: { job: 'blob-audit', run: 'manual-1' }, query: {}, body: null },
    ],
    [
      '/api/baton/runs/a%20b/2026-01-01T00%3A00%3A00Z',
      200,
      { fn: 'run', params: { job: 'a b', run: '2026-01-01T00:00:00Z' }, query: {}, body: null },
    ],
    ['/api/baton/runs/a/b/c/d', 404, { error: 'no route /api/baton/runs/a/b/c/d' }],
    ['/baton/runs', 404, { error: 'no route /baton/runs' }],
    ['/api/baton/runs/a/b/cancel', 405, { error: 'GET is not allowed on /api/baton/runs/a/b/cancel' }],
  ])('GET %s → %i', async (path, status, body) => {
    const res = await fetch(`${server.origin}${path}`);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual(body);
  });

  it('passes a POST body through, and refuses one larger than the API takes with 413', async () => {
    const ok = await fetch(`${server.origin}/api/baton/runs/a/b/cancel`, { method: 'POST', body: '{"reason":"x"}' });
    expect(await ok.json()).toMatchObject({ fn: 'cancel', body: '{"reason":"x"}' });
    const big = await fetch(`${server.origin}/api/baton/runs/a/b/cancel`, { method: 'POST', body: 'x'.repeat(65 * 1024) });
    expect(big.status).toBe(413);
  });

  it('answers a handler that throws with a 500 naming no detail, and logs it masked', async () => {
    const res = await fetch(`${server.origin}/api/baton/boom`);
    expect(res.status).toBe(500);
    expect(JSON.stringify(await res.json())).not.toContain('SECRETSIG');
    expect(logged.join('\n')).toContain('bad things');
    expect(logged.join('\n')).not.toContain('SECRETSIG');
  });

  it('serves the page as HTML that allows only its own script and never leaks its key as a referrer', async () => {
    const res = await fetch(`${server.origin}/api/baton/page?code=k`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    const csp = res.headers.get('content-security-policy') ?? '';
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeDefined();
    const html = await res.text();
    expect(html).toContain(`<script nonce="${nonce}">`);
    // A fresh nonce each time: a page cannot be replayed with an injected script.
    const again = await fetch(`${server.origin}/api/baton/page`);
    expect(again.headers.get('content-security-policy')).not.toContain(nonce!);
    // Hub data is written as text, never parsed as HTML.
    expect(html).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  it('takes a free port when the usual one is taken and fallback is on, and fails when it is not', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as { port: number }).port;
    try {
      const fallback = await serveHttpRegistrations(registrations, { port: taken, fallback: true, log: () => {} });
      expect(fallback.origin).not.toBe(`http://127.0.0.1:${taken}`);
      await fallback.close();
      await expect(serveHttpRegistrations(registrations, { port: taken, log: () => {} })).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
    } finally {
      blocker.close();
    }
  });
});

/** A request with headers fetch will not set (Host), as another site's page or a rebound name sends it. */
function raw(
  origin: string,
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  const url = new URL(path, origin);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path: url.pathname, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

describe('another site cannot steer the local server', () => {
  const cases = (own: () => string) => {
    const port = () => new URL(own()).port;
    return [
      [
        'a POST from another origin (a form on any page)',
        403,
        'POST',
        () => ({ host: `127.0.0.1:${port()}`, origin: 'https://evil.example' }),
      ],
      [
        'a POST from a page of another local port',
        403,
        'POST',
        () => ({ host: `127.0.0.1:${port()}`, origin: 'http://127.0.0.1:1' }),
      ],
      ['a POST from a sandboxed page (Origin null)', 403, 'POST', () => ({ host: `127.0.0.1:${port()}`, origin: 'null' })],
      ['a POST to a name rebound to 127.0.0.1', 403, 'POST', () => ({ host: `evil.example:${port()}` })],
      ['a GET to a name rebound to 127.0.0.1', 403, 'GET', () => ({ host: `evil.example:${port()}` })],
      ['a POST from its own page', 200, 'POST', () => ({ host: `127.0.0.1:${port()}`, origin: `http://127.0.0.1:${port()}` })],
      [
        'a POST from its own page by the name localhost',
        200,
        'POST',
        () => ({ host: `localhost:${port()}`, origin: `http://localhost:${port()}` }),
      ],
      ['a POST with no Origin (the CLI, curl)', 200, 'POST', () => ({ host: `127.0.0.1:${port()}` })],
    ] as const;
  };

  it.each(cases(() => server.origin))('an instance answers %s with %i', async (_what, status, method, headers) => {
    const path = method === 'POST' ? '/api/baton/runs/sum/r1/cancel' : '/api/baton/runs';
    const res = await raw(server.origin, method, path, headers());
    expect(res.status, res.body).toBe(status);
    if (status === 403) expect(JSON.parse(res.body)).toEqual({ error: expect.stringMatching(/Host header|from another origin/) });
  });

  let proxy: LocalHttpServer;
  beforeAll(async () => {
    proxy = await serveHttpProxy(() => [Number(new URL(server.origin).port)], { port: 0, log: () => {} });
  });
  afterAll(() => proxy.close());

  it.each(cases(() => proxy.origin))('the front door answers %s with %i', async (_what, status, method, headers) => {
    const path = method === 'POST' ? '/api/baton/runs/sum/r1/cancel' : '/api/baton/runs';
    const res = await raw(proxy.origin, method, path, headers());
    expect(res.status, res.body).toBe(status);
  });
});

describe("the cluster's front door (each request to the first instance that takes it)", () => {
  /** A port nothing listens on: bound, noted and closed again. */
  async function closedPort(): Promise<number> {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    return port;
  }

  it('skips an instance that refuses, forwards method, path and body, and answers 503 when none is left', async () => {
    const instance = Number(new URL(server.origin).port);
    const gone = await closedPort();
    let ports: number[] = [gone, instance];
    const proxy = await serveHttpProxy(() => ports, { port: 0, log: () => {} });
    try {
      const posted = await fetch(`${proxy.origin}/api/baton/runs/sum/r1/cancel?why=test`, { method: 'POST', body: 'stop it' });
      expect(posted.status).toBe(200);
      expect(await posted.json()).toEqual({
        fn: 'cancel',
        params: { job: 'sum', run: 'r1' },
        query: { why: 'test' },
        body: 'stop it',
      });
      const page = await fetch(`${proxy.origin}/api/baton/page`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);

      ports = [gone];
      const none = await fetch(`${proxy.origin}/api/baton/runs`);
      expect(none.status).toBe(503);
      expect(none.headers.get('retry-after')).toBe('1');
      expect(await none.json()).toEqual({ error: 'no instance serves http now: they are starting, or every one has exited' });
    } finally {
      await proxy.close();
    }
  });
});
