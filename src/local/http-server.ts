import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { HttpRequest, InvocationContext, type HttpMethod, type HttpResponseInit } from '@azure/functions';
import type { HttpRegistration } from '../app/registration-types';
import { redactSecrets } from '../redact';
import { describeThrown } from '../errors';

/** Where the Functions host mounts http routes by default (host.json `extensions.http.routePrefix`). */
export const ROUTE_PREFIX = 'api';
/** The port `func start` uses, so links and habits carry over. */
export const DEFAULT_HTTP_PORT = 7071;
/** Request bodies the API takes are a line of JSON; anything larger is refused before it is read. */
const MAX_BODY_BYTES = 64 * 1024;

export interface LocalHttpServer {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  close(): Promise<void>;
}

export interface LocalHttpOptions {
  /** 0 picks a free port. With `fallback`, a port in use falls back to a free one instead of failing. */
  port: number;
  fallback?: boolean;
  log: (level: 'warning' | 'error', message: string) => void;
}

interface Route {
  registration: HttpRegistration;
  pattern: RegExp;
  names: string[];
}

/** `baton/runs/{job}/{run}` → a pattern whose groups are the named segments, one segment each. */
function compile(registration: HttpRegistration): Route {
  const names: string[] = [];
  const source = registration.route
    .split('/')
    .map((segment) => {
      const param = /^\{(\w+)\}$/.exec(segment);
      if (!param) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(param[1]!);
      return '([^/]+)';
    })
    .join('/');
  return { registration, pattern: new RegExp(`^/${ROUTE_PREFIX}/${source}/?$`), names };
}

/**
 * Serves http registrations the way the Functions host would, for the local cluster: same
 * routes under `/api`, same `HttpRequest` and `InvocationContext` types. It listens on the
 * loopback interface only and, like `func start`, asks for no keys: this machine is the caller.
 */
export async function serveHttpRegistrations(
  registrations: readonly HttpRegistration[],
  options: LocalHttpOptions,
): Promise<LocalHttpServer> {
  const routes = registrations.map(compile);
  const server = createServer((req, res) => {
    if (refusedAsCrossSite(req, res)) return;
    handle(routes, req, res).catch((err: unknown) => {
      options.log('error', `http ${req.method} ${redactSecrets(req.url ?? '')} failed: ${describe(err)}`);
      if (!res.headersSent) send(res, { status: 500, jsonBody: { error: 'the request failed; the cluster log has the reason' } });
      else res.destroy();
    });
  });
  return listenLoopback(server, options);
}

/**
 * The cluster's front door, as the Functions platform's front end is for its instances: each
 * request goes to the first instance in `ports()` that takes it (an instance killed a moment ago
 * refuses, and the next one is tried). Bodies are read first, so a retry can send them again.
 */
export async function serveHttpProxy(ports: () => readonly number[], options: LocalHttpOptions): Promise<LocalHttpServer> {
  const server = createServer((req, res) => {
    if (refusedAsCrossSite(req, res)) return;
    forward(req, res, ports()).catch((err: unknown) => {
      options.log('error', `http ${req.method} ${redactSecrets(req.url ?? '')} failed: ${describe(err)}`);
      if (!res.headersSent)
        send(res, { status: 502, jsonBody: { error: 'no instance answered; the cluster log has the reason' } });
      else res.destroy();
    });
  });
  return listenLoopback(server, options);
}

async function forward(req: IncomingMessage, res: ServerResponse, ports: readonly number[]): Promise<void> {
  const body = await readBody(req);
  if (body === null) {
    send(res, { status: 413, jsonBody: { error: `the body is larger than ${MAX_BODY_BYTES} bytes` } });
    return;
  }
  for (const port of ports) {
    // Checked here against this door; the instance checks what it is sent against itself.
    const headers = { ...req.headers, host: `127.0.0.1:${port}` };
    if (headers.origin !== undefined) headers.origin = `http://127.0.0.1:${port}`;
    const answered = await new Promise<boolean>((resolve, reject) => {
      const upstream = request({ host: '127.0.0.1', port, method: req.method, path: req.url, headers }, (response) => {
        res.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(res);
        response.once('end', () => resolve(true));
        response.once('error', reject);
      });
      upstream.once('error', (err: NodeJS.ErrnoException) => {
        // Refused or cut before an answer: that instance is gone or going; try the next.
        if (!res.headersSent && (err.code === 'ECONNREFUSED' || err.code === 'ECONNRESET')) resolve(false);
        else reject(err);
      });
      upstream.end(body);
    });
    if (answered) return;
  }
  send(res, {
    status: 503,
    headers: { 'retry-after': '1' },
    jsonBody: { error: 'no instance serves http now: they are starting, or every one has exited' },
  });
}

