// One client process of a burst (bench/burst/run-burst.ts spawns several: one process may hold at
// most `ulimit -n` sockets, 20,000 on the machines this was written on, so 20,000 connections need
// at least two, and four keep each event loop light). It waits for the parent's `go`, then opens
// all of its connections in one synchronous loop (as fast as the kernel accepts connect()s), each
// sending one streaming chat completion and reading the whole answer or refusal, and reports the
// outcome kinds (outcome.ts) with their latencies.
//
// Every connection binds to one of `addresses` (127.x.y.z: all of 127/8 routes to lo on Linux),
// round-robin: the server sees many client addresses, as it would from a crowd, so the burst meets
// the server's total connection bound rather than its per-address one; and each source address has
// its own ephemeral port range, so the client side never runs out of ports.
import net from 'node:net';
import { classify } from './outcome.ts';

/** What the parent sends: the work of this process. */
export interface ClientJob {
  readonly host: string;
  readonly port: number;
  readonly numConnections: number;
  /** Local addresses to bind, round-robin ([] : the kernel's choice, 127.0.0.1). */
  readonly addresses: readonly string[];
  /** The request body (a streaming chat completion). */
  readonly body: string;
  /** A connection without a complete answer by then is counted as `timeout` and closed. */
  readonly timeoutMs: number;
}

/** What this process reports: per outcome kind, the time from connect() to the answer's end, ms. */
export interface ClientReport {
  readonly latenciesMs: Record<string, number[]>;
  /** Time to issue every connect(), ms: how fast the burst was opened. */
  readonly openMs: number;
}

/** Most bytes kept per connection: a refusal or a short stream fit; a longer stream only needs its end. */
const KEEP_BYTES = 16 * 1024;

export function runClient(job: ClientJob): Promise<ClientReport> {
  const latenciesMs: Record<string, number[]> = {};
  let numDone = 0;
  const request = Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${job.host}:${job.port}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(job.body)}\r\nconnection: close\r\n\r\n${job.body}`,
  );
  return new Promise((resolve) => {
    const t0 = performance.now();
    const done = (kind: string, startMs: number): void => {
      (latenciesMs[kind] ??= []).push(performance.now() - startMs);
      if (++numDone === job.numConnections) resolve({ latenciesMs, openMs });
    };
    for (let i = 0; i < job.numConnections; i++) {
      const startMs = performance.now();
      const localAddress = job.addresses.length === 0 ? undefined : job.addresses[i % job.addresses.length];
      const socket = net.connect({ host: job.host, port: job.port, ...(localAddress === undefined ? {} : { localAddress }) });
      let bytes = Buffer.alloc(0);
      let errorCode: string | null = null;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        socket.destroy();
      }, job.timeoutMs);
      socket.write(request);
      socket.on('data', (b: Buffer) => {
        // Keep the head (status line, headers, a refusal's body) and the tail (a stream's [DONE]).
        bytes = Buffer.concat([bytes, b]);
        if (bytes.length > KEEP_BYTES) bytes = Buffer.concat([bytes.subarray(0, KEEP_BYTES / 2), bytes.subarray(-KEEP_BYTES / 2)]);
      });
      socket.on('error', (e: NodeJS.ErrnoException) => {
        errorCode ??= e.code ?? 'unknown';
      });
      socket.once('close', () => {
        clearTimeout(timer);
        done(classify(bytes, errorCode, timedOut), startMs);
      });
    }
    const openMs = performance.now() - t0;
    if (job.numConnections === 0) resolve({ latenciesMs, openMs });
  });
}

// As a child process: the job comes over IPC, the work starts on `go`, the report goes back.
if (process.send !== undefined && process.argv.includes('--burst-client')) {
  // A parent that died (a failed test) leaves no client behind holding thousands of sockets.
  process.once('disconnect', () => process.exit(0));
  process.once('message', (job: ClientJob) => {
    process.send!({ ready: true });
    process.once('message', () => {
      void runClient(job).then((report) => process.send!({ report }, undefined, {}, () => process.exit(0)));
    });
  });
}
