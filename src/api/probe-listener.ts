// A second listening port for machines that poll (--probe-port): orchestrator probes (/health,
// /ready) and the Prometheus scrape (/metrics), kept out of the API port's accept queue.
//
// Why: a probe on the API port is one more TCP handshake in the same kernel queue as every client's.
// In a burst of thousands of connections it waits behind them (the server accepts and refuses them
// one by one, and a handshake the full queue dropped is retried after 1 s, 3 s, 7 s), so a liveness
// probe can time out on a server that is answering everything it has accepted
// (results/burst/README.md). On a port of its own the probe's handshake has its own queue.
//
// Requests here go through the same fastify instance as the API's (`routing`): the same handlers,
// hooks, request ids and log lines. Only the probe paths are served; anything else is a 404
// naming the API port. Few connections are expected (a kubelet, a scraper): past MAX_CONNECTIONS
// the server closes new ones at once.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** What the probe port answers; every other path is 404 there. */
export const PROBE_PORT_PATHS: ReadonlySet<string> = new Set(['/health', '/ready', '/metrics']);
/** Open connections the probe port holds at most (node closes the ones past it as they arrive). */
const MAX_CONNECTIONS = 64;

export interface ProbeTimeouts {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
}

export class ProbeListener {
  readonly #server: Server;
  readonly #sockets = new WeakSet<Socket>();
  #route: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  #address: string | null = null;

  constructor(readonly port: number, timeouts: ProbeTimeouts) {
    this.#server = createServer({ headersTimeout: timeouts.headersTimeoutMs, requestTimeout: timeouts.requestTimeoutMs, keepAliveTimeout: timeouts.keepAliveTimeoutMs }, (req, res) => {
      if (this.#route !== null) {
        this.#route(req, res);
        return;
      }
      res.writeHead(503, { 'content-type': 'application/json', connection: 'close' }).end();
    });
    this.#server.maxConnections = MAX_CONNECTIONS;
    this.#server.on('connection', (socket: Socket) => this.#sockets.add(socket));
  }

  /** Serve through `app`'s routes (called once the app is built, before listening). */
  attach(app: FastifyInstance): void {
    this.#route = (req, res) => app.routing(req, res);
  }

  /** Whether a request came in on the probe port. */
  owns(socket: Socket): boolean {
    return this.#sockets.has(socket);
  }

  /** The bound address (`http://host:port`), once listening. */
  get address(): string | null {
    return this.#address;
  }

  async listen(host: string): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        const why = err.code === 'EADDRINUSE' ? 'already in use' : err.code === 'EACCES' ? 'no permission (ports below 1024 need privileges)' : err.message;
        reject(new Error(`--probe-port: cannot listen on ${host}:${this.port}: ${why}`, { cause: err }));
      };
      this.#server.once('error', onError);
      this.#server.listen(this.port, host, () => {
        this.#server.off('error', onError);
        resolve();
      });
    });
    const a = this.#server.address();
    if (a === null || typeof a === 'string') throw new Error(`--probe-port: no TCP address after listening on ${host}:${this.port}`);
    this.#address = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    return this.#address;
  }

  async close(): Promise<void> {
    if (!this.#server.listening) return;
    const closing = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closing;
  }
}

/** Opens the probe port, if there is one, after `app` listens; on failure the app is closed too. */
export async function listenProbes(app: FastifyInstance, probes: ProbeListener | null, host: string): Promise<void> {
  if (probes === null) return;
  try {
    const address = await probes.listen(host);
    app.log.info(`probes (${[...PROBE_PORT_PATHS].join(', ')}) at ${address}`);
  } catch (err) {
    await app.close();
    throw err;
  }
}
