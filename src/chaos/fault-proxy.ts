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
  status: number;
  responseHeaders: IncomingMessage['headers'];
  /** When the proxy received storage's answer (ms since the epoch). */
  at: number;
  /** The client never got the answer: the proxy reset the connection after storage applied it. */
  hiddenFromClient: boolean;
}

export type ProxyAction = 'latency' | 'unavailable' | 'resetBefore' | 'resetAfter' | 'refused';

export interface FaultProxyOptions {
  upstreamHost: string;
  upstreamPort: number;
  /** Seeds the choice of which requests a profile disturbs. */
  seed: number;
  /** Called for every answered request; keep it cheap. */
  onExchange?: (exchange: Exchange) => void;
  /** Whether to keep a request's body for `onExchange`. */
  captureBody?: (method: string, url: string) => boolean;
}

const BUSY_BODY =
  '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Injected by the fault proxy.</Message></Error>';

/**
 * An HTTP proxy between the instances and storage that disturbs a share of requests while a
 * fault profile is on: latency, 503 ServerBusy, a connection reset before the request reaches
 * storage, or one after storage applied it (the case retries and idempotency must survive).
 * While storage is down it refuses every request by resetting the connection.
 */
export class FaultProxy {
  readonly counts: Record<ProxyAction, number> = { latency: 0, unavailable: 0, resetBefore: 0, resetAfter: 0, refused: 0 };
  forwarded = 0;
  private profile: ProxyProfile | undefined;
  private upstreamDown = false;
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

  /** While down, every request is refused, and pooled connections to storage are dropped. */
  setUpstreamDown(down: boolean): void {
    this.upstreamDown = down;
    if (down) {
      this.agent.destroy();
      this.agent = new Agent({ keepAlive: true, maxSockets: 256 });
    }
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
    const action = this.choose();
    if (action) this.counts[action]++;
    switch (action) {
      case 'unavailable':
        // Drain the body first, so the connection stays usable for the client's retry.
        req.resume();
        req.on('end', () => {
          res.writeHead(503, { 'content-type': 'application/xml', 'x-ms-error-code': 'ServerBusy' });
          res.end(BUSY_BODY);
        });
        return;
      case 'resetBefore':
        req.socket.resetAndDestroy();
        return;
      case 'latency': {
        const [min, max] = this.profile?.latencyMs ?? [0, 0];
        const delay = min + Math.floor(this.rng.next() * (max - min + 1));
        req.pause();
        setTimeout(() => this.forward(req, res, false), delay);
        return;
      }
      default:
        this.forward(req, res, action === 'resetAfter');
    }
  }

  private forward(req: IncomingMessage, res: ServerResponse, resetAfter: boolean): void {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const chunks: Buffer[] | undefined = this.options.captureBody?.(method, url) ? [] : undefined;
    const upstream = httpRequest(
      {
        host: this.options.upstreamHost,
        port: this.options.upstreamPort,
        method,
        path: url,
        headers: req.headers,
        agent: this.agent,
      },
      (answer) => {
        this.forwarded++;
        const at = Date.now();
        this.options.onExchange?.({
          method,
          url,
          requestHeaders: req.headers,
          ...(chunks ? { body: Buffer.concat(chunks) } : {}),
          status: answer.statusCode ?? 0,
          responseHeaders: answer.headers,
          at,
          hiddenFromClient: resetAfter,
        });
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
    // Storage went away mid-request: the client sees its connection drop, as it would.
    upstream.on('error', () => req.socket.destroy());
    req.on('error', () => upstream.destroy());
    if (chunks) req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.pipe(upstream);
    req.resume();
  }
}
