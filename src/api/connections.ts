// Bounds on client connections, so no client, and no crowd, can hold the server open or run the
// process out of file descriptors (measured before: ~1,000 idle sockets under a 1,024 fd limit
// made every new client, /health included, get a connection reset).
//
//   open < soft            served normally
//   soft ≤ open < hard     "overflow": /health and /ready are answered (probes keep working),
//                          anything else gets 503 too_many_connections and the connection closes;
//                          an overflow socket idle for OVERFLOW_IDLE_MS is closed
//   open ≥ hard            the oldest overflow socket is closed to make room, so a new probe is
//                          still answered while a flood goes on (the flood only evicts itself)
//
// No connection is closed unanswered: one closed before anything was written to it (evicted,
// refused at the hard bound, or idle past OVERFLOW_IDLE_MS) first gets a raw 503
// too_many_connections with Retry-After; each is counted, and a log line at most every
// LOG_EVERY_MS says how many (a 2,000-connection burst is one line, not 2,000).
//
// soft = maxConnections (also per client address: maxConnectionsPerAddress), hard = soft +
// reserve, and both are lowered to stay FD_MARGIN descriptors below the process's open-file
// limit (RLIMIT_NOFILE, read from /proc/self/limits), which the model, logs and pipes also use.
// Counts are O(1) per connection: one counter and one map entry per address.
import type { Server } from 'node:http';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { ApiError } from './errors.ts';

/** Descriptors left to the rest of the process below its open-file limit. */
const FD_MARGIN = 64;
/** Overflow connections allowed past the soft bound, for probes and for clear refusals. */
const OVERFLOW_RESERVE = 64;
const OVERFLOW_IDLE_MS = 1000;
const LOG_EVERY_MS = 10_000;

export interface ConnectionLimits {
  readonly maxConnections: number;
  readonly maxConnectionsPerAddress: number;
  /** The process's open-file limit; default: read from /proc/self/limits (Infinity if unknown). */
  readonly fdLimit?: number;
}

export interface ConnectionStats {
  readonly numOpen: number;
  readonly softLimit: number;
  readonly hardLimit: number;
  /** Connections that got only probes or a 503. */
  readonly numOverflow: number;
  /** Overflow connections closed to make room for newer ones past the hard bound. */
  readonly numEvicted: number;
  /** Overflow connections closed after OVERFLOW_IDLE_MS without a byte written to them (no request came, or not all of it). */
  readonly numIdleClosed: number;
  /** Connections closed with a raw 503 too_many_connections before anything else was written to them. */
  readonly numRefusedRaw: number;
}

export class ConnectionGuard {
  readonly #soft: number;
  readonly #hard: number;
  readonly #perAddress: number;
  readonly #byAddress = new Map<string, number>();
  /** Overflow sockets, oldest first (a Set keeps insertion order): eviction is O(1). */
  readonly #overflow = new Set<Socket>();
  #numOpen = 0;
  #numOverflow = 0;
  #numEvicted = 0;
  #numIdleClosed = 0;
  #numRefusedRaw = 0;
  #log: ((msg: string) => void) | null = null;
  #lastLogMs = -Infinity;
  #loggedRefused = 0;
  #rawRefusal = '';

  constructor(limits: ConnectionLimits) {
    for (const k of ['maxConnections', 'maxConnectionsPerAddress'] as const) {
      if (!Number.isInteger(limits[k]) || limits[k] < 1) throw new Error(`ConnectionGuard: expected ${k} to be a positive integer, got ${limits[k]}`);
    }
    const fdLimit = limits.fdLimit ?? readFdLimit();
    this.#hard = Math.max(2, Math.min(limits.maxConnections + OVERFLOW_RESERVE, fdLimit - FD_MARGIN));
    this.#soft = Math.max(1, Math.min(limits.maxConnections, this.#hard - Math.min(OVERFLOW_RESERVE, Math.floor(this.#hard / 2))));
    this.#perAddress = Math.min(limits.maxConnectionsPerAddress, this.#soft);
  }