/**
 * Listening on loopback keeps other machines out, not other sites: a page the browser loaded
 * from anywhere can send a form's POST here, and one whose name an attacker points at 127.0.0.1
 * (DNS rebinding) can read the answers too. So a request must name this server as its Host,
 * and a write that says where it comes from (`Origin`) must come from this server's own page.
 * The CLI and tests send neither a foreign Host nor an Origin.
 */
function refusedAsCrossSite(req: IncomingMessage, res: ServerResponse): boolean {
  const port = req.socket.localPort;
  const own = ['127.0.0.1', 'localhost', '[::1]'].map((host) => `${host}:${port}`);
  const host = req.headers.host?.toLowerCase();
  const method = (req.method ?? 'GET').toUpperCase();
  const origin = req.headers.origin?.toLowerCase();
  let refusal: string | undefined;
  if (host === undefined || !own.includes(host)) refusal = 'the Host header does not name this loopback server';
  else if (method !== 'GET' && method !== 'HEAD' && origin !== undefined && !own.some((h) => origin === `http://${h}`))
    refusal = `a ${method} from another origin is refused`;
  if (!refusal) return false;
  req.resume();
  send(res, { status: 403, jsonBody: { error: refusal } });
  return true;
}

async function listenLoopback(server: Server, options: LocalHttpOptions): Promise<LocalHttpServer> {
  const port = await listen(server, options.port).catch(async (err: unknown) => {
    if (!options.fallback || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    return listen(server, 0);
  });
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A page polling with keep-alive would otherwise hold the close open.
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

async function handle(routes: readonly Route[], req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const method = (req.method ?? 'GET').toUpperCase();
  let pathMatched = false;
  for (const route of routes) {
    const match = route.pattern.exec(url.pathname);
    if (!match) continue;
    pathMatched = true;
    if (!route.registration.methods.includes(method as HttpMethod)) continue;
    const params = Object.fromEntries(route.names.map((name, i) => [name, decodeURIComponent(match[i + 1]!)]));
    const body = method === 'GET' || method === 'HEAD' ? undefined : await readBody(req);
    if (body === null) {
      send(res, { status: 413, jsonBody: { error: `the body is larger than ${MAX_BODY_BYTES} bytes` } });
      return;
    }
    const request = new HttpRequest({
      method,
      url: url.toString(),
      headers: Object.fromEntries(
        Object.entries(req.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, Array.isArray(v) ? v.join(', ') : v]])),
      ),
      query: Object.fromEntries(url.searchParams.entries()),
      params,
      ...(body !== undefined ? { body: { string: body } } : {}),
    });
    const context = new InvocationContext({ functionName: route.registration.name, invocationId: randomUUID() });
    send(res, await route.registration.handler(request, context));
    return;
  }
  send(
    res,
    pathMatched
      ? { status: 405, jsonBody: { error: `${method} is not allowed on ${url.pathname}` } }
      : { status: 404, jsonBody: { error: `no route ${url.pathname}` } },
  );
}

/** The body as text, or null when it is larger than the API takes. */
async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(res: ServerResponse, response: HttpResponseInit): void {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries((response.headers ?? {}) as Record<string, string>))
    headers[key.toLowerCase()] = value;
  let body: string | undefined;
  if (response.jsonBody !== undefined) {
    body = JSON.stringify(response.jsonBody);
    headers['content-type'] ??= 'application/json; charset=utf-8';
  } else if (typeof response.body === 'string') {
    body = response.body;
    headers['content-type'] ??= 'text/plain; charset=utf-8';
  }
  res.writeHead(response.status ?? 200, headers);
  res.end(body);
}

function describe(err: unknown): string {
  return redactSecrets(describeThrown(err));
}
