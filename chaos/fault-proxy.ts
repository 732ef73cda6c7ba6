import { createServer, request as httpRequest, Agent, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { ProxyProfile } from './fault-plan';
import { SeededRandom } from './rng';

/** One request that storage answered, as the proxy saw it on the wire. */
export interface Exchange {
  method: string;
  /** Path and query as sent, still URL-encoded. */
  url: string;
  requestHeaders: IncomingMessage['headers'];
  /** The request body, kept only when `captureBody` asked for it. */
  body?: Buffer;
  /** Storage's status code; 0 when the request went to storage and no answer came back (outcome unknown). */
  status: number;
  responseHeaders: IncomingMessage['headers'];
  /** When the proxy received storage's answer (ms since the epoch). */
  at: number;
  /** Order in which the proxy received answers: unlike the wall clock, it never steps back. */
  seq: number;
  /** The client never got the answer: the proxy reset the connection after storage applied it. */
  hiddenFromClient: boolean;
}

/** `outage`: answered 500 because the request named a blob in an outage (see `setOutage`). */
export type ProxyAction = 'latency' | 'unavailable' | 'resetBefore' | 'resetAfter' | 'refused' | 'outage';

export interface FaultProxyOptions {
  upstreamHost: string;
  upstreamPort: number;
  /** Seeds the choice of which requests a profile disturbs. */
  seed: number;
  /** Called for every request that reached storage, answered or not; keep it cheap. */
  onExchange?: (exchange: Exchange) => void;
  /** Whether to keep a request's body for `onExchange`. */
  captureBody?: (method: string, url: string) => boolean;
}

const INTERNAL_ERROR_BODY =
  '<?xml version="1.0" encoding="utf-8"?><Error><Code>InternalError</Code><Message>Injected by the fault proxy.</Message></Error>';
const BUSY_BODY =
  '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Injected by the fault proxy.</Message></Error>';

/**
 * An HTTP proxy between the instances and storage that disturbs a share of requests while a
 * fault profile is on: latency, 503 ServerBusy, a connection reset before the request reaches
 * storage, or one after storage applied it (the case retries and idempotency must survive).
 * While storage is down it refuses every request by resetting the connection.
 */
export class FaultProxy {
  readonly counts: Record<ProxyAction, number> = {
    latency: 0,
    unavailable: 0,
    resetBefore: 0,
    resetAfter: 0,
    refused: 0,
    outage: 0,
  };
  forwarded = 0;
  private seq = 0;
  private inFlight = 0;
  private profile: ProxyProfile | undefined;
  private upstreamDown = false;
  private outage: ((method: string, url: string) => boolean) | undefined;
  private readonly rng: SeededRandom;
  private agent = new Agent({ keepAlive: true, maxSockets: 256 });
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly options: FaultProxyOptions,
  ) {
    this.rng = new SeededRandom(options.seed);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.handle(req, res));
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: FaultProxyOptions & { port?: number; host?: string }): Promise<FaultProxy> {
    const server = createServer({ keepAlive: true });
    const proxy = new FaultProxy(server, options);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Turns a fault profile on, or off with `undefined`. */
  setProfile(profile: ProxyProfile | undefined): void {
    this.profile = profile;
  }

  /**
   * Requests `matches` picks are answered 500 InternalError without reaching storage, as when
   * the partition serving them is unavailable; `undefined` ends the outage. The profile's
   * faults still apply to every other request.
   */
  setOutage(matches: ((method: string, url: string) => boolean) | undefined): void {
    this.outage = matches;
  }

  /**
   * While down, every new request is refused. Going down waits (up to `drainMs`) for requests
   * already at storage to be answered, so a restart does not swallow writes the audit must see;
   * then pooled connections to storage are dropped.
   */
  async setUpstreamDown(down: boolean, drainMs = 5000): Promise<void> {
    this.upstreamDown = down;
    if (!down) return;
    const until = Date.now() + drainMs;
    while (this.inFlight > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
    this.agent.destroy();
    this.agent = new Agent({ keepAlive: true, maxSockets: 256 });
  }

  async close(): Promise<void> {
    this.agent.destroy();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private choose(): Exclude<ProxyAction, 'refused'> | undefined {
    const profile = this.profile;
    if (!profile) return undefined;
    let roll = this.rng.next();
    for (const action of ['unavailable', 'resetBefore', 'resetAfter', 'latency'] as const) {
      if (roll < profile[action]) return action;
      roll -= profile[action];
    }
    return undefined;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.upstreamDown) {
      this.counts.refused++;
      req.socket.resetAndDestroy();
      return;
    }
    if (this.outage?.(req.method ?? 'GET', req.url ?? '/')) {
      this.counts.outage++;
      this.answerWithoutStorage(req, res, 500, 'InternalError', INTERNAL_ERROR_BODY);
      return;
    }
    const action = this.choose();
    if (action) this.counts[action]++;
    switch (action) {
      case 'unavailable':
        this.answerWithoutStorage(req, res, 503, 'ServerBusy', BUSY_BODY);
        return;
      case 'resetBefore':
        req.socket.resetAndDestroy();
        return;
      case 'latency': {
        const [min, max] = this.profile?.latencyMs ?? [0, 0];
        const delay = min + Math.floor(this.rng.next() * (max - min + 1));
        req.pause();
        setTimeout(() => {
          // The client gave up meanwhile: forwarding a dead stream would hold a pooled socket forever.
          if (req.destroyed) return;
          this.forward(req, res, false);
        }, delay);
        return;
      }
      default:
        this.forward(req, res, action === 'resetAfter');
    }
  }

  private answerWithoutStorage(req: IncomingMessage, res: ServerResponse, status: number, code: string, body: string): void {
    // Drain the body first, so the connection stays usable for the client's retry.
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/xml', 'x-ms-error-code': code });
      res.end(body);
    });
  }

  private forward(req: IncomingMessage, res: ServerResponse, resetAfter: boolean): void {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const chunks: Buffer[] | undefined = this.options.captureBody?.(method, url) ? [] : undefined;
    let answered = false;
    let reported = false;
    const report = (status: number, responseHeaders: IncomingMessage['headers']): void => {
      if (reported) return;
      reported = true;
      try {
        this.options.onExchange?.({
          method,
          url,
          requestHeaders: req.headers,
          ...(chunks ? { body: Buffer.concat(chunks) } : {}),
          status,
          responseHeaders,
          at: Date.now(),
          seq: ++this.seq,
          hiddenFromClient: resetAfter,
        });
      } catch {
        // The audit is the caller's; a failure there must not take storage's traffic down with it.
      }
    };
    this.inFlight++;
    const settle = (() => {
      let done = false;
      return () => {
        if (!done) this.inFlight--;
        done = true;
      };
    })();
    const upstream = httpRequest(
      {
        host: this.options.upstreamHost,
        port: this.options.upstreamPort,
        method,
        path: url,
        headers: req.headers,
        agent: this.agent,
        timeout: 60_000,
      },
      (answer) => {
        answered = true;
        settle();
        this.forwarded++;
        report(answer.statusCode ?? 0, answer.headers);
        if (resetAfter) {
          answer.resume();
          req.socket.resetAndDestroy();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('error', () => req.socket.destroy());
      },
    );
    upstream.on('timeout', () => upstream.destroy(new Error('no answer from storage within 60 s')));
    // Storage went away mid-request: the client sees its connection drop, as it would. A write
    // that was sent may still have been applied, so it is reported with status 0 (unknown).
    upstream.on('error', () => {
      settle();
      if (!answered && upstream.writableFinished) report(0, {});
      req.socket.destroy();
    });
    req.on('error', () => upstream.destroy());
    req.once('close', () => {
      if (!req.complete) upstream.destroy();
    });
    if (chunks) req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.pipe(upstream);
    req.resume();
  }
}