  /** `log` gets one line at most every LOG_EVERY_MS while connections are refused; `retryAfterS` goes into those refusals. */
  attach(server: Server, log?: (msg: string) => void, retryAfterS = 1): void {
    this.#log = log ?? null;
    const e = this.refusal(retryAfterS);
    const body = JSON.stringify({ error: { message: e.message, type: 'overloaded_error', param: null, code: 'too_many_connections' } });
    this.#rawRefusal = `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; charset=utf-8\r\nretry-after: ${retryAfterS}\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    server.on('connection', (socket: Socket) => this.#onConnection(socket));
  }

  /** This socket may only ask /health or /ready; everything else is refused (refusal()). */
  isOverflow(socket: Socket): boolean {
    return this.#overflow.has(socket);
  }

  refusal(retryAfterS: number): ApiError {
    return new ApiError('too_many_connections', 'The server holds as many connections as it accepts (in total or from this address); retry shortly.', { retryAfterS });
  }

  stats(): ConnectionStats {
    return { numOpen: this.#numOpen, softLimit: this.#soft, hardLimit: this.#hard, numOverflow: this.#numOverflow, numEvicted: this.#numEvicted, numIdleClosed: this.#numIdleClosed, numRefusedRaw: this.#numRefusedRaw };
  }

  /** Close a socket the guard gives up on: a raw 503 first when nothing was written to it yet. */
  #close(socket: Socket): void {
    if (socket.bytesWritten === 0 && socket.writable && this.#rawRefusal !== '') {
      this.#numRefusedRaw++;
      // Into the kernel's send buffer, then the descriptor is released at once: under a flood a
      // socket left to linger holds the descriptor the next accept() needs (and libuv answers a
      // failed accept by closing that connection unanswered).
      socket.write(this.#rawRefusal, () => socket.destroy());
      this.#maybeLog();
    } else {
      socket.destroy();
    }
  }

  #maybeLog(): void {
    const now = performance.now();
    if (this.#log === null || now - this.#lastLogMs < LOG_EVERY_MS) return;
    this.#lastLogMs = now;
    const n = this.#numRefusedRaw - this.#loggedRefused;
    this.#loggedRefused = this.#numRefusedRaw;
    this.#log(`connections: ${n} refused with 503 too_many_connections since the last such line (${this.#numOpen} open; bounds ${this.#soft} served, ${this.#hard} in all)`);
  }

  #onConnection(socket: Socket): void {
    if (this.#numOpen >= this.#hard) {
      const oldest = this.#overflow.values().next();
      this.#numEvicted++;
      if (oldest.done === true) {
        // Evicted sockets whose 'close' has not run yet still count: refuse this one instead.
        this.#close(socket);
        return;
      }
      this.#overflow.delete(oldest.value);
      this.#close(oldest.value);
    }
    const address = socket.remoteAddress ?? '?';
    const fromAddress = this.#byAddress.get(address) ?? 0;
    this.#numOpen++;
    this.#byAddress.set(address, fromAddress + 1);
    socket.once('close', () => {
      this.#overflow.delete(socket);
      this.#numOpen--;
      const n = (this.#byAddress.get(address) ?? 1) - 1;
      if (n === 0) this.#byAddress.delete(address);
      else this.#byAddress.set(address, n);
    });
    if (this.#numOpen > this.#soft || fromAddress >= this.#perAddress) {
      this.#numOverflow++;
      this.#overflow.add(socket);
      // Our own idle timer, not socket.setTimeout: on a socket's 'timeout' the HTTP server destroys
      // it first, unanswered. Each byte the client sends restarts it.
      const idle = setTimeout(() => {
        // Nothing asked of it in time: counted, and refused with a 503 when nothing was answered yet.
        if (socket.bytesWritten === 0) this.#numIdleClosed++;
        this.#close(socket);
      }, OVERFLOW_IDLE_MS);
      idle.unref();
      socket.on('data', () => idle.refresh());
      socket.once('close', () => clearTimeout(idle));
    }
  }
}

/** The soft RLIMIT_NOFILE of this process, or Infinity where it cannot be read. */
export function readFdLimit(): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m === null || m[1] === 'unlimited' ? Infinity : Number(m[1]);
  } catch {
    return Infinity;
  }
}
